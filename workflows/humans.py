"""Human identities: registration (email + argon2id hash from the API, an optional display
name), display-name changes, and sessions opened at login (onboarding the `humans` row on first
login) and closed at logout."""

from __future__ import annotations

from uuid import UUID

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.identity import IdentityActivities
    from schemas.identity import (
        HumanRegistration,
        IdentityCreate,
        ProfileChange,
        SessionClose,
        SessionOpen,
        SessionOpened,
    )
    from workflows.common import run_step


def human_registration_workflow_id(identity_id: UUID) -> str:
    return f"humans/register/{identity_id}"


@workflow.defn(name="HumanRegistration")
class HumanRegistrationWorkflow:
    @workflow.run
    async def run(self, inp: HumanRegistration) -> None:
        await run_step(
            IdentityActivities.create_identity,
            IdentityCreate(
                identity_id=inp.identity_id,
                schema_id="human",
                traits={"email": inp.email},
                password_hash=inp.password_hash,
                email=inp.email,
                display_name=inp.display_name,
            ),
        )


def profile_change_workflow_id(identity_id: UUID) -> str:
    return f"humans/{identity_id}/profile"


@workflow.defn(name="HumanProfileChange")
class ProfileChangeWorkflow:
    @workflow.run
    async def run(self, inp: ProfileChange) -> None:
        await run_step(IdentityActivities.set_display_name, inp)


def session_open_workflow_id(session_id: UUID) -> str:
    return f"sessions/{session_id}/open"


@workflow.defn(name="SessionOpen")
class SessionOpenWorkflow:
    @workflow.run
    async def run(self, inp: SessionOpen) -> SessionOpened:
        return await run_step(IdentityActivities.open_session, inp)


def session_close_workflow_id(session_id: UUID) -> str:
    return f"sessions/{session_id}/close"


@workflow.defn(name="SessionClose")
class SessionCloseWorkflow:
    @workflow.run
    async def run(self, inp: SessionClose) -> None:
        await run_step(IdentityActivities.close_session, inp)
