"""Project routes: a team's projects, which tasks may name (SPEC 4.3).

Who may do what (the permission engine decides; SPEC 5's Team namespace; what every team route
shares is in `api/team_access.py`):

| action | needs (else 403 for members, 404 for others) |
|---|---|
| read projects | any role |
| projects: create | `write` (owners, managers) |
"""

from __future__ import annotations

from aiohttp import web

from api.auth import require_principal
from api.endpoint import Parsed, endpoint
from api.idempotency import new_id, run_key
from api.team_access import read_pool, require_membership, require_team, run_team_write
from infra.repos import team_reads
from schemas.errors import (
    PermissionDenied,
    ProjectExists,
    TeamChangeRunning,
    TeamNotActive,
    TeamNotFound,
)
from schemas.teams import CreateProjectRequest, Project, ProjectCreate, ProjectList, TeamPath
from workflows.teams import ProjectCreateWorkflow, project_create_workflow_id

routes = web.RouteTableDef()
TAG = "teams"


@endpoint(
    routes,
    "POST",
    "/teams/{id}/projects",
    tag=TAG,
    status=201,
    path_params=TeamPath,
    body=CreateProjectRequest,
    response=Project,
    errors=(TeamNotFound, PermissionDenied, TeamChangeRunning, TeamNotActive, ProjectExists),
    idempotent=True,
)
async def create_project(
    request: web.Request, parsed: Parsed[CreateProjectRequest, None, TeamPath]
) -> Project:
    """A project of the team, which tasks may name as `projectId` (owners and managers)."""
    path = parsed.path
    body = parsed.body
    principal = require_principal(request)
    await require_team(request, path.id, "write")
    key = run_key(request, "project")
    project_id = new_id(key)
    create = ProjectCreate(
        project_id=project_id, team_id=path.id, name=body.name, created_by=principal.subject_id
    )
    workflow_id = project_create_workflow_id(project_id)
    return await run_team_write(
        request, ProjectCreateWorkflow.run, create, path.id, workflow_id, key
    )


@endpoint(
    routes,
    "GET",
    "/teams/{id}/projects",
    tag=TAG,
    path_params=TeamPath,
    response=ProjectList,
    errors=(TeamNotFound,),
)
async def list_projects(request: web.Request, parsed: Parsed[None, None, TeamPath]) -> ProjectList:
    """The team's projects."""
    path = parsed.path
    await require_membership(request, path.id)
    return ProjectList(items=await team_reads.list_projects(read_pool(request), path.id))
