"""Agent registration: the spec's six steps as one durable workflow, compensated on failure.

1. validate the key and derive the fingerprint; 2. check the voucher; 3. create the identity;
4. upsert the agent and redeem the voucher (one transaction); 5. write the Agent self tuple
(then make the agent's personal team, named by its fingerprint, with the agent as owner);
6. create the OAuth2 client. If 4–6 fail, the identity is deleted and the error re-raised.
The client secret never enters history: the API sends only its keyed hash.

The steps are local activities (`run_step`): the whole registration is one workflow task.
"""

from __future__ import annotations

from uuid import UUID

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.identity import IdentityActivities
    from activities.permissions import PermissionActivities
    from activities.teams import TeamActivities
    from schemas.errors import FingerprintMismatch, PublicKeyInvalid
    from schemas.identity import (
        AgentBinding,
        IdentityCreate,
        IdentityRef,
        OAuthClientCreate,
        RegistrationInput,
        RegistrationResult,
        VoucherCheck,
    )
    from schemas.kernel.crypto import fingerprint, parse_public_key
    from schemas.kernel.permissions import RelationTuple, TupleWrite
    from schemas.teams import PersonalTeamCreate
    from workflows.common import domain_failure, run_step


def registration_workflow_id(fingerprint: str) -> str:
    """Keyed by the key's fingerprint: one registration per key, however often it is retried."""
    return f"registration/{fingerprint}"


@workflow.defn(name="Registration")
class RegistrationWorkflow:
    @workflow.run
    async def run(self, inp: RegistrationInput) -> RegistrationResult:
        self._validate_key(inp)
        await run_step(
            IdentityActivities.check_voucher, VoucherCheck(voucher_code=inp.voucher_code)
        )
        await run_step(
            IdentityActivities.create_identity,
            IdentityCreate(
                identity_id=inp.identity_id,
                schema_id="agent",
                traits={"public_key": inp.public_key, "voucher_code": inp.voucher_code},
                password_hash="",
            ),
        )
        try:
            agent_id = await self._bind(inp)
        except Exception:
            await run_step(
                IdentityActivities.delete_identity, IdentityRef(identity_id=inp.identity_id)
            )
            raise
        return RegistrationResult(
            identity_id=inp.identity_id, agent_id=agent_id, client_id=inp.client_id
        )

    def _validate_key(self, inp: RegistrationInput) -> None:
        try:
            derived = fingerprint(parse_public_key(inp.public_key))
        except ValueError as exc:
            raise domain_failure(PublicKeyInvalid(str(exc))) from None
        if derived != inp.fingerprint:
            raise domain_failure(FingerprintMismatch("The fingerprint does not match the key"))

    async def _bind(self, inp: RegistrationInput) -> UUID:
        bound = await run_step(
            IdentityActivities.bind_agent,
            AgentBinding(
                identity_id=inp.identity_id,
                agent_id=inp.agent_id,
                public_key=inp.public_key,
                fingerprint=inp.fingerprint,
                voucher_code=inp.voucher_code,
            ),
        )
        agent_id = bound.agent_id
        self_tuple = RelationTuple(
            namespace="Agent",
            object_id=str(agent_id),
            relation="self",
            subject_ns="Agent",
            subject_id=str(agent_id),
        )
        await run_step(PermissionActivities.write_tuples, TupleWrite(tuples=[self_tuple]))
        # Added after histories were recorded: runs started before it replay without the step.
        if workflow.patched("personal-team"):
            await run_step(
                TeamActivities.create_personal_team,
                PersonalTeamCreate(
                    team_id=workflow.uuid4(), owner_id=agent_id, name=inp.fingerprint
                ),
            )
        await run_step(
            IdentityActivities.create_oauth_client,
            OAuthClientCreate(
                client_id=inp.client_id,
                identity_id=inp.identity_id,
                agent_id=agent_id,
                client_secret_hash=inp.client_secret_hash,
                public_key=inp.public_key,
                fingerprint=inp.fingerprint,
            ),
        )
        return agent_id
