"""The ArtifactSweep workflow on the time-skipping server with the real activities (Postgres and
rclone S3): a staged artifact no task binds is deleted, row and object, once 48 h have passed on
Temporal's clock; a bound one and a fresh one stay; a run deletes at most its batch."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest
from histories import keep
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from infra.db import create_pool
from infra.s3 import BlobStore, artifact_key
from infra.settings import Settings
from schemas import limits
from schemas.artifacts import ArtifactSweepInput, ArtifactSweepResult
from schemas.kernel.cids import bytes_cid
from schemas.kernel.keyring import SecretKeyring
from schemas.task_attempts import task_workflow_id
from workers.interceptors import DomainErrorInterceptor
from workers.registry import WORKFLOWS, ActivityDeps, activities
from workers.schedules import artifact_sweep_schedule
from workflows.artifacts import (
    SWEEP_WORKFLOW_ID,
    ArtifactSweepWorkflow,
)

SECRET = b"workflow-test-secret-0123456789abcdef"
GRACE = limits.ARTIFACT_ORPHAN_GRACE


class Env:
    env: WorkflowEnvironment
    queue: str
    pool: asyncpg.Pool
    blobs: BlobStore
    team_id: uuid.UUID
    task_id: uuid.UUID


@pytest.fixture(scope="module")
async def sweep_env(
    time_skipping_env: WorkflowEnvironment, database_url: str, s3: Any
) -> AsyncIterator[Env]:
    e = Env()
    e.env = time_skipping_env
    e.pool = await create_pool(database_url, read_only=False)
    e.blobs = BlobStore.from_settings(
        Settings(
            s3_endpoint=s3.endpoint,
            s3_bucket=s3.bucket,
            s3_access_key=s3.access_key,
            s3_secret_key=s3.secret_key,
        )
    )
    e.queue = f"wf-{uuid.uuid4().hex[:8]}"
    e.team_id, e.task_id = await _team_with_a_task(e.pool)
    async with Worker(
        time_skipping_env.client,
        task_queue=e.queue,
        workflows=list(WORKFLOWS),
        activities=activities(ActivityDeps(e.pool, SecretKeyring((SECRET,)), e.blobs)),
        interceptors=[DomainErrorInterceptor()],
    ):
        yield e
    e.blobs.close()
    await e.pool.close()


async def _team_with_a_task(pool: asyncpg.Pool) -> tuple[uuid.UUID, uuid.UUID]:
    owner, team_id, diary_id, task_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO teams (id, name, personal, created_by, created_by_ns, status)"
            " VALUES ($1, 'crew', false, $2, 'Agent', 'active')",
            team_id,
            owner,
        )
        await conn.execute(
            "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
            " VALUES ($1, $2, $3, 'notes', 'private')",
            diary_id,
            owner,
            team_id,
        )
        await conn.execute(
            "INSERT INTO tasks (id, team_id, diary_id, task_type, input, input_cid,"
            " input_schema_cid, output_kind, dispatch_timeout_sec, running_timeout_sec,"
            " proposed_by_agent_id, workflow_id)"
            " VALUES ($1, $2, $3, 'freeform', '{}', 'b', 'b', 'artifact', 300, 7200, $4, $5)",
            task_id,
            team_id,
            diary_id,
            owner,
            task_workflow_id(task_id),
        )
    return team_id, task_id


async def staged(e: Env, staged_at: datetime, *, bound: bool = False) -> str:
    """What staging leaves behind (the object, the blob and staged rows), optionally bound to
    the task as an input the way task creation binds it."""
    data = os.urandom(2048)
    cid = bytes_cid(data)
    with tempfile.TemporaryFile() as file:
        file.write(data)
        await e.blobs.put_file(artifact_key(cid), file, len(data))
    async with e.pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "INSERT INTO artifact_blobs (cid, size_bytes) VALUES ($1, $2)", cid, len(data)
        )
        await conn.execute(
            "INSERT INTO staged_artifacts (team_id, cid, staged_at) VALUES ($1, $2, $3)",
            e.team_id,
            cid,
            staged_at,
        )
        if bound:
            await conn.execute(
                "INSERT INTO task_artifacts (id, team_id, task_id, cid, kind, title, role,"
                " size_bytes) VALUES ($1, $2, $3, $4, 'input', $4, 'context', $5)",
                uuid.uuid4(),
                e.team_id,
                e.task_id,
                cid,
                len(data),
            )
    return cid


async def sweep(
    e: Env, batch_max: int = limits.ARTIFACT_SWEEP_BATCH_MAX, keep_as: str | None = None
) -> ArtifactSweepResult:
    """One run, with Temporal's clock held: waiting on a result would otherwise let the test
    server skip ahead (years, with no timer pending), and every staged row would look old. Its
    history is kept as `keep_as` under `make record-histories`."""
    with e.env.auto_time_skipping_disabled():
        handle = await e.env.client.start_workflow(
            ArtifactSweepWorkflow.run,
            ArtifactSweepInput(grace_sec=limits.ARTIFACT_ORPHAN_GRACE_SEC, batch_max=batch_max),
            id=f"{SWEEP_WORKFLOW_ID}/{uuid.uuid4()}",
            task_queue=e.queue,
        )
        result = await handle.result()
    if keep_as is not None:
        await keep(handle, keep_as)
    return result


async def kept(e: Env, cid: str) -> tuple[bool, bool]:
    """(a staged row names it, its object is in S3)."""
    row = await e.pool.fetchval("SELECT 1 FROM staged_artifacts WHERE cid = $1", cid)
    return row is not None, await e.blobs.exists(artifact_key(cid))


async def test_an_unbound_staged_artifact_is_swept_after_48_hours(sweep_env: Env) -> None:
    e = sweep_env
    start = await e.env.get_current_time()
    orphan = await staged(e, start)
    bound = await staged(e, start, bound=True)

    early = await sweep(e)
    assert early == ArtifactSweepResult(staged_deleted=0, blobs_deleted=0)
    assert await kept(e, orphan) == (True, True)

    await e.env.sleep(GRACE + timedelta(minutes=1))
    fresh = await staged(e, await e.env.get_current_time() - timedelta(hours=1))

    swept = await sweep(e, keep_as="artifact_sweep")
    assert swept == ArtifactSweepResult(staged_deleted=1, blobs_deleted=1)
    assert await kept(e, orphan) == (False, False)
    assert await e.pool.fetchval("SELECT 1 FROM artifact_blobs WHERE cid = $1", orphan) is None
    assert await kept(e, bound) == (True, True)  # a task binds it: it stays, staged row and all
    assert await kept(e, fresh) == (True, True)  # not yet 48 h old on Temporal's clock


async def test_a_deleted_tasks_artifacts_go_with_the_next_sweep(sweep_env: Env) -> None:
    e = sweep_env
    now = await e.env.get_current_time()
    bound = await staged(e, now - GRACE - timedelta(hours=1), bound=True)
    assert (await sweep(e)).blobs_deleted == 0
    await e.pool.execute("DELETE FROM tasks WHERE id = $1", e.task_id)  # cascades to its bindings
    swept = await sweep(e)
    assert swept.staged_deleted >= 1  # the binding was all that kept its staged row
    assert await kept(e, bound) == (False, False)


async def test_one_run_deletes_at_most_its_batch(sweep_env: Env) -> None:
    e = sweep_env
    old = await e.env.get_current_time() - GRACE - timedelta(hours=1)
    cids = [await staged(e, old) for _ in range(3)]
    first = await sweep(e, batch_max=2)
    assert first == ArtifactSweepResult(staged_deleted=2, blobs_deleted=2)
    second = await sweep(e, batch_max=2)
    assert second == ArtifactSweepResult(staged_deleted=1, blobs_deleted=1)
    for cid in cids:
        assert await kept(e, cid) == (False, False)


def test_the_grace_period_is_read_from_task_artifact_orphan_grace_sec(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SPEC 8 names `TASK_ARTIFACT_ORPHAN_GRACE_SEC`; our prefixed name wins when both are set,
    and the worker hands the value to the schedule's runs."""
    for name in ("TASK_ARTIFACT_ORPHAN_GRACE_SEC", "SERVICE_TASK_ARTIFACT_ORPHAN_GRACE_SEC"):
        monkeypatch.delenv(name, raising=False)
    assert Settings().task_artifact_orphan_grace_sec == 48 * 3600
    monkeypatch.setenv("TASK_ARTIFACT_ORPHAN_GRACE_SEC", "3600")
    assert Settings().task_artifact_orphan_grace_sec == 3600
    monkeypatch.setenv("SERVICE_TASK_ARTIFACT_ORPHAN_GRACE_SEC", "60")
    assert Settings().task_artifact_orphan_grace_sec == 60
    assert Settings(task_artifact_orphan_grace_sec=5).task_artifact_orphan_grace_sec == 5
    schedule = artifact_sweep_schedule("cairn", 3600)
    [arg] = schedule.action.args  # type: ignore[attr-defined]
    assert arg == ArtifactSweepInput(grace_sec=3600, batch_max=limits.ARTIFACT_SWEEP_BATCH_MAX)
