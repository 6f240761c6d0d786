"""Key-signed recovery. The API has already checked the challenge's format, HMAC, age and key
binding; this workflow does the rest in the spec's order (4.1): the agent exists, the nonce is
unused, the Ed25519 signature over the challenge verifies, and only then is the nonce stored
(atomically: of two racing verifications one wins) and a one-time code flow opened. A failed
attempt, such as a signature by the wrong key, leaves the challenge usable.

`RecoveryRedeemWorkflow` redeems the code and rotates the OAuth2 client secret; the new secret's
hash comes from the API, so no secret is ever in history.
"""

from __future__ import annotations

from uuid import UUID

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.identity import IdentityActivities
    from schemas.errors import InvalidSignature
    from schemas.identity import (
        AgentLookup,
        NonceConsume,
        RecoveryFlowCreate,
        RecoveryRedeem,
        RecoveryRedeemed,
        RecoveryStart,
        RecoveryStarted,
    )
    from schemas.kernel.crypto import parse_public_key, recovery_signature_ok
    from workflows.common import domain_failure, run_step
    from workflows.steps import RequestStep, request_step


# Runs before this patch consumed the nonce ahead of the signature check (which burnt the
# challenge on a bad signature) and replay that order.
VERIFY_BEFORE_CONSUME_PATCH = "verify-before-consume"


def _verify_signature(inp: RecoveryStart) -> None:
    if not recovery_signature_ok(parse_public_key(inp.public_key), inp.challenge, inp.signature):
        raise domain_failure(InvalidSignature("The signature does not verify for this key"))


def recovery_verify_workflow_id(nonce: str) -> str:
    """Keyed by the challenge's nonce: a successful verification uses the challenge up."""
    return f"recovery/{nonce}"


@workflow.defn(name="RecoveryVerify")
class RecoveryVerifyWorkflow:
    @workflow.run
    async def run(self, inp: RecoveryStart) -> RecoveryStarted:
        agent = await run_step(
            IdentityActivities.find_agent, AgentLookup(public_key=inp.public_key)
        )
        nonce = NonceConsume(nonce=inp.nonce, expires_at=inp.nonce_expires_at)
        if workflow.patched(VERIFY_BEFORE_CONSUME_PATCH):
            await run_step(IdentityActivities.check_recovery_nonce, nonce)
            _verify_signature(inp)
            await run_step(IdentityActivities.consume_recovery_nonce, nonce)
        else:
            await run_step(IdentityActivities.consume_recovery_nonce, nonce)
            _verify_signature(inp)
        await run_step(
            IdentityActivities.create_recovery_flow,
            RecoveryFlowCreate(
                flow_id=inp.flow_id,
                identity_id=agent.identity_id,
                code_hash=inp.code_hash,
                expires_at=inp.flow_expires_at,
            ),
        )
        return RecoveryStarted(flow_id=inp.flow_id, identity_id=agent.identity_id)


def recovery_redeem_workflow_id(flow_id: UUID) -> str:
    """Keyed by the recovery flow: a retried redemption hits the same id, and one flow is
    redeemed one try at a time (a concurrent try answers 409); every try still counts
    against the flow's limit, and a redeemed flow refuses the next (`recovery-flow-used`)."""
    return f"recovery-flow/{flow_id}"


@request_step("RecoveryRedeem", IdentityActivities.redeem_recovery)
class RecoveryRedeemWorkflow(RequestStep[RecoveryRedeem, RecoveryRedeemed]): ...
