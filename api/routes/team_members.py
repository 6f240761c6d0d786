"""Team member routes: list the members, change a role, remove a member or leave (SPEC 4.3).

Who may do what (the permission engine decides; SPEC 5's Team namespace; what every team route
shares is in `api/team_access.py`):

| action | needs (else 403 for members, 404 for others) |
|---|---|
| read the members | any role (founding team: a founding seat) |
| change a role, remove a member | `manage_members`; granting or taking `owner`: `manage` |
| leave a team | being that member |
"""

from __future__ import annotations

from aiohttp import web

from api.access import allowed
from api.auth import require_principal
from api.endpoint import Parsed, endpoint
from api.team_access import (
    members_of,
    require_membership,
    require_team,
    run_team_write,
    visible_team,
)
from schemas.errors import (
    NotATeamMember,
    OwnerRequired,
    PermissionDenied,
    TeamChangeRunning,
    TeamLastOwner,
    TeamNotActive,
    TeamNotFound,
)
from schemas.teams import (
    Deleted,
    MemberList,
    MemberPath,
    MemberRemove,
    MemberRoleChange,
    TeamMember,
    TeamPath,
    UpdateMemberRequest,
)
from workflows.teams import (
    TeamMemberRemoveWorkflow,
    TeamMemberRoleWorkflow,
    team_member_workflow_id,
)

routes = web.RouteTableDef()
TAG = "teams"


@endpoint(
    routes,
    "GET",
    "/teams/{id}/members",
    tag=TAG,
    path_params=TeamPath,
    response=MemberList,
    errors=(TeamNotFound,),
)
async def list_team_members(
    request: web.Request, parsed: Parsed[None, None, TeamPath]
) -> MemberList:
    """The team's members and their roles."""
    path = parsed.path
    await visible_team(request, path.id)
    return MemberList(items=await members_of(request, path.id))


@endpoint(
    routes,
    "PATCH",
    "/teams/{id}/members/{subjectId}",
    tag=TAG,
    path_params=MemberPath,
    body=UpdateMemberRequest,
    response=TeamMember,
    errors=(
        TeamNotFound,
        NotATeamMember,
        PermissionDenied,
        OwnerRequired,
        TeamChangeRunning,
        TeamNotActive,
        TeamLastOwner,
    ),
)
async def update_team_member(
    request: web.Request, parsed: Parsed[UpdateMemberRequest, None, MemberPath]
) -> TeamMember:
    """Change a member's role (owners and managers; only owners grant or take `owner`; the last
    owner stays). Code `team-last-owner` (409), `owner-required` (403)."""
    path = parsed.path
    body = parsed.body
    await require_team(request, path.id, "manage_members")
    change = MemberRoleChange(
        team_id=path.id,
        subject_id=path.subjectId,
        role=body.role,
        may_touch_owners=await allowed(request, "Team", path.id, "manage"),
    )
    workflow_id = team_member_workflow_id(path.id, path.subjectId)
    await run_team_write(request, TeamMemberRoleWorkflow.run, change, path.id, workflow_id)
    for member in await members_of(request, path.id):
        if member.subjectId == path.subjectId:
            return member
    raise NotATeamMember("The subject is not a member of this team")


@endpoint(
    routes,
    "DELETE",
    "/teams/{id}/members/{subjectId}",
    tag=TAG,
    path_params=MemberPath,
    response=Deleted,
    errors=(
        TeamNotFound,
        NotATeamMember,
        PermissionDenied,
        OwnerRequired,
        TeamChangeRunning,
        TeamNotActive,
        TeamLastOwner,
    ),
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
        await require_membership(request, path.id)
    else:
        await require_team(request, path.id, "manage_members")
    remove = MemberRemove(
        team_id=path.id,
        subject_id=path.subjectId,
        may_touch_owners=leaving or await allowed(request, "Team", path.id, "manage"),
    )
    workflow_id = team_member_workflow_id(path.id, path.subjectId)
    await run_team_write(request, TeamMemberRemoveWorkflow.run, remove, path.id, workflow_id)
    return Deleted()
