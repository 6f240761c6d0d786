"""Team routes: teams and founding (SPEC 4.3, 3.2).

Who may do what (the permission engine decides; SPEC 5's Team namespace; what every team route
shares is in `api/team_access.py`):

| action | needs (else 403 for members, 404 for others) |
|---|---|
| read a team | any role (founding team: a founding seat) |
| delete a team | `manage` (owners) |
| accept founding | a founding seat |
"""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web
from temporalio.common import SearchAttributePair
from temporalio.service import RPCError, RPCStatusCode

from api import keys
from api.auth import require_principal
from api.endpoint import Parsed, endpoint, render
from api.flows import start_with_update, waiting_on_workflow
from api.idempotency import RunKey, new_id, run_key
from api.team_access import (
    TEAM_BUSY,
    members_of,
    read_pool,
    require_team,
    run_team_write,
    team_row,
    visible_team,
)
from infra.repos import team_reads
from infra.repos.team_reads import MembershipRow, TeamRow
from schemas.errors import (
    CreatorListedAsFounder,
    DomainError,
    FieldError,
    PermissionDenied,
    TeamChangeRunning,
    TeamHasDiaries,
    TeamInUse,
    TeamNotActive,
    TeamNotFound,
    TeamNotFounding,
    UnknownSubject,
)
from schemas.principals import Principal
from schemas.teams import (
    FOUNDING_ACCEPT_EVENT,
    FOUNDING_SEEDED,
    RELATION_ROLES,
    CreateTeamRequest,
    Deleted,
    FoundingAccept,
    FoundingAcceptanceView,
    FoundingAccepted,
    FoundingState,
    Seat,
    Team,
    TeamCreate,
    TeamList,
    TeamPath,
    TeamRef,
    TeamRole,
    TeamSummary,
    strongest,
)
from workflows.common import TEAM_ID
from workflows.teams import (
    TeamCreateWorkflow,
    TeamDeleteWorkflow,
    TeamFoundingWorkflow,
    team_create_workflow_id,
    team_delete_workflow_id,
    team_founding_workflow_id,
)

routes = web.RouteTableDef()
TAG = "teams"


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
        for seat in await team_reads.founding_seats(read_pool(request), team_id)
    ]


# --- teams --------------------------------------------------------------------------------------


@endpoint(routes, "GET", "/teams", tag=TAG, response=TeamList)
async def list_teams(request: web.Request, parsed: Parsed) -> TeamList:
    """Teams the caller belongs to, and teams it was asked to found (status founding/archived,
    with the caller's own `foundingAcceptance`)."""
    principal = require_principal(request)
    rows = await team_reads.memberships(
        read_pool(request), principal.subject_ns, principal.subject_id, principal.confined_team_id
    )
    roles: dict[uuid.UUID, list[TeamRole]] = {}
    seats: dict[uuid.UUID, MembershipRow] = {}
    teams: dict[uuid.UUID, MembershipRow] = {}
    for row in rows:
        teams.setdefault(row.id, row)
        if row.relation is not None:
            roles.setdefault(row.id, []).append(RELATION_ROLES[row.relation])
        elif row.founding_role is not None:
            seats[row.id] = row
    items = []
    for team_id, row in teams.items():
        seat = seats.get(team_id)
        role = strongest(roles.get(team_id, [])) or (seat.founding_role if seat else None)
        assert role is not None
        items.append(
            TeamSummary(
                id=team_id,
                name=row.name,
                personal=row.personal,
                status=row.status,
                role=role,
                foundingAcceptance=seat.founding_status if seat else None,
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
    errors=(TeamChangeRunning, CreatorListedAsFounder, UnknownSubject),
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
    key = run_key(request, "team")
    team_id = new_id(key)
    creator = Seat(subject_id=principal.subject_id, subject_ns=principal.subject_ns, role="owner")
    founders = body.foundingMembers or []
    for index, member in enumerate(founders):
        if member.subjectId == principal.subject_id:
            raise CreatorListedAsFounder(
                "The creator is a founding owner already; do not list yourself",
                errors=[
                    FieldError(pointer=f"/foundingMembers/{index}/subjectId", message="Is you")
                ],
            )
    if not founders:
        create = TeamCreate(team_id=team_id, name=body.name, creator=creator)
        await run_team_write(
            request, TeamCreateWorkflow.run, create, team_id, team_create_workflow_id(team_id), key
        )
        team = _team_view(await team_row(request, team_id), "owner")
        return render(team, 201)
    seats = [creator] + [
        Seat(subject_id=m.subjectId, subject_ns=m.subjectNs, role=m.role) for m in founders
    ]
    await _start_founding(request, key, team_id, body.name, creator, seats)
    team = _team_view(
        await team_row(request, team_id),
        "owner",
        foundingAcceptances=await _acceptances(request, team_id),
    )
    return render(team, 202)


async def _start_founding(
    request: web.Request,
    key: RunKey | None,
    team_id: uuid.UUID,
    name: str,
    creator: Seat,
    seats: list[Seat],
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
        on_duplicate=TEAM_BUSY,
        search=[SearchAttributePair(TEAM_ID, str(team_id))],
        key=key,
    )


@endpoint(
    routes,
    "GET",
    "/teams/{id}",
    tag=TAG,
    path_params=TeamPath,
    response=Team,
    errors=(TeamNotFound,),
)
async def get_team(request: web.Request, parsed: Parsed[None, None, TeamPath]) -> Team:
    """A team with its members (and, before it is active, its founding acceptances)."""
    path = parsed.path
    team, role = await visible_team(request, path.id)
    acceptances = None if team.status == "active" else await _acceptances(request, path.id)
    return _team_view(
        team, role, members=await members_of(request, path.id), foundingAcceptances=acceptances
    )


@endpoint(
    routes,
    "DELETE",
    "/teams/{id}",
    tag=TAG,
    path_params=TeamPath,
    response=Deleted,
    errors=(
        TeamNotFound,
        PermissionDenied,
        TeamChangeRunning,
        TeamNotActive,
        TeamHasDiaries,
        TeamInUse,
    ),
)
async def delete_team(request: web.Request, parsed: Parsed[None, None, TeamPath]) -> Deleted:
    """Delete a team (owners only). Personal teams stay; a team that owns diaries is a 409."""
    path = parsed.path
    await require_team(request, path.id, "manage")
    workflow_id = team_delete_workflow_id(path.id)
    await run_team_write(
        request, TeamDeleteWorkflow.run, TeamRef(team_id=path.id), path.id, workflow_id
    )
    return Deleted()


@endpoint(
    routes,
    "POST",
    "/teams/{id}/accept-founding",
    tag=TAG,
    path_params=TeamPath,
    response=FoundingAccepted,
    errors=(TeamNotFound, TeamNotFounding),
    idempotent=True,  # a decision: repeated, it answers the acceptance already recorded
)
async def accept_founding(
    request: web.Request, parsed: Parsed[None, None, TeamPath]
) -> FoundingAccepted:
    """Record the caller's acceptance of a founding team (idempotent). The last acceptance
    answers with the team already `active`."""
    path = parsed.path
    principal = require_principal(request)
    team = await team_row(request, path.id)
    seat = await team_reads.founding_seat(read_pool(request), path.id, principal.subject_id)
    if seat is None:
        raise TeamNotFound("No such team")
    if seat.status == "accepted":
        return FoundingAccepted(accepted=True, teamStatus=team.status)
    if team.status != "founding" or team.workflow_id is None:
        raise _not_founding(team.status)
    handle = request.app[keys.TEMPORAL].get_workflow_handle(team.workflow_id)
    try:
        async with waiting_on_workflow(request):
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
    team = await team_row(request, team_id)
    seat = await team_reads.founding_seat(read_pool(request), team_id, principal.subject_id)
    if seat is not None and seat.status == "accepted":
        return FoundingAccepted(accepted=True, teamStatus=team.status)
    raise _not_founding(team.status)


def _not_founding(status: str) -> DomainError:
    return TeamNotFounding(f"The team is {status}, no longer founding")
