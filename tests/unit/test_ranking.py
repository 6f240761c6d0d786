"""The ranking of search (`schemas.ranking`): fusion, the floor, links, the flagged demotion,
successors, weights. The repository and bench/quality.py both rank through it."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from schemas import limits, ranking
from schemas.embedding import SearchWeights
from schemas.ranking import RULES, EntryFacts, Ranked

RELEVANCE_ONLY = SearchWeights()
# the floor of the tests' own rules (the shipped one is measured in bench/quality.py)
FLOORED = replace(RULES, answer_distance=0.5)
NEAR, FAR, FARTHER = 0.4, 0.6, 0.75


def ids(count: int) -> list[uuid.UUID]:
    return [uuid.uuid4() for _ in range(count)]


def test_fusion_weighs_a_full_text_match_above_a_vector_match_of_the_same_rank() -> None:
    both, text_only, vector_only = ids(3)
    fused = ranking.fuse([(both, 0.1), (vector_only, 0.2)], [both, text_only])
    assert fused[both] == pytest.approx(1.0)  # first in both arms
    assert fused[text_only] > fused[vector_only]
    # the scale is fixed: first in one arm alone is that arm's weight
    alone = ranking.fuse([(vector_only, 0.1)], None)
    assert alone[vector_only] == pytest.approx(limits.SEARCH_RRF_WEIGHT_VECTOR)


def test_a_query_is_answered_only_with_evidence_of_an_answer() -> None:
    near, far, farther = ids(3)
    # a query about nothing in the scope: the nearest entry is first in its arm, but too far
    assert ranking.fuse([(far, FAR), (farther, FARTHER)], [], FLOORED) == {}
    assert ranking.fuse([(far, FAR)], None, FLOORED) == {}
    # a near candidate, or a full-text match, answers it; the other candidates come along
    answered = ranking.fuse([(near, NEAR), (far, FAR), (farther, FARTHER)], [], FLOORED)
    assert set(answered) == {near, far, farther}
    assert set(ranking.fuse([(far, FAR)], [farther], FLOORED)) == {far, farther}
    # the scale does not move: the far one is second in its arm either way
    k, w_vector, w_text = RULES.rrf_k, RULES.weight_vector, RULES.weight_fulltext
    assert answered[far] == pytest.approx((w_vector / (k + 2)) / ((w_vector + w_text) / (k + 1)))


def test_the_link_seed_is_the_best_candidate_and_links_carry_its_factor() -> None:
    best, other, linked, known = ids(4)
    relevance = {best: 0.8, other: 0.5, known: 0.3}
    assert ranking.link_seeds(relevance) == [best]
    joined = ranking.with_links(relevance, {linked: best, known: best})
    assert joined[linked] == pytest.approx(limits.SEARCH_LINK_RELEVANCE * 0.8)
    assert joined[known] == 0.3  # a candidate already found keeps its own relevance


@pytest.mark.parametrize(
    ("scope_rows", "carriers"),
    [(2, 2), (5, 2), (6, 2), (7, 3), (9, 4), (1_000, limits.SEARCH_LINK_MAX_SHARED)],
)
def test_an_identifier_half_the_scope_carries_links_nothing_but_a_pair_always_links(
    scope_rows: int, carriers: int
) -> None:
    assert ranking.link_max_carriers(scope_rows) == carriers


def test_a_flagged_entry_ranks_below_an_unflagged_one_of_similar_relevance() -> None:
    flagged, plain, weak = ids(3)
    relevance = {flagged: 0.95, plain: 0.9, weak: 0.1}
    facts = {flagged: EntryFacts(flagged=True), plain: EntryFacts(), weak: EntryFacts()}
    ranked = ranking.rank(relevance, facts, RELEVANCE_ONLY, limit=10)
    assert [hit.entry_id for hit in ranked] == [plain, flagged, weak]
    assert ranked[1].score == pytest.approx(0.95 * limits.SEARCH_FLAGGED_RELEVANCE_FACTOR)
    # without the rule, it would come first
    off = ranking.rank(relevance, facts, RELEVANCE_ONLY, 10, replace(RULES, flagged_factor=1.0))
    assert off[0].entry_id == flagged


def test_successors_inherit_the_best_relevance_down_a_chain() -> None:
    a, b, c, d, e = ids(5)
    # a ← superseded by b ← superseded by c; d's successor e is more relevant already
    relevance = {a: 0.9, b: 0.2, c: 0.1, d: 0.3, e: 0.8}
    superseded_by = {a: b, b: c, c: None, d: e, e: None}
    assert ranking.successors_inherit(relevance, superseded_by) == {
        a: 0.9, b: 0.9, c: 0.9, d: 0.3, e: 0.8
    }  # fmt: skip
    # a successor that is not a candidate gains nothing; a cycle settles
    assert ranking.successors_inherit({a: 0.5}, {a: b}) == {a: 0.5}
    assert ranking.successors_inherit({a: 0.5, b: 0.1}, {a: b, b: a}) == {a: 0.5, b: 0.5}


def hit(entry_id: uuid.UUID, successor: uuid.UUID | None = None) -> Ranked:
    return Ranked(entry_id, score=0.0, relevance=0.0, superseded_by=successor)


def test_successors_first_moves_each_superseded_hit_below_its_successor() -> None:
    a, b, c, d, e = ids(5)
    absent = uuid.uuid4()
    # a ← superseded by c ← superseded by d; b's successor is not a candidate; e is plain
    hits = [hit(a, c), hit(b, absent), hit(c, d), hit(e), hit(d)]
    ranked = [h.entry_id for h in ranking.successors_first(hits)]
    assert ranked == [b, e, d, c, a]
    # a successor already above keeps the order; a cycle loses no hit
    assert [h.entry_id for h in ranking.successors_first([hit(d), hit(c, d)])] == [d, c]
    cycle = ranking.successors_first([hit(a, b), hit(b, a), hit(e)])
    assert [h.entry_id for h in cycle] == [e, a, b]


def test_rank_orders_by_the_weights_breaks_ties_by_relevance_then_id_and_keeps_the_limit() -> None:
    old, new, important, tie_a, tie_b = sorted(ids(5), key=str)
    relevance = {old: 0.9, new: 0.2, important: 0.5, tie_a: 0.4, tie_b: 0.4}
    facts = {
        old: EntryFacts(superseded_by=new),
        new: EntryFacts(),
        important: EntryFacts(importance=limits.ENTRY_IMPORTANCE_MAX),
        tie_a: EntryFacts(),
        tie_b: EntryFacts(),
    }
    ranked = ranking.rank(relevance, facts, RELEVANCE_ONLY, limit=4)
    # the successor takes the old fact's relevance and place, the old fact just below it
    assert [h.entry_id for h in ranked] == [new, old, important, tie_a]
    assert ranked[0].relevance == 0.9
    by_importance = ranking.rank(relevance, facts, SearchWeights(relevance=0, importance=1), 1)
    assert [h.entry_id for h in by_importance] == [important]
    # a candidate without facts (ruled out by the caller) is not ranked
    assert ranking.rank(relevance, {tie_a: EntryFacts()}, RELEVANCE_ONLY, 10)[0].entry_id == tie_a
