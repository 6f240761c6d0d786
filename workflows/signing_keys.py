"""The token endpoint's signing key: created once, rotated on demand (old keys keep verifying
for a token lifetime). Workers run it at start-up so a fresh stack can issue tokens."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.identity import IdentityActivities
    from schemas.identity import SigningKeyEnsure, SigningKeyState
    from workflows.steps import RequestStep, request_step


def signing_keys_workflow_id(task_queue: str) -> str:
    """One per deployment (its task queue), like the maintenance schedules: a run only its own
    workers can finish must not hold another deployment's (or test stack's) start-up, which
    attaches to a running run of the same id."""
    return f"oauth/signing-keys/{task_queue}"


@request_step("SigningKeys", IdentityActivities.ensure_signing_key)
class SigningKeysWorkflow(RequestStep[SigningKeyEnsure, SigningKeyState]): ...
