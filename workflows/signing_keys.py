"""The token endpoint's signing key: created once, rotated on demand (old keys keep verifying
for a token lifetime). Workers run it at start-up so a fresh stack can issue tokens."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.identity import IdentityActivities
    from schemas.identity import SigningKeyEnsure, SigningKeyState
    from workflows.common import run_step

SIGNING_KEYS_WORKFLOW_ID = "oauth/signing-keys"


@workflow.defn(name="SigningKeys")
class SigningKeysWorkflow:
    @workflow.run
    async def run(self, inp: SigningKeyEnsure) -> SigningKeyState:
        return await run_step(IdentityActivities.ensure_signing_key, inp)
