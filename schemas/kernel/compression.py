"""Token estimates, the three compression levels, and fitting a pack's entries into a budget.

DECISIONS "Memory": tokens = ceil(words / 0.75); ``summary`` keeps the best 30 % of sentences in
their original order; ``keywords`` keeps distinctive words up to 30 tokens; a token budget
compresses from the tail (full -> summary, then -> keywords), then drops tail entries.

A pack stores only each entry's level and token counts, never the compressed text (the render
prints full content), so these functions decide sizes, not what a reader sees. They are pure and
deterministic: the same entries and budget always give the same levels, which the pack CID hashes.

Where the reference implementation has an accident we do the intended thing instead, and say so:
ratios are exact fractions (``ceil(10 * 0.3)`` is 3 here, 4 in floating point), ``\\w`` is
Unicode (accented words survive ``keywords``), and a level change that would not shrink an entry
(a one-sentence "summary", keywords longer than a short summary) is skipped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Final, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from schemas.limits import KEYWORDS_MAX_TOKENS, SUMMARY_SENTENCE_RATIO, WORDS_PER_TOKEN

CompressionLevel = Literal["full", "summary", "keywords"]
LEVELS: Final[tuple[CompressionLevel, ...]] = ("full", "summary", "keywords")

# The limits are written as decimals; exact fractions keep "30 % of 10" at 3.
_WORDS_PER_TOKEN: Final = Fraction(str(WORDS_PER_TOKEN))
_SUMMARY_RATIO: Final = Fraction(str(SUMMARY_SENTENCE_RATIO))

_SENTENCE_BREAK: Final = re.compile(r"(?<=[.!?])\s+")
_NOT_KEPT_IN_KEYWORD: Final = re.compile(r"[^\w./-]")
_CAMEL_CASE: Final = re.compile(r"[a-z][A-Z]")
_SENTENCE_LENGTH_FOR_FULL_SCORE: Final = 200  # characters; longer sentences score no higher


def _tokens_for_words(words: int) -> int:
    return math.ceil(words / _WORDS_PER_TOKEN)


def estimate_tokens(text: str) -> int:
    """Tokens a text costs: its whitespace-separated words divided by 0.75, rounded up."""
    return _tokens_for_words(len(text.split()))


# --- compression levels ---------------------------------------------------------------------


def _sentences(text: str) -> list[str]:
    parts = (part.strip() for part in _SENTENCE_BREAK.split(text))
    return [part for part in parts if part]


def _summary(text: str) -> str:
    """The best 30 % of sentences (at least one), in their original order.

    A sentence scores for coming early (``1 - i/n``: openings carry the point) and for length up
    to 200 characters (``min(len/200, 1)``: fragments carry little). Ties keep the earlier one.
    """
    sentences = _sentences(text)
    n = len(sentences)
    if n <= 2:
        return text
    keep = max(1, math.ceil(n * _SUMMARY_RATIO))

    def score(i: int) -> float:
        length_score = min(len(sentences[i]) / _SENTENCE_LENGTH_FOR_FULL_SCORE, 1.0)
        return (1 - i / n) + length_score

    best = sorted(range(n), key=score, reverse=True)[:keep]  # sorted() is stable
    return " ".join(sentences[i] for i in sorted(best))


def _is_distinctive(word: str) -> bool:
    """Long words, camelCase identifiers and anything with a digit (versions, ids, sizes)."""
    return len(word) >= 4 or bool(_CAMEL_CASE.search(word)) or any(c.isdigit() for c in word)


def _keywords(text: str) -> str:
    """Distinctive words in order of first use, without repeats, within ``KEYWORDS_MAX_TOKENS``.

    Punctuation is stripped except ``.``, ``/``, ``-`` and ``_``, which hold paths, versions and
    identifiers together. Matching ignores case; the first spelling wins.
    """
    kept: list[str] = []
    seen: set[str] = set()
    for raw in text.split():
        word = _NOT_KEPT_IN_KEYWORD.sub("", raw)
        key = word.casefold()
        if not word or key in seen or not _is_distinctive(word):
            continue
        if _tokens_for_words(len(kept) + 1) > KEYWORDS_MAX_TOKENS:
            break  # every word costs the same, so once one does not fit none will
        seen.add(key)
        kept.append(word)
    return " ".join(kept)


def compress(text: str, level: CompressionLevel) -> str:
    """``text`` at a compression level: ``full`` (unchanged), ``summary`` or ``keywords``."""
    if level == "full":
        return text
    if level == "summary":
        return _summary(text)
    if level == "keywords":
        return _keywords(text)
    raise ValueError(f"unknown compression level: {level!r}")


# --- fitting a pack into a token budget -------------------------------------------------------


class FitCandidate(BaseModel):
    """An entry offered to a pack: its id, its pack rank (1 = most important) and its text."""

    model_config = ConfigDict(frozen=True)

    entryId: UUID
    rank: int = Field(ge=1)
    content: str


class FittedEntry(BaseModel):
    """An entry kept in the pack, with the level chosen for it and what that saves."""

    model_config = ConfigDict(frozen=True)

    entryId: UUID
    rank: int
    compressionLevel: CompressionLevel
    originalTokens: int
    packedTokens: int


class FitStats(BaseModel):
    """How the pack came out against its budget."""

    model_config = ConfigDict(frozen=True)

    totalTokens: int  # packed tokens of the kept entries
    entriesIncluded: int
    entriesCompressed: int  # kept entries at a level other than ``full``
    compressionRatio: float  # packed / original over the kept entries (1 when both are 0)
    budgetUtilization: float  # packed / budget; without a budget 1 if anything is packed, else 0


class FitResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    entries: list[FittedEntry]  # by rank
    dropped: list[UUID]  # entries cut from the tail, by rank
    stats: FitStats


class _Slot:
    """Mutable working state of one candidate while the budget is being met."""

    __slots__ = ("candidate", "level", "original", "packed")

    def __init__(self, candidate: FitCandidate) -> None:
        self.candidate = candidate
        self.level: CompressionLevel = "full"
        self.original = estimate_tokens(candidate.content)
        self.packed = self.original

    def try_level(self, level: CompressionLevel) -> int:
        """Move to ``level`` if that makes the entry smaller; return the tokens saved."""
        packed = estimate_tokens(compress(self.candidate.content, level))
        saved = self.packed - packed
        if saved <= 0:
            return 0
        self.level, self.packed = level, packed
        return saved


def _compress_from_tail(
    slots: Sequence[_Slot], total: int, budget: int, target: CompressionLevel
) -> int:
    """One sweep from the lowest rank up, moving entries to ``target`` until the pack fits.

    Returns the new total. An entry already at ``target`` or beyond is left alone.
    """
    for slot in reversed(slots):
        if total <= budget:
            break
        if LEVELS.index(slot.level) < LEVELS.index(target):
            total -= slot.try_level(target)
    return total


def fit_entries(entries: Sequence[FitCandidate], token_budget: int | None) -> FitResult:
    """Choose a compression level per entry so the pack fits ``token_budget``.

    Everything starts at ``full``. While over budget: sweep from the last rank to the first
    turning ``full`` into ``summary``; then again turning what is left into ``keywords``; then
    drop entries from the tail. The most important entries are the last to lose detail. Without
    a budget nothing is compressed.
    """
    if token_budget is not None and token_budget < 1:
        raise ValueError("token_budget must be at least 1")
    slots = [_Slot(c) for c in sorted(entries, key=lambda c: c.rank)]
    total = sum(slot.packed for slot in slots)
    dropped: list[_Slot] = []
    if token_budget is not None:
        total = _compress_from_tail(slots, total, token_budget, "summary")
        # Also reaches entries whose summary saved nothing (one or two long sentences).
        total = _compress_from_tail(slots, total, token_budget, "keywords")
        while slots and total > token_budget:
            last = slots.pop()
            total -= last.packed
            dropped.insert(0, last)
    return FitResult(
        entries=[
            FittedEntry(
                entryId=s.candidate.entryId,
                rank=s.candidate.rank,
                compressionLevel=s.level,
                originalTokens=s.original,
                packedTokens=s.packed,
            )
            for s in slots
        ],
        dropped=[s.candidate.entryId for s in dropped],
        stats=_stats(slots, token_budget),
    )


def _stats(kept: Sequence[_Slot], token_budget: int | None) -> FitStats:
    packed = sum(s.packed for s in kept)
    original = sum(s.original for s in kept)
    utilization = packed / token_budget if token_budget else float(packed > 0)
    return FitStats(
        totalTokens=packed,
        entriesIncluded=len(kept),
        entriesCompressed=sum(1 for s in kept if s.level != "full"),
        compressionRatio=packed / original if original else 1.0,
        budgetUtilization=utilization,
    )
