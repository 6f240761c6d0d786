"""Diary transfer routes (SPEC 3.3; DECISIONS "Names").

- `POST /diaries/{diaryId}/transfers {destinationTeamId}`: an owner of the diary's team (Team
  `manage`) proposes to hand it to another team. A caller who cannot read the diary gets 404, a
  reader who does not own its team 403. The destination must exist (404), be another team, not
  a personal one, and be active (400 with distinct codes); one transfer per diary may be pending
  (409 `diary-transfer-pending`). Answers 201 with the pending transfer once it is stored.
- `POST /diaries/{diaryId}/transfers/{transferId}/accept` and `.../reject`: only an owner of the
  destination team decides (Team `manage` there, else 403; 404 for a caller who can see
  neither the transfer's teams nor the diary). A transfer that is not pending is 409
  `diary-transfer-already-resolved`, answered before anything is written. Answers 200 with the
  resolved transfer; after an accept the diary belongs to the destination team.
- `GET /transfers`: the pending transfers the caller may decide (destination teams it owns);
  `?teamId=` narrows it to the transfers waiting for one team, for any member of that team
  (404 for others), so a member sees what waits even where only an owner decides.
- `GET /diaries/{diaryId}/transfers[/{transferId}]`: a diary's transfer history, and one transfer.

Scopes (the spec is silent): proposing and deciding change who holds a diary, so they need
`diary:share`, the scope of the other operations that change who may use a diary; reads need
`diary:read`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

from aiohttp import web
from temporalio.common import SearchAttributePair
from temporalio.service import RPCError, RPCStatusCode

from api import keys
from api.access import allowed, allowed_ids, can_read, readable_diary, require
from api.auth import require_principal
from api.endpoint import Parsed, endpoint
from api.flows import start_with_update, waiting_on_workflow
from api.idempotency import new_id, run_key
from api.reads import reader
from api.team_access import require_membership
from infra.repos import memory_reads, team_reads
from infra.repos.transfers import (
    check_destination,
    get_transfer,
    pending_transfer_of,
    pending_transfers_to,
    transfers_of_diary,
)
from schemas.errors import (
    DiaryNotFound,
    DiaryTransferAlreadyResolved,
    DiaryTransferNotFound,
    DiaryTransferNotReady,
    DiaryTransferPending,
    DiaryTransferPersonalTeam,
    DiaryTransferSameTeam,
    DiaryTransferStale,
    DiaryTransferTeamNotActive,
    NotDestinationOwner,
    NotTeamOwner,
    PermissionDenied,
    RequestInvalid,
    TeamNotFound,
)
from schemas.transfers import (
    TRANSFER_STORED,
    Decision,
    DiaryTransfersPath,
    Transfer,
    TransferCreateRequest,
    TransferDecision,
    TransferInput,
    TransferList,
    TransferPath,
    TransferRecord,
    WaitingTransfersQuery,
    already_resolved,
)
from workflows.common import DIARY_ID, TEAM_ID
from workflows.transfers import DiaryTransferWorkflow, transfer_workflow_id

routes = web.RouteTableDef()
TAG = "transfers"
CHANGE_SCOPES = ("diary:share",)
READ_SCOPES = ("diary:read",)
DECIDE_ERRORS = (
    DiaryNotFound,
    DiaryTransferNotFound,
    PermissionDenied,
    NotDestinationOwner,
    DiaryTransferAlreadyResolved,
    DiaryTransferNotReady,
    DiaryTransferTeamNotActive,
    DiaryTransferStale,
)


# --- propose -----------------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/diaries/{diaryId}/transfers",
    tag=TAG,
    status=201,
    path_params=DiaryTransfersPath,
    body=TransferCreateRequest,
    response=Transfer,
    scopes=CHANGE_SCOPES,
    errors=(
        DiaryNotFound,
        PermissionDenied,
        NotTeamOwner,
        RequestInvalid,
        DiaryTransferPending,
        DiaryTransferTeamNotActive,
        DiaryTransferStale,
        DiaryTransferSameTeam,
        DiaryTransferPersonalTeam,
    ),
    idempotent=True,
)
async def create_transfer(
    request: web.Request, parsed: Parsed[TransferCreateRequest, None, DiaryTransfersPath]
) -> Transfer:
    """Propose to hand a diary to another team; its owners have 7 days to accept."""
    principal = require_principal(request)
    diary_id = parsed.path.diaryId
    body = parsed.body
    diary = await readable_diary(request, diary_id)
    source_team_id = diary.teamId
    await require(
        request,
        "Team",
        source_team_id,
        "manage",
        denied=NotTeamOwner("Only an owner of the diary's team transfers it"),
    )
    pool = request.app[keys.READ_POOL]
    destination = await team_reads.team_state(pool, body.destinationTeamId)
    check_destination(destination, source_team_id, body.destinationTeamId)
    key = run_key(request, "transfer")
    transfer_id = new_id(key)
    pending = await pending_transfer_of(pool, diary_id)
    if pending is not None and pending.id != transfer_id:  # its own: a keyed retry
        raise DiaryTransferPending("This diary already has a pending transfer")
    record = await start_with_update(
        request,
        DiaryTransferWorkflow.run,
        TransferInput(
            transfer_id=transfer_id,
            diary_id=diary_id,
            source_team_id=source_team_id,
            destination_team_id=body.destinationTeamId,
            initiated_by=principal.subject_id,
        ),
        workflow_id=transfer_workflow_id(transfer_id),
        update=TRANSFER_STORED,
        result_type=TransferRecord,
        key=key,
        on_duplicate=DiaryTransferPending("This transfer is being created"),
        search=[
            SearchAttributePair(DIARY_ID, str(diary_id)),
            SearchAttributePair(TEAM_ID, str(source_team_id)),
        ],
    )
    if record is None:  # a keyed retry after the transfer's run ended: its row answers
        record = await get_transfer(pool, transfer_id)
        assert record is not None
    return _current(record, datetime.now(UTC))


# --- decide -------------------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/diaries/{diaryId}/transfers/{transferId}/accept",
    tag=TAG,
    path_params=TransferPath,
    response=Transfer,
    scopes=CHANGE_SCOPES,
    errors=DECIDE_ERRORS,
    idempotent=True,
)
async def accept_transfer(
    request: web.Request, parsed: Parsed[None, None, TransferPath]
) -> Transfer:
    """Accept a pending transfer: the diary moves to your team (destination owners only)."""
    return await _decide(request, parsed.path, "accepted")


@endpoint(
    routes,
    "POST",
    "/diaries/{diaryId}/transfers/{transferId}/reject",
    tag=TAG,
    path_params=TransferPath,
    response=Transfer,
    scopes=CHANGE_SCOPES,
    errors=DECIDE_ERRORS,
    idempotent=True,
)
async def reject_transfer(
    request: web.Request, parsed: Parsed[None, None, TransferPath]
) -> Transfer:
    """Reject a pending transfer: the diary stays with its team (destination owners only)."""
    return await _decide(request, parsed.path, "rejected")


async def _decide(request: web.Request, path: TransferPath, decision: Decision) -> Transfer:
    """Check the caller and the row (the cheap refusals), then send the decision to the
    transfer's workflow, whose validator answers the races; a finished workflow no longer takes
    decisions, so its row says why. The same decision again answers the transfer it resolved
    (200); only the opposite one, or a decision after expiry, is 409."""
    principal = require_principal(request)
    record = await _visible_transfer(request, path)
    await require(
        request,
        "Team",
        record.destination_team_id,
        "manage",
        denied=NotDestinationOwner("Only an owner of the destination team decides"),
    )
    if record.effective_status(datetime.now(UTC)) == decision:
        return record.view()
    _refuse_unless_pending(record)
    handle = request.app[keys.TEMPORAL].get_workflow_handle_for(
        DiaryTransferWorkflow.run, record.workflow_id
    )
    try:
        async with waiting_on_workflow(request):
            resolved = cast(
                TransferRecord,
                await handle.execute_update(
                    DiaryTransferWorkflow.decide,
                    TransferDecision(decision=decision, decided_by=principal.subject_id),
                ),
            )
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        latest = await get_transfer(request.app[keys.READ_POOL], record.id) or record
        if latest.effective_status(datetime.now(UTC)) == decision:
            return latest.view()
        raise already_resolved(latest.effective_status(datetime.now(UTC))) from None
    return resolved.view()


def _refuse_unless_pending(record: TransferRecord) -> None:
    status = record.effective_status(datetime.now(UTC))
    if status != "pending":
        raise already_resolved(status)


async def _visible_transfer(request: web.Request, path: TransferPath) -> TransferRecord:
    """The transfer, if the caller can know about it: a member of its source or destination
    team, or a reader of the diary. Anyone else gets the 404 of a transfer that is not there."""
    missing = DiaryTransferNotFound("No such transfer")
    record = await get_transfer(reader(request), path.transferId)
    if record is None or record.diary_id != path.diaryId:
        raise missing
    for team_id in (record.destination_team_id, record.source_team_id):
        if await allowed(request, "Team", team_id, "access"):
            return record
    diary = await memory_reads.get_diary(reader(request), record.diary_id)
    if diary is not None and await can_read(request, diary):
        return record
    raise missing


# --- read -----------------------------------------------------------------------------------------


@endpoint(
    routes,
    "GET",
    "/transfers",
    tag=TAG,
    query=WaitingTransfersQuery,
    response=TransferList,
    scopes=READ_SCOPES,
    errors=(TeamNotFound,),
)
async def list_pending_transfers(
    request: web.Request, parsed: Parsed[None, WaitingTransfersQuery]
) -> TransferList:
    """The pending transfers into teams the caller owns (the ones it may decide), or, with
    `teamId`, those waiting for that team (any member of it)."""
    team_id = parsed.query.teamId
    if team_id is None:
        teams = sorted(await allowed_ids(request, "Team", "manage"))
    else:
        await require_membership(request, team_id)
        teams = [team_id]
    records = await pending_transfers_to(reader(request), teams)
    return TransferList(items=[record.view() for record in records])


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}/transfers",
    tag=TAG,
    path_params=DiaryTransfersPath,
    response=TransferList,
    scopes=READ_SCOPES,
    errors=(DiaryNotFound, PermissionDenied),
)
async def list_diary_transfers(
    request: web.Request, parsed: Parsed[None, None, DiaryTransfersPath]
) -> TransferList:
    """A diary's transfers, newest first (members of its team, or its managers)."""
    diary_id = parsed.path.diaryId
    diary = await readable_diary(request, diary_id)
    if not (
        await allowed(request, "Team", diary.teamId, "access")
        or await allowed(request, "Diary", diary_id, "manage")
    ):
        raise PermissionDenied("Only the diary's team sees its transfers")
    now = datetime.now(UTC)
    records = await transfers_of_diary(reader(request), diary_id)
    return TransferList(items=[_current(record, now) for record in records])


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}/transfers/{transferId}",
    tag=TAG,
    path_params=TransferPath,
    response=Transfer,
    scopes=READ_SCOPES,
    errors=(DiaryNotFound, DiaryTransferNotFound),
)
async def get_diary_transfer(
    request: web.Request, parsed: Parsed[None, None, TransferPath]
) -> Transfer:
    """One transfer, for members of its teams and readers of its diary."""
    record = await _visible_transfer(request, parsed.path)
    return _current(record, datetime.now(UTC))


def _current(record: TransferRecord, now: datetime) -> Transfer:
    """The transfer with `expired` shown as soon as its deadline passed."""
    return record.model_copy(update={"status": record.effective_status(now)}).view()
