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

The vector arm's plan is chosen per scope, because pgvector 0.6 applies `WHERE diary_id = ANY`
*after* its HNSW scan, which yields at most `hnsw.ef_search` rows: a scope that is a small share
of the table would get few or none of its true neighbours (`choose_vector_plan`).

Everything runs in one read-only repeatable-read transaction, so both arms and the final read
see one snapshot. The query vector may still be computing when the search starts: the scope is
sized and the full-text arm runs meanwhile.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
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


# --- the plan of the vector arm -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VectorPlan:
    """Exact search over the scope, or HNSW with `ef_search` candidates kept per scan."""

    method: Literal["exact", "hnsw"]
    ef_search: int | None = None
    reason: str = ""


def choose_vector_plan(scoped_rows: int, table_rows: int, wanted: int) -> VectorPlan:
    """Exact for a small scope; HNSW for a large one, unless it is too thin a slice of the table.

    `scoped_rows` is exact up to `SEARCH_EXACT_SCOPE_MAX_ROWS` (counted) and the planner's
    estimate above it. The HNSW scan keeps `ef` rows of the whole table, of which about
    `ef × share` fall inside the scope; ef is chosen so that this is `SEARCH_HNSW_EF_MARGIN ×`
    the rows wanted. When even pgvector's largest ef cannot deliver that, exact search is the
    only correct plan (and a short HNSW answer falls back to it anyway, see `vector_arm`).
    """
    if scoped_rows <= limits.SEARCH_EXACT_SCOPE_MAX_ROWS:
        return VectorPlan("exact", reason="small scope")
    share = min(1.0, scoped_rows / table_rows) if table_rows > 0 else 1.0
    ef = math.ceil(limits.SEARCH_HNSW_EF_MARGIN * wanted / share)
    if ef > limits.SEARCH_HNSW_EF_MAX:
        return VectorPlan("exact", reason="scope too thin a share of the table for HNSW")
    return VectorPlan("hnsw", ef_search=max(limits.SEARCH_HNSW_EF_MIN, ef), reason="large scope")


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


@dataclass(frozen=True, slots=True)
class _PlanInputs:
    scoped_rows: int
    table_rows: int
    has_lexemes: bool
    negated: bool


class SearchRepo:
    """Hybrid search on a (read-only) pool; one call is one transaction."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def search(
        self, query: str, query_vector: QueryVector, filters: SearchFilters
    ) -> SearchOutcome:
        if not filters.diary_ids:  # the caller reads no diary: nothing to search
            embedded = filters.mode != "fulltext" and await _resolve(query_vector) is not None
            return SearchOutcome(
                hits=[],
                search_type=search_type_of(embedded, filters.mode != "vector" or not embedded),
            )
        async with (
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            await conn.execute(Q.search_custom_plans)
            inputs = await _plan_inputs(conn, query, filters)
            plan: VectorPlan | None = None
            vector: list[tuple[UUID, float]] | None = None
            if filters.mode == "vector":  # the vector arm first: without it, full text after all
                vector, plan = await _vector_candidates(conn, query_vector, filters, inputs)
            run_fulltext = inputs.has_lexemes and (filters.mode != "vector" or vector is None)
            fulltext_ids = await fulltext_arm(conn, query, filters) if run_fulltext else None
            if filters.mode == "hybrid":  # the query vector computed meanwhile
                vector, plan = await _vector_candidates(conn, query_vector, filters, inputs)
            relevance = ranking.fuse(vector, fulltext_ids)
            linked = await linked_entries(conn, relevance, filters, inputs.scoped_rows)
            hits = await _ranked_hits(
                conn, query, filters, ranking.with_links(relevance, linked), inputs
            )
        return SearchOutcome(
            hits=hits,
            search_type=search_type_of(vector is not None, fulltext_ids is not None),
            vector_plan=plan,
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


async def _vector_candidates(
    conn: asyncpg.Connection, query_vector: QueryVector, filters: SearchFilters, inputs: _PlanInputs
) -> tuple[list[tuple[UUID, float]] | None, VectorPlan | None]:
    """The vector arm's candidates and plan; None when the query has no vector or no entry in
    scope has one (the search is then full text only)."""
    vector = await _resolve(query_vector)
    if vector is None:
        return None, None
    plan = choose_vector_plan(inputs.scoped_rows, inputs.table_rows, _candidates(filters))
    candidates = await vector_arm(conn, vector, filters, plan)
    if not candidates and not await conn.fetchval(
        Q.search_scope_has_vectors, list(filters.diary_ids)
    ):
        return None, plan
    return candidates, plan


def _candidates(filters: SearchFilters) -> int:
    return limits.SEARCH_CANDIDATE_FACTOR * filters.limit


def _filter_args(filters: SearchFilters) -> tuple[Any, ...]:
    """Parameters $2..$10 of every arm (see the header of search.sql)."""
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


async def _plan_inputs(conn: asyncpg.Connection, query: str, filters: SearchFilters) -> _PlanInputs:
    """Size the scope: the planner's estimate first (free), then a count capped just above the
    exact-search threshold unless the estimate is far above it (counting a large scope costs
    ~0.3 µs a row; a wrong estimate only costs speed, see `vector_arm`)."""
    diary_ids = list(filters.diary_ids)
    plan = await conn.fetchval(Q.search_scope_estimate, diary_ids)
    estimate = int(plan[0]["Plan"]["Plan Rows"])
    threshold = limits.SEARCH_EXACT_SCOPE_MAX_ROWS
    cap = threshold + 1 if estimate <= 2 * threshold else 0
    row = await conn.fetchrow(Q.search_plan_inputs, diary_ids, cap, query)
    counted: int = row["scoped_rows"]
    return _PlanInputs(
        scoped_rows=counted if counted < cap else max(counted, estimate),
        table_rows=row["table_rows"],
        has_lexemes=row["has_lexemes"],
        negated=row["negated"],
    )


async def fulltext_arm(conn: asyncpg.Connection, query: str, filters: SearchFilters) -> list[UUID]:
    """Ids of the best full-text matches in scope, best first."""
    rows = await conn.fetch(Q.search_fulltext, query, *_filter_args(filters), _candidates(filters))
    return [row["id"] for row in rows]


async def vector_arm(
    conn: asyncpg.Connection, vector: Vector, filters: SearchFilters, plan: VectorPlan
) -> list[tuple[UUID, float]]:
    """The nearest entries in scope within the distance cut-off with their cosine distance,
    nearest first.

    On the HNSW plan, a scan that returns fewer rows than asked may have run out of candidates
    inside the scope and filters (pgvector filters after the scan): the arm is then recomputed
    exactly, because a short answer there would be silently wrong rather than slow.
    """
    wanted = _candidates(filters)
    if plan.method == "hnsw":
        await conn.execute(Q.search_set_ef_search, plan.ef_search)
        rows = await conn.fetch(Q.search_vector_hnsw, vector, *_filter_args(filters), wanted)
        if len(rows) >= wanted:
            return [
                (row["id"], row["distance"])
                for row in rows
                if row["distance"] <= limits.SEARCH_MAX_COSINE_DISTANCE
            ]
    rows = await conn.fetch(
        Q.search_vector_exact,
        vector,
        *_filter_args(filters),
        limits.SEARCH_MAX_COSINE_DISTANCE,
        wanted,
    )
    return [(row["id"], row["distance"]) for row in rows]


async def linked_entries(
    conn: asyncpg.Connection,
    relevance: Mapping[UUID, float],
    filters: SearchFilters,
    scoped_rows: int,
) -> dict[UUID, UUID]:
    """The entries that share a rare identifier (`ranking.link_max_carriers` of the scope's
    entries carry it at most) with the best of the candidates given (`ranking.link_seeds`),
    each with the seed it came from."""
    seeds = ranking.link_seeds(relevance)
    if not seeds:
        return {}
    rows = await conn.fetch(
        Q.search_linked_entries,
        seeds,
        *_filter_args(filters),
        ranking.link_max_carriers(scoped_rows),
        filters.limit,
    )
    return {row["id"]: row["seed_id"] for row in rows if row["id"] not in relevance}


async def _ranked_hits(
    conn: asyncpg.Connection,
    query: str,
    filters: SearchFilters,
    relevance: Mapping[UUID, float],
    inputs: _PlanInputs,
) -> list[SearchHit]:
    if not relevance:
        return []
    rows = {
        row["id"]: row
        for row in await conn.fetch(Q.search_fetch_entries, list(relevance), query, filters.as_of)
        if row["matches_query"] or not inputs.negated
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
