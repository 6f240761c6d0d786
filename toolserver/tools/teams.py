"""Teams, their members and invites."""

from __future__ import annotations

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

TeamId = UUID


@tool(output=TeamList, read_only=True, render=lambda r: f"{len(r['items'])} teams")
async def teams_list(call: Call, args: NoArguments) -> TeamList:
    """List your teams and your role in each."""
    return await call.api.list_teams()


class FoundingMemberArg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject_id: UUID
    subject_ns: MemberNs
    role: TeamRole = Field(default="owner")


class TeamsCreate(Arguments):
    name: str = Field(min_length=1, max_length=255)
    founding_members: list[FoundingMemberArg] = Field(
        default_factory=list,
        max_length=50,
        description="Each must accept within 24 h",
    )


@tool(output=Team, render=lambda r: f"Team {r['name']} is {r['status']}")
async def teams_create(call: Call, args: TeamsCreate) -> Team:
    """Found a team; active once all founders, you too, accept."""
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
    """Delete a team you own."""
    return await call.api.delete_team(args.team_id)


class TeamsJoin(Arguments):
    code: str = Field(min_length=1, max_length=200)


@tool(output=Joined, render=lambda r: f"Joined team {r['teamId']} as {r['role']}")
async def teams_join(call: Call, args: TeamsJoin) -> Joined:
    """Join a team with an invite code."""
    return await call.api.join_team(args.code)


@tool(output=MemberList, read_only=True, render=lambda r: f"{len(r['items'])} members")
async def team_members_list(call: Call, args: TeamRef) -> MemberList:
    """List a team's members and roles."""
    return await call.api.list_members(args.team_id)


class MemberUpdate(Arguments):
    team_id: TeamId
    subject_id: UUID
    role: TeamRole


@tool(output=TeamMember, idempotent=True, render=lambda r: f"{r['subjectId']} is now {r['role']}")
async def team_member_update_role(call: Call, args: MemberUpdate) -> TeamMember:
    """Change a member's role."""
    return await call.api.update_member_role(args.team_id, args.subject_id, args.role)


class MemberRef(Arguments):
    team_id: TeamId
    subject_id: UUID


@tool(output=Deleted, destructive=True, idempotent=True, render=lambda r: "Member removed")
async def team_member_remove(call: Call, args: MemberRef) -> Deleted:
    """Remove a member (or yourself)."""
    return await call.api.remove_member(args.team_id, args.subject_id)


class InviteCreate(Arguments):
    team_id: TeamId
    role: InviteRole = Field(default="member")
    max_uses: int = Field(
        default=limits.TEAM_INVITE_MAX_USES_DEFAULT,
        ge=1,
        le=limits.TEAM_INVITE_MAX_USES_MAX,
    )
    expires_in_hours: int = Field(
        default=limits.TEAM_INVITE_TTL_HOURS_DEFAULT,
        ge=limits.TEAM_INVITE_TTL_HOURS_MIN,
        le=limits.TEAM_INVITE_TTL_HOURS_MAX,
    )


@tool(output=Invite, render=lambda r: f"Invite code {r['code']} ({r['role']})")
async def teams_invite_create(call: Call, args: InviteCreate) -> Invite:
    """Create an invite code for a team."""
    body = CreateInviteRequest(
        role=args.role, maxUses=args.max_uses, expiresInHours=args.expires_in_hours
    )
    return await call.api.create_invite(args.team_id, body)


@tool(output=InviteList, read_only=True, render=lambda r: f"{len(r['items'])} invites")
async def teams_invite_list(call: Call, args: TeamRef) -> InviteList:
    """List a team's open invites."""
    return await call.api.list_invites(args.team_id)


class InviteRef(Arguments):
    team_id: TeamId
    invite_id: UUID


@tool(output=Deleted, destructive=True, idempotent=True, render=lambda r: "Invite deleted")
async def teams_invite_delete(call: Call, args: InviteRef) -> Deleted:
    """Withdraw an invite."""
    return await call.api.delete_invite(args.team_id, args.invite_id)
