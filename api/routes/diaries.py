"""Diary routes: create (in the team of `x-service-team-id`), list, get, update, delete, and
grants; the tag histogram; signed-entry verification; export and import as a CAR file
(`schemas.kernel.diary_car` defines the format).

Reading a diary follows its visibility (SPEC 5): `public` needs no credential, `moltnet` any
authenticated principal (401 otherwise), `private` the Diary `read` permission, and a denial is
404 so that private diaries cannot be discovered. Changing one needs `write` or `manage`; a
caller who can read but not change it gets 403.
"""

from __future__ import annotations

import asyncio
import io
from typing import get_args
from uuid import UUID

import asyncpg
from aiohttp import web
from temporalio.common import SearchAttributePair

from api import keys
from api.access import (
    allowed_ids,
    changeable_diary,
    diary_access,
    load_diary,
    readable_diary,
    require,
    require_team_visible,
)
from api.auth import optional_principal, require_principal
from api.endpoint import Parsed, endpoint
from api.flows import execute
from api.headers import require_team_header, team_header
from api.idempotency import keyed_workflow_id, new_id, run_key
from api.reads import reader
from infra.repos import memory_reads, team_reads
from schemas import limits
from schemas.diary_archive import (
    DiaryImportInput,
    DiaryImportQuery,
    peer_import_diary_id,
    staged_archive_key,
)
from schemas.errors import (
    ArchiveInvalid,
    ArchiveNotStaged,
    AuthenticationRequired,
    DiaryHasSignedEntries,
    DiaryInUse,
    DiaryNotFound,
    EntryNotFound,
    GrantInProgress,
    ImportInvalid,
    InvalidTeamHeader,
    OperationRunning,
    PayloadTooLarge,
    PermissionDenied,
    SubjectNotFound,
    TeamNotActive,
    TeamNotFound,
    TeamRequired,
    UnsupportedMediaType,
)
from schemas.hygiene import HygieneReport
from schemas.identity import Done
from schemas.imports.formats import IMPORT_MEDIA_TYPES, family, read_peer_file
from schemas.imports.peer import RecordRejected, refusal
from schemas.kernel.cids import bytes_cid, entry_cid
from schemas.kernel.crypto import parse_public_key, signing_payload, verify_signature
from schemas.kernel.diary_car import CAR_MEDIA_TYPE, ArchiveRejected, encode_archive, read_archive
from schemas.memory import (
    Diary,
    DiaryChange,
    DiaryCreateInput,
    DiaryCreateRequest,
    DiaryEntryPath,
    DiaryList,
    DiaryPath,
    DiaryRef,
    DiaryUpdateInput,
    DiaryUpdateRequest,
    Entry,
    EntryVerification,
    Grant,
    GrantChange,
    GrantList,
    GrantPath,
    GrantRequest,
    ImportFormat,
    PeerFormat,
    TagHistogram,
    TagQuery,
)
from workflows.common import DIARY_ID, TEAM_ID
from workflows.diaries import (
    DiaryCreateWorkflow,
    DiaryDeleteWorkflow,
    DiaryGrantRevokeWorkflow,
    DiaryGrantWriteWorkflow,
    DiaryUpdateWorkflow,
    diary_create_workflow_id,
    diary_delete_workflow_id,
    diary_grant_workflow_id,
    diary_update_workflow_id,
)
from workflows.diary_archive import DiaryImportWorkflow, diary_import_workflow_id

routes = web.RouteTableDef()
TAG = "diaries"


# --- diaries ----------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/diaries",
    tag=TAG,
    memory="create_memory_store",
    status=201,
    body=DiaryCreateRequest,
    response=Diary,
    scopes=("diary:write",),
    headers=("x-service-team-id",),
    errors=(TeamRequired, TeamNotFound, PermissionDenied, TeamNotActive, OperationRunning),
    idempotent=True,
)
async def create_diary(request: web.Request, parsed: Parsed[DiaryCreateRequest]) -> Diary:
    """Create a diary owned by the team of `x-service-team-id` (needs Team `write`)."""
    body = parsed.body
    principal = require_principal(request)
    team_id = await _team_for_new_diary(request)
    key = run_key(request, "diary")
    diary_id = new_id(key)
    await execute(
        request,
        DiaryCreateWorkflow.run,
        DiaryCreateInput(
            diary_id=diary_id,
            team_id=team_id,
            name=body.name,
            visibility=body.visibility,
            signed=body.signed,
            created_by=principal.subject_id,
            created_by_ns=principal.subject_ns,
        ),
        workflow_id=diary_create_workflow_id(diary_id),
        on_duplicate=OperationRunning("This diary is being created"),
        key=key,
        search=_diary_search(diary_id, team_id),
        team=team_id,
    )
    return await load_diary(request, diary_id)


async def _team_for_new_diary(request: web.Request) -> UUID:
    """The team of `x-service-team-id`, if the caller may create diaries in it: a member (else
    404 `team-not-found`) with Team `write` (else 403), the team active (else 409)."""
    team_id = require_team_header(request)
    team = await team_reads.team_state(request.app[keys.READ_POOL], team_id)
    await require_team_visible(request, team_id, "access")
    if team is None:
        raise TeamNotFound("No such team")
    await require(request, "Team", team_id, "write")
    if team.status != "active":
        raise TeamNotActive("The team is not active")
    return team_id


def _diary_search(diary_id: UUID, team_id: UUID) -> list[SearchAttributePair[str]]:
    return [
        SearchAttributePair(DIARY_ID, str(diary_id)),
        SearchAttributePair(TEAM_ID, str(team_id)),
    ]


@endpoint(
    routes,
    "GET",
    "/diaries",
    tag=TAG,
    response=DiaryList,
    scopes=("diary:read",),
    headers=("x-service-team-id",),
)
async def list_diaries(request: web.Request, parsed: Parsed) -> DiaryList:
    """The diaries the caller can read through its teams and grants (one team with the header)."""
    ids = await allowed_ids(request, "Diary", "read")
    diaries = await memory_reads.list_diaries(reader(request), sorted(ids), team_header(request))
    return DiaryList(items=diaries)


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}",
    tag=TAG,
    path_params=DiaryPath,
    response=Diary,
    auth="optional",
    scopes=("diary:read",),
    errors=(DiaryNotFound, AuthenticationRequired),
)
async def get_diary(request: web.Request, parsed: Parsed[None, None, DiaryPath]) -> Diary:
    """One diary, by its visibility rule, with the changes the caller may make."""
    changes: tuple[DiaryChange, ...] = get_args(DiaryChange)
    diary, granted = await diary_access(request, parsed.path.diaryId, changes)
    if optional_principal(request) is None:
        return diary
    may = [change for change in changes if change in granted]
    return diary.model_copy(update={"yourPermissions": may})


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}/hygiene",
    tag=TAG,
    path_params=DiaryPath,
    response=HygieneReport,
    scopes=("diary:read",),
    errors=(DiaryNotFound,),
)
async def diary_hygiene(
    request: web.Request, parsed: Parsed[None, None, DiaryPath]
) -> HygieneReport:
    """How clean the diary is: its entries, the exact duplicates refused, the consolidation
    proposals awaiting a decision, the entries superseded or injection-flagged, and those no
    search or pack returned in the last 30 days."""
    diary = await readable_diary(request, parsed.path.diaryId)
    return await memory_reads.hygiene(reader(request), diary.id)


@endpoint(
    routes,
    "PATCH",
    "/diaries/{diaryId}",
    tag=TAG,
    path_params=DiaryPath,
    body=DiaryUpdateRequest,
    response=Diary,
    scopes=("diary:write",),
    errors=(DiaryNotFound, PermissionDenied),
)
async def update_diary(
    request: web.Request, parsed: Parsed[DiaryUpdateRequest, None, DiaryPath]
) -> Diary:
    """Rename a diary or change its visibility (needs Diary `manage`)."""
    diary_id = parsed.path.diaryId
    await changeable_diary(request, diary_id, "manage")
    body = parsed.body
    await execute(
        request,
        DiaryUpdateWorkflow.run,
        DiaryUpdateInput(diary_id=diary_id, name=body.name, visibility=body.visibility),
        workflow_id=diary_update_workflow_id(diary_id),
        on_duplicate=OperationRunning("This diary is being updated"),
    )
    return await load_diary(request, diary_id)


@endpoint(
    routes,
    "DELETE",
    "/diaries/{diaryId}",
    tag=TAG,
    memory="delete_memory_store",
    path_params=DiaryPath,
    response=Done,
    scopes=("diary:delete",),
    errors=(
        DiaryNotFound,
        PermissionDenied,
        OperationRunning,
        DiaryHasSignedEntries,
        DiaryInUse,
    ),
)
async def delete_diary(request: web.Request, parsed: Parsed[None, None, DiaryPath]) -> Done:
    """Delete a diary, its entries and every permission tuple naming them (needs `manage`);
    a diary holding signed entries is permanent (409), one an unfinished task names or a pending
    transfer moves is in use (409 `diary-in-use` with the referencing kind and count)."""
    diary_id = parsed.path.diaryId
    await changeable_diary(request, diary_id, "manage")
    await execute(
        request,
        DiaryDeleteWorkflow.run,
        DiaryRef(diary_id=diary_id),
        workflow_id=diary_delete_workflow_id(diary_id),
        on_duplicate=OperationRunning("This diary is being deleted"),
    )
    return Done()


# --- grants -----------------------------------------------------------------------------


def _grant_change(diary_id: UUID, body: GrantRequest) -> GrantChange:
    return GrantChange(
        diary_id=diary_id, subject_id=body.subjectId, subject_ns=body.subjectNs, role=body.role
    )


@endpoint(
    routes,
    "POST",
    "/diaries/{diaryId}/grants",
    tag=TAG,
    status=201,
    path_params=GrantPath,
    body=GrantRequest,
    response=Grant,
    scopes=("diary:share",),
    errors=(DiaryNotFound, PermissionDenied),
    idempotent=True,
)
async def create_grant(
    request: web.Request, parsed: Parsed[GrantRequest, None, GrantPath]
) -> Grant:
    """Make an agent, a human or a group's members writers or managers of the diary."""
    diary_id = parsed.path.diaryId
    body = parsed.body
    await changeable_diary(request, diary_id, "manage")
    if not await memory_reads.subject_exists(
        request.app[keys.READ_POOL], body.subjectNs, body.subjectId
    ):
        raise SubjectNotFound(f"No such {body.subjectNs}")
    change = _grant_change(diary_id, body)
    key = run_key(request, "diary-grant")
    await execute(
        request,
        DiaryGrantWriteWorkflow.run,
        change,
        workflow_id=keyed_workflow_id(key, diary_grant_workflow_id(change)),
        on_duplicate=GrantInProgress("This grant is being written"),
        key=key,
    )
    return Grant(
        diaryId=diary_id, subjectId=body.subjectId, subjectNs=body.subjectNs, role=body.role
    )


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}/grants",
    tag=TAG,
    path_params=GrantPath,
    response=GrantList,
    scopes=("diary:read",),
    errors=(DiaryNotFound, PermissionDenied),
)
async def list_grants(request: web.Request, parsed: Parsed[None, None, GrantPath]) -> GrantList:
    """Who holds writer or manager grants on the diary (needs Diary `manage`)."""
    diary_id = parsed.path.diaryId
    await changeable_diary(request, diary_id, "manage")
    return GrantList(items=await memory_reads.list_grants(reader(request), diary_id))


@endpoint(
    routes,
    "DELETE",
    "/diaries/{diaryId}/grants",
    tag=TAG,
    path_params=GrantPath,
    body=GrantRequest,
    response=Done,
    scopes=("diary:share",),
    errors=(DiaryNotFound, PermissionDenied),
)
async def revoke_grant(request: web.Request, parsed: Parsed[GrantRequest, None, GrantPath]) -> Done:
    """Remove one grant; revoking a grant that does not exist is a no-op."""
    diary_id = parsed.path.diaryId
    await changeable_diary(request, diary_id, "manage")
    change = _grant_change(diary_id, parsed.body)
    await execute(
        request,
        DiaryGrantRevokeWorkflow.run,
        change,
        workflow_id=diary_grant_workflow_id(change),
        on_duplicate=GrantInProgress("This grant is being revoked"),
    )
    return Done()


# --- tags and verification ----------------------------------------------------------------


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}/tags",
    tag=TAG,
    path_params=DiaryPath,
    query=TagQuery,
    response=TagHistogram,
    auth="optional",
    scopes=("diary:read",),
    errors=(DiaryNotFound, AuthenticationRequired),
)
async def tag_histogram(
    request: web.Request, parsed: Parsed[None, TagQuery, DiaryPath]
) -> TagHistogram:
    """How many entries carry each tag, most used first."""
    diary_id = parsed.path.diaryId
    await readable_diary(request, diary_id)
    query = parsed.query
    tags = await memory_reads.tag_histogram(
        reader(request), diary_id, query.prefix, query.minCount, query.entryType
    )
    return TagHistogram(tags=tags, total=len(tags))


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}/entries/{entryId}/verify",
    tag=TAG,
    path_params=DiaryEntryPath,
    response=EntryVerification,
    auth="optional",
    scopes=("diary:read",),
    errors=(DiaryNotFound, EntryNotFound, AuthenticationRequired),
)
async def verify_entry(
    request: web.Request, parsed: Parsed[None, None, DiaryEntryPath]
) -> EntryVerification:
    """Recompute a signed entry's CID, check its signature and its link in the diary's chain."""
    path = parsed.path
    diary = await readable_diary(request, path.diaryId)
    pool = request.app[keys.READ_POOL]
    entry = await memory_reads.get_entry(pool, path.entryId)
    if entry is None or entry.diaryId != path.diaryId:
        raise EntryNotFound("No such entry")
    return await _verification(pool, entry, diary.signed)


async def _verification(pool: asyncpg.Pool, entry: Entry, chained: bool) -> EntryVerification:
    """`chained`: the entry's diary is signed, so its entries link to their predecessors."""
    prev = entry.prevCid if chained else None
    recomputed = entry_cid(entry.content, entry.title, entry.tags, entry.entryType, prev)
    cid_matches = recomputed == entry.cid
    if entry.signingRequestId is None:
        return EntryVerification(
            signed=False,
            cidMatches=cid_matches,
            signatureValid=False,
            chainValid=False,
            valid=False,
            cid=entry.cid,
        )
    signer = await memory_reads.entry_signer(pool, entry.signingRequestId)
    signature_valid = (
        signer is not None
        and verify_signature(
            parse_public_key(signer.public_key),
            signing_payload(entry.cid, signer.nonce).encode(),
            entry.contentSignature or "",
        )
        and signer.message == entry.cid
    )
    chain_valid = not chained or await _links_to_chain(pool, entry)
    return EntryVerification(
        signed=True,
        cidMatches=cid_matches,
        signatureValid=signature_valid,
        chainValid=chain_valid,
        valid=cid_matches and signature_valid and chain_valid,
        cid=entry.cid,
        agentFingerprint=None if signer is None else signer.fingerprint,
    )


async def _links_to_chain(pool: asyncpg.Pool, entry: Entry) -> bool:
    """The predecessor exists in the same diary ('' only for the diary's first entry)."""
    if entry.prevCid == "":
        return True
    return entry.prevCid is not None and await memory_reads.diary_has_cid(
        pool, entry.diaryId, entry.prevCid
    )


# --- export and import ----------------------------------------------------------------------


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}/export",
    tag=TAG,
    path_params=DiaryPath,
    auth="optional",
    scopes=("diary:read",),
    raw_response=CAR_MEDIA_TYPE,
    errors=(DiaryNotFound, AuthenticationRequired),
)
async def export_diary(request: web.Request, parsed: Parsed[None, None, DiaryPath]) -> web.Response:
    """The diary as a CARv1 file: manifest, entries with their CIDs, relations, signatures."""
    diary = await readable_diary(request, parsed.path.diaryId)
    archive = await memory_reads.diary_archive(reader(request), diary)
    # The manifest comes first in the file and names every entry block, so the whole diary is
    # read before the first byte could be sent: the body is built, then sent with its length.
    body = await asyncio.to_thread(encode_archive, archive)
    return web.Response(
        body=body,
        content_type=CAR_MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{diary.id}.car"'},
    )


@endpoint(
    routes,
    "POST",
    "/diaries/import",
    tag=TAG,
    status=201,
    query=DiaryImportQuery,
    raw_body=IMPORT_MEDIA_TYPES,
    response=Diary,
    scopes=("diary:write",),
    headers=("x-service-team-id",),
    errors=(
        TeamRequired,
        InvalidTeamHeader,
        TeamNotFound,
        PermissionDenied,
        TeamNotActive,
        OperationRunning,
        ArchiveNotStaged,
        ArchiveInvalid,
        ImportInvalid,
        PayloadTooLarge,
        UnsupportedMediaType,
    ),
    idempotent=True,
)
async def import_diary(request: web.Request, parsed: Parsed[None, DiaryImportQuery]) -> Diary:
    """Create a diary from a Cairn archive or a Mem0, Letta or COGX export.

    The body is the file (at most 32 MiB), checked whole before anything is written; the
    import needs what `POST /diaries` needs in the team.

    - A CAR file of `GET /diaries/{id}/export` (`application/vnd.ipld.car`): every block's CID
      and every signature is checked, and the entries keep their CIDs. Each import is a copy.
    - A Mem0 `get_all` listing or a Letta agent file (`application/json`), or a COGX 0.1
      archive (`application/zip`, `application/gzip`): docs/imports.md. Each entry keeps its
      origin and passes the rules of an entry create (limits, exact duplicates, injection scan,
      embedding); a refused file is 400 `import-invalid` (413 when it unpacks too large) naming
      its first bad `record`. One file is one diary per team: sending it again answers that
      diary and writes nothing.

    `application/octet-stream` is sniffed: a zip or gzip signature or a JSON object is a peer
    file, anything else a CAR file."""
    principal = require_principal(request)
    team_id = await _team_for_new_diary(request)
    data = await _import_body(request)
    file_cid = bytes_cid(data)
    request[keys.RAW_BODY_CID] = file_cid
    # a key, when sent, ties retries to this request: a CAR import's diary is named by it, a
    # peer file's by the file itself (one diary per team)
    run = run_key(request, "diary-import")
    if family(request.content_type, data) == "car":
        await _check_archive(data)
        diary_id = new_id(run)
        file_format: ImportFormat = "car"
    else:
        file_format = await _check_peer_file(data)
        diary_id = peer_import_diary_id(team_id, file_cid)
    key = staged_archive_key(diary_id, file_cid, file_format)
    await request.app[keys.BLOBS].put_file(key, io.BytesIO(data), len(data))
    await execute(
        request,
        DiaryImportWorkflow.run,
        DiaryImportInput(
            diary_id=diary_id,
            team_id=team_id,
            name=parsed.query.name,
            created_by=principal.subject_id,
            created_by_ns=principal.subject_ns,
            archive_key=key,
            format=file_format,
        ),
        workflow_id=diary_import_workflow_id(diary_id),
        on_duplicate=OperationRunning("This diary is being imported"),
        key=run,
        search=_diary_search(diary_id, team_id),
        team=team_id,
    )
    return await load_diary(request, diary_id)


async def _check_archive(data: bytes) -> None:
    try:
        await asyncio.to_thread(read_archive, data)
    except ArchiveRejected as rejected:
        raise ArchiveInvalid(
            f"The archive is refused at {rejected}",
            extensions={"block": rejected.block},
        ) from None


async def _check_peer_file(data: bytes) -> PeerFormat:
    """The format of a Mem0, Letta or COGX file, every record checked (the worker reads it
    again from the staged copy)."""
    try:
        peer = await asyncio.to_thread(read_peer_file, data)
    except RecordRejected as rejected:
        raise refusal(rejected) from None
    return peer.format


async def _import_body(request: web.Request) -> bytes:
    """The uploaded file, refused (413) as soon as it passes the limit."""
    if family(request.content_type, b"") is None:
        raise UnsupportedMediaType(f"Send the file as one of {', '.join(IMPORT_MEDIA_TYPES)}")
    too_large = PayloadTooLarge(f"An import file is at most {limits.DIARY_IMPORT_MAX_BYTES} bytes")
    declared = request.content_length
    if declared is not None and declared > limits.DIARY_IMPORT_MAX_BYTES:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limits.DIARY_IMPORT_MAX_BYTES:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)
