"""Teams, their members and invites."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from schemas import limits
from schemas.teams import (
    CreateInviteRequest,
    CreateTeamRequest,
    Deleted,
    FoundingMember,
    Invite,
    InviteList,
    InviteRole,
    Joined,
    MemberList,
    MemberNs,
    Team,
    TeamList,
    TeamMember,
    TeamRole,
)
from toolserver.registry import Arguments, Call, NoArguments, tool

TeamId = Annotated[UUID, Field(description="The team's id (see teams_list)")]


@tool(output=TeamList, read_only=True, render=lambda r: f"{len(r['items'])} teams")
async def teams_list(call: Call, args: NoArguments) -> TeamList:
    """List your teams with your role in each (including your personal team). Use it to find
    the team_id that owns diaries and tasks."""
    return await call.api.list_teams()


class FoundingMemberArg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject_id: UUID = Field(description="A co-founding agent or human")
    subject_ns: MemberNs
    role: TeamRole = Field(default="owner", description="The role it gets once the team is active")


class TeamsCreate(Arguments):
    name: str = Field(min_length=1, max_length=255)
    founding_members: list[FoundingMemberArg] = Field(
        default_factory=list,
        max_length=50,
        description=(
            "Co-founders who must each accept within 24 hours, as must you"
            " (accept-founding), before the team is active"
        ),
    )


@tool(output=Team, render=lambda r: f"Team {r['name']} is {r['status']}")
async def teams_create(call: Call, args: TeamsCreate) -> Team:
    """Found a new team. With founding members it stays `founding` until every one, you
    included, accepts (`POST /teams/{id}/accept-founding`); alone, it is active at once."""
    members = [
        FoundingMember(subjectId=m.subject_id, subjectNs=m.subject_ns, role=m.role)
        for m in args.founding_members
    ]
    body = CreateTeamRequest(name=args.name, foundingMembers=members or None)
    return await call.api.create_team(body)


class TeamRef(Arguments):
    team_id: TeamId


@tool(output=Deleted, destructive=True, idempotent=True, render=lambda r: "Team deleted")
async def teams_delete(call: Call, args: TeamRef) -> Deleted:
    """Delete a team you own when it is no longer needed. Refused while it still owns
    diaries."""
    return await call.api.delete_team(args.team_id)


class TeamsJoin(Arguments):
    code: str = Field(min_length=1, max_length=200, description="An invite code (service_inv_...)")


@tool(output=Joined, render=lambda r: f"Joined team {r['teamId']} as {r['role']}")
async def teams_join(call: Call, args: TeamsJoin) -> Joined:
    """Join a team with an invite code someone gave you; you get the role the invite names."""
    return await call.api.join_team(args.code)


@tool(output=MemberList, read_only=True, render=lambda r: f"{len(r['items'])} members")
async def team_members_list(call: Call, args: TeamRef) -> MemberList:
    """List a team's members with their roles and agents' fingerprints."""
    return await call.api.list_members(args.team_id)


class MemberUpdate(Arguments):
    team_id: TeamId
    subject_id: UUID = Field(description="The member whose role changes")
    role: TeamRole


@tool(output=TeamMember, idempotent=True, render=lambda r: f"{r['subjectId']} is now {r['role']}")
async def team_member_update_role(call: Call, args: MemberUpdate) -> TeamMember:
    """Change a member's role (owner, manager, executor, member). Needs team owner or manager
    rights."""
    return await call.api.update_member_role(args.team_id, args.subject_id, args.role)


class MemberRef(Arguments):
    team_id: TeamId
    subject_id: UUID = Field(description="The member to remove")


@tool(output=Deleted, destructive=True, idempotent=True, render=lambda r: "Member removed")
async def team_member_remove(call: Call, args: MemberRef) -> Deleted:
    """Remove a member from a team (or leave it, with your own id)."""
    return await call.api.remove_member(args.team_id, args.subject_id)


class InviteCreate(Arguments):
    team_id: TeamId
    role: InviteRole = Field(default="member", description="The role whoever joins gets")
    max_uses: int = Field(
        default=limits.TEAM_INVITE_MAX_USES_DEFAULT,
        ge=1,
        le=limits.TEAM_INVITE_MAX_USES_MAX,
        description="How many may join with it",
    )
    expires_in_hours: int = Field(
        default=limits.TEAM_INVITE_TTL_HOURS_DEFAULT,
        ge=limits.TEAM_INVITE_TTL_HOURS_MIN,
        le=limits.TEAM_INVITE_TTL_HOURS_MAX,
    )


@tool(output=Invite, render=lambda r: f"Invite code {r['code']} ({r['role']})")
async def teams_invite_create(call: Call, args: InviteCreate) -> Invite:
    """Create an invite code for a team; give it to the agent or human who should join."""
    body = CreateInviteRequest(
        role=args.role, maxUses=args.max_uses, expiresInHours=args.expires_in_hours
    )
    return await call.api.create_invite(args.team_id, body)


@tool(output=InviteList, read_only=True, render=lambda r: f"{len(r['items'])} invites")
async def teams_invite_list(call: Call, args: TeamRef) -> InviteList:
    """List a team's open invites (code, role, uses left, expiry), e.g. to find one to
    withdraw."""
    return await call.api.list_invites(args.team_id)


class InviteRef(Arguments):
    team_id: TeamId
    invite_id: UUID


@tool(output=Deleted, destructive=True, idempotent=True, render=lambda r: "Invite deleted")
async def teams_invite_delete(call: Call, args: InviteRef) -> Deleted:
    """Withdraw an invite so its code no longer works, e.g. when it was shared by mistake."""
    return await call.api.delete_invite(args.team_id, args.invite_id)
