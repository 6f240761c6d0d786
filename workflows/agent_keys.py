"""Agent keys (SPEC 3.5): create, rotate and revoke are short request workflows the API awaits;
expiry is a timer in each key's own `AgentKeyExpiry` workflow.

- Create inserts the row, then starts the key's expiry workflow (abandoned by its parent, so
  it outlives the request). Its id comes from the caller and the Idempotency-Key, and a second
  start under it is refused: a retried create is a 409 and never mints a second key.
- Rotate swaps the secret hash (the old secret fails from the commit on); expiry and scopes
  stay, so the expiry timer stays right. Revoke records the reason.
- Expiry: the timer sleeps until `expires_at`, then records `expired` if the key is still
  active. Authentication does not wait for it: it reads an active key past its expiry as
  expired (the store's effective status), so a key never works a moment too long, even when a
  worker is down at the deadline; the timer keeps the stored status and lists truthful.

Payloads carry the secret's keyed hash, never the secret.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from uuid import UUID

from temporalio import workflow
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from activities.agent_keys import AgentKeyActivities
    from schemas.agent_keys import (
        AgentKeyCreate,
        AgentKeyExpire,
        AgentKeyExpired,
        AgentKeyRevoke,
        AgentKeyRotate,
        AgentKeyRow,
    )
    from workflows.common import LONG_LIVED, run_step
    from workflows.steps import RequestStep, request_step

# uuid5 namespace of key ids derived from (caller, Idempotency-Key): fixed forever
IDEMPOTENT_KEY_IDS = uuid.UUID("0f5c7a3e-8c1d-5b6a-9e2f-4d7b1a6c3e90")


def idempotency_key_hash(idempotency_key: str) -> str:
    return hashlib.sha256(idempotency_key.encode("utf-8", "surrogatepass")).hexdigest()


def create_workflow_id(caller_ns: str, caller_id: UUID, idempotency_key: str) -> str:
    """One create per caller and Idempotency-Key (the key is hashed: ids stay short)."""
    return f"agent-keys/create/{caller_ns}:{caller_id}/{idempotency_key_hash(idempotency_key)}"


def key_id_for(create_id: str) -> UUID:
    """The new key's id, derived from its create workflow id: a retry names the same key."""
    return uuid.uuid5(IDEMPOTENT_KEY_IDS, create_id)


def rotate_workflow_id(key_id: UUID) -> str:
    return f"agent-keys/{key_id}/rotate"


def keyed_rotate_workflow_id(
    caller_ns: str, caller_id: UUID, key_id: UUID, idempotency_key: str
) -> str:
    """One rotation per caller, key and Idempotency-Key: sent again, it mints nothing (the new
    secret was shown once), as a create under its key does (DECISIONS, "agent keys")."""
    caller = f"{caller_ns}:{caller_id}"
    return f"agent-keys/rotate/{caller}/{key_id}/{idempotency_key_hash(idempotency_key)}"


def revoke_workflow_id(key_id: UUID) -> str:
    return f"agent-keys/{key_id}/revoke"


def expiry_workflow_id(key_id: UUID) -> str:
    return f"agent-keys/{key_id}/expiry"


@workflow.defn(name="AgentKeyCreate")
class AgentKeyCreateWorkflow:
    @workflow.run
    async def run(self, inp: AgentKeyCreate) -> AgentKeyRow:
        created = await run_step(AgentKeyActivities.insert, inp)
        await workflow.start_child_workflow(
            AgentKeyExpiryWorkflow.run,
            AgentKeyExpire(key_id=created.id, expires_at=created.expires_at),
            id=expiry_workflow_id(created.id),
            parent_close_policy=ParentClosePolicy.ABANDON,
        )
        return created


@request_step("AgentKeyRotate", AgentKeyActivities.rotate)
class AgentKeyRotateWorkflow(RequestStep[AgentKeyRotate, AgentKeyRow]): ...


@request_step("AgentKeyRevoke", AgentKeyActivities.revoke)
class AgentKeyRevokeWorkflow(RequestStep[AgentKeyRevoke, AgentKeyRow]): ...


@workflow.defn(name="AgentKeyExpiry", versioning_behavior=LONG_LIVED)
class AgentKeyExpiryWorkflow:
    @workflow.run
    async def run(self, inp: AgentKeyExpire) -> AgentKeyExpired:
        remaining = inp.expires_at - workflow.now()
        if remaining > timedelta(0):
            await workflow.sleep(remaining)
        return await run_step(AgentKeyActivities.expire, inp)
