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
    from workflows.steps import RequestStep, request_step


def human_registration_workflow_id(identity_id: UUID) -> str:
    return f"humans/register/{identity_id}"


def _human_identity(inp: HumanRegistration) -> IdentityCreate:
    return IdentityCreate(
        identity_id=inp.identity_id,
        schema_id="human",
        traits={"email": inp.email},
        password_hash=inp.password_hash,
        email=inp.email,
        display_name=inp.display_name,
    )


@request_step("HumanRegistration", IdentityActivities.create_identity, prepare=_human_identity)
class HumanRegistrationWorkflow(RequestStep[HumanRegistration, None]): ...


def profile_change_workflow_id(identity_id: UUID) -> str:
    return f"humans/{identity_id}/profile"


@request_step("HumanProfileChange", IdentityActivities.set_display_name)
class ProfileChangeWorkflow(RequestStep[ProfileChange, None]): ...


def session_open_workflow_id(session_id: UUID) -> str:
    return f"sessions/{session_id}/open"


@request_step("SessionOpen", IdentityActivities.open_session)
class SessionOpenWorkflow(RequestStep[SessionOpen, SessionOpened]): ...


def session_close_workflow_id(session_id: UUID) -> str:
    return f"sessions/{session_id}/close"


@request_step("SessionClose", IdentityActivities.close_session)
class SessionCloseWorkflow(RequestStep[SessionClose, None]): ...
