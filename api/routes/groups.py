"""Group routes: a team's groups and their members (SPEC 4.3).

Who may do what (the permission engine decides; SPEC 5's Team and Group namespaces; what every
team route shares is in `api/team_access.py`):

| action | needs (else 403 for members, 404 for others) |
|---|---|
| read groups and their members | any role in the team |
| groups: create, delete, members | `manage_members` (Group `manage`) |
| leave a group | being that member |
"""

from __future__ import annotations

import uuid

from aiohttp import web

from api.access import allowed, is_team_member
from api.auth import require_principal
from api.endpoint import Parsed, endpoint
from api.idempotency import keyed_workflow_id, new_id, run_key
from api.team_access import read_pool, require_membership, require_team, run_team_write
from infra.repos import team_reads
from schemas.errors import (
    GroupExists,
    GroupMemberExists,
    GroupNotFound,
    NotAGroupMember,
    NotATeamMember,
    PermissionDenied,
    TeamChangeRunning,
    TeamNotActive,
    TeamNotFound,
)
from schemas.teams import (
    AddGroupMemberRequest,
    CreateGroupRequest,
    Deleted,
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
    TeamPath,
)
from workflows.teams import (
    GroupCreateWorkflow,
    GroupDeleteWorkflow,
    GroupMemberAddWorkflow,
    GroupMemberRemoveWorkflow,
    group_create_workflow_id,
    group_delete_workflow_id,
    group_member_workflow_id,
)

routes = web.RouteTableDef()
TAG = "teams"


async def _group_row(request: web.Request, group_id: uuid.UUID) -> Group:
    """The group, visible to members of its team only (404 otherwise)."""
    group = await team_reads.get_group(read_pool(request), group_id)
    if group is None or not await is_team_member(request, group.teamId):
        raise GroupNotFound("No such group")
    return group


async def _require_group_manager(request: web.Request, group: Group) -> None:
    if not await allowed(request, "Group", group.id, "manage"):
        raise PermissionDenied("Managing groups needs an owner or manager of the team")


async def _group_members(request: web.Request, group_id: uuid.UUID) -> list[GroupMember]:
    return await team_reads.group_members(read_pool(request), group_id)


@endpoint(
    routes,
    "POST",
    "/teams/{id}/groups",
    tag=TAG,
    status=201,
    path_params=TeamPath,
    body=CreateGroupRequest,
    response=Group,
    errors=(TeamNotFound, PermissionDenied, TeamChangeRunning, TeamNotActive, GroupExists),
    idempotent=True,
)
async def create_group(
    request: web.Request, parsed: Parsed[CreateGroupRequest, None, TeamPath]
) -> Group:
    """A named group of team members (unique name per team; not in personal teams)."""
    path = parsed.path
    body = parsed.body
    await require_team(request, path.id, "manage_members")
    key = run_key(request, "group")
    group_id = new_id(key)
    create = GroupCreate(group_id=group_id, team_id=path.id, name=body.name)
    workflow_id = group_create_workflow_id(group_id)
    group = await run_team_write(
        request, GroupCreateWorkflow.run, create, path.id, workflow_id, key
    )
    return group.model_copy(update={"members": []})


@endpoint(
    routes,
    "GET",
    "/teams/{id}/groups",
    tag=TAG,
    path_params=TeamPath,
    response=GroupList,
    errors=(TeamNotFound,),
)
async def list_groups(request: web.Request, parsed: Parsed[None, None, TeamPath]) -> GroupList:
    """The team's groups."""
    path = parsed.path
    await require_membership(request, path.id)
    return GroupList(items=await team_reads.list_groups(read_pool(request), path.id))


@endpoint(
    routes,
    "GET",
    "/groups/{id}",
    tag=TAG,
    path_params=GroupPath,
    response=Group,
    errors=(GroupNotFound,),
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
    errors=(GroupNotFound, PermissionDenied, TeamChangeRunning),
)
async def delete_group(request: web.Request, parsed: Parsed[None, None, GroupPath]) -> Deleted:
    """Delete a group and every grant made to it."""
    path = parsed.path
    group = await _group_row(request, path.id)
    await _require_group_manager(request, group)
    workflow_id = group_delete_workflow_id(group.teamId, path.id)
    await run_team_write(
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
    errors=(
        GroupNotFound,
        PermissionDenied,
        NotATeamMember,
        TeamChangeRunning,
        TeamNotActive,
        GroupMemberExists,
    ),
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
    key = run_key(request, "group-member")
    workflow_id = keyed_workflow_id(
        key, group_member_workflow_id(group.teamId, path.id, body.subjectId)
    )
    added = await run_team_write(
        request, GroupMemberAddWorkflow.run, change, group.teamId, workflow_id, key
    )
    assert added.subject_ns is not None
    return GroupMember(subjectId=added.subject_id, subjectNs=added.subject_ns)


@endpoint(
    routes,
    "GET",
    "/groups/{id}/members",
    tag=TAG,
    path_params=GroupPath,
    response=GroupMemberList,
    errors=(GroupNotFound,),
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
    errors=(GroupNotFound, NotAGroupMember, PermissionDenied),
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
    await run_team_write(request, GroupMemberRemoveWorkflow.run, remove, group.teamId, workflow_id)
    return Deleted()
