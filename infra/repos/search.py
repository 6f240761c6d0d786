"""Hybrid search over diary entries (DECISIONS "Memory", Hybrid search).

Two arms, each the best `2 × limit` candidates inside the scope and the filters:

- the vector arm: cosine distance to the query vector, at most 0.8;
- the full-text arm: `websearch_to_tsquery('english', query)` over `tsv`, ranked by `ts_rank`;

then the entries that share a rare identifier (a ticket, an error code) with the best candidate
(`linked_entries`: a follow-up that names only the ticket). What the arms and the links found is
ranked by `schemas.ranking` (fusion, the relevance floor, the flagged entries' demotion,
successors, the caller's weights), the one ranking the quality benchmark measures. A query with a
negation (`-word`) keeps only entries that match its full-text query. `mode` (`vector`,
`fulltext`) runs one arm alone, to measure it. `as_of` reads the scope as it stood at an instant:
entries created by then, superseded as they were then (migration 0021).

A search is one statement, `search_diaries` (migrations 0030, 0031): it sizes the scope,
chooses the vector arm's plan, runs both arms, finds the identifier links of the candidates
that can become a seed (each arm's first `SEARCH_LINK_SEEDS` and those both arms found: any
fusion by position picks its seeds among them) and returns the rows of every entry found, in
one snapshot and one round trip. What needs the fused relevance stays here, in
`schemas.ranking`: fusion, the choice of the links' seed (`link_seeds`) and the ranking. The
query vector may still be computing when the search is called; it is awaited before the
statement is sent.

The full-text arm of a one-diary search reads the GIN index on (diary_id, tsv) (migration
0032: the filter writes such a scope as `diary_id = x`, the form that index takes); a scope of
several diaries reads the table-wide index on `tsv` and keeps its own diaries' matches.

The vector arm's plan is chosen per scope (`search_vector_plan` in 0030), because pgvector 0.6
applies `WHERE diary_id = ANY` *after* its HNSW scan, which yields at most `hnsw.ef_search`
rows: a scope that is a small share of the table would get few or none of its true neighbours.
Where pgvector is 0.8 or later (`iterative_scan`, read once per pool), a large scope too thin
for that is searched with its iterative scan instead of exactly.
"""

from __future__ import annotations

import inspect
import re
import weakref
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from uuid import UUID

import asyncpg
import numpy as np
from numpy.typing import NDArray

from infra.db import Q
from schemas import limits, ranking
from schemas.embedding import SearchFilters, SearchType
from schemas.memory import Entry, entry_from_row

Vector = Sequence[float] | NDArray[np.float32]
QueryVector = Vector | Awaitable[Vector | None] | None
"""The query's embedding, or an awaitable of it (None: embedding failed, full text only)."""

ITERATIVE_SCAN_SINCE: Final = (0, 8)
"""The first pgvector with `hnsw.iterative_scan` (0.6 rejects the setting: its prefix is
reserved)."""


# --- the plan of the vector arm -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VectorPlan:
    """Exact search over the scope, or HNSW with `ef_search` candidates kept per scan
    (`iterative`: pgvector 0.8's iterative scan, which scans on until enough pass the filters)."""

    method: Literal["exact", "hnsw", "iterative"]
    ef_search: int | None = None
    reason: str = ""


def _plan_limits(iterative: bool) -> tuple[Any, ...]:
    """The limits of `search_vector_plan`, where the rule is written (migration 0030)."""
    return (
        limits.SEARCH_EXACT_SCOPE_MAX_ROWS,
        limits.SEARCH_HNSW_EF_MARGIN,
        limits.SEARCH_HNSW_EF_MIN,
        limits.SEARCH_HNSW_EF_MAX,
        limits.SEARCH_HNSW_ITERATIVE_EF if iterative else None,
    )


async def choose_vector_plan(
    db: asyncpg.Pool | asyncpg.Connection,
    scoped_rows: int,
    table_rows: int,
    wanted: int,
    *,
    iterative: bool,
) -> VectorPlan:
    """The plan a search chooses for `scoped_rows` of a table of `table_rows` (for tests and
    benchmarks: the search itself asks inside its statement, where the scope is sized)."""
    row = await db.fetchrow(
        Q.search_vector_plan, scoped_rows, table_rows, wanted, *_plan_limits(iterative)
    )
    return VectorPlan(row["method"], row["ef_search"], row["reason"])


# per pool, not per process: a test process holds pools on servers with either pgvector
_ITERATIVE_SCAN: weakref.WeakKeyDictionary[asyncpg.Pool, bool] = weakref.WeakKeyDictionary()


async def iterative_scan(pool: asyncpg.Pool) -> bool:
    """Whether the pool's database has pgvector's iterative index scans: read on the pool's
    first search with a vector and kept for the pool's life (a process opens its pools when it
    starts: `ALTER EXTENSION vector UPDATE` is seen by the processes started after it)."""
    known = _ITERATIVE_SCAN.get(pool)
    if known is None:
        version = await pool.fetchval(Q.search_vector_version)
        release = re.match(r"(\d+)\.(\d+)", version or "")
        known = release is not None and ((int(release[1]), int(release[2])) >= ITERATIVE_SCAN_SINCE)
        _ITERATIVE_SCAN[pool] = known
    return known


def search_type_of(vector_ran: bool, fulltext_ran: bool) -> SearchType:
    if vector_ran and fulltext_ran:
        return "hybrid"
    return "vector" if vector_ran else "fulltext"


# --- the repository -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One result: the entry's row (what `schemas.memory.entry_from_row` reads) and its score."""

    row: Mapping[str, Any]
    score: float
    relevance: float

    @property
    def entry_id(self) -> UUID:
        entry_id: UUID = self.row["id"]
        return entry_id

    def entry(self) -> Entry:
        """The hit as the API shows it, with its score (6 decimals)."""
        return entry_from_row(self.row, score=round(self.score, 6))


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    hits: list[SearchHit]
    search_type: SearchType
    vector_plan: VectorPlan | None = None
    # What each arm returned, best first (None: the arm did not run), the vector arm with each
    # candidate's cosine distance, and the linked entries with the seed each came from; for
    # tests and benchmarks (which rank them again through `schemas.ranking`).
    vector: list[tuple[UUID, float]] | None = field(default=None, repr=False)
    fulltext_ids: list[UUID] | None = field(default=None, repr=False)
    linked: dict[UUID, UUID] = field(default_factory=dict, repr=False)

    @property
    def vector_ids(self) -> list[UUID] | None:
        return None if self.vector is None else [entry_id for entry_id, _ in self.vector]

    @property
    def linked_ids(self) -> list[UUID]:
        return list(self.linked)


class SearchRepo:
    """Hybrid search on a (read-only) pool; one call is one statement."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def search(
        self, query: str, query_vector: QueryVector, filters: SearchFilters
    ) -> SearchOutcome:
        vector = None if filters.mode == "fulltext" else await _resolve(query_vector)
        if not filters.diary_ids:  # the caller reads no diary: nothing to search
            embedded = vector is not None
            return SearchOutcome(
                hits=[],
                search_type=search_type_of(embedded, filters.mode != "vector" or not embedded),
            )
        iterative = vector is not None and await iterative_scan(self._pool)
        rows = await self._pool.fetch(
            Q.search_diaries, *search_args(query, vector, filters, iterative=iterative)
        )
        return outcome_of(rows, filters)


def search_args(
    query: str, vector: Vector | None, filters: SearchFilters, *, iterative: bool
) -> tuple[Any, ...]:
    """The parameters of `search_diaries` (search.sql)."""
    return (
        query,
        *filter_args(filters),
        vector,
        filters.mode == "vector",
        candidate_count(filters),
        limits.SEARCH_MAX_COSINE_DISTANCE,
        limits.SEARCH_LINK_MAX_SHARED,
        *_plan_limits(iterative),
        limits.SEARCH_LINK_SEEDS,
    )


def outcome_of(rows: Sequence[Mapping[str, Any]], filters: SearchFilters) -> SearchOutcome:
    """The search from the rows of `search_diaries`: fused, linked and ranked."""
    head = next(row["search"] for row in rows if row["id"] is None)
    entries = {row["id"]: row for row in rows if row["id"] is not None}
    vector = _vector_arm(head)
    fulltext_ids = None if head["fulltext_ids"] is None else list(head["fulltext_ids"])
    relevance = ranking.fuse(vector, fulltext_ids)
    linked = linked_entries(head, relevance, filters.limit)
    relevance = ranking.with_links(relevance, linked)
    return SearchOutcome(
        hits=_ranked_hits(entries, relevance, head["negated"], filters),
        search_type=search_type_of(vector is not None, fulltext_ids is not None),
        vector_plan=_vector_plan(head),
        vector=vector,
        fulltext_ids=fulltext_ids,
        linked=linked,
    )


async def _resolve(query_vector: QueryVector) -> Vector | None:
    if query_vector is None:
        return None
    if inspect.isawaitable(query_vector):
        return await query_vector
    return query_vector


def candidate_count(filters: SearchFilters) -> int:
    """How many candidates each arm brings to the fusion (the parameter after the vector)."""
    return limits.SEARCH_CANDIDATE_FACTOR * filters.limit


def filter_args(filters: SearchFilters) -> tuple[Any, ...]:
    """Parameters $2..$10 of every arm (see the header of search.sql): the scope, as the
    search statement and each arm alone (the benches and the plan tests) take it."""
    return (
        list(filters.diary_ids),
        list(filters.tags),
        list(filters.exclude_tags),
        list(filters.entry_types),
        filters.exclude_superseded,
        filters.exclude_suspicious,
        filters.created_before,
        filters.created_after,
        filters.as_of,
    )


def _vector_plan(head: Mapping[str, Any]) -> VectorPlan | None:
    if head["plan_method"] is None:  # no query vector
        return None
    return VectorPlan(head["plan_method"], head["plan_ef_search"], head["plan_reason"])


def _vector_arm(head: Mapping[str, Any]) -> list[tuple[UUID, float]] | None:
    """The vector arm's candidates, nearest first, with their distance; None when the query has
    no vector or no entry in scope has one (the search is then full text only)."""
    if head["vector_ids"] is None:
        return None
    return list(zip(head["vector_ids"], head["vector_distances"], strict=True))


def linked_entries(
    head: Mapping[str, Any], relevance: Mapping[UUID, float], limit: int
) -> dict[UUID, UUID]:
    """The entries that share a rare identifier (`ranking.link_max_carriers` of the scope's
    entries carry it at most) with the best of the candidates (`ranking.link_seeds`), each with
    the seed it came from. The statement found the links of every candidate that could be a
    seed; kept here are those of the seeds, each entry with its first seed, at most `limit`
    entries (by id), and none that is a candidate already."""
    seeds = {seed: n for n, seed in enumerate(ranking.link_seeds(relevance))}
    most = ranking.link_max_carriers(head["scoped_rows"])
    first: dict[UUID, UUID] = {}
    for entry_id, seed_id, carriers in zip(
        head["link_ids"], head["link_seed_ids"], head["link_carriers"], strict=True
    ):
        if seed_id not in seeds or entry_id in seeds or carriers > most:
            continue
        if entry_id not in first or seeds[seed_id] < seeds[first[entry_id]]:
            first[entry_id] = seed_id
    kept = sorted(first)[:limit]
    return {entry_id: first[entry_id] for entry_id in kept if entry_id not in relevance}


def _ranked_hits(
    entries: Mapping[UUID, Mapping[str, Any]],
    relevance: Mapping[UUID, float],
    negated: bool,
    filters: SearchFilters,
) -> list[SearchHit]:
    rows = {
        entry_id: entries[entry_id]
        for entry_id in relevance
        if entries[entry_id]["matches_query"] or not negated
    }
    facts = {
        entry_id: ranking.EntryFacts(
            superseded_by=row["superseded_by"],
            flagged=row["injection_risk"],
            hours_since_access=float(row["hours_since_access"]),
            importance=row["importance"],
        )
        for entry_id, row in rows.items()
    }
    ranked = ranking.rank(relevance, facts, filters.weights, filters.limit)
    return [SearchHit(rows[hit.entry_id], hit.score, hit.relevance) for hit in ranked]
