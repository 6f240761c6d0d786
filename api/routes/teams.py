"""Team routes: teams and founding (SPEC 4.3, 3.2), members, invites, groups and projects.

Who may do what (the permission engine decides; SPEC 5's Team and Group namespaces):

| action | needs (else 403 for members, 404 for others) |
|---|---|
| read a team, members, groups, projects | any role (founding team: a founding seat) |
| delete a team | `manage` (owners) |
| change a role, remove a member | `manage_members`; granting or taking `owner`: `manage` |
| leave a team or a group | being that member |
| invites: create, list, delete | `manage_members` (owners, managers) |
| groups: create, delete, members | `manage_members` (Group `manage`) |
| projects: create | `write` (owners, managers) |

Scopes: none beyond authentication. The spec names no team scope, and a team is governed by
its roles, so the routes gate by permission only (as the reference does in effect). Invariants
that races could break (the last owner, invite use counts, personal teams, founding status) are
re-checked by the activity under a row lock; the checks here only decide 404 versus 403.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import asyncpg
from aiohttp import web
from temporalio.common import (
    SearchAttributePair,
)
from temporalio.service import RPCError, RPCStatusCode

from api import keys
from api.access import allowed
from api.auth import require_principal
from api.endpoint import Parsed, endpoint, render
from api.flows import execute, start_with_update
from api.idempotency import keyed_workflow_id, new_id
from infra.repos import team_reads
from infra.repos.team_reads import MemberRow, MembershipRow, TeamRow
from schemas import limits
from schemas.errors import (
    Conflict,
    DomainError,
    FieldError,
    Forbidden,
    Gone,
    NotFound,
    TeamChangeRunning,
    TeamNotFounding,
    ValidationFailed,
)
from schemas.principals import Principal
from schemas.teams import (
    FOUNDING_ACCEPT_EVENT,
    FOUNDING_SEEDED,
    INVITE_CODE_PREFIX,
    RELATION_ROLES,
    AddGroupMemberRequest,
    CreateGroupRequest,
    CreateInviteRequest,
    CreateProjectRequest,
    CreateTeamRequest,
    Deleted,
    FoundingAccept,
    FoundingAcceptanceView,
    FoundingAccepted,
    FoundingState,
    Group,
    GroupCreate,
    GroupList,
    GroupMember,
    GroupMemberChange,
    GroupMemberList,
    GroupMemberPath,
    GroupMemberRemove,
    GroupPath,
    GroupRef,
    Invite,
    InviteCreate,
    InviteDelete,
    InviteList,
    InvitePath,
    Joined,
    JoinRequest,
    MemberList,
    MemberPath,
    MemberRemove,
    MemberRoleChange,
    Project,
    ProjectCreate,
    ProjectList,
    Seat,
    Team,
    TeamCreate,
    TeamJoin,
    TeamList,
    TeamMember,
    TeamPath,
    TeamRef,
    TeamRole,
    TeamSummary,
    UpdateMemberRequest,
    strongest,
)
from workflows.common import TEAM_ID
from workflows.teams import (
    GroupCreateWorkflow,
    GroupDeleteWorkflow,
    GroupMemberAddWorkflow,
    GroupMemberRemoveWorkflow,
    ProjectCreateWorkflow,
    TeamCreateWorkflow,
    TeamDeleteWorkflow,
    TeamFoundingWorkflow,
    TeamInviteCreateWorkflow,
    TeamInviteDeleteWorkflow,
    TeamJoinWorkflow,
    TeamMemberRemoveWorkflow,
    TeamMemberRoleWorkflow,
    group_create_workflow_id,
    group_delete_workflow_id,
    group_member_workflow_id,
    invite_create_workflow_id,
    invite_delete_workflow_id,
    join_workflow_id,
    project_create_workflow_id,
    team_create_workflow_id,
    team_delete_workflow_id,
    team_founding_workflow_id,
    team_member_workflow_id,
)

routes = web.RouteTableDef()
TAG = "teams"
ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")
BUSY = TeamChangeRunning("The same change to this team is already running")


def _pool(request: web.Request) -> asyncpg.Pool:
    return request.app[keys.READ_POOL]


async def _run(
    request: web.Request,
    run: Callable[[Any, ArgT], Awaitable[ResultT]],
    arg: ArgT,
    team_id: uuid.UUID,
    workflow_id: str,
) -> ResultT:
    """Run one team write as a workflow (its id from `workflows.teams`), findable by TeamId."""
    return await execute(
        request,
        run,
        arg,
        workflow_id=workflow_id,
        on_duplicate=BUSY,
        search=[SearchAttributePair(TEAM_ID, str(team_id))],
    )


# --- who the caller is in a team --------------------------------------------------------------


async def _team_row(request: web.Request, team_id: uuid.UUID) -> TeamRow:
    row = await team_reads.get_team(_pool(request), team_id)
    if row is None:
        raise NotFound("No such team")
    return row


async def _role_in(
    request: web.Request, team_id: uuid.UUID, subject_id: uuid.UUID
) -> TeamRole | None:
    relations = await team_reads.subject_relations(_pool(request), team_id, subject_id)
    return strongest([RELATION_ROLES[relation] for relation in relations])


async def _visible_team(request: web.Request, team_id: uuid.UUID) -> tuple[TeamRow, TeamRole]:
    """The team and the caller's role in it; 404 unless the caller holds a role, or holds a
    founding seat of a team that never became active (its role-to-be is shown)."""
    principal = require_principal(request)
    if not principal.acts_in(team_id):
        raise NotFound("No such team")
    team = await _team_row(request, team_id)
    role = await _role_in(request, team_id, principal.subject_id)
    if role is None and team.status != "active":
        seat = await team_reads.founding_seat(_pool(request), team_id, principal.subject_id)
        role = None if seat is None else seat.role
    if role is None:
        raise NotFound("No such team")
    return team, role


async def _require_team(request: web.Request, team_id: uuid.UUID, permission: str) -> None:
    """`permission` on the team, else 403 for its members and 404 for everyone else."""
    if await allowed(request, "Team", team_id, permission):
        return
    if await allowed(request, "Team", team_id, "verify_claim"):
        raise Forbidden(f"Your role in this team does not allow this ({permission})")
    raise NotFound("No such team")


async def _require_membership(request: web.Request, team_id: uuid.UUID) -> None:
    if not await allowed(request, "Team", team_id, "verify_claim"):
        raise NotFound("No such team")


# --- views --------------------------------------------------------------------------------------


def _team_view(row: TeamRow, role: TeamRole | None, **extra: Any) -> Team:
    return Team(
        id=row.id,
        name=row.name,
        personal=row.personal,
        status=row.status,
        createdBy=row.created_by,
        createdAt=row.created_at,
        updatedAt=row.updated_at,
        role=role,
        workflowId=row.workflow_id,
        **extra,
    )


async def _members(request: web.Request, team_id: uuid.UUID) -> list[TeamMember]:
    rows = await team_reads.member_roles(_pool(request), team_id)
    roles: dict[uuid.UUID, list[TeamRole]] = {}
    first: dict[uuid.UUID, MemberRow] = {}
    for row in rows:
        roles.setdefault(row.subject_id, []).append(RELATION_ROLES[row.relation])
        first.setdefault(row.subject_id, row)
    members = []
    for subject_id, row in first.items():
        role = strongest(roles[subject_id])
        assert role is not None
        members.append(
            TeamMember(
                subjectId=subject_id,
                subjectNs=row.subject_ns,
                role=role,
                **row.names(),
            )
        )
    return members


async def _acceptances(request: web.Request, team_id: uuid.UUID) -> list[FoundingAcceptanceView]:
    return [
        FoundingAcceptanceView(
            subjectId=seat.subject_id,
            subjectNs=seat.subject_ns,
            role=seat.role,
            status=seat.status,
            acceptedAt=seat.accepted_at,
            **seat.names(),
        )
        for seat in await team_reads.founding_seats(_pool(request), team_id)
    ]


# --- teams --------------------------------------------------------------------------------------


@endpoint(routes, "GET", "/teams", tag=TAG, response=TeamList)
async def list_teams(request: web.Request, parsed: Parsed) -> TeamList:
    """Teams the caller belongs to, and teams it was asked to found (status founding/archived)."""
    principal = require_principal(request)
    rows = await team_reads.memberships(
        _pool(request), principal.subject_ns, principal.subject_id, principal.confined_team_id
    )
    roles: dict[uuid.UUID, list[TeamRole]] = {}
    seats: dict[uuid.UUID, TeamRole] = {}
    teams: dict[uuid.UUID, MembershipRow] = {}
    for row in rows:
        teams.setdefault(row.id, row)
        if row.relation is not None:
            roles.setdefault(row.id, []).append(RELATION_ROLES[row.relation])
        elif row.founding_role is not None:
            seats[row.id] = row.founding_role
    items = []
    for team_id, row in teams.items():
        role = strongest(roles.get(team_id, [])) or seats[team_id]
        items.append(
            TeamSummary(
                id=team_id,
                name=row.name,
                personal=row.personal,
                status=row.status,
                role=role,
            )
        )
    return TeamList(items=items)


@endpoint(
    routes,
    "POST",
    "/teams",
    tag=TAG,
    status=201,
    also=((202, "Founding: the team waits for every founding member to accept"),),
    body=CreateTeamRequest,
    response=Team,
    errors=(Conflict,),
    idempotent=True,
)
async def create_team(
    request: web.Request, parsed: Parsed[CreateTeamRequest]
) -> web.StreamResponse:
    """Create a team: active at once (201), or founding (202) when `foundingMembers` are named.

    A founding team waits up to 24 h for every founding member's `accept-founding`, the
    creator's included (its acceptance row is seeded `pending` like the others'); then it is
    active and each founding member holds its role (owner unless another is given, the creator
    an owner), or it is archived.
    """
    body = parsed.body
    principal = require_principal(request)
    team_id = new_id(request, "team")
    creator = Seat(subject_id=principal.subject_id, subject_ns=principal.subject_ns, role="owner")
    founders = body.foundingMembers or []
    for index, member in enumerate(founders):
        if member.subjectId == principal.subject_id:
            raise ValidationFailed(
                "The creator is a founding owner already; do not list yourself",
                errors=[
                    FieldError(pointer=f"/foundingMembers/{index}/subjectId", message="Is you")
                ],
            )
    if not founders:
        create = TeamCreate(team_id=team_id, name=body.name, creator=creator)
        await _run(
            request, TeamCreateWorkflow.run, create, team_id, team_create_workflow_id(team_id)
        )
        team = _team_view(await _team_row(request, team_id), "owner")
        return render(team, 201)
    seats = [creator] + [
        Seat(subject_id=m.subjectId, subject_ns=m.subjectNs, role=m.role) for m in founders
    ]
    await _start_founding(request, team_id, body.name, creator, seats)
    team = _team_view(
        await _team_row(request, team_id),
        "owner",
        foundingAcceptances=await _acceptances(request, team_id),
    )
    return render(team, 202)


async def _start_founding(
    request: web.Request, team_id: uuid.UUID, name: str, creator: Seat, seats: list[Seat]
) -> None:
    """Start `TeamFounding` and wait only until its rows exist (Update-with-Start)."""
    workflow_id = team_founding_workflow_id(team_id)
    # a keyed retry of a founding that has ended (None) finds its rows
    await start_with_update(
        request,
        TeamFoundingWorkflow.run,
        TeamCreate(
            team_id=team_id, name=name, creator=creator, seats=seats, workflow_id=workflow_id
        ),
        workflow_id=workflow_id,
        update=FOUNDING_SEEDED,
        result_type=FoundingState,
        on_duplicate=BUSY,
        search=[SearchAttributePair(TEAM_ID, str(team_id))],
    )


@endpoint(
    routes,
    "GET",
    "/teams/{id}",
    tag=TAG,
    path_params=TeamPath,
    response=Team,
    errors=(NotFound,),
)
async def get_team(request: web.Request, parsed: Parsed[None, None, TeamPath]) -> Team:
    """A team with its members (and, before it is active, its founding acceptances)."""
    path = parsed.path
    team, role = await _visible_team(request, path.id)
    acceptances = None if team.status == "active" else await _acceptances(request, path.id)
    return _team_view(
        team, role, members=await _members(request, path.id), foundingAcceptances=acceptances
    )


@endpoint(
    routes,
    "DELETE",
    "/teams/{id}",
    tag=TAG,
    path_params=TeamPath,
    response=Deleted,
    errors=(NotFound, Forbidden, Conflict),
)
async def delete_team(request: web.Request, parsed: Parsed[None, None, TeamPath]) -> Deleted:
    """Delete a team (owners only). Personal teams stay; a team that owns diaries is a 409."""
    path = parsed.path
    await _require_team(request, path.id, "manage")
    workflow_id = team_delete_workflow_id(path.id)
    await _run(request, TeamDeleteWorkflow.run, TeamRef(team_id=path.id), path.id, workflow_id)
    return Deleted()


@endpoint(
    routes,
    "POST",
    "/teams/{id}/accept-founding",
    tag=TAG,
    path_params=TeamPath,
    response=FoundingAccepted,
    errors=(NotFound, Conflict),
    idempotent=True,  # a decision: repeated, it answers the acceptance already recorded
)
async def accept_founding(
    request: web.Request, parsed: Parsed[None, None, TeamPath]
) -> FoundingAccepted:
    """Record the caller's acceptance of a founding team (idempotent). The last acceptance
    answers with the team already `active`."""
    path = parsed.path
    principal = require_principal(request)
    team = await _team_row(request, path.id)
    seat = await team_reads.founding_seat(_pool(request), path.id, principal.subject_id)
    if seat is None:
        raise NotFound("No such team")
    if seat.status == "accepted":
        return FoundingAccepted(accepted=True, teamStatus=team.status)
    if team.status != "founding" or team.workflow_id is None:
        raise _not_founding(team.status)
    handle = request.app[keys.TEMPORAL].get_workflow_handle(team.workflow_id)
    try:
        accepted: FoundingAccepted = await handle.execute_update(
            FOUNDING_ACCEPT_EVENT,
            FoundingAccept(subject_id=principal.subject_id),
            result_type=FoundingAccepted,
        )
        return accepted
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
    # the founding ended between our read and the update: answer from the final rows
    return await _accepted_after_end(request, path.id, principal)


async def _accepted_after_end(
    request: web.Request, team_id: uuid.UUID, principal: Principal
) -> FoundingAccepted:
    team = await _team_row(request, team_id)
    seat = await team_reads.founding_seat(_pool(request), team_id, principal.subject_id)
    if seat is not None and seat.status == "accepted":
        return FoundingAccepted(accepted=True, teamStatus=team.status)
    raise _not_founding(team.status)


def _not_founding(status: str) -> DomainError:
    return TeamNotFounding(f"The team is {status}, no longer founding")


# --- members ------------------------------------------------------------------------------------


@endpoint(
    routes,
    "GET",
    "/teams/{id}/members",
    tag=TAG,
    path_params=TeamPath,
    response=MemberList,
    errors=(NotFound,),
)
async def list_team_members(
    request: web.Request, parsed: Parsed[None, None, TeamPath]
) -> MemberList:
    """The team's members and their roles."""
    path = parsed.path
    await _visible_team(request, path.id)
    return MemberList(items=await _members(request, path.id))


@endpoint(
    routes,
    "PATCH",
    "/teams/{id}/members/{subjectId}",
    tag=TAG,
    path_params=MemberPath,
    body=UpdateMemberRequest,
    response=TeamMember,
    errors=(NotFound, Forbidden, Conflict),
)
async def update_team_member(
    request: web.Request, parsed: Parsed[UpdateMemberRequest, None, MemberPath]
) -> TeamMember:
    """Change a member's role (owners and managers; only owners grant or take `owner`; the last
    owner stays). Code `team-last-owner` (409), `owner-required` (403)."""
    path = parsed.path
    body = parsed.body
    await _require_team(request, path.id, "manage_members")
    change = MemberRoleChange(
        team_id=path.id,
        subject_id=path.subjectId,
        role=body.role,
        may_touch_owners=await allowed(request, "Team", path.id, "manage"),
    )
    workflow_id = team_member_workflow_id(path.id, path.subjectId)
    await _run(request, TeamMemberRoleWorkflow.run, change, path.id, workflow_id)
    for member in await _members(request, path.id):
        if member.subjectId == path.subjectId:
            return member
    raise NotFound("The subject is not a member of this team")


@endpoint(
    routes,
    "DELETE",
    "/teams/{id}/members/{subjectId}",
    tag=TAG,
    path_params=MemberPath,
    response=Deleted,
    errors=(NotFound, Forbidden, Conflict),
)
async def remove_team_member(
    request: web.Request, parsed: Parsed[None, None, MemberPath]
) -> Deleted:
    """Remove a member (owners and managers; only owners remove an owner), or leave the team
    yourself. The member also leaves the team's groups. Never the last owner (409)."""
    path = parsed.path
    principal = require_principal(request)
    leaving = path.subjectId == principal.subject_id
    if leaving:
        await _require_membership(request, path.id)
    else:
        await _require_team(request, path.id, "manage_members")
    remove = MemberRemove(
        team_id=path.id,
        subject_id=path.subjectId,
        may_touch_owners=leaving or await allowed(request, "Team", path.id, "manage"),
    )
    workflow_id = team_member_workflow_id(path.id, path.subjectId)
    await _run(request, TeamMemberRemoveWorkflow.run, remove, path.id, workflow_id)
    return Deleted()


# --- invites ------------------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/teams/{id}/invites",
    tag=TAG,
    status=201,
    path_params=TeamPath,
    body=CreateInviteRequest,
    response=Invite,
    errors=(NotFound, Forbidden, Conflict),
    idempotent=True,
)
async def create_team_invite(
    request: web.Request, parsed: Parsed[CreateInviteRequest, None, TeamPath]
) -> Invite:
    """An invite code (`service_inv_…`) anyone may redeem with `POST /teams/join` until it
    expires or is used `maxUses` times. Not for personal teams (400 team-personal-immutable)."""
    path = parsed.path
    body = parsed.body
    principal = require_principal(request)
    await _require_team(request, path.id, "manage_members")
    invite_id = new_id(request, "team-invite")
    create = InviteCreate(
        invite_id=invite_id,
        team_id=path.id,
        code=INVITE_CODE_PREFIX + secrets.token_urlsafe(limits.TEAM_INVITE_CODE_RANDOM_BYTES),
        role=body.role,
        max_uses=body.maxUses,
        expires_at=datetime.now(UTC) + timedelta(hours=body.expiresInHours),
        created_by=principal.subject_id,
    )
    workflow_id = invite_create_workflow_id(path.id, invite_id)
    return await _run(request, TeamInviteCreateWorkflow.run, create, path.id, workflow_id)


@endpoint(
    routes,
    "GET",
    "/teams/{id}/invites",
    tag=TAG,
    path_params=TeamPath,
    response=InviteList,
    errors=(NotFound, Forbidden),
)
async def list_team_invites(
    request: web.Request, parsed: Parsed[None, None, TeamPath]
) -> InviteList:
    """The team's invites with their codes (owners and managers only: a code admits its holder)."""
    path = parsed.path
    await _require_team(request, path.id, "manage_members")
    return InviteList(items=await team_reads.list_invites(_pool(request), path.id))


@endpoint(
    routes,
    "DELETE",
    "/teams/{id}/invites/{inviteId}",
    tag=TAG,
    path_params=InvitePath,
    response=Deleted,
    errors=(NotFound, Forbidden),
)
async def delete_team_invite(
    request: web.Request, parsed: Parsed[None, None, InvitePath]
) -> Deleted:
    """Revoke an invite; its code stops working at once."""
    path = parsed.path
    await _require_team(request, path.id, "manage_members")
    delete = InviteDelete(team_id=path.id, invite_id=path.inviteId)
    workflow_id = invite_delete_workflow_id(path.id, path.inviteId)
    await _run(request, TeamInviteDeleteWorkflow.run, delete, path.id, workflow_id)
    return Deleted()


@endpoint(
    routes,
    "POST",
    "/teams/join",
    tag=TAG,
    body=JoinRequest,
    response=Joined,
    errors=(NotFound, Conflict, Gone),
    idempotent=True,  # a decision: repeated, the membership it reached answers 200
)
async def join_team(request: web.Request, parsed: Parsed[JoinRequest]) -> Joined:
    """Join a team with an invite code: the invite's role. Expired or used up → 410
    (`invite-expired`, `invite-exhausted`); unknown → 404; already a member → 409."""
    body = parsed.body
    principal = require_principal(request)
    team_id = await team_reads.invite_team(_pool(request), body.code)
    if team_id is None:
        raise NotFound("No such invite")
    join = TeamJoin(
        code=body.code, subject_id=principal.subject_id, subject_ns=principal.subject_ns
    )
    workflow_id = keyed_workflow_id(
        request, "team-join", join_workflow_id(team_id, principal.subject_id)
    )
    return await _run(request, TeamJoinWorkflow.run, join, team_id, workflow_id)


# --- groups -------------------------------------------------------------------------------------


async def _group_row(request: web.Request, group_id: uuid.UUID) -> Group:
    """The group, visible to members of its team only (404 otherwise)."""
    group = await team_reads.get_group(_pool(request), group_id)
    if group is None or not await allowed(request, "Team", group.teamId, "verify_claim"):
        raise NotFound("No such group")
    return group


async def _require_group_manager(request: web.Request, group: Group) -> None:
    if not await allowed(request, "Group", group.id, "manage"):
        raise Forbidden("Managing groups needs an owner or manager of the team")


async def _group_members(request: web.Request, group_id: uuid.UUID) -> list[GroupMember]:
    return await team_reads.group_members(_pool(request), group_id)


@endpoint(
    routes,
    "POST",
    "/teams/{id}/groups",
    tag=TAG,
    status=201,
    path_params=TeamPath,
    body=CreateGroupRequest,
    response=Group,
    errors=(NotFound, Forbidden, Conflict),
    idempotent=True,
)
async def create_group(
    request: web.Request, parsed: Parsed[CreateGroupRequest, None, TeamPath]
) -> Group:
    """A named group of team members (unique name per team; not in personal teams)."""
    path = parsed.path
    body = parsed.body
    await _require_team(request, path.id, "manage_members")
    group_id = new_id(request, "group")
    create = GroupCreate(group_id=group_id, team_id=path.id, name=body.name)
    workflow_id = group_create_workflow_id(path.id, group_id)
    group = await _run(request, GroupCreateWorkflow.run, create, path.id, workflow_id)
    return group.model_copy(update={"members": []})


@endpoint(
    routes,
    "GET",
    "/teams/{id}/groups",
    tag=TAG,
    path_params=TeamPath,
    response=GroupList,
    errors=(NotFound,),
)
async def list_groups(request: web.Request, parsed: Parsed[None, None, TeamPath]) -> GroupList:
    """The team's groups."""
    path = parsed.path
    await _require_membership(request, path.id)
    return GroupList(items=await team_reads.list_groups(_pool(request), path.id))


@endpoint(
    routes,
    "GET",
    "/groups/{id}",
    tag=TAG,
    path_params=GroupPath,
    response=Group,
    errors=(NotFound,),
)
async def get_group(request: web.Request, parsed: Parsed[None, None, GroupPath]) -> Group:
    """A group with its members."""
    path = parsed.path
    group = await _group_row(request, path.id)
    return group.model_copy(update={"members": await _group_members(request, path.id)})


@endpoint(
    routes,
    "DELETE",
    "/groups/{id}",
    tag=TAG,
    path_params=GroupPath,
    response=Deleted,
    errors=(NotFound, Forbidden),
)
async def delete_group(request: web.Request, parsed: Parsed[None, None, GroupPath]) -> Deleted:
    """Delete a group and every grant made to it."""
    path = parsed.path
    group = await _group_row(request, path.id)
    await _require_group_manager(request, group)
    workflow_id = group_delete_workflow_id(group.teamId, path.id)
    await _run(
        request, GroupDeleteWorkflow.run, GroupRef(group_id=path.id), group.teamId, workflow_id
    )
    return Deleted()


@endpoint(
    routes,
    "POST",
    "/groups/{id}/members",
    tag=TAG,
    status=201,
    path_params=GroupPath,
    body=AddGroupMemberRequest,
    response=GroupMember,
    errors=(NotFound, Forbidden, Conflict),
    idempotent=True,
)
async def add_group_member(
    request: web.Request, parsed: Parsed[AddGroupMemberRequest, None, GroupPath]
) -> GroupMember:
    """Add a member of the team to the group (404 `not-a-team-member` otherwise)."""
    path = parsed.path
    body = parsed.body
    group = await _group_row(request, path.id)
    await _require_group_manager(request, group)
    change = GroupMemberChange(
        group_id=path.id, subject_id=body.subjectId, subject_ns=body.subjectNs
    )
    workflow_id = keyed_workflow_id(
        request, "group-member", group_member_workflow_id(group.teamId, path.id, body.subjectId)
    )
    added = await _run(request, GroupMemberAddWorkflow.run, change, group.teamId, workflow_id)
    assert added.subject_ns is not None
    return GroupMember(subjectId=added.subject_id, subjectNs=added.subject_ns)


@endpoint(
    routes,
    "GET",
    "/groups/{id}/members",
    tag=TAG,
    path_params=GroupPath,
    response=GroupMemberList,
    errors=(NotFound,),
)
async def list_group_members(
    request: web.Request, parsed: Parsed[None, None, GroupPath]
) -> GroupMemberList:
    """The group's members."""
    path = parsed.path
    await _group_row(request, path.id)
    return GroupMemberList(items=await _group_members(request, path.id))


@endpoint(
    routes,
    "DELETE",
    "/groups/{id}/members/{subjectId}",
    tag=TAG,
    path_params=GroupMemberPath,
    response=Deleted,
    errors=(NotFound, Forbidden),
)
async def remove_group_member(
    request: web.Request, parsed: Parsed[None, None, GroupMemberPath]
) -> Deleted:
    """Remove a member from the group (managers), or leave it yourself."""
    path = parsed.path
    principal = require_principal(request)
    group = await _group_row(request, path.id)
    if path.subjectId != principal.subject_id:
        await _require_group_manager(request, group)
    remove = GroupMemberRemove(group_id=path.id, subject_id=path.subjectId)
    workflow_id = group_member_workflow_id(group.teamId, path.id, path.subjectId)
    await _run(request, GroupMemberRemoveWorkflow.run, remove, group.teamId, workflow_id)
    return Deleted()


# --- projects -----------------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/teams/{id}/projects",
    tag=TAG,
    status=201,
    path_params=TeamPath,
    body=CreateProjectRequest,
    response=Project,
    errors=(NotFound, Forbidden, Conflict),
    idempotent=True,
)
async def create_project(
    request: web.Request, parsed: Parsed[CreateProjectRequest, None, TeamPath]
) -> Project:
    """A project of the team, which tasks may name as `projectId` (owners and managers)."""
    path = parsed.path
    body = parsed.body
    principal = require_principal(request)
    await _require_team(request, path.id, "write")
    project_id = new_id(request, "project")
    create = ProjectCreate(
        project_id=project_id, team_id=path.id, name=body.name, created_by=principal.subject_id
    )
    workflow_id = project_create_workflow_id(path.id, project_id)
    return await _run(request, ProjectCreateWorkflow.run, create, path.id, workflow_id)


@endpoint(
    routes,
    "GET",
    "/teams/{id}/projects",
    tag=TAG,
    path_params=TeamPath,
    response=ProjectList,
    errors=(NotFound,),
)
async def list_projects(request: web.Request, parsed: Parsed[None, None, TeamPath]) -> ProjectList:
    """The team's projects."""
    path = parsed.path
    await _require_membership(request, path.id)
    return ProjectList(items=await team_reads.list_projects(_pool(request), path.id))
