"""Models of teams: teams, founding, members, invites, groups and projects (SPEC 2.2, 3.2, 4.3).

Membership is relation tuples, not rows: a role is one of the Team relations `owners`,
`managers`, `executors`, `members` held by an Agent or a Human; `ROLE_RELATIONS` maps the wire
role to its relation. HTTP bodies are camelCase and closed; workflow payloads tolerate extras.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal
from uuid import UUID

from pydantic import Field, StringConstraints, model_validator

from schemas import limits
from schemas.base import Payload, RequestBody, ResponseBody
from schemas.names import SubjectNames

TeamStatus = Literal["founding", "active", "archived"]
TeamRole = Literal["owner", "manager", "executor", "member"]
InviteRole = Literal["manager", "executor", "member"]
MemberNs = Literal["Agent", "Human"]
FoundingOutcome = Literal["active", "archived"]
AcceptanceStatus = Literal["pending", "accepted"]

ROLE_RELATIONS: Final[dict[str, str]] = {
    "owner": "owners",
    "manager": "managers",
    "executor": "executors",
    "member": "members",
}
RELATION_ROLES: Final[dict[str, TeamRole]] = {
    "owners": "owner",
    "managers": "manager",
    "executors": "executor",
    "members": "member",
}
ROLE_RANK: Final[dict[str, int]] = {"owner": 0, "manager": 1, "executor": 2, "member": 3}
"""Strongest first: a subject holding two role relations (never written so) shows the stronger."""

INVITE_CODE_PREFIX: Final = "service_inv_"
INVITE_CODE_PATTERN: Final = r"^service_inv_[A-Za-z0-9_-]{22}$"

FOUNDING_ACCEPT_EVENT: Final = "FOUNDING_ACCEPT_EVENT"
"""The founding workflow's acceptance message (SPEC 6), an Update so the caller learns the
team's status after its acceptance counted."""
FOUNDING_SEEDED: Final = "team.founding.seeded"
"""Update sent with the workflow start: answers once the team and acceptance rows exist."""

Name = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=limits.TEAM_NAME_MAX_CHARS),
]


def strongest(roles: list[TeamRole]) -> TeamRole | None:
    """The strongest of several roles (None for none)."""
    ranked = sorted(roles, key=lambda role: ROLE_RANK[role])
    return ranked[0] if ranked else None


# --- HTTP: paths --------------------------------------------------------------------------------


class TeamPath(RequestBody):
    id: UUID


class MemberPath(RequestBody):
    id: UUID
    subjectId: UUID


class InvitePath(RequestBody):
    id: UUID
    inviteId: UUID


class GroupPath(RequestBody):
    id: UUID


class GroupMemberPath(RequestBody):
    id: UUID
    subjectId: UUID


# --- HTTP: teams and founding -------------------------------------------------------------------


class FoundingMember(RequestBody):
    """A co-founder. Without `role` a founding member becomes an owner (SPEC 3.2: "owner
    permission granted to all founding members")."""

    subjectId: UUID
    subjectNs: MemberNs
    role: TeamRole = "owner"


class CreateTeamRequest(RequestBody):
    name: Name
    foundingMembers: list[FoundingMember] | None = Field(
        default=None,
        max_length=limits.TEAM_FOUNDING_MEMBERS_MAX,
        description="Co-founders who must each accept within 24 h; omit for a team active at once",
    )

    @model_validator(mode="after")
    def _distinct_members(self) -> CreateTeamRequest:
        ids = [m.subjectId for m in self.foundingMembers or []]
        if len(ids) != len(set(ids)):
            raise ValueError("foundingMembers names the same subject twice")
        return self


class EmptyBody(RequestBody):
    """A body with nothing in it (`{}` or none); anything else is an unknown field."""


class TeamMember(SubjectNames):
    subjectId: UUID
    subjectNs: MemberNs
    role: TeamRole


class FoundingAcceptanceView(SubjectNames):
    subjectId: UUID
    subjectNs: MemberNs
    role: TeamRole
    status: AcceptanceStatus
    acceptedAt: datetime | None = None


class Team(ResponseBody):
    id: UUID
    name: str
    personal: bool
    status: TeamStatus
    createdBy: UUID
    createdAt: datetime
    updatedAt: datetime
    role: TeamRole | None = Field(default=None, description="The caller's role")
    workflowId: str | None = Field(default=None, description="The founding workflow, if any")
    members: list[TeamMember] | None = None
    foundingAcceptances: list[FoundingAcceptanceView] | None = None


class TeamSummary(ResponseBody):
    id: UUID
    name: str
    personal: bool
    status: TeamStatus
    role: TeamRole
    foundingAcceptance: AcceptanceStatus | None = Field(
        default=None,
        description="The caller's own founding acceptance, on a team that is not active",
    )


class TeamList(ResponseBody):
    items: list[TeamSummary]


class MemberList(ResponseBody):
    items: list[TeamMember]


class FoundingAccepted(Payload):
    accepted: bool
    teamStatus: TeamStatus


class UpdateMemberRequest(RequestBody):
    role: TeamRole


class Deleted(ResponseBody):
    success: bool = True


# --- HTTP: invites ------------------------------------------------------------------------------


class CreateInviteRequest(RequestBody):
    role: InviteRole = "member"
    maxUses: int = Field(
        default=limits.TEAM_INVITE_MAX_USES_DEFAULT, ge=1, le=limits.TEAM_INVITE_MAX_USES_MAX
    )
    expiresInHours: int = Field(
        default=limits.TEAM_INVITE_TTL_HOURS_DEFAULT,
        ge=limits.TEAM_INVITE_TTL_HOURS_MIN,
        le=limits.TEAM_INVITE_TTL_HOURS_MAX,
    )


class Invite(Payload):
    id: UUID
    teamId: UUID
    code: str
    role: InviteRole
    maxUses: int
    useCount: int
    expiresAt: datetime
    usedAt: datetime | None = None
    createdBy: UUID
    createdAt: datetime


class InviteList(ResponseBody):
    items: list[Invite]


class JoinRequest(RequestBody):
    code: Annotated[str, StringConstraints(pattern=INVITE_CODE_PATTERN)]


class Joined(Payload):
    teamId: UUID
    role: InviteRole


# --- HTTP: groups and projects ------------------------------------------------------------------


class CreateGroupRequest(RequestBody):
    name: Name


class GroupMember(SubjectNames):
    subjectId: UUID
    subjectNs: MemberNs


class Group(Payload):
    id: UUID
    teamId: UUID
    name: str
    createdAt: datetime
    members: list[GroupMember] | None = None


class GroupList(ResponseBody):
    items: list[Group]


class AddGroupMemberRequest(RequestBody):
    subjectId: UUID
    subjectNs: MemberNs | None = Field(
        default=None, description="Optional: the subject's namespace in the team is used"
    )


class GroupMemberList(ResponseBody):
    items: list[GroupMember]


class CreateProjectRequest(RequestBody):
    name: Name


class Project(Payload):
    id: UUID
    teamId: UUID
    name: str
    createdBy: UUID
    createdAt: datetime


class ProjectList(ResponseBody):
    items: list[Project]


# --- workflow payloads --------------------------------------------------------------------------


class Seat(Payload):
    """One subject's place in a team: who, and which role."""

    subject_id: UUID
    subject_ns: MemberNs
    role: TeamRole


class PersonalTeamCreate(Payload):
    """An agent's personal team, made at registration (name = the agent's fingerprint)."""

    team_id: UUID
    owner_id: UUID
    owner_ns: MemberNs = "Agent"
    name: str


class PersonalTeamCreated(Payload):
    team_id: UUID


class TeamCreate(Payload):
    """A team: active at once with the creator as owner, or founding with `seats` (creator's
    seat first) when co-founders are named."""

    team_id: UUID
    name: str
    creator: Seat
    seats: list[Seat] = Field(default_factory=list)
    workflow_id: str | None = None


class TeamRef(Payload):
    team_id: UUID


class FoundingState(Payload):
    team_id: UUID
    status: TeamStatus


class FoundingAccept(Payload):
    subject_id: UUID


class FoundingAcceptance(Payload):
    team_id: UUID
    subject_id: UUID


class FoundingSeed(Payload):
    """The founding team's rows: every seat's acceptance `pending`, except the seats in
    `accepted` (the creator's, for founding runs started before `creator-accepts`)."""

    team: TeamCreate
    accepted: list[UUID] = Field(default_factory=list)


class FoundingFinish(Payload):
    team_id: UUID
    outcome: FoundingOutcome
    seats: list[Seat]


class MemberRoleChange(Payload):
    team_id: UUID
    subject_id: UUID
    role: TeamRole
    may_touch_owners: bool = False
    """The caller owns the team: it may grant or take away the owner role."""


class MemberRemove(Payload):
    team_id: UUID
    subject_id: UUID
    may_touch_owners: bool = False
    """The caller owns the team, or removes itself: it may remove an owner."""


class InviteCreate(Payload):
    invite_id: UUID
    team_id: UUID
    code: str
    role: InviteRole
    max_uses: int
    expires_at: datetime
    created_by: UUID


class InviteDelete(Payload):
    team_id: UUID
    invite_id: UUID


class TeamJoin(Payload):
    code: str
    subject_id: UUID
    subject_ns: MemberNs


class GroupCreate(Payload):
    group_id: UUID
    team_id: UUID
    name: str


class GroupRef(Payload):
    group_id: UUID


class GroupMemberChange(Payload):
    group_id: UUID
    subject_id: UUID
    subject_ns: MemberNs | None = None
    """None: the subject's namespace in the group's team."""


class GroupMemberRemove(Payload):
    group_id: UUID
    subject_id: UUID


class ProjectCreate(Payload):
    project_id: UUID
    team_id: UUID
    name: str
    created_by: UUID
