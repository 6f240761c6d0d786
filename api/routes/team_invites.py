"""Team invite routes: create, list and revoke invites, and join a team with a code (SPEC 4.3).

Who may do what (the permission engine decides; SPEC 5's Team namespace; what every team route
shares is in `api/team_access.py`):

| action | needs (else 403 for members, 404 for others) |
|---|---|
| invites: create, list, delete | `manage_members` (owners, managers) |
| join with a code | a live invite code (unknown: 404; expired or used up: 410) |
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

from aiohttp import web

from api.auth import require_principal
from api.endpoint import Parsed, endpoint
from api.idempotency import keyed_workflow_id, new_id, run_key
from api.team_access import read_pool, require_team, run_team_write
from infra.repos import team_reads
from schemas import limits
from schemas.errors import (
    AlreadyMember,
    InviteExhausted,
    InviteExpired,
    InviteNotFound,
    PermissionDenied,
    TeamChangeRunning,
    TeamNotActive,
    TeamNotFound,
)
from schemas.teams import (
    INVITE_CODE_PREFIX,
    CreateInviteRequest,
    Deleted,
    Invite,
    InviteCreate,
    InviteDelete,
    InviteList,
    InvitePath,
    Joined,
    JoinRequest,
    TeamJoin,
    TeamPath,
)
from workflows.teams import (
    TeamInviteCreateWorkflow,
    TeamInviteDeleteWorkflow,
    TeamJoinWorkflow,
    invite_create_workflow_id,
    invite_delete_workflow_id,
    join_workflow_id,
)

routes = web.RouteTableDef()
TAG = "teams"


@endpoint(
    routes,
    "POST",
    "/teams/{id}/invites",
    tag=TAG,
    status=201,
    path_params=TeamPath,
    body=CreateInviteRequest,
    response=Invite,
    errors=(TeamNotFound, PermissionDenied, TeamChangeRunning, TeamNotActive),
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
    await require_team(request, path.id, "manage_members")
    key = run_key(request, "team-invite")
    invite_id = new_id(key)
    create = InviteCreate(
        invite_id=invite_id,
        team_id=path.id,
        code=INVITE_CODE_PREFIX + secrets.token_urlsafe(limits.TEAM_INVITE_CODE_RANDOM_BYTES),
        role=body.role,
        max_uses=body.maxUses,
        expires_at=datetime.now(UTC) + timedelta(hours=body.expiresInHours),
        created_by=principal.subject_id,
    )
    workflow_id = invite_create_workflow_id(invite_id)
    return await run_team_write(
        request, TeamInviteCreateWorkflow.run, create, path.id, workflow_id, key
    )


@endpoint(
    routes,
    "GET",
    "/teams/{id}/invites",
    tag=TAG,
    path_params=TeamPath,
    response=InviteList,
    errors=(TeamNotFound, PermissionDenied),
)
async def list_team_invites(
    request: web.Request, parsed: Parsed[None, None, TeamPath]
) -> InviteList:
    """The team's invites with their codes (owners and managers only: a code admits its holder)."""
    path = parsed.path
    await require_team(request, path.id, "manage_members")
    return InviteList(items=await team_reads.list_invites(read_pool(request), path.id))


@endpoint(
    routes,
    "DELETE",
    "/teams/{id}/invites/{inviteId}",
    tag=TAG,
    path_params=InvitePath,
    response=Deleted,
    errors=(TeamNotFound, InviteNotFound, PermissionDenied, TeamChangeRunning),
)
async def delete_team_invite(
    request: web.Request, parsed: Parsed[None, None, InvitePath]
) -> Deleted:
    """Revoke an invite; its code stops working at once."""
    path = parsed.path
    await require_team(request, path.id, "manage_members")
    delete = InviteDelete(team_id=path.id, invite_id=path.inviteId)
    workflow_id = invite_delete_workflow_id(path.id, path.inviteId)
    await run_team_write(request, TeamInviteDeleteWorkflow.run, delete, path.id, workflow_id)
    return Deleted()


@endpoint(
    routes,
    "POST",
    "/teams/join",
    tag=TAG,
    body=JoinRequest,
    response=Joined,
    errors=(
        InviteNotFound,
        AlreadyMember,
        TeamChangeRunning,
        TeamNotActive,
        InviteExpired,
        InviteExhausted,
    ),
    idempotent=True,  # a decision: repeated, the membership it reached answers 200
)
async def join_team(request: web.Request, parsed: Parsed[JoinRequest]) -> Joined:
    """Join a team with an invite code: the invite's role. Expired or used up → 410
    (`invite-expired`, `invite-exhausted`); unknown → 404; already a member → 409."""
    body = parsed.body
    principal = require_principal(request)
    team_id = await team_reads.invite_team(read_pool(request), body.code)
    if team_id is None:
        raise InviteNotFound("No such invite")
    join = TeamJoin(
        code=body.code, subject_id=principal.subject_id, subject_ns=principal.subject_ns
    )
    key = run_key(request, "team-join")
    workflow_id = keyed_workflow_id(key, join_workflow_id(team_id, principal.subject_id))
    return await run_team_write(request, TeamJoinWorkflow.run, join, team_id, workflow_id, key)
