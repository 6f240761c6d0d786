"""Credentials moving to the current server secret (`SERVICE_SECRET_KEYS`): a session token,
an agent key or a client secret that matched only under an older key has its stored hash
replaced by the current key's, the first time it is presented after a rotation."""

from __future__ import annotations

from typing import Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.identity import IdentityActivities
    from schemas.identity import CredentialRehash
    from workflows.common import run_local_step
    from workflows.steps import RequestStep, request_step


def credential_rehash_workflow_id(
    kind: Literal["session", "agent_key", "oauth_client"], credential_id: str
) -> str:
    """One move per credential at a time: requests racing after a rotation share a run (the
    credential's kind and id, never its hash)."""
    return f"credentials/{kind}/{credential_id}/rehash"


@request_step("CredentialRehash", IdentityActivities.rehash_credential, runner=run_local_step)
class CredentialRehashWorkflow(RequestStep[CredentialRehash, None]): ...
