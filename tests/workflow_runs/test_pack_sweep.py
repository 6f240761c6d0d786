"""The PackSweep workflow on the time-skipping server with the real activities (Postgres): a
pack and its rendering, unpinned, go once their 7 days have passed on Temporal's clock (with
the pack's parent tuple); pinned ones stay, and a pack whose rendering is pinned stays with it.

Packs are made by the real `PackCreate` and `PackRender` workflows. Their `expires_at` comes
from the database clock; the test server's clock runs ahead of it once any test has skipped
time, so each row's expiry is then set to 7 days after Temporal's "now", as the row default
would give on one clock."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import asyncpg
import pytest
from histories import keep
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from infra.db import create_pool
from schemas import limits
from schemas.kernel.cids import entry_cid
from schemas.kernel.keyring import SecretKeyring
from schemas.packs import PackCreateInput, PackSweepInput, PackSweepResult, RenderInput
from workers.interceptors import DomainErrorInterceptor
from workers.registry import WORKFLOWS, ActivityDeps, activities
from workers.schedules import pack_sweep_schedule
from workflows.packs import (
    SWEEP_WORKFLOW_ID,
    PackCreateWorkflow,
    PackRenderWorkflow,
    PackSweepWorkflow,
)

SECRET = b"workflow-test-secret-0123456789abcdef"
LIFETIME = timedelta(seconds=limits.PACK_TTL_SEC)


class Env:
    env: WorkflowEnvironment
    queue: str
    pool: asyncpg.Pool
    owner: uuid.UUID
    diary_id: uuid.UUID
    entry_ids: list[uuid.UUID]


@pytest.fixture(scope="module")
async def sweep_env(
    time_skipping_env: WorkflowEnvironment, database_url: str
) -> AsyncIterator[Env]:
    e = Env()
    e.env = time_skipping_env
    e.pool = await create_pool(database_url, read_only=False)
    e.queue = f"wf-{uuid.uuid4().hex[:8]}"
    e.owner, e.diary_id, e.entry_ids = await _diary_with_entries(e.pool)
    async with Worker(
        time_skipping_env.client,
        task_queue=e.queue,
        workflows=list(WORKFLOWS),
        activities=activities(ActivityDeps(e.pool, SecretKeyring((SECRET,)))),
        interceptors=[DomainErrorInterceptor()],
    ):
        yield e
    await e.pool.close()


async def _diary_with_entries(pool: asyncpg.Pool) -> tuple[uuid.UUID, uuid.UUID, list[uuid.UUID]]:
    owner, team_id, diary_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    entry_ids = [uuid.uuid4() for _ in range(4)]
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
        for i, entry_id in enumerate(entry_ids):
            await conn.execute(
                "INSERT INTO diary_entries (id, diary_id, content, cid, created_by)"
                " VALUES ($1, $2, $3, $4, $5)",
                entry_id,
                diary_id,
                f"Note number {i} about deploys.",
                entry_cid(f"Note number {i} about deploys.", None, [], "semantic"),
                owner,
            )
    return owner, diary_id, entry_ids


async def make_pack(e: Env, entry: int, *, pinned: bool = False) -> uuid.UUID:
    pack_id = uuid.uuid4()
    with e.env.auto_time_skipping_disabled():
        created = await e.env.client.execute_workflow(
            PackCreateWorkflow.run,
            PackCreateInput(
                pack_id=pack_id,
                diary_id=e.diary_id,
                params={"n": entry, "made": str(pack_id)},  # a new CID every time
                selection=[(e.entry_ids[entry], 1)],
                pinned=pinned,
                created_by=e.owner,
            ),
            id=f"packs/test/{pack_id}",
            task_queue=e.queue,
        )
    assert created.pack_id == pack_id and created.created
    await _align_expiry(e, "context_packs", pack_id)
    return pack_id


async def render(e: Env, pack_id: uuid.UUID, *, pinned: bool = False) -> uuid.UUID:
    rendered_id = uuid.uuid4()
    with e.env.auto_time_skipping_disabled():
        await e.env.client.execute_workflow(
            PackRenderWorkflow.run,
            RenderInput(
                rendered_id=rendered_id,
                pack_id=pack_id,
                render_method="agent:test-v1",
                markdown=f"# {rendered_id}\n",
                pinned=pinned,
                created_by=e.owner,
            ),
            id=f"packs/test/render/{rendered_id}",
            task_queue=e.queue,
        )
    await _align_expiry(e, "rendered_packs", rendered_id)
    return rendered_id


async def _align_expiry(e: Env, table: str, row_id: uuid.UUID) -> None:
    now = await e.env.get_current_time()
    query = {
        "context_packs": "UPDATE context_packs SET expires_at = $2 WHERE id = $1 AND NOT pinned",
        "rendered_packs": "UPDATE rendered_packs SET expires_at = $2 WHERE id = $1 AND NOT pinned",
    }[table]
    await e.pool.execute(query, row_id, now + LIFETIME)


async def sweep(
    e: Env, batch_max: int = limits.PACK_SWEEP_BATCH_MAX, keep_as: str | None = None
) -> PackSweepResult:
    """One run with Temporal's clock held (waiting on a result would let it skip ahead); its
    history kept as `keep_as` under `make record-histories`."""
    with e.env.auto_time_skipping_disabled():
        handle = await e.env.client.start_workflow(
            PackSweepWorkflow.run,
            PackSweepInput(batch_max=batch_max),
            id=f"{SWEEP_WORKFLOW_ID}/{uuid.uuid4()}",
            task_queue=e.queue,
        )
        result = await handle.result()
    if keep_as is not None:
        await keep(handle, keep_as)
    return result


async def exists(e: Env, table: str, row_id: uuid.UUID) -> bool:
    query = {
        "context_packs": "SELECT 1 FROM context_packs WHERE id = $1",
        "rendered_packs": "SELECT 1 FROM rendered_packs WHERE id = $1",
    }[table]
    return await e.pool.fetchval(query, row_id) is not None


async def test_expired_unpinned_packs_and_renderings_go_after_7_days(sweep_env: Env) -> None:
    e = sweep_env
    doomed = await make_pack(e, 0)
    doomed_render = await render(e, doomed)
    pinned = await make_pack(e, 1, pinned=True)
    held = await make_pack(e, 2)  # its rendering is pinned: it stays while that does
    held_render = await render(e, held, pinned=True)

    early = await sweep(e)
    assert early == PackSweepResult(packs_deleted=0, rendered_deleted=0)
    assert await exists(e, "context_packs", doomed)

    await e.env.sleep(LIFETIME - timedelta(minutes=1))
    assert await sweep(e) == PackSweepResult(packs_deleted=0, rendered_deleted=0)

    await e.env.sleep(timedelta(minutes=2))
    swept = await sweep(e, keep_as="pack_sweep")
    assert swept == PackSweepResult(packs_deleted=1, rendered_deleted=1)
    assert not await exists(e, "context_packs", doomed)
    assert not await exists(e, "rendered_packs", doomed_render)
    tuples = await e.pool.fetchval(
        "SELECT count(*) FROM relation_tuples WHERE namespace = 'ContextPack' AND object_id = $1",
        str(doomed),
    )
    assert tuples == 0
    assert await exists(e, "context_packs", pinned)
    assert await exists(e, "context_packs", held) and await exists(e, "rendered_packs", held_render)
    survivors = await e.pool.fetchval(
        "SELECT count(*) FROM relation_tuples WHERE namespace = 'ContextPack' AND object_id = $1",
        str(pinned),
    )
    assert survivors == 1


async def test_one_run_deletes_at_most_its_batch(sweep_env: Env) -> None:
    e = sweep_env
    packs = [await make_pack(e, i) for i in (0, 1, 3)]
    await e.env.sleep(LIFETIME + timedelta(minutes=1))
    first = await sweep(e, batch_max=2)
    assert first == PackSweepResult(packs_deleted=2, rendered_deleted=0)
    second = await sweep(e, batch_max=2)
    assert second == PackSweepResult(packs_deleted=1, rendered_deleted=0)
    assert [p for p in packs if await exists(e, "context_packs", p)] == []


def test_the_schedule_runs_the_sweep_hourly() -> None:
    schedule = pack_sweep_schedule("cairn")
    [arg] = schedule.action.args  # type: ignore[attr-defined]
    assert arg == PackSweepInput(batch_max=limits.PACK_SWEEP_BATCH_MAX)
    [interval] = schedule.spec.intervals
    assert interval.every == timedelta(hours=1)
