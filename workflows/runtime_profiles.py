"""Runtime-profile workflows (DECISIONS "Runtime profiles"): create, update, delete, each one
local step the API waits on.

- `RuntimeProfileCreate` (`runtime-profiles/<teamId>/create/<request CID>`): the profile id is
  the workflow's (stable under retry); the same request again meets the same id.
- `RuntimeProfileUpdate` (`runtime-profiles/<profileId>/update/<revision>`): keyed by the
  revision it changes, so two updates of the same revision never both apply (the second is a
  409), and a retried request meets the same id.
- `RuntimeProfileDelete` (`runtime-profiles/<profileId>/delete`).
"""

from __future__ import annotations

from uuid import UUID

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.runtime_profiles import RuntimeProfileActivities
    from schemas.runtime_profiles import (
        ProfileChanged,
        ProfileCreate,
        ProfileDelete,
        ProfileUpdate,
    )
    from workflows.steps import RequestStep, request_step, with_minted_id


def profile_create_workflow_id(team_id: UUID, request_cid: str) -> str:
    return f"runtime-profiles/{team_id}/create/{request_cid}"


def profile_update_workflow_id(profile_id: UUID, revision: int) -> str:
    return f"runtime-profiles/{profile_id}/update/{revision}"


def profile_delete_workflow_id(profile_id: UUID) -> str:
    return f"runtime-profiles/{profile_id}/delete"


@request_step(
    "RuntimeProfileCreate", RuntimeProfileActivities.create, prepare=with_minted_id("profile_id")
)
class RuntimeProfileCreateWorkflow(RequestStep[ProfileCreate, ProfileChanged]): ...


@request_step("RuntimeProfileUpdate", RuntimeProfileActivities.update)
class RuntimeProfileUpdateWorkflow(RequestStep[ProfileUpdate, ProfileChanged]): ...


@request_step("RuntimeProfileDelete", RuntimeProfileActivities.delete)
class RuntimeProfileDeleteWorkflow(RequestStep[ProfileDelete, None]): ...
