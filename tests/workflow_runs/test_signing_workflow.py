"""The SigningRequest workflow on the time-skipping server with the real activities (Postgres):
300 s without a signature expire the request, after which a signature is refused (409); the
`sign` validator refuses a malformed signature before anything is written."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import nacl.signing
import pytest
from histories import keep
from temporalio.client import (
    WithStartWorkflowOperation,
    WorkflowHistory,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from api.routes.crypto import submit_signature
from infra.db import create_pool
from infra.repos.signing import get_signing_request
from infra.temporal import problem_from_failure
from schemas import limits
from schemas.errors import Conflict
from schemas.identity import RegistrationInput, VoucherIssue
from schemas.kernel.crypto import fingerprint, hash_secret, new_voucher_code, signing_payload
from schemas.kernel.keyring import SecretKeyring
from schemas.signing import SignatureSubmission, SigningEnvelope, SigningRequestInput
from workers.interceptors import DomainErrorInterceptor
from workers.registry import WORKFLOWS, ActivityDeps, activities
from workflows.registration import RegistrationWorkflow, registration_workflow_id
from workflows.signing import SigningRequestWorkflow, signing_workflow_id
from workflows.vouchers import VoucherIssueWorkflow, voucher_workflow_id

SECRET = b"workflow-test-secret-0123456789abcdef"


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


class Agent:
    """A registered agent (through the registration workflow) and its private key."""

    def __init__(self, agent_id: uuid.UUID, key: nacl.signing.SigningKey) -> None:
        self.agent_id = agent_id
        self.key = key
        self.public_key = "ed25519:" + base64.b64encode(bytes(key.verify_key)).decode()

    def sign(self, text: str) -> str:
        return base64.b64encode(self.key.sign(text.encode()).signature).decode()


async def register(env: WorkflowEnvironment, queue: str) -> Agent:
    voucher = await env.client.execute_workflow(
        VoucherIssueWorkflow.run,
        VoucherIssue(voucher_id=uuid.uuid4(), code=new_voucher_code()),
        id=voucher_workflow_id(uuid.uuid4()),
        task_queue=queue,
    )
    key = nacl.signing.SigningKey.generate()
    raw = bytes(key.verify_key)
    inp = RegistrationInput(
        public_key="ed25519:" + base64.b64encode(raw).decode(),
        fingerprint=fingerprint(raw),
        voucher_code=voucher.code,
        identity_id=uuid.uuid4(),
        agent_id=uuid.uuid4(),
        client_id=str(uuid.uuid4()),
        client_secret_hash=hash_secret("s", SECRET),
    )
    result = await env.client.execute_workflow(
        RegistrationWorkflow.run,
        inp,
        id=registration_workflow_id(inp.fingerprint),
        task_queue=queue,
    )
    return Agent(result.agent_id, key)


async def open_request(env: WorkflowEnvironment, queue: str, agent: Agent) -> SigningEnvelope:
    """What the API does: start the workflow with its `envelope` update in one call."""
    request_id = uuid.uuid4()
    start = WithStartWorkflowOperation(
        SigningRequestWorkflow.run,
        SigningRequestInput(
            request_id=request_id,
            agent_id=agent.agent_id,
            public_key=agent.public_key,
            message="sign me",
            nonce=uuid.uuid4(),
        ),
        id=signing_workflow_id(request_id),
        task_queue=queue,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
    )
    envelope: Any = await env.client.execute_update_with_start_workflow(
        SigningRequestWorkflow.envelope, start_workflow_operation=start
    )
    assert isinstance(envelope, SigningEnvelope)
    return envelope


def timer_seconds(history: WorkflowHistory) -> list[float]:
    return [
        event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds()
        for event in history.events
        if event.HasField("timer_started_event_attributes")
    ]


async def test_no_signature_for_300_s_expires_and_a_late_signature_is_409(
    time_skipping_env: WorkflowEnvironment, worker: Any
) -> None:
    queue, pool = worker
    agent = await register(time_skipping_env, queue)
    envelope = await open_request(time_skipping_env, queue, agent)
    assert (envelope.expires_at - envelope.created_at).total_seconds() == pytest.approx(
        limits.SIGNING_REQUEST_TTL_SEC, abs=5
    )
    handle = time_skipping_env.client.get_workflow_handle_for(
        SigningRequestWorkflow.run, signing_workflow_id(envelope.request_id)
    )

    # Only handles from `start_workflow` skip time by themselves; this one is told to.
    await time_skipping_env.sleep(limits.SIGNING_REQUEST_TTL_SEC)
    result = await handle.result()

    assert result.status == "expired" and result.valid is None
    waits = timer_seconds(await handle.fetch_history())
    assert len(waits) == 1 and limits.SIGNING_REQUEST_TTL_SEC - 1 < waits[0] <= 300
    stored = await get_signing_request(pool, envelope.request_id)
    assert stored is not None
    assert stored.status == "expired" and stored.signature is None and stored.valid is None
    assert (await handle.query(SigningRequestWorkflow.result)).status == "expired"
    await keep(handle, "signing_expired")

    # A signature after the deadline: what the API answers, and the row stays expired.
    late = agent.sign(signing_payload(envelope.message, envelope.nonce))
    with pytest.raises(Conflict) as refused:
        await submit_signature(
            time_skipping_env.client, pool, agent.agent_id, envelope.request_id, late
        )
    assert refused.value.status == 409
    assert refused.value.instance_code == "signing-request-expired"
    # the finished workflow takes no update at all
    with pytest.raises(RPCError):
        await handle.execute_update(
            SigningRequestWorkflow.sign, SignatureSubmission(signature=late)
        )
    assert await get_signing_request(pool, envelope.request_id) == stored


async def test_the_validator_refuses_a_malformed_signature_before_writing(
    time_skipping_env: WorkflowEnvironment, worker: Any
) -> None:
    queue, pool = worker
    agent = await register(time_skipping_env, queue)
    envelope = await open_request(time_skipping_env, queue, agent)
    handle = time_skipping_env.client.get_workflow_handle_for(
        SigningRequestWorkflow.run, signing_workflow_id(envelope.request_id)
    )

    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await handle.execute_update(
            SigningRequestWorkflow.sign, SignatureSubmission(signature="bm90IDY0IGJ5dGVz")
        )

    problem = problem_from_failure(failed.value)
    assert problem is not None and problem.status == 400
    stored = await get_signing_request(pool, envelope.request_id)
    assert stored is not None and stored.status == "pending" and stored.signature is None

    good = agent.sign(signing_payload(envelope.message, envelope.nonce))
    outcome = await submit_signature(
        time_skipping_env.client, pool, agent.agent_id, envelope.request_id, good
    )
    assert (outcome.status, outcome.valid) == ("completed", True)
    assert (await handle.result()).valid is True
    stored = await get_signing_request(pool, envelope.request_id)
    assert stored is not None and stored.status == "completed" and stored.signature == good
    with pytest.raises(Conflict) as again:
        await submit_signature(
            time_skipping_env.client, pool, agent.agent_id, envelope.request_id, good
        )
    assert again.value.instance_code == "signing-request-already-completed"


async def test_a_signature_just_before_the_deadline_completes(
    time_skipping_env: WorkflowEnvironment, worker: Any
) -> None:
    queue, pool = worker
    agent = await register(time_skipping_env, queue)
    envelope = await open_request(time_skipping_env, queue, agent)
    handle = time_skipping_env.client.get_workflow_handle_for(
        SigningRequestWorkflow.run, signing_workflow_id(envelope.request_id)
    )
    await time_skipping_env.sleep(limits.SIGNING_REQUEST_TTL_SEC - 10)
    assert (await handle.query(SigningRequestWorkflow.result)).status == "pending"

    signature = agent.sign(signing_payload(envelope.message, envelope.nonce))
    outcome = await handle.execute_update(
        SigningRequestWorkflow.sign, SignatureSubmission(signature=signature)
    )

    assert (outcome.status, outcome.valid) == ("completed", True)
    assert (await handle.result()).status == "completed"
    stored = await get_signing_request(pool, envelope.request_id)
    assert stored is not None and stored.status == "completed" and stored.valid is True
    await keep(handle, "signing_completed")
