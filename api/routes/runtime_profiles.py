"""Runtime profiles (DECISIONS "Runtime profiles"): a team's named runtime policies that daemons
claim under (`POST /tasks/{id}/claim {runtimeProfileId}`).

Who may do what:
- read (list with the `x-service-team-id` header, get by id): scope `runtime:read`; any member
  of the team, executors included: a daemon reads the profile it runs under, as it reads the
  queue it polls (SPEC 5). Anyone else gets 404 (`team-not-found`, `runtime-profile-not-found`).
- create, update, delete: scope `task:manage`; the team's owners and managers
  (`manage_credentials`), else 403 `runtime-profile-manage-forbidden` for a member and 404 for
  anyone else.

Every change is a workflow (`workflows.runtime_profiles`). An update names nothing but the
change; it applies to the revision read here and makes the next one (a concurrent update of the
same revision is a 409 `runtime-profile-changed` or `runtime-profile-busy`). A name is unique in
its team (409 `runtime-profile-name-taken`). Deleting a profile leaves the attempts claimed
under it as they are; a task still pinned to it can then be claimed by none (cancel it).
"""

from __future__ import annotations

from uuid import UUID

import asyncpg
from aiohttp import web
from temporalio.common import SearchAttributePair

from api import keys
from api.access import allowed, require_team_visible, visible_profile
from api.auth import require_principal
from api.endpoint import Parsed, endpoint
from api.flows import execute
from api.headers import TEAM_HEADER, require_team_header, team_header
from api.idempotency import keyed_workflow_id, run_key
from infra.repos import runtime_profiles as repo
from schemas.errors import (
    FieldError,
    PermissionDenied,
    RequestInvalid,
    RuntimeProfileBusy,
    RuntimeProfileChanged,
    RuntimeProfileLimit,
    RuntimeProfileManageForbidden,
    RuntimeProfileNameTaken,
    RuntimeProfileNotFound,
    TeamMismatch,
    TeamNotFound,
)
from schemas.kernel.cids import json_cid
from schemas.runtime_profiles import (
    CreateRuntimeProfileRequest,
    ProfileCreate,
    ProfileDelete,
    ProfileUpdate,
    RuntimeProfile,
    RuntimeProfileList,
    RuntimeProfilePath,
    UpdateRuntimeProfileRequest,
)
from workflows.common import TEAM_ID
from workflows.runtime_profiles import (
    RuntimeProfileCreateWorkflow,
    RuntimeProfileDeleteWorkflow,
    RuntimeProfileUpdateWorkflow,
    profile_create_workflow_id,
    profile_delete_workflow_id,
    profile_update_workflow_id,
)

routes = web.RouteTableDef()
TAG = "runtime-profiles"
READ = ("runtime:read",)
WRITE = ("task:manage",)
BUSY = RuntimeProfileBusy("This runtime profile is being changed")


def _pool(request: web.Request) -> asyncpg.Pool:
    return request.app[keys.READ_POOL]


def _search(team_id: UUID) -> list[SearchAttributePair[str]]:
    return [SearchAttributePair(TEAM_ID, str(team_id))]


async def _require_manager(request: web.Request, team_id: UUID) -> None:
    if not await allowed(request, "Team", team_id, "manage_credentials"):
        raise RuntimeProfileManageForbidden(
            "Runtime profiles are managed by the team's owners and managers"
        )


async def _loaded(request: web.Request, profile_id: UUID) -> RuntimeProfile:
    profile = await repo.get_profile(_pool(request), profile_id)
    if profile is None:
        raise RuntimeProfileNotFound("No such runtime profile")
    return profile


@endpoint(
    routes,
    "POST",
    "/runtime-profiles",
    tag=TAG,
    status=201,
    body=CreateRuntimeProfileRequest,
    response=RuntimeProfile,
    scopes=WRITE,
    headers=(TEAM_HEADER,),
    errors=(
        RequestInvalid,
        TeamNotFound,
        PermissionDenied,
        RuntimeProfileBusy,
        RuntimeProfileLimit,
        RuntimeProfileNameTaken,
    ),
    idempotent=True,
)
async def create_runtime_profile(
    request: web.Request, parsed: Parsed[CreateRuntimeProfileRequest]
) -> RuntimeProfile:
    """A runtime profile of the team (revision 1): its `policy` narrows the task types a
    daemon claims under it and the scopes of the attempts it claims."""
    body = parsed.body
    principal = require_principal(request)
    header = team_header(request)
    if header is not None and header != body.teamId:
        raise TeamMismatch(
            "The x-service-team-id header names another team than teamId",
            errors=[FieldError(pointer="/teamId", message="differs from x-service-team-id")],
        )
    await require_team_visible(request, body.teamId)
    await _require_manager(request, body.teamId)
    create = ProfileCreate(
        team_id=body.teamId,
        name=body.name,
        policy=body.policy.snapshot(),
        created_by_agent_id=principal.agent_id,
        created_by_human_id=principal.human_id,
    )
    key = run_key(request, "runtime-profile")
    created = await execute(
        request,
        RuntimeProfileCreateWorkflow.run,
        create,
        workflow_id=keyed_workflow_id(
            key,
            profile_create_workflow_id(
                body.teamId, json_cid({**create.model_dump(mode="json"), "profile_id": None})
            ),
        ),
        on_duplicate=BUSY,
        key=key,
        search=_search(body.teamId),
    )
    return await _loaded(request, created.profile_id)


@endpoint(
    routes,
    "GET",
    "/runtime-profiles",
    tag=TAG,
    response=RuntimeProfileList,
    scopes=READ,
    headers=(TEAM_HEADER,),
    errors=(RequestInvalid, TeamNotFound),
)
async def list_runtime_profiles(request: web.Request, parsed: Parsed) -> RuntimeProfileList:
    """The team's runtime profiles (the `x-service-team-id` header names it), oldest first."""
    team_id = require_team_header(request)
    await require_team_visible(request, team_id)
    return RuntimeProfileList(items=await repo.list_profiles(_pool(request), team_id))


@endpoint(
    routes,
    "GET",
    "/runtime-profiles/{id}",
    tag=TAG,
    path_params=RuntimeProfilePath,
    response=RuntimeProfile,
    scopes=READ,
    headers=(TEAM_HEADER,),
    errors=(RuntimeProfileNotFound,),
)
async def get_runtime_profile(
    request: web.Request, parsed: Parsed[None, None, RuntimeProfilePath]
) -> RuntimeProfile:
    """One runtime profile, with its current revision and policy."""
    return await visible_profile(request, parsed.path.id)


@endpoint(
    routes,
    "PATCH",
    "/runtime-profiles/{id}",
    tag=TAG,
    path_params=RuntimeProfilePath,
    body=UpdateRuntimeProfileRequest,
    response=RuntimeProfile,
    scopes=WRITE,
    headers=(TEAM_HEADER,),
    errors=(
        RequestInvalid,
        RuntimeProfileNotFound,
        PermissionDenied,
        RuntimeProfileBusy,
        RuntimeProfileNameTaken,
        RuntimeProfileChanged,
    ),
)
async def update_runtime_profile(
    request: web.Request, parsed: Parsed[UpdateRuntimeProfileRequest, None, RuntimeProfilePath]
) -> RuntimeProfile:
    """Rename the profile or replace its policy; `revision` grows by one. Attempts already
    claimed under it keep the revision and policy hash they were claimed with."""
    body = parsed.body
    profile = await visible_profile(request, parsed.path.id)
    await _require_manager(request, profile.teamId)
    update = ProfileUpdate(
        profile_id=profile.id,
        revision=profile.revision,
        name=body.name,
        policy=None if body.policy is None else body.policy.snapshot(),
    )
    await execute(
        request,
        RuntimeProfileUpdateWorkflow.run,
        update,
        workflow_id=profile_update_workflow_id(profile.id, profile.revision),
        on_duplicate=BUSY,
        search=_search(profile.teamId),
    )
    return await _loaded(request, profile.id)


@endpoint(
    routes,
    "DELETE",
    "/runtime-profiles/{id}",
    tag=TAG,
    status=204,
    path_params=RuntimeProfilePath,
    scopes=WRITE,
    headers=(TEAM_HEADER,),
    errors=(RuntimeProfileNotFound, PermissionDenied, RuntimeProfileBusy),
)
async def delete_runtime_profile(
    request: web.Request, parsed: Parsed[None, None, RuntimeProfilePath]
) -> web.Response:
    """Delete the profile. Attempts claimed under it keep their record; claims naming it are
    refused from now on (`runtime-profile-not-found`)."""
    profile = await visible_profile(request, parsed.path.id)
    await _require_manager(request, profile.teamId)
    await execute(
        request,
        RuntimeProfileDeleteWorkflow.run,
        ProfileDelete(profile_id=profile.id),
        workflow_id=profile_delete_workflow_id(profile.id),
        on_duplicate=BUSY,
        search=_search(profile.teamId),
    )
    return web.Response(status=204)
