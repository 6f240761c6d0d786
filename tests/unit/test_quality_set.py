"""The labelled retrieval set of bench/quality.py is well-formed, and its metrics compute known
values on a hand example (the bench itself runs in `make bench`)."""

from __future__ import annotations

import gzip
import json
import math
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.quality_metrics import dcg, ndcg_at, query_metrics, recall_at, reciprocal_rank
from bench.quality_set import (
    CATEGORIES,
    DATA,
    QUERY_COUNTS,
    QualitySet,
    build,
    content_words,
    load,
)
from schemas.kernel.injection import scan


@pytest.fixture(scope="module")
def qs() -> QualitySet:
    return load()


def test_the_committed_file_is_what_the_generator_writes() -> None:
    with gzip.open(DATA, "rt", encoding="utf-8") as handle:
        committed = json.load(handle)
    assert build().to_json() == committed


def test_counts_and_split(qs: QualitySet) -> None:
    assert len(qs.entries) >= 2000
    assert len(qs.diaries) >= 3 and {e.diary for e in qs.entries} == set(qs.diaries)
    assert len(qs.queries) == 250
    assert Counter(q.category for q in qs.queries) == QUERY_COUNTS
    for category in CATEGORIES:
        splits = Counter(q.split for q in qs.queries if q.category == category)
        assert set(splits) == {"tune", "heldout"}
        assert abs(splits["tune"] - splits["heldout"]) <= 1
    for category, forms in {
        "supersession": {"terse", "question"},
        "cross_diary": {"ticket", "words"},
        "injection": {"ticket", "words"},
    }.items():  # each half holds both wordings of a category that alternates them
        for split in ("tune", "heldout"):
            chosen = {q.form for q in qs.queries if q.category == category and q.split == split}
            assert chosen == forms, (category, split)
    assert len({e.key for e in qs.entries}) == len(qs.entries)
    assert len({q.key for q in qs.queries}) == len(qs.queries)
    assert len({q.text for q in qs.queries}) == len(qs.queries)


def test_unanswerable_queries_have_no_answer_in_their_diary(qs: QualitySet) -> None:
    """Ten per diary, half in each split, and no entry of the diary holds every content word
    of one (so neither arm has an answer to find; any result is a wrong one)."""
    assert Counter(q.diary for q in qs.unanswerable) == {diary: 10 for diary in qs.diaries}
    assert Counter(q.split for q in qs.unanswerable) == {"tune": 20, "heldout": 20}
    for query in qs.unanswerable:
        assert query.judgments == {} and query.category == "unanswerable"
        wanted = content_words(query.text)
        for entry in (e for e in qs.entries if e.diary == query.diary):
            words = content_words(f"{entry.title or ''} {entry.content} {' '.join(entry.tags)}")
            assert not wanted <= words, (query.text, entry.key)


def test_every_judgment_names_an_entry_and_every_query_has_a_relevant_one(qs: QualitySet) -> None:
    by_key = {e.key: e for e in qs.entries}
    for query in qs.queries:
        assert set(query.judgments) <= set(by_key), query.key
        assert all(0 <= grade <= 3 for grade in query.judgments.values())
        assert max(query.judgments.values()) == 3, query.key
        diaries = {by_key[key].diary for key in query.judgments}
        if query.category == "cross_diary":
            assert query.diary is None and len(diaries) >= 2, query.key
        else:  # searched in its diary: everything judged is there
            assert diaries == {query.diary}, query.key


def test_supersession_pairs_are_consistent(qs: QualitySet) -> None:
    by_key = {e.key: e for e in qs.entries}
    pairs = {(r.source, r.target) for r in qs.relations}
    assert all(r.relation == "supersedes" and r.status == "accepted" for r in qs.relations)
    targets = [r.target for r in qs.relations]
    assert len(targets) == len(set(targets))  # each older fact replaced once
    assert not {r.source for r in qs.relations} & set(targets)  # pairs, no chains or cycles
    for source, target in pairs:
        newer, older = by_key[source], by_key[target]
        assert newer.diary == older.diary and newer.age_days < older.age_days
    supersession = [q for q in qs.queries if q.category == "supersession"]
    for query in supersession:
        assert query.current and query.superseded
        assert (query.current, query.superseded) in pairs
        assert query.judgments[query.current] == 3 > query.judgments[query.superseded] >= 1
    assert all(q.current is None for q in qs.queries if q.category != "supersession")


def test_paraphrases_share_no_content_word_with_their_target(qs: QualitySet) -> None:
    by_key = {e.key: e for e in qs.entries}
    paraphrases = [q for q in qs.queries if q.category == "paraphrase"]
    for query in paraphrases:
        (target,) = [by_key[k] for k, grade in query.judgments.items() if grade == 3]
        words = content_words(" ".join([target.title or "", target.content, *target.tags]))
        assert not content_words(query.text) & words, (query.text, target.content)


def test_injection_noise_is_flagged_by_the_scanner_and_never_relevant(qs: QualitySet) -> None:
    flagged = {e.key for e in qs.entries if scan(e.title, e.content).risk}
    assert flagged == {e.key for e in qs.entries if e.role == "injection"}
    assert len(flagged) >= 40
    judged = {key for q in qs.queries for key, grade in q.judgments.items() if grade > 0}
    assert not flagged & judged
    noisy = {
        (e.diary, e.content.split(".")[0].lower()) for e in qs.entries if e.role == "injection"
    }
    by_key = {e.key: e for e in qs.entries}
    for query in (q for q in qs.queries if q.category == "injection"):
        (target,) = [by_key[k] for k, grade in query.judgments.items() if grade == 3]
        assert any(diary == target.diary and clause in target.content.lower()
                   for diary, clause in noisy), query.key  # fmt: skip


# --- the metrics on a hand example ---------------------------------------------------------


JUDGED = {"a": 3, "b": 2, "c": 1, "x": 0}


def test_recall_and_reciprocal_rank() -> None:
    ranked = ["x", "b", "y", "z", "w", "a", "v", "u", "t", "s", "c"]
    assert recall_at(ranked, JUDGED, 5) == pytest.approx(1 / 3)
    assert recall_at(ranked, JUDGED, 10) == pytest.approx(2 / 3)
    assert reciprocal_rank(ranked, JUDGED) == 0.5  # b at rank 2; x (grade 0) does not count
    assert reciprocal_rank(["x", "y"], JUDGED) == 0.0


def test_ndcg() -> None:
    assert dcg([3, 2, 1]) == pytest.approx(7 + 3 / math.log2(3) + 1 / 2)
    assert ndcg_at(["a", "b", "c"], JUDGED, 10) == 1.0
    # c, x, a: (1 + 0 + 7/2) / (7 + 3/log2(3) + 1/2)
    expected = (1 + 7 / 2) / (7 + 3 / math.log2(3) + 1 / 2)
    assert ndcg_at(["c", "x", "a"], JUDGED, 10) == pytest.approx(expected)
    assert ndcg_at(["a", "b", "c"], JUDGED, 1) == 1.0  # the ideal is cut at k too
    assert ndcg_at([], JUDGED, 10) == 0.0


def test_query_metrics_names() -> None:
    assert query_metrics(["a", "b", "c"], JUDGED) == {
        "recall@5": 1.0,
        "recall@10": 1.0,
        "mrr": 1.0,
        "ndcg@10": 1.0,
    }
