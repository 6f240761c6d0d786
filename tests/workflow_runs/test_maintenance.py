"""The maintenance workflows on the time-skipping server with the real activities (Postgres):
`ExpiredRowsPurge` deletes expired signing requests, used recovery nonces and unredeemed vouchers
once Temporal's clock has passed their expiry (and keeps what is still live, completed or
redeemed), and the browser OAuth connector's codes and grants once past their retention (a run
started before that step still replays: committed histories of both versions);
`StaleTaskReconcile` settles the non-terminal tasks whose workflow no longer runs and leaves
live ones alone. Both report what they did; the worker's schedules exist after start."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import asyncpg
import pytest
from histories import keep, patches_of
from payload_keys import CONVERTER
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from test_task_workflow import Run, new_worker, register_search_attributes

from infra.db import create_pool
from schemas import limits
from schemas.maintenance import (
    PurgeInput,
    PurgeResult,
    SettledTask,
    StaleTaskInput,
    StaleTaskResult,
)
from workers.schedules import ensure_maintenance_schedules
from workflows.consolidation import consolidation_schedule_id
from workflows.maintenance import (
    CONNECTOR_PURGE_PATCH,
    PURGE_WORKFLOW_ID,
    STALE_TASKS_WORKFLOW_ID,
    ExpiredRowsPurgeWorkflow,
    StaleTaskReconcileWorkflow,
    purge_schedule_id,
    stale_tasks_schedule_id,
)

RETENTION = timedelta(seconds=limits.SIGNING_REQUEST_RETENTION_SEC)
MARGIN = timedelta(seconds=limits.MAINTENANCE_EXPIRY_MARGIN_SEC)
CODE_RETENTION = timedelta(seconds=limits.CONNECTOR_CODE_RETENTION_SEC)
GRANT_RETENTION = timedelta(seconds=limits.CONNECTOR_GRANT_RETENTION_SEC)


@pytest.fixture(scope="module")
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    opened = await create_pool(database_url, read_only=False)
    yield opened
    await opened.close()


@pytest.fixture(scope="module")
async def queue(time_skipping_env: WorkflowEnvironment, pool: asyncpg.Pool) -> AsyncIterator[str]:
    await register_search_attributes(time_skipping_env)
    name = f"wf-{uuid.uuid4().hex[:8]}"
    async with new_worker(time_skipping_env, name, pool):
        yield name


async def purge(
    env: WorkflowEnvironment, queue: str, batch_max: int = limits.MAINTENANCE_BATCH_MAX
) -> PurgeResult:
    """One run with Temporal's clock held (waiting on the result would let it skip ahead)."""
    with env.auto_time_skipping_disabled():
        return await env.client.execute_workflow(
            ExpiredRowsPurgeWorkflow.run,
            PurgeInput(batch_max=batch_max),
            id=f"{PURGE_WORKFLOW_ID}/{uuid.uuid4()}",
            task_queue=queue,
        )


async def reconcile(
    env: WorkflowEnvironment, queue: str, page: int = 2, keep_as: str | None = None
) -> StaleTaskResult:
    with env.auto_time_skipping_disabled():
        handle = await env.client.start_workflow(
            StaleTaskReconcileWorkflow.run,
            StaleTaskInput(page=page),
            id=f"{STALE_TASKS_WORKFLOW_ID}/{uuid.uuid4()}",
            task_queue=queue,
        )
        result = await handle.result()
    if keep_as is not None:  # under `make record-histories`
        await keep(handle, keep_as)
    return result


class Rows:
    """Expiring rows, each dated relative to Temporal's clock."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def agent(self) -> uuid.UUID:
        agent_id = uuid.uuid4()
        await self.pool.execute(
            "INSERT INTO agents (id, public_key, fingerprint) VALUES ($1, $2, $3)",
            agent_id,
            f"ed25519:{agent_id.hex}",
            agent_id.hex[:19],
        )
        return agent_id

    async def signing_request(self, agent: uuid.UUID, status: str, expires: datetime) -> uuid.UUID:
        request_id = uuid.uuid4()
        await self.pool.execute(
            "INSERT INTO signing_requests (id, agent_id, message, nonce, status, workflow_id,"
            " expires_at) VALUES ($1, $2, 'm', $3, $4, $5, $6)",
            request_id,
            agent,
            uuid.uuid4(),
            status,
            f"signing/{request_id}",
            expires,
        )
        return request_id

    async def nonce(self, expires: datetime) -> str:
        nonce = uuid.uuid4().hex
        await self.pool.execute(
            "INSERT INTO used_recovery_nonces (nonce, expires_at) VALUES ($1, $2)", nonce, expires
        )
        return nonce

    async def voucher(self, expires: datetime, redeemed_by: uuid.UUID | None = None) -> uuid.UUID:
        voucher_id = uuid.uuid4()
        await self.pool.execute(
            "INSERT INTO agent_vouchers (id, code, expires_at, redeemed_by, redeemed_at)"
            " VALUES ($1, $2, $3, $4, CASE WHEN $4::uuid IS NULL THEN NULL ELSE now() END)",
            voucher_id,
            (voucher_id.hex * 2)[:64],
            expires,
            redeemed_by,
        )
        return voucher_id

    async def connector_client(self) -> tuple[str, uuid.UUID, uuid.UUID]:
        """A registered connector client and a human to grant it: (client id, human, identity)."""
        client_id, human, identity = f"client-{uuid.uuid4().hex}", uuid.uuid4(), uuid.uuid4()
        await self.pool.execute(
            "INSERT INTO identities (id, schema_id, traits, password_hash)"
            " VALUES ($1, 'human', '{}', 'x')",
            identity,
        )
        await self.pool.execute(
            "INSERT INTO humans (id, identity_id) VALUES ($1, $2)", human, identity
        )
        await self.pool.execute(
            "INSERT INTO connector_clients (client_id, redirect_uris, metadata)"
            " VALUES ($1, ARRAY['https://host.test/cb'], '{}')",
            client_id,
        )
        return client_id, human, identity

    async def code(
        self,
        owner: tuple[str, uuid.UUID, uuid.UUID],
        expires: datetime,
        used: datetime | None = None,
    ) -> str:
        code_hash = uuid.uuid4().hex
        await self.pool.execute(
            "INSERT INTO connector_codes (code_hash, client_id, human_id, identity_id,"
            " redirect_uri, redirect_uri_explicit, code_challenge, scopes, resource, expires_at,"
            " used_at) VALUES ($1, $2, $3, $4, 'https://host.test/cb', true, 'c', '{}',"
            " 'http://mcp.test/mcp', $5, $6)",
            code_hash,
            *owner,
            expires,
            used,
        )
        return code_hash

    async def grant(
        self,
        owner: tuple[str, uuid.UUID, uuid.UUID],
        refresh_expires: datetime,
        revoked: datetime | None = None,
    ) -> uuid.UUID:
        grant_id = uuid.uuid4()
        await self.pool.execute(
            "INSERT INTO connector_grants (id, client_id, code_hash, human_id, identity_id,"
            " scopes, resource, refresh_hash, refresh_expires_at, revoked_at)"
            " VALUES ($1, $2, $3, $4, $5, '{}', 'http://mcp.test/mcp', $6, $7, $8)",
            grant_id,
            owner[0],
            uuid.uuid4().hex,
            owner[1],
            owner[2],
            uuid.uuid4().hex,
            refresh_expires,
            revoked,
        )
        return grant_id

    async def exists(self, table: str, column: str, key: object) -> bool:
        found = await self.pool.fetchval(f"SELECT 1 FROM {table} WHERE {column} = $1", key)
        return found is not None


async def test_the_purge_deletes_what_expired_and_keeps_the_rest(
    time_skipping_env: WorkflowEnvironment, queue: str, pool: asyncpg.Pool
) -> None:
    env, rows = time_skipping_env, Rows(pool)
    now = await env.get_current_time()
    agent = await rows.agent()
    in_five = now + timedelta(minutes=5)
    expiring_request = await rows.signing_request(agent, "expired", now + timedelta(hours=2))
    completed_request = await rows.signing_request(agent, "completed", in_five)
    nonce = await rows.nonce(in_five)
    open_voucher = await rows.voucher(now + timedelta(hours=24))
    redeemed_voucher = await rows.voucher(now + timedelta(hours=24), redeemed_by=agent)

    assert await purge(env, queue) == PurgeResult(
        signing_requests_deleted=0, recovery_nonces_deleted=0, vouchers_deleted=0
    )

    await env.sleep(timedelta(hours=24, minutes=1))  # the nonce and the voucher expired...
    assert await purge(env, queue) == PurgeResult(
        signing_requests_deleted=0, recovery_nonces_deleted=1, vouchers_deleted=0
    )  # ...the voucher a minute ago: it waits out the margin for clock skew
    assert await rows.exists("agent_vouchers", "id", open_voucher)
    await env.sleep(MARGIN)
    assert await purge(env, queue) == PurgeResult(
        signing_requests_deleted=0, recovery_nonces_deleted=0, vouchers_deleted=1
    )
    assert not await rows.exists("used_recovery_nonces", "nonce", nonce)
    assert not await rows.exists("agent_vouchers", "id", open_voucher)
    assert await rows.exists("agent_vouchers", "id", redeemed_voucher)  # a proof names it
    assert await rows.exists("signing_requests", "id", expiring_request)  # still readable

    await env.sleep(RETENTION)
    assert await purge(env, queue) == PurgeResult(
        signing_requests_deleted=1, recovery_nonces_deleted=0, vouchers_deleted=0
    )
    assert not await rows.exists("signing_requests", "id", expiring_request)
    assert await rows.exists("signing_requests", "id", completed_request)


async def test_the_purge_deletes_the_connectors_ended_codes_and_grants(
    time_skipping_env: WorkflowEnvironment, queue: str, pool: asyncpg.Pool
) -> None:
    env, rows = time_skipping_env, Rows(pool)
    now = await env.get_current_time()
    owner = await rows.connector_client()
    in_five, five_ago = now + timedelta(minutes=5), now - timedelta(minutes=5)
    live_code = await rows.code(owner, in_five)
    used_code = await rows.code(owner, in_five, used=now)
    expired_code = await rows.code(owner, five_ago)
    refresh_ttl = timedelta(seconds=limits.CONNECTOR_REFRESH_TTL_SEC)
    active = await rows.grant(owner, now + refresh_ttl)
    revoked = await rows.grant(owner, now + refresh_ttl, revoked=now)
    lapsed = await rows.grant(owner, five_ago)  # its refresh token expired: nothing renews it

    first = await purge(env, queue)
    assert (first.connector_codes_deleted, first.connector_grants_deleted) == (0, 0)
    codes = [live_code, used_code, expired_code]
    assert [await rows.exists("connector_codes", "code_hash", c) for c in codes] == [True] * 3

    # a day later every one of those codes is past the grace (a used code, too, expired
    # minutes after it was issued); a code issued now is live, and stays
    await env.sleep(CODE_RETENTION + timedelta(minutes=10))
    fresh_code = await rows.code(owner, (await env.get_current_time()) + timedelta(minutes=5))
    second = await purge(env, queue)
    assert (second.connector_codes_deleted, second.connector_grants_deleted) == (3, 0)
    assert [await rows.exists("connector_codes", "code_hash", c) for c in codes] == [False] * 3
    assert await rows.exists("connector_codes", "code_hash", fresh_code)

    # 30 days on, the revoked and the lapsed grants are past their retention; the active one
    # (its refresh token expired only just now) and one revoked now stay
    await env.sleep(GRANT_RETENTION - CODE_RETENTION)
    just_revoked = await rows.grant(
        owner, now + 2 * refresh_ttl, revoked=await env.get_current_time()
    )
    third = await purge(env, queue)
    assert (third.connector_codes_deleted, third.connector_grants_deleted) == (1, 2)
    kept = [await rows.exists("connector_grants", "id", g) for g in (active, revoked, lapsed)]
    assert kept == [True, False, False]
    assert await rows.exists("connector_grants", "id", just_revoked)


async def test_one_purge_run_deletes_at_most_its_batch_of_each_kind(
    time_skipping_env: WorkflowEnvironment, queue: str, pool: asyncpg.Pool
) -> None:
    env, rows = time_skipping_env, Rows(pool)
    long_ago = await env.get_current_time() - timedelta(days=3)
    nonces = [await rows.nonce(long_ago) for _ in range(3)]
    assert (await purge(env, queue, batch_max=2)).recovery_nonces_deleted == 2
    assert (await purge(env, queue, batch_max=2)).recovery_nonces_deleted == 1
    assert [await rows.exists("used_recovery_nonces", "nonce", n) for n in nonces] == [False] * 3


async def test_a_purge_run_is_recorded_for_replay(
    time_skipping_env: WorkflowEnvironment, queue: str
) -> None:
    env = time_skipping_env
    with env.auto_time_skipping_disabled():
        handle = await env.client.start_workflow(
            ExpiredRowsPurgeWorkflow.run,
            PurgeInput(),
            id=f"{PURGE_WORKFLOW_ID}/{uuid.uuid4()}",
            task_queue=queue,
        )
        await handle.result()
    # a new run takes the connector's purge (maintenance_purge.json, as first deployed, was
    # recorded on that code and stays as it is)
    assert patches_of(await handle.fetch_history()) == {CONNECTOR_PURGE_PATCH}
    await keep(handle, "maintenance_purge_connector")


@pytest.fixture
async def runs() -> AsyncIterator[list[Run]]:
    """Runs of the test; those still going at the end are terminated. Once this module's worker
    is gone, a timer of theirs firing on the shared time-skipping server would make a workflow
    task that nobody polls, and the server would stop skipping time for later modules."""
    made: list[Run] = []
    yield made
    for run in made:
        with contextlib.suppress(RPCError):  # it ended already
            await run.handle.terminate("test over")


async def test_the_reconciler_settles_tasks_whose_workflow_is_gone(
    time_skipping_env: WorkflowEnvironment, queue: str, pool: asyncpg.Pool, runs: list[Run]
) -> None:
    env = time_skipping_env
    live = await Run(env, queue, pool).create()
    running = await Run(env, queue, pool).create()
    runs.extend([live, running])
    await running.claim()
    await running.heartbeat()
    queued = await Run(env, queue, pool).create()
    finished = await Run(env, queue, pool).create()
    runs.extend([queued, finished])
    await finished.claim()
    await finished.heartbeat()
    await finished.complete()
    assert await running.claimants() == [str(running.agent)]

    await running.handle.terminate("lost in an operator's clean-up")
    await queued.handle.terminate("lost in an operator's clean-up")
    # a row whose workflow Temporal never heard of (restored from a backup, say)
    orphan = uuid.uuid4()
    await pool.execute(
        "INSERT INTO tasks (id, team_id, diary_id, task_type, input, input_cid,"
        " input_schema_cid, output_kind, dispatch_timeout_sec, running_timeout_sec,"
        " proposed_by_agent_id, workflow_id, expires_at)"
        " SELECT $1, team_id, diary_id, task_type, input, input_cid, input_schema_cid,"
        " output_kind, 300, 7200, proposed_by_agent_id, $2, now() - interval '1 hour'"
        " FROM tasks WHERE id = $3",
        orphan,
        f"task/{orphan}",
        live.task_id,
    )

    # every row so far was last written two hours ago on Temporal's clock; one more stale task
    # was written just now, within the grace period: it is left for a later run
    now = await env.get_current_time()
    await pool.execute("UPDATE tasks SET updated_at = $1", now - timedelta(hours=2))
    recent = await Run(env, queue, pool).create()
    await recent.handle.terminate("lost in an operator's clean-up")
    await pool.execute("UPDATE tasks SET updated_at = $1 WHERE id = $2", now, recent.task_id)

    # pages of two: the scan goes on past the first page
    result = await reconcile(env, queue, keep_as="stale_task_reconcile")
    assert result.checked == 4  # live, running, queued, orphan; the finished one is terminal
    assert result.stale == 3
    assert sorted(result.settled, key=lambda s: str(s.task_id)) == sorted(
        [
            SettledTask(task_id=running.task_id, status="failed"),
            SettledTask(task_id=queued.task_id, status="failed"),
            SettledTask(task_id=orphan, status="expired"),  # queued past its expiry
        ],
        key=lambda s: str(s.task_id),
    )
    task = await running.task()
    assert (task["status"], task["claim_agent_id"], task["completed_at"] is not None) == (
        "failed",
        None,
        True,
    )
    [attempt] = await running.attempts()
    assert attempt["status"] == "failed"
    assert attempt["error"]["code"] == "task-workflow-gone"
    assert "terminated" in attempt["error"]["message"]
    assert await running.claimants() == []
    assert (await live.task())["status"] == "queued"  # its workflow runs: untouched
    assert (await finished.task())["status"] == "completed"
    assert (await recent.task())["status"] == "queued"  # written within the grace period

    again = await reconcile(env, queue)
    assert again == StaleTaskResult(checked=1, stale=0, settled=[])


async def test_the_worker_makes_the_schedules_once(temporal_address: str) -> None:
    """On the dev server (the time-skipping one has no schedules), as the worker does at start."""
    client = await Client.connect(temporal_address, data_converter=CONVERTER)
    queue = f"wf-{uuid.uuid4().hex[:8]}"
    made = await ensure_maintenance_schedules(client, queue)
    assert made == [
        purge_schedule_id(queue),
        stale_tasks_schedule_id(queue),
        consolidation_schedule_id(queue),
    ]
    assert await ensure_maintenance_schedules(client, queue) == made  # again: updated, no error
    for schedule_id in made:
        described = await client.get_schedule_handle(schedule_id).describe()
        assert described.schedule.action.task_queue == queue  # type: ignore[attr-defined]
        await client.get_schedule_handle(schedule_id).delete()
