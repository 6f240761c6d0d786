"""The registration workflow on the time-skipping server with the real activities (Postgres),
and the replay of a committed history of it (old runs must keep replaying)."""

from __future__ import annotations

import base64
import uuid

import nacl.signing
import pytest
from histories import keep
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from infra.db import create_pool
from infra.temporal import problem_from_failure
from schemas.identity import RegistrationInput, VoucherIssue
from schemas.kernel.crypto import fingerprint, hash_secret, new_voucher_code
from schemas.kernel.keyring import SecretKeyring
from workers.interceptors import DomainErrorInterceptor
from workers.registry import WORKFLOWS, ActivityDeps, activities
from workflows.registration import RegistrationWorkflow, registration_workflow_id
from workflows.vouchers import VoucherIssueWorkflow, voucher_workflow_id

SECRET = b"workflow-test-secret-0123456789abcdef"


def registration(voucher: str) -> RegistrationInput:
    key = nacl.signing.SigningKey.generate()
    raw = bytes(key.verify_key)
    return RegistrationInput(
        public_key="ed25519:" + base64.b64encode(raw).decode(),
        fingerprint=fingerprint(raw),
        voucher_code=voucher,
        identity_id=uuid.uuid4(),
        agent_id=uuid.uuid4(),
        client_id=str(uuid.uuid4()),
        client_secret_hash=hash_secret("s", SECRET),
    )


@pytest.fixture(scope="module")
async def worker(time_skipping_env: WorkflowEnvironment, database_url: str):  # type: ignore[no-untyped-def]
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


async def issue(env: WorkflowEnvironment, queue: str) -> str:
    voucher = await env.client.execute_workflow(
        VoucherIssueWorkflow.run,
        VoucherIssue(voucher_id=uuid.uuid4(), code=new_voucher_code()),
        id=voucher_workflow_id(uuid.uuid4()),
        task_queue=queue,
    )
    return voucher.code


async def test_registration_binds_agent_and_redeems_voucher(time_skipping_env, worker) -> None:  # type: ignore[no-untyped-def]
    queue, pool = worker
    inp = registration(await issue(time_skipping_env, queue))
    handle = await time_skipping_env.client.start_workflow(
        RegistrationWorkflow.run,
        inp,
        id=registration_workflow_id(inp.fingerprint),
        task_queue=queue,
    )
    result = await handle.result()
    assert result.identity_id == inp.identity_id
    async with pool.acquire() as conn:
        agent = await conn.fetchrow(
            "SELECT identity_id, fingerprint FROM agents WHERE id = $1", result.agent_id
        )
        redeemed = await conn.fetchval(
            "SELECT redeemed_by FROM agent_vouchers WHERE code = $1", inp.voucher_code
        )
    assert agent["identity_id"] == inp.identity_id and agent["fingerprint"] == inp.fingerprint
    assert redeemed == result.agent_id
    history = await handle.fetch_history()
    scheduled = [
        event
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes")
    ]
    assert scheduled == [], "every step is a local activity"
    await keep(handle, "registration_local_steps")


async def test_second_registration_with_same_voucher_is_rejected_and_compensated(
    time_skipping_env,
    worker,  # type: ignore[no-untyped-def]
) -> None:
    queue, pool = worker
    code = await issue(time_skipping_env, queue)
    await time_skipping_env.client.execute_workflow(
        RegistrationWorkflow.run,
        (first := registration(code)),
        id=f"r/{first.fingerprint}",
        task_queue=queue,
    )
    second = registration(code)
    with pytest.raises(WorkflowFailureError) as failed:
        await time_skipping_env.client.execute_workflow(
            RegistrationWorkflow.run, second, id=f"r/{second.fingerprint}", task_queue=queue
        )
    problem = problem_from_failure(failed.value)
    assert problem is not None and problem.status == 403
    assert problem.instance_code == "voucher-rejected"
    async with pool.acquire() as conn:
        left = await conn.fetchval(
            "SELECT count(*) FROM identities WHERE id = $1", second.identity_id
        )
    assert left == 0
