"""Runtime profiles (DECISIONS "Runtime profiles"): the HTTP models of `/runtime-profiles`, the
payloads of their workflows, and the one mapping from a row to the JSON a client sees.

A profile is `{id, teamId, name, revision, policy: {taskTypes?, scopes?}, createdAt, updatedAt}`.
`revision` starts at 1 and grows by one on every update. A policy field that is absent does not
narrow; a present one lists at least one registered task type or credential scope (sorted and
deduplicated as stored, so equal policies have equal snapshot hashes).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Final
from uuid import UUID

from pydantic import Field, StringConstraints, field_validator, model_validator

from schemas import limits
from schemas.base import Payload, RequestBody, ResponseBody
from schemas.errors import (
    FieldError,
    Forbidden,
    ProfileNotAllowed,
    ProfileScopeDenied,
    ProfileTaskTypeNotAllowed,
    UnknownRuntimeProfile,
    ValidationFailed,
)
from schemas.kernel.runtime_profiles import ClaimRefusal
from schemas.kernel.task_types import TASK_TYPES
from schemas.principals import AGENT_SCOPES

ProfileName = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=limits.RUNTIME_PROFILE_NAME_MAX_CHARS, strip_whitespace=True
    ),
]
_TYPE_NAMES: Final = frozenset(t.name for t in TASK_TYPES)


class RuntimePolicy(RequestBody):
    """What a claim under the profile may take (`taskTypes`) and which of the credential's
    scopes its attempt keeps (`scopes`). Absent: no narrowing."""

    taskTypes: Annotated[list[str], Field(min_length=1, max_length=len(_TYPE_NAMES))] | None = (
        Field(default=None, description="registered task types this profile claims")
    )
    scopes: Annotated[list[str], Field(min_length=1, max_length=len(AGENT_SCOPES))] | None = Field(
        default=None, description="the credential scopes an attempt claimed under it keeps"
    )

    @field_validator("taskTypes")
    @classmethod
    def _registered_types(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        unknown = sorted(set(value) - _TYPE_NAMES)
        if unknown:
            raise ValueError(f"not registered task types: {', '.join(unknown)}")
        return sorted(set(value))

    @field_validator("scopes")
    @classmethod
    def _known_scopes(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        unknown = sorted(set(value) - set(AGENT_SCOPES))
        if unknown:
            raise ValueError(f"not credential scopes: {', '.join(unknown)}")
        return sorted(set(value))

    def snapshot(self) -> dict[str, Any]:
        """The policy as stored and hashed: absent fields left out."""
        return self.model_dump(exclude_none=True)


class CreateRuntimeProfileRequest(RequestBody):
    teamId: UUID = Field(description="the owning team")
    name: ProfileName = Field(description="unique within the team")
    policy: RuntimePolicy = Field(default_factory=RuntimePolicy)


class UpdateRuntimeProfileRequest(RequestBody):
    """A new name, a new policy (replacing the old one whole), or both; the revision grows."""

    name: ProfileName | None = None
    policy: RuntimePolicy | None = None

    @model_validator(mode="after")
    def _changes_something(self) -> UpdateRuntimeProfileRequest:
        if self.name is None and self.policy is None:
            raise ValueError("send name, policy or both")
        return self


class RuntimeProfilePath(RequestBody):
    id: UUID


class RuntimePolicyView(ResponseBody):
    taskTypes: list[str] | None = None
    scopes: list[str] | None = None


class RuntimeProfile(ResponseBody):
    id: UUID
    teamId: UUID
    name: str
    revision: int = Field(description="1 at creation, one more on every update")
    policy: RuntimePolicyView
    createdByAgentId: UUID | None = None
    createdByHumanId: UUID | None = None
    createdAt: datetime
    updatedAt: datetime


class RuntimeProfileList(ResponseBody):
    items: list[RuntimeProfile]


def unknown_profile(pointer: str) -> ValidationFailed:
    """A request naming a profile that is not one of the team's: none by that id, another
    team's, or deleted (the same answer for each, so ids of other teams stay unknown)."""
    message = "not a runtime profile of the task's team"
    return UnknownRuntimeProfile(
        f"No such runtime profile: {message}",
        errors=[FieldError(pointer=pointer, message=message)],
    )


def claim_refused(refusal: ClaimRefusal, task_type: str) -> Forbidden:
    """The 403 of a claim the runtime profile rules refuse (one wording for every caller)."""
    if refusal == "profile-not-allowed":
        return ProfileNotAllowed(
            "The task is pinned to other runtime profiles (allowedProfiles); claim under one"
        )
    if refusal == "profile-task-type-not-allowed":
        return ProfileTaskTypeNotAllowed(
            f"The runtime profile's policy does not claim {task_type} tasks"
        )
    return profile_scope_denied(["task:claim"])


def profile_scope_denied(denied: list[str]) -> Forbidden:
    """A call the runtime policy of the attempt (or of the claim) does not allow."""
    return ProfileScopeDenied(
        f"The runtime profile's policy does not allow scope(s): {', '.join(denied)}"
    )


def profile_from_row(row: Mapping[str, Any]) -> RuntimeProfile:
    return RuntimeProfile(
        id=row["id"],
        teamId=row["team_id"],
        name=row["name"],
        revision=row["revision"],
        policy=RuntimePolicyView.model_validate(row["policy"] or {}),
        createdByAgentId=row["created_by_agent_id"],
        createdByHumanId=row["created_by_human_id"],
        createdAt=row["created_at"],
        updatedAt=row["updated_at"],
    )


# --- workflow payloads -------------------------------------------------------------------------


class ProfileCreate(Payload):
    team_id: UUID
    name: str
    policy: dict[str, Any] = Field(default_factory=dict)
    created_by_agent_id: UUID | None = None
    created_by_human_id: UUID | None = None
    profile_id: UUID | None = Field(default=None, description="drawn by the workflow")


class ProfileUpdate(Payload):
    """An update of the profile as it stood at `revision` (a concurrent one since is a 409)."""

    profile_id: UUID
    revision: int
    name: str | None = None
    policy: dict[str, Any] | None = None


class ProfileDelete(Payload):
    profile_id: UUID


class ProfileChanged(Payload):
    profile_id: UUID
    revision: int
