"""The ranking of search: what the arms found, in the order and with the score a caller sees.

One pure function for the repository (`infra/repos/search.py`) and the quality benchmark
(`bench/quality.py`), so that the constants tuned there are the ones that ship. The steps, each
a function below:

1. `fuse`: the relevance floor, then weighted reciprocal-rank fusion of the two arms into a
   relevance in 0..1 (1 = first in both arms). A query is answered only when something is
   evidence of an answer: a full-text match, or a vector candidate within
   `SEARCH_ANSWER_MAX_DISTANCE`; otherwise nothing is returned, instead of whatever is least far
   (the nearest of five unrelated notes is always first in its arm).
2. `with_links`: the entries that share a rare identifier with the best candidate (`link_seeds`)
   join at `SEARCH_LINK_RELEVANCE` × its relevance. "Rare" is `link_max_carriers`: a token that
   half the scope carries names the scope (a project prefix in every title), not an event.
3. `rank`: successors inherit the relevance of what they superseded; an injection-flagged entry
   keeps `SEARCH_FLAGGED_RELEVANCE_FACTOR` of its relevance (DECISIONS, turn 4: below unflagged
   entries of similar relevance); relevance is mixed with recency and importance by the caller's
   weights into the score; ties go to relevance, then the id; a superseded entry moves just below
   its successor; the first `limit` are kept.

docs/search.md says what a score means to a caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from schemas import limits
from schemas.embedding import SearchWeights


@dataclass(frozen=True, slots=True)
class RankingRules:
    """The constants of the ranking (`schemas/limits.py`), and switches that turn a rule off:
    the benchmark measures each rule's share with them. The search runs `RULES`."""

    rrf_k: int = limits.SEARCH_RRF_K
    weight_vector: float = limits.SEARCH_RRF_WEIGHT_VECTOR
    weight_fulltext: float = limits.SEARCH_RRF_WEIGHT_FULLTEXT
    answer_distance: float = limits.SEARCH_ANSWER_MAX_DISTANCE
    link_relevance: float = limits.SEARCH_LINK_RELEVANCE
    flagged_factor: float = limits.SEARCH_FLAGGED_RELEVANCE_FACTOR
    inherit: bool = True
    successors_first: bool = True


RULES = RankingRules()


@dataclass(frozen=True, slots=True)
class EntryFacts:
    """What the ranking reads of a candidate entry beside the arms."""

    superseded_by: UUID | None = None
    flagged: bool = False
    hours_since_access: float = 0.0
    importance: int = limits.ENTRY_IMPORTANCE_DEFAULT


@dataclass(frozen=True, slots=True)
class Ranked:
    """One result: its score (what the caller sees) and its relevance (the score's first part)."""

    entry_id: UUID
    score: float
    relevance: float
    superseded_by: UUID | None = None


def fuse(
    vector: Sequence[tuple[UUID, float]] | None,
    fulltext: Sequence[UUID] | None,
    rules: RankingRules = RULES,
) -> dict[UUID, float]:
    """Relevance in 0..1 of every candidate: the weighted sum of 1/(k + rank) over the arms it
    appears in, divided by the best possible sum (first in both). `vector` is (id, cosine
    distance), nearest first; `fulltext` best first. Nothing when no candidate is evidence of an
    answer (the floor)."""
    if not fulltext and not any(d <= rules.answer_distance for _, d in vector or ()):
        return {}
    fused: dict[UUID, float] = {}
    for rank, (entry_id, _) in enumerate(vector or (), start=1):
        fused[entry_id] = rules.weight_vector / (rules.rrf_k + rank)
    for rank, entry_id in enumerate(fulltext or (), start=1):
        fused[entry_id] = fused.get(entry_id, 0.0) + rules.weight_fulltext / (rules.rrf_k + rank)
    best = (rules.weight_vector + rules.weight_fulltext) / (rules.rrf_k + 1)
    return {entry_id: score / best for entry_id, score in fused.items()}


def link_seeds(relevance: Mapping[UUID, float]) -> list[UUID]:
    """The candidates whose rare identifiers bring in the entries that share them: the best
    `SEARCH_LINK_SEEDS`, ties by id."""
    ranked = sorted(relevance, key=lambda entry_id: (-relevance[entry_id], str(entry_id)))
    return ranked[: limits.SEARCH_LINK_SEEDS]


def link_max_carriers(scope_rows: int) -> int:
    """How many entries of the scope may carry an identifier for it to link them: at most
    `SEARCH_LINK_MAX_SHARED`, and fewer than half the scope, but always a pair (an incident and
    its follow-up). In a five-entry diary whose titles all start with `PRJ-2041` the token names
    the diary, not an event, and would link every entry to any hit."""
    return min(limits.SEARCH_LINK_MAX_SHARED, max(2, (scope_rows - 1) // 2))


def with_links(
    relevance: Mapping[UUID, float], linked: Mapping[UUID, UUID], rules: RankingRules = RULES
) -> dict[UUID, float]:
    """The relevance with each linked entry (id → the seed it came from) at the link factor of
    its seed's relevance; a candidate already found keeps its own."""
    joined = dict(relevance)
    for entry_id, seed_id in linked.items():
        if entry_id not in joined and seed_id in relevance:
            joined[entry_id] = rules.link_relevance * relevance[seed_id]
    return joined


def successors_inherit(
    relevance: Mapping[UUID, float], superseded_by: Mapping[UUID, UUID | None]
) -> dict[UUID, float]:
    """Relevance with every candidate successor raised to the best relevance of the candidates
    it superseded, directly or down a chain (issue 26: a query in the old fact's words is a
    question whose answer is now the new fact, so the new fact takes the old one's place and
    `successors_first` puts the old one just below it). Measured in bench/quality.py: current
    fact first 0.70 → 0.75 on the tuning half."""
    inherited = dict(relevance)
    links = [(old, new) for old, new in superseded_by.items() if old in inherited and new]
    for _ in range(len(links)):  # a chain of n supersessions settles in at most n passes
        raised = False
        for old, new in links:
            if new in inherited and inherited[old] > inherited[new]:
                inherited[new] = inherited[old]
                raised = True
        if not raised:
            break
    return inherited


def combined_score(
    relevance: float, hours_since_access: float, importance: int, weights: SearchWeights
) -> float:
    recency: float = limits.SEARCH_RECENCY_DECAY_PER_HOUR ** max(0.0, hours_since_access)
    return (
        weights.relevance * relevance
        + weights.recency * recency
        + weights.importance * importance / limits.ENTRY_IMPORTANCE_MAX
    )


def rank(
    relevance: Mapping[UUID, float],
    facts: Mapping[UUID, EntryFacts],
    weights: SearchWeights,
    limit: int,
    rules: RankingRules = RULES,
) -> list[Ranked]:
    """The first `limit` candidates, best first. Only the candidates with facts are ranked (the
    caller leaves out what it has ruled out, e.g. an entry a negated word excludes)."""
    kept = {entry_id: relevance[entry_id] for entry_id in relevance if entry_id in facts}
    if rules.inherit:
        kept = successors_inherit(kept, {i: facts[i].superseded_by for i in kept})
    ranked = []
    for entry_id, entry_relevance in kept.items():
        fact = facts[entry_id]
        if fact.flagged:
            entry_relevance *= rules.flagged_factor
        score = combined_score(entry_relevance, fact.hours_since_access, fact.importance, weights)
        ranked.append(Ranked(entry_id, score, entry_relevance, fact.superseded_by))
    ranked.sort(key=lambda hit: (-hit.score, -hit.relevance, str(hit.entry_id)))
    if rules.successors_first:
        ranked = successors_first(ranked)
    return ranked[:limit]


def successors_first(hits: Sequence[Ranked]) -> list[Ranked]:
    """The ranking with every superseded entry moved just below the entry that superseded it,
    when both are candidates (issue 26: the current fact wins over the one it replaced, however
    much closer the old wording is to the query). `superseded_by` is what accepting a
    `supersedes` relation sets; an entry whose successor is not a candidate keeps its place.
    """
    candidates = {hit.entry_id for hit in hits}
    placed: set[UUID] = set()
    waiting: dict[UUID, list[Ranked]] = {}  # successor id -> hits to place right after it
    ranked: list[Ranked] = []

    def place(hit: Ranked) -> None:
        ranked.append(hit)
        placed.add(hit.entry_id)
        for follower in waiting.pop(hit.entry_id, []):
            place(follower)

    for hit in hits:
        successor = hit.superseded_by
        if successor in candidates and successor not in placed:
            waiting.setdefault(successor, []).append(hit)
        else:
            place(hit)
    # a cycle of supersessions (each accepted by someone) leaves its members waiting: keep them
    ranked.extend(hit for hit in hits if hit.entry_id not in placed)
    return ranked
