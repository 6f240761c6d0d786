"""What the team routes share: who the caller is in a team, its members, and how a team write
runs as a workflow (`api/routes/teams.py`, `team_members.py`, `team_invites.py`, `groups.py`,
`projects.py`).

Scopes: none beyond authentication. The spec names no team scope, and a team is governed by
its roles, so the routes gate by permission only (as the reference does in effect). Invariants
that races could break (the last owner, invite use counts, personal teams, founding status) are
re-checked by the activity under a row lock; the checks here only decide 404 versus 403.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
from aiohttp import web
from temporalio.common import SearchAttributePair

from api import keys
from api.access import allowed, require_team_visible
from api.auth import require_principal
from api.flows import execute
from api.idempotency import RunKey
from infra.repos import team_reads
from infra.repos.team_reads import MemberRow, TeamRow
from schemas.errors import (
    PermissionDenied,
    TeamChangeRunning,
    TeamNotFound,
)
from schemas.teams import RELATION_ROLES, TeamMember, TeamRole, strongest
from workflows.common import TEAM_ID

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")
TEAM_BUSY = TeamChangeRunning("The same change to this team is already running")


def read_pool(request: web.Request) -> asyncpg.Pool:
    """The API's read-only pool, where the team reads run."""
    return request.app[keys.READ_POOL]


async def run_team_write(
    request: web.Request,
    run: Callable[[Any, ArgT], Awaitable[ResultT]],
    arg: ArgT,
    team_id: uuid.UUID,
    workflow_id: str,
    key: RunKey | None = None,
) -> ResultT:
    """Run one team write as a workflow (its id from `workflows.teams`), findable by TeamId;
    `key` when the request's Idempotency-Key named it."""
    return await execute(
        request,
        run,
        arg,
        workflow_id=workflow_id,
        on_duplicate=TEAM_BUSY,
        key=key,
        search=[SearchAttributePair(TEAM_ID, str(team_id))],
    )


# --- who the caller is in a team --------------------------------------------------------------


async def team_row(request: web.Request, team_id: uuid.UUID) -> TeamRow:
    """The team's row, or 404 when there is none."""
    row = await team_reads.get_team(read_pool(request), team_id)
    if row is None:
        raise TeamNotFound("No such team")
    return row


async def _role_in(
    request: web.Request, team_id: uuid.UUID, subject_id: uuid.UUID
) -> TeamRole | None:
    relations = await team_reads.subject_relations(read_pool(request), team_id, subject_id)
    return strongest([RELATION_ROLES[relation] for relation in relations])


async def visible_team(request: web.Request, team_id: uuid.UUID) -> tuple[TeamRow, TeamRole]:
    """The team and the caller's role in it; 404 unless the caller holds a role, or holds a
    founding seat of a team that never became active (its role-to-be is shown)."""
    principal = require_principal(request)
    if not principal.acts_in(team_id):
        raise TeamNotFound("No such team")
    team = await team_row(request, team_id)
    role = await _role_in(request, team_id, principal.subject_id)
    if role is None and team.status != "active":
        seat = await team_reads.founding_seat(read_pool(request), team_id, principal.subject_id)
        role = None if seat is None else seat.role
    if role is None:
        raise TeamNotFound("No such team")
    return team, role


async def require_team(request: web.Request, team_id: uuid.UUID, permission: str) -> None:
    """`permission` on the team, else 403 for its members and 404 for everyone else."""
    if await allowed(request, "Team", team_id, permission):
        return
    await require_team_visible(request, team_id)
    raise PermissionDenied(f"Your role in this team does not allow this ({permission})")


async def require_membership(request: web.Request, team_id: uuid.UUID) -> None:
    """Any role in the team, else 404."""
    await require_team_visible(request, team_id)


# --- views --------------------------------------------------------------------------------------


async def members_of(request: web.Request, team_id: uuid.UUID) -> list[TeamMember]:
    """The team's members, each with its strongest role."""
    rows = await team_reads.member_roles(read_pool(request), team_id)
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
