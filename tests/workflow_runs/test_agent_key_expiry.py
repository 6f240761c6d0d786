"""Agent-key expiry on the time-skipping server with the real activities (Postgres): the key's
own workflow sleeps until `expires_at` (30 days by default) and then records `expired`; a key
revoked meanwhile stays revoked. (That create starts it, on the dev server, is checked in
tests/integration/test_agent_keys.py.)"""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import asyncpg
import pytest
from histories import keep
from payload_keys import CONVERTER
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from infra.db import create_pool
from infra.devstack import venv_binary
from infra.repos.agent_keys import AgentKeyRepo
from schemas.agent_keys import AgentKeyCreate, AgentKeyExpire, metadata_v2
from schemas.kernel.keyring import SecretKeyring
from workers.interceptors import DomainErrorInterceptor
from workers.registry import WORKFLOWS, ActivityDeps, activities
from workflows.agent_keys import (
    AgentKeyCreateWorkflow,
    AgentKeyExpiryWorkflow,
    expiry_workflow_id,
)

SECRET = b"workflow-test-secret-0123456789abcdef"


@pytest.fixture(scope="module")
async def worker(
    time_skipping_env: WorkflowEnvironment, database_url: str
) -> AsyncIterator[tuple[str, asyncpg.Pool]]:
    pool = await create_pool(database_url, read_only=False)
    queue = f"wf-{uuid.uuid4().hex[:8]}"
    async with Worker(
        time_skipping_env.client,
        task_queue=queue,
        workflows=list(WORKFLOWS),
        activities=activities(ActivityDeps(pool, SecretKeyring((SECRET,)))),
        interceptors=[DomainErrorInterceptor()],
    ):
        yield queue, pool
    await pool.close()


async def new_agent(pool: asyncpg.Pool) -> uuid.UUID:
    agent_id = uuid.uuid4()
    raw = hashlib.sha256(agent_id.bytes).digest()
    await pool.execute(
        "INSERT INTO agents (id, public_key, fingerprint) VALUES ($1, $2, $3)",
        agent_id,
        "ed25519:" + base64.b64encode(raw).decode(),
        raw.hex()[:16].upper(),
    )
    return agent_id


def key_for(agent_id: uuid.UUID, expires_at: datetime) -> AgentKeyCreate:
    return AgentKeyCreate(
        key_id=uuid.uuid4(),
        actor_id=agent_id,
        name="daemon",
        metadata=metadata_v2("identity", None),
        scopes=["agent:profile"],
        secret_hash="0" * 64,
        expires_at=expires_at,
        created_by_ns="Agent",
        created_by_id=agent_id,
    )


async def status_of(pool: asyncpg.Pool, key_id: uuid.UUID) -> str:
    return str(await pool.fetchval("SELECT status FROM agent_keys WHERE id = $1", key_id))


async def test_the_expiry_timer_records_expired_after_thirty_days(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, asyncpg.Pool]
) -> None:
    queue, pool = worker
    client = time_skipping_env.client
    now = await time_skipping_env.get_current_time()
    key = key_for(await new_agent(pool), now + timedelta(days=30))
    await AgentKeyRepo(pool).insert(key)
    # The server skips timers for runs a client waits on: the key's expiry run, on its own.
    handle = await client.start_workflow(
        AgentKeyExpiryWorkflow.run,
        AgentKeyExpire(key_id=key.key_id, expires_at=key.expires_at),
        id=f"test-expiry/{key.key_id}",
        task_queue=queue,
    )
    result = await handle.result()
    assert result.expired is True
    assert await time_skipping_env.get_current_time() - now >= timedelta(days=30)
    assert await status_of(pool, key.key_id) == "expired"
    await keep(handle, "agent_key_expired")


async def test_a_create_starts_the_keys_expiry_run(database_url: str) -> None:
    """On a test server of its own: an abandoned child keeps a shared one's clock from skipping
    for later tests, even after it is terminated (as in test_entry_workflow.py)."""
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=CONVERTER,
        test_server_existing_path=str(venv_binary("temporal-test-server")),
    )
    pool = await create_pool(database_url, read_only=False)
    queue = f"wf-{uuid.uuid4().hex[:8]}"
    try:
        async with Worker(
            env.client,
            task_queue=queue,
            workflows=list(WORKFLOWS),
            activities=activities(ActivityDeps(pool, SecretKeyring((SECRET,)))),
            interceptors=[DomainErrorInterceptor()],
        ):
            now = await env.get_current_time()
            key = key_for(await new_agent(pool), now + timedelta(days=30))
            with env.auto_time_skipping_disabled():  # else the child's 30 days pass at once
                create = await env.client.start_workflow(
                    AgentKeyCreateWorkflow.run,
                    key,
                    id=f"test-create/{key.key_id}",
                    task_queue=queue,
                )
                assert (await create.result()).id == key.key_id
            assert await status_of(pool, key.key_id) == "active"
            expiry = env.client.get_workflow_handle(expiry_workflow_id(key.key_id))
            described = await expiry.describe()
            assert described.workflow_type == "AgentKeyExpiry"
            assert described.status == WorkflowExecutionStatus.RUNNING  # asleep for 30 days
            await keep(create, "agent_key_create")
            await expiry.terminate("test over")
    finally:
        await pool.close()
        await env.shutdown()


async def test_a_key_revoked_before_its_expiry_stays_revoked(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, asyncpg.Pool]
) -> None:
    queue, pool = worker
    client = time_skipping_env.client
    now = await time_skipping_env.get_current_time()
    key = key_for(await new_agent(pool), now + timedelta(days=1))
    await AgentKeyRepo(pool).insert(key)
    await pool.execute("UPDATE agent_keys SET status = 'revoked' WHERE id = $1", key.key_id)
    result = await client.execute_workflow(
        AgentKeyExpiryWorkflow.run,
        AgentKeyExpire(key_id=key.key_id, expires_at=key.expires_at),
        id=f"test-expiry/{key.key_id}",
        task_queue=queue,
    )
    assert result.expired is False
    assert await status_of(pool, key.key_id) == "revoked"


async def test_the_expiry_timer_does_not_fire_early(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, asyncpg.Pool]
) -> None:
    queue, pool = worker
    client = time_skipping_env.client
    now = await time_skipping_env.get_current_time()
    key = key_for(await new_agent(pool), now + timedelta(days=90))
    await AgentKeyRepo(pool).insert(key)
    # an expiry run for the same key, checked at day 89: still active
    early = await client.start_workflow(
        AgentKeyExpiryWorkflow.run,
        AgentKeyExpire(key_id=key.key_id, expires_at=now + timedelta(days=89)),
        id=f"test-early/{key.key_id}",
        task_queue=queue,
    )
    assert (await early.result()).expired is False
    assert await status_of(pool, key.key_id) == "active"
