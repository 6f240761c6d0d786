"""The ConsolidationSweep workflow on the time-skipping server with the real activities
(Postgres): a diary written before consolidation existed gets one `proposed` relation for its
near-duplicate pair and none for the rest, page by page across runs (continue-as-new), and a
later sweep probes only what changed since: nothing when nothing did, each new or re-embedded
entry once (a nearest-neighbour query each), against every older entry of its diary."""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from histories import keep
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from infra.db import create_pool
from schemas.hygiene import ConsolidationSweepInput, ConsolidationSweepResult
from schemas.kernel.cids import entry_cid
from schemas.kernel.keyring import SecretKeyring
from workers.interceptors import DomainErrorInterceptor
from workers.registry import WORKFLOWS, ActivityDeps, activities
from workflows.consolidation import ConsolidationSweepWorkflow

SECRET = b"workflow-test-secret-0123456789abcdef"
DIMS = 384


def _vector(*head: float) -> list[float]:
    return [*head, *([0.0] * (DIMS - len(head)))]


# the first two are near duplicates (cosine 0.95), the third unrelated to both
VECTORS = [_vector(1.0), _vector(0.95, math.sqrt(1 - 0.95**2)), _vector(0.0, 0.0, 1.0)]


class Env:
    env: WorkflowEnvironment
    queue: str
    pool: asyncpg.Pool
    entry_ids: list[uuid.UUID]


@pytest.fixture(scope="module")
async def sweep_env(
    time_skipping_env: WorkflowEnvironment, database_url: str
) -> AsyncIterator[Env]:
    e = Env()
    e.env = time_skipping_env
    e.pool = await create_pool(database_url, read_only=False)
    e.queue = f"wf-{uuid.uuid4().hex[:8]}"
    e.entry_ids = await _diary_written_before(e.pool)
    async with Worker(
        time_skipping_env.client,
        task_queue=e.queue,
        workflows=list(WORKFLOWS),
        activities=activities(ActivityDeps(e.pool, SecretKeyring((SECRET,)))),
        interceptors=[DomainErrorInterceptor()],
    ):
        yield e
    await e.pool.close()


async def _diary_written_before(pool: asyncpg.Pool) -> list[uuid.UUID]:
    owner, team_id, diary_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    entry_ids = [uuid.uuid4() for _ in VECTORS]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO teams (id, name, personal, created_by, created_by_ns, status)"
            " VALUES ($1, 'crew', false, $2, 'Agent', 'active')",
            team_id,
            owner,
        )
        await conn.execute(
            "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
            " VALUES ($1, $2, $3, 'old notes', 'private')",
            diary_id,
            owner,
            team_id,
        )
        for i, (entry_id, vector) in enumerate(zip(entry_ids, VECTORS, strict=True)):
            content = f"Note {i}."
            await conn.execute(
                "INSERT INTO diary_entries (id, diary_id, content, cid, created_by, embedding,"
                " created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                entry_id,
                diary_id,
                content,
                entry_cid(content, None, [], "semantic"),
                owner,
                vector,
                start + timedelta(minutes=i),
            )
    return entry_ids


async def sweep(e: Env, keep_as: str | None = None) -> ConsolidationSweepResult:
    workflow_id = f"maintenance/consolidation/test/{uuid.uuid4()}"
    handle = await e.env.client.start_workflow(
        ConsolidationSweepWorkflow.run,
        ConsolidationSweepInput(page=1, pages_per_run=2),  # 3 entries: continues as new once
        id=workflow_id,
        task_queue=e.queue,
    )
    result = await handle.result()
    if keep_as is not None:  # the first run (continued as new) and the last one
        first_run = e.env.client.get_workflow_handle(workflow_id, run_id=handle.result_run_id)
        await keep(first_run, f"{keep_as}_continued_as_new")
        await keep(e.env.client.get_workflow_handle(workflow_id), keep_as)
    return result


async def test_the_sweep_proposes_once_across_runs(sweep_env: Env) -> None:
    e = sweep_env
    first = await sweep(e, keep_as="consolidation_sweep")
    assert first == ConsolidationSweepResult(scanned=3, proposed=1)
    rows = await e.pool.fetch(
        "SELECT source_id, target_id, relation, status, workflow_id, metadata FROM entry_relations"
    )
    assert len(rows) == 1
    [row] = rows
    assert (row["source_id"], row["target_id"]) == (e.entry_ids[1], e.entry_ids[0])
    assert row["relation"] == "supersedes" and row["status"] == "proposed"
    assert row["workflow_id"].startswith("maintenance/consolidation/test/")
    assert abs(row["metadata"]["similarity"] - 0.95) < 1e-3

    again = await sweep(e)
    assert again == ConsolidationSweepResult(scanned=0, proposed=0)  # no kNN: nothing changed
    assert await e.pool.fetchval("SELECT count(*) FROM entry_relations") == 1


async def test_a_later_sweep_probes_only_what_changed_since(sweep_env: Env) -> None:
    e = sweep_env
    await sweep(e)  # whatever an earlier test left
    diary_id = await e.pool.fetchval(
        "SELECT diary_id FROM diary_entries WHERE id = $1", e.entry_ids[0]
    )
    # two new entries: one restates the oldest (among all, not only the new ones), one not
    restated, other = uuid.uuid4(), uuid.uuid4()
    for entry_id, vector in (
        (restated, _vector(0.96, math.sqrt(1 - 0.96**2))),
        (other, _vector(0.0, 0.0, 0.0, 1.0)),
    ):
        content = f"New {entry_id}."
        await e.pool.execute(
            "INSERT INTO diary_entries (id, diary_id, content, cid, created_by, embedding)"
            " VALUES ($1, $2, $3, $4, $5, $6)",
            entry_id,
            diary_id,
            content,
            entry_cid(content, None, [], "semantic"),
            uuid.uuid4(),
            vector,
        )
    assert await sweep(e) == ConsolidationSweepResult(scanned=2, proposed=1)
    target = await e.pool.fetchval(
        "SELECT target_id FROM entry_relations WHERE source_id = $1", restated
    )
    assert target in (e.entry_ids[0], e.entry_ids[1])
    assert await sweep(e) == ConsolidationSweepResult(scanned=0, proposed=0)

    # a re-embedded entry is probed again; an update that leaves the vector is not
    await e.pool.execute(
        "UPDATE diary_entries SET embedding = $2 WHERE id = $1", other, _vector(0.0, 1.0)
    )
    await e.pool.execute("UPDATE diary_entries SET importance = 7 WHERE id = $1", e.entry_ids[2])
    assert (await sweep(e)).scanned == 1
