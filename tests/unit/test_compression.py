"""Token estimates, the three compression levels and the budget fitter, on hand-computed cases."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from schemas.kernel.compression import (
    FitCandidate,
    FitStats,
    compress,
    estimate_tokens,
    fit_entries,
)

# --- estimate_tokens: ceil(words / 0.75) ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("   \n\t ", 0),
        ("one", 2),  # 1 / 0.75 = 1.33
        ("a b c", 4),  # exactly 4
        ("a b c d", 6),  # 5.33
        ("a\tb\nc   d", 6),  # any whitespace separates words
        ("  leading and trailing  ", 4),
        (" ".join(["w"] * 22), 30),  # 29.33
        (" ".join(["w"] * 23), 31),  # 30.67
        (" ".join(["w"] * 300), 400),
    ],
)
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


# --- compress ---------------------------------------------------------------------------------


def test_full_is_unchanged() -> None:
    text = "  Anything at all.\n\nEven odd   spacing.  "
    assert compress(text, "full") == text


@pytest.mark.parametrize("text", ["", "One sentence only", "One. Two.", "First! Second?\n"])
def test_summary_of_two_sentences_or_fewer_is_unchanged(text: str) -> None:
    assert compress(text, "summary") == text


def test_summary_keeps_the_best_scored_sentences_in_order() -> None:
    long_sentence = "L" * 199 + "."  # 200 characters: full length score
    text = f"Alpha is first. Bb. {long_sentence} End."
    # n = 4, keep ceil(4 * 0.3) = 2. Scores (1 - i/4) + min(len/200, 1):
    #   "Alpha is first." 1.00 + 0.075 = 1.075
    #   "Bb."             0.75 + 0.015 = 0.765
    #   long              0.50 + 1.000 = 1.500
    #   "End."            0.25 + 0.020 = 0.270
    assert compress(text, "summary") == f"Alpha is first. {long_sentence}"


def test_summary_splits_on_any_whitespace_after_terminal_punctuation() -> None:
    text = "A one.   B two!\nC three?  D four. v1.2 stays whole"
    # Sentences: "A one." "B two!" "C three?" "D four." "v1.2 stays whole" (n = 5, keep 2).
    # Early sentences of similar length win: "A one." 1.03, "B two!" 0.83.
    assert compress(text, "summary") == "A one. B two!"


def test_summary_ratio_is_exact_thirty_percent() -> None:
    """ceil(10 * 0.3) is 4 in floating point; 30 % of ten sentences is three."""
    text = " ".join(f"Sentence number {i} here." for i in range(10))
    assert compress(text, "summary") == (
        "Sentence number 0 here. Sentence number 1 here. Sentence number 2 here."
    )


def test_summary_keeps_at_least_one_sentence() -> None:
    text = "First one. Second one. Third one."
    # n = 3, ceil(0.9) = 1.
    assert compress(text, "summary") == "First one."


def test_keywords_keeps_long_words_in_order() -> None:
    text = "The quick brown fox jumps over the lazy dog"
    assert compress(text, "keywords") == "quick brown jumps over lazy"


def test_keywords_keeps_short_camel_case_and_digits() -> None:
    assert compress(text="an aB v2 io x9 ok Go", level="keywords") == "aB v2 x9"


def test_keywords_strips_punctuation_but_keeps_paths_and_identifiers() -> None:
    text = "(hello), see src/app.py: foo_bar! v1.2.3-rc don't #tag"
    assert compress(text, "keywords") == "hello src/app.py foo_bar v1.2.3-rc dont"


def test_keywords_drops_repeats_ignoring_case() -> None:
    assert compress("Cache cache CACHE miss Miss", "keywords") == "Cache miss"


def test_keywords_keep_accented_words() -> None:
    assert compress("café naïve über", "keywords") == "café naïve über"


def test_keywords_stay_within_thirty_tokens() -> None:
    text = " ".join(f"word{i:02d}" for i in range(40))
    kept = compress(text, "keywords").split()
    assert kept == [f"word{i:02d}" for i in range(22)]  # 22 words = ceil(29.33) = 30 tokens
    assert estimate_tokens(" ".join(kept)) == 30


def test_keywords_of_text_without_distinctive_words_is_empty() -> None:
    assert compress("a an the of to !!! ...", "keywords") == ""


def test_unknown_level_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown compression level"):
        compress("text", "tiny")  # type: ignore[arg-type]


# --- fit_entries ------------------------------------------------------------------------------


def _sentence(tag: str, i: int) -> str:
    return " ".join(f"word{tag}{i}{c}" for c in "abcde") + f" word{tag}{i}f."


def _document(tag: str, sentences: int) -> str:
    """``sentences`` equal sentences of six distinct long words each."""
    return " ".join(_sentence(tag, i) for i in range(sentences))


# Twenty sentences: 120 words = 160 tokens; summary keeps 6 sentences = 36 words = 48 tokens;
# keywords keep 22 words = 30 tokens.
FULL, SUMMARY, KEYWORDS = 160, 48, 30
IDS = [uuid.UUID(int=i) for i in range(1, 4)]


def _three() -> list[FitCandidate]:
    return [
        FitCandidate(entryId=IDS[i], rank=i + 1, content=_document(str(i), 20)) for i in range(3)
    ]


def test_document_sizes_used_below() -> None:
    text = _document("x", 20)
    assert estimate_tokens(text) == FULL
    assert estimate_tokens(compress(text, "summary")) == SUMMARY
    assert estimate_tokens(compress(text, "keywords")) == KEYWORDS


def _levels(budget: int | None) -> list[tuple[int, str, int]]:
    result = fit_entries(_three(), budget)
    return [(e.rank, e.compressionLevel, e.packedTokens) for e in result.entries]


def test_without_a_budget_nothing_is_compressed() -> None:
    result = fit_entries(_three(), None)
    assert _levels(None) == [(1, "full", FULL), (2, "full", FULL), (3, "full", FULL)]
    assert all(e.originalTokens == FULL for e in result.entries)
    assert result.dropped == []
    assert result.stats == FitStats(
        totalTokens=480,
        entriesIncluded=3,
        entriesCompressed=0,
        compressionRatio=1.0,
        budgetUtilization=1.0,
    )


def test_a_budget_that_fits_changes_nothing() -> None:
    result = fit_entries(_three(), 960)
    assert [e.compressionLevel for e in result.entries] == ["full"] * 3
    assert result.stats.budgetUtilization == 0.5


def test_summary_starts_at_the_tail_and_stops_once_it_fits() -> None:
    # 480 > 400: rank 3 -> summary gives 368, which fits.
    result = fit_entries(_three(), 400)
    assert _levels(400) == [(1, "full", FULL), (2, "full", FULL), (3, "summary", SUMMARY)]
    assert result.stats == FitStats(
        totalTokens=368,
        entriesIncluded=3,
        entriesCompressed=1,
        compressionRatio=368 / 480,
        budgetUtilization=368 / 400,
    )


def test_every_entry_is_summarised_before_any_becomes_keywords() -> None:
    # 480 -> 368 -> 256 -> 144 <= 200.
    assert _levels(200) == [(1, "summary", 48), (2, "summary", 48), (3, "summary", 48)]
    assert fit_entries(_three(), 200).stats.compressionRatio == 144 / 480


def test_keywords_follow_from_the_tail() -> None:
    # All summaries give 144 > 120; rank 3 -> keywords 126 > 120; rank 2 -> keywords 108.
    assert _levels(120) == [(1, "summary", 48), (2, "keywords", 30), (3, "keywords", 30)]


def test_tail_entries_are_dropped_last() -> None:
    # All keywords give 90 > 50; drop rank 3 (60), drop rank 2 (30).
    result = fit_entries(_three(), 50)
    assert [(e.rank, e.compressionLevel) for e in result.entries] == [(1, "keywords")]
    assert result.dropped == [IDS[1], IDS[2]]
    assert result.stats == FitStats(
        totalTokens=30,
        entriesIncluded=1,
        entriesCompressed=1,
        compressionRatio=30 / 160,
        budgetUtilization=30 / 50,
    )


def test_a_budget_nothing_fits_drops_everything() -> None:
    result = fit_entries(_three(), 10)
    assert result.entries == []
    assert result.dropped == IDS
    assert result.stats == FitStats(
        totalTokens=0,
        entriesIncluded=0,
        entriesCompressed=0,
        compressionRatio=1.0,
        budgetUtilization=0.0,
    )


def test_entries_are_ordered_by_rank_not_by_position() -> None:
    shuffled = list(reversed(_three()))
    result = fit_entries(shuffled, 400)
    assert [(e.entryId, e.compressionLevel) for e in result.entries] == [
        (IDS[0], "full"),
        (IDS[1], "full"),
        (IDS[2], "summary"),
    ]


def test_long_entry_with_few_sentences_goes_straight_to_keywords() -> None:
    # Two sentences of 50 words: a summary would be the same text, so it stays full in the
    # first sweep and becomes keywords in the second rather than being dropped.
    words = [f"term{i:03d}" for i in range(100)]
    content = " ".join(words[:50]) + ". " + " ".join(words[50:]) + "."
    entry = FitCandidate(entryId=IDS[0], rank=1, content=content)
    result = fit_entries([entry], 40)
    (fitted,) = result.entries
    assert (fitted.compressionLevel, fitted.originalTokens, fitted.packedTokens) == (
        "keywords",
        134,  # ceil(100 / 0.75)
        30,
    )


def test_keywords_larger_than_a_summary_are_not_used() -> None:
    # Ten sentences: full 80, summary 3 x 6 = 18 words = 24 tokens, keywords 30 tokens.
    entry = FitCandidate(entryId=IDS[0], rank=1, content=_document("s", 10))
    kept = fit_entries([entry], 25).entries
    assert [(e.compressionLevel, e.packedTokens) for e in kept] == [("summary", 24)]
    # Still over a budget of 20 after the summary: keywords would not help, so it is dropped.
    too_small = fit_entries([entry], 20)
    assert too_small.entries == []
    assert too_small.dropped == [IDS[0]]


def test_empty_pack() -> None:
    result = fit_entries([], 100)
    assert result.entries == [] and result.dropped == []
    assert result.stats.totalTokens == 0
    assert result.stats.budgetUtilization == 0.0
    assert fit_entries([], None).stats.budgetUtilization == 0.0


def test_invalid_budget_and_rank_are_rejected() -> None:
    with pytest.raises(ValueError, match="token_budget"):
        fit_entries(_three(), 0)
    with pytest.raises(ValidationError):
        FitCandidate(entryId=IDS[0], rank=0, content="x")


def test_result_serialises_with_wire_names() -> None:
    dumped = fit_entries(_three(), 400).model_dump(mode="json")
    assert set(dumped) == {"entries", "dropped", "stats"}
    assert set(dumped["entries"][0]) == {
        "entryId",
        "rank",
        "compressionLevel",
        "originalTokens",
        "packedTokens",
    }
    assert set(dumped["stats"]) == {
        "totalTokens",
        "entriesIncluded",
        "entriesCompressed",
        "compressionRatio",
        "budgetUtilization",
    }
