"""Entry and relation routes. Creation and every change run as workflows (scan, CID, embedding,
row and tuple); reads follow the diary's visibility (see `routes.diaries`).

Permissions (SPEC 5): creating, changing and deleting an entry need Diary `write` (the
DiaryEntry `edit`/`delete` permissions resolve to it); relations need `write` on the diary that
holds both entries. Signed entries are immutable and permanent (409).
"""

from __future__ import annotations

from uuid import UUID

from aiohttp import web
from temporalio.common import SearchAttributePair

from api import keys
from api.access import allowed, changeable_diary, found, readable_diary, require
from api.auth import require_principal
from api.endpoint import Parsed, endpoint, render
from api.flows import execute
from api.headers import DUPLICATE_HEADER
from api.idempotency import new_id, run_key
from api.reads import reader
from infra.repos import memory_reads
from infra.repos.memory_reads import LocatedRelation
from schemas.errors import (
    AgentsOnly,
    AuthenticationRequired,
    ChainConflict,
    CrossDiaryRelation,
    DiaryNotFound,
    EntryBusy,
    EntryImmutable,
    EntryNotFound,
    NotFound,
    OperationRunning,
    PermissionDenied,
    RelationNotFound,
    RequestInvalid,
    SelfRelation,
    SignatureCidMismatch,
    SignatureRequired,
    SigningRequestInvalid,
    SigningRequestNotFound,
    SigningRequestUsed,
)
from schemas.identity import Done
from schemas.memory import (
    BatchDeleted,
    DiaryPath,
    Entry,
    EntryBatchDelete,
    EntryChange,
    EntryCreateRequest,
    EntryDraft,
    EntryList,
    EntryListQuery,
    EntryPath,
    EntryRefs,
    EntryUpdateInput,
    EntryUpdateRequest,
    Relation,
    RelationCreateInput,
    RelationCreateRequest,
    RelationList,
    RelationListQuery,
    RelationPath,
    RelationRef,
    RelationStatusChange,
    RelationUpdateRequest,
)
from workflows.common import DIARY_ID
from workflows.entries import (
    EntryDeleteWorkflow,
    EntryUpdateWorkflow,
    RelationCreateWorkflow,
    RelationDeleteWorkflow,
    RelationUpdateWorkflow,
    entries_delete_workflow_id,
    entry_create_workflow_id,
    entry_update_workflow_id,
    relation_create_workflow_id,
    relation_delete_workflow_id,
    relation_update_workflow_id,
)
from workflows.entry_create import EntryCreateWorkflow

routes = web.RouteTableDef()
TAG = "entries"
NO_SUCH_ENTRY = "No such entry"


async def load_entry(request: web.Request, entry_id: UUID) -> Entry:
    entry = await memory_reads.get_entry(reader(request), entry_id)
    return found(entry, EntryNotFound(NO_SUCH_ENTRY))


async def readable_entry(request: web.Request, entry_id: UUID) -> Entry:
    entry = await load_entry(request, entry_id)
    try:
        await readable_diary(request, entry.diaryId)
    except NotFound:
        raise EntryNotFound(NO_SUCH_ENTRY) from None
    return entry


async def writable_entry(request: web.Request, entry_id: UUID) -> Entry:
    entry = await readable_entry(request, entry_id)
    await require(request, "Diary", entry.diaryId, "write")
    return entry


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()] or None


# --- entries ----------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/diaries/{diaryId}/entries",
    tag=TAG,
    memory="update_memory",
    status=201,
    also=(
        (
            200,
            "An exact duplicate (the same content, after trimming whitespace, as a live entry "
            f"of this diary): nothing was created; the body is the existing entry, and the "
            f"`{DUPLICATE_HEADER}` response header names it",
        ),
    ),
    path_params=DiaryPath,
    body=EntryCreateRequest,
    response=Entry,
    scopes=("diary:write",),
    errors=(
        DiaryNotFound,
        PermissionDenied,
        EntryBusy,
        ChainConflict,
        SigningRequestUsed,
        SigningRequestNotFound,
        SigningRequestInvalid,
        SignatureCidMismatch,
    ),
    idempotent=True,
)
async def create_entry(
    request: web.Request, parsed: Parsed[EntryCreateRequest, None, DiaryPath]
) -> web.StreamResponse | Entry:
    """Write an entry: scanned for prompt injection, content-addressed, embedded server-side.
    In a signed diary the entry must name a completed signing request over its CID.

    An exact duplicate of a live entry of the diary creates nothing (signed diaries too: a
    chain never holds the same content twice) and answers 200 with that entry. A new entry's
    consolidation (near-duplicate proposals) starts after the answer."""
    body = parsed.body
    diary_id = parsed.path.diaryId
    principal = require_principal(request)
    diary = await changeable_diary(request, diary_id, "write")
    if diary.signed and body.signingRequestId is None:
        raise SignatureRequired("Entries of a signed diary need a signingRequestId")
    if body.signingRequestId is not None and principal.agent_id is None:
        raise AgentsOnly("Only agents sign entries")
    key = run_key(request, "entry")
    entry_id = new_id(key)
    inserted = await execute(
        request,
        EntryCreateWorkflow.run,
        EntryDraft(
            entry_id=entry_id,
            diary_id=diary_id,
            content=body.content,
            title=body.title,
            tags=body.tags,
            importance=body.importance,
            entry_type=body.entryType,
            signing_request_id=body.signingRequestId,
            created_by=principal.subject_id,
            created_by_ns=principal.subject_ns,
            signed_diary=diary.signed,
            embed_locally=True,  # started on the embedding queue, beside the model
        ),
        workflow_id=entry_create_workflow_id(entry_id),
        key=key,
        on_duplicate=EntryBusy("This entry is being created"),
        search=[SearchAttributePair(DIARY_ID, str(diary_id))],
        task_queue=request.app[keys.SETTINGS].embedding_task_queue,
        team=diary.teamId,
    )
    # the run answers with the stored entry; a worker of the build before that, with its id
    entry = inserted.entry or await load_entry(request, inserted.entry_id)
    if inserted.duplicate:
        response = render(entry, 200)
        response.headers[DUPLICATE_HEADER] = str(entry.id)
        return response
    request.app[keys.HYGIENE].consolidate(entry.id)
    return entry


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}/entries",
    tag=TAG,
    path_params=DiaryPath,
    query=EntryListQuery,
    response=EntryList,
    auth="optional",
    scopes=("diary:read",),
    errors=(DiaryNotFound, AuthenticationRequired),
)
async def list_entries(
    request: web.Request, parsed: Parsed[None, EntryListQuery, DiaryPath]
) -> EntryList:
    """A diary's entries, newest first, filtered (tags, type, `asOf`), paged by limit and offset."""
    diary_id = parsed.path.diaryId
    await readable_diary(request, diary_id)
    query = parsed.query
    where = memory_reads.EntryFilter(
        diary_id=diary_id,
        tags=_split(query.tags),
        exclude_tags=_split(query.excludeTags),
        entry_type=query.entryType,
        as_of=query.asOf,
    )
    entries, total = await memory_reads.list_entries(
        reader(request), where, query.limit, query.offset
    )
    return EntryList(
        items=entries,
        total=total,
        limit=query.limit,
        offset=query.offset,
    )


@endpoint(
    routes,
    "GET",
    "/entries/{entryId}",
    tag=TAG,
    path_params=EntryPath,
    response=Entry,
    auth="optional",
    scopes=("diary:read",),
    errors=(EntryNotFound, AuthenticationRequired),
)
async def get_entry(request: web.Request, parsed: Parsed[None, None, EntryPath]) -> Entry:
    """One entry, by its diary's visibility rule."""
    return await readable_entry(request, parsed.path.entryId)


@endpoint(
    routes,
    "PATCH",
    "/entries/{entryId}",
    tag=TAG,
    memory="update_memory",
    path_params=EntryPath,
    body=EntryUpdateRequest,
    response=Entry,
    scopes=("diary:write",),
    errors=(EntryNotFound, PermissionDenied, EntryImmutable, EntryBusy),
)
async def update_entry(
    request: web.Request, parsed: Parsed[EntryUpdateRequest, None, EntryPath]
) -> Entry:
    """Change an unsigned entry; its CID, scan and (when the text changed) vector follow."""
    entry_id = parsed.path.entryId
    entry = await writable_entry(request, entry_id)
    if entry.signingRequestId is not None:
        raise EntryImmutable("Signed entries are immutable")
    body = parsed.body
    await execute(
        request,
        EntryUpdateWorkflow.run,
        _update_input(entry, body),
        workflow_id=entry_update_workflow_id(entry_id),
        on_duplicate=EntryBusy("Another update of this entry is running"),
        task_queue=request.app[keys.SETTINGS].embedding_task_queue,
    )
    return await load_entry(request, entry_id)


def _update_input(entry: Entry, body: EntryUpdateRequest) -> EntryUpdateInput:
    fields = body.model_fields_set
    clear_title = "title" in fields and body.title is None
    change = EntryChange(
        entry_id=entry.id,
        content=body.content,
        title=body.title,
        clear_title=clear_title,
        tags=body.tags,
        importance=body.importance,
        entry_type=body.entryType,
    )
    merged = EntryDraft(
        entry_id=entry.id,
        diary_id=entry.diaryId,
        content=body.content if body.content is not None else entry.content,
        title=None if clear_title else (body.title if body.title is not None else entry.title),
        tags=body.tags if body.tags is not None else list(entry.tags),
        importance=body.importance if body.importance is not None else entry.importance,
        entry_type=body.entryType if body.entryType is not None else entry.entryType,
        created_by=entry.createdBy,
        embed_locally=True,  # started on the embedding queue, beside the model
    )
    text_changed = (merged.content, merged.title, merged.tags) != (
        entry.content,
        entry.title,
        list(entry.tags),
    )
    return EntryUpdateInput(change=change, merged=merged, text_changed=text_changed)


@endpoint(
    routes,
    "DELETE",
    "/entries/{entryId}",
    tag=TAG,
    memory="delete_memory",
    path_params=EntryPath,
    response=Done,
    scopes=("diary:delete",),
    errors=(EntryNotFound, PermissionDenied, EntryImmutable, EntryBusy),
)
async def delete_entry(request: web.Request, parsed: Parsed[None, None, EntryPath]) -> Done:
    """Delete an unsigned entry and its parent tuple."""
    entry_id = parsed.path.entryId
    entry = await writable_entry(request, entry_id)
    if entry.signingRequestId is not None:
        raise EntryImmutable("Signed entries cannot be deleted")
    await _delete(request, [entry_id])
    return Done()


@endpoint(
    routes,
    "DELETE",
    "/entries",
    tag=TAG,
    body=EntryBatchDelete,
    response=BatchDeleted,
    scopes=("diary:delete",),
)
async def delete_entries(request: web.Request, parsed: Parsed[EntryBatchDelete]) -> BatchDeleted:
    """Delete several entries; those the caller cannot delete, signed ones and unknown ids are
    reported as skipped (without saying which reason, so ids cannot be probed)."""
    ids: list[UUID] = list(dict.fromkeys(parsed.body.ids))
    refs = await memory_reads.entry_refs(request.app[keys.READ_POOL], ids)
    deletable = [
        ref.id
        for ref in refs
        if ref.signing_request_id is None and await allowed(request, "Diary", ref.diary_id, "write")
    ]
    deleted = await _delete(request, deletable) if deletable else []
    return BatchDeleted(deleted=deleted, skipped=[i for i in ids if i not in deleted])


async def _delete(request: web.Request, entry_ids: list[UUID]) -> list[UUID]:
    result = await execute(
        request,
        EntryDeleteWorkflow.run,
        EntryRefs(entry_ids=entry_ids),
        workflow_id=entries_delete_workflow_id(entry_ids),
        on_duplicate=EntryBusy("These entries are being deleted"),
    )
    return result.deleted


# --- relations --------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/entries/{entryId}/relations",
    tag=TAG,
    status=201,
    also=((200, "The same relation again: the existing one"),),
    path_params=EntryPath,
    body=RelationCreateRequest,
    response=Relation,
    scopes=("diary:write",),
    errors=(EntryNotFound, PermissionDenied, RequestInvalid),
    idempotent=True,
)
async def create_relation(
    request: web.Request, parsed: Parsed[RelationCreateRequest, None, EntryPath]
) -> web.StreamResponse | Relation:
    """Relate this entry (the source) to another entry of the same diary; the CIDs of both are
    snapshotted. An existing relation of the same type is returned with 200 (accepted when this
    create asks for `accepted` and finds it proposed)."""
    source = await writable_entry(request, parsed.path.entryId)
    body = parsed.body
    target = await memory_reads.get_entry(request.app[keys.READ_POOL], body.targetId)
    if target is None or target.diaryId != source.diaryId:
        raise CrossDiaryRelation("The target must be an entry of the same diary")
    if target.id == source.id:
        raise SelfRelation("An entry cannot relate to itself")
    key = run_key(request, "relation")
    relation_id = new_id(key)
    workflow_id = relation_create_workflow_id(relation_id)
    written = await execute(
        request,
        RelationCreateWorkflow.run,
        RelationCreateInput(
            relation_id=relation_id,
            source_id=source.id,
            target_id=target.id,
            relation=body.relation,
            status=body.status,
            metadata=body.metadata.model_dump(exclude_none=True) if body.metadata else {},
            workflow_id=workflow_id,
        ),
        workflow_id=workflow_id,
        key=key,
        on_duplicate=OperationRunning("This relation is being created"),
    )
    located = await _load_relation(request, written.relation_id)
    if not written.created:
        return render(located.relation, 200)
    return located.relation


async def _load_relation(request: web.Request, relation_id: UUID) -> LocatedRelation:
    located = await memory_reads.get_relation(reader(request), relation_id)
    return found(located, RelationNotFound("No such relation"))


async def _writable_relation(request: web.Request, relation_id: UUID) -> LocatedRelation:
    located = await _load_relation(request, relation_id)
    try:
        await readable_diary(request, located.diary_id)
    except NotFound:
        raise RelationNotFound("No such relation") from None
    await require(request, "Diary", located.diary_id, "write")
    return located


@endpoint(
    routes,
    "GET",
    "/entries/{entryId}/relations",
    tag=TAG,
    path_params=EntryPath,
    query=RelationListQuery,
    response=RelationList,
    auth="optional",
    scopes=("diary:read",),
    errors=(EntryNotFound, AuthenticationRequired),
)
async def list_relations(
    request: web.Request, parsed: Parsed[None, RelationListQuery, EntryPath]
) -> RelationList:
    """Relations of an entry, as source, target or both."""
    entry = await readable_entry(request, parsed.path.entryId)
    query = parsed.query
    relations, total = await memory_reads.list_relations(
        reader(request),
        entry.id,
        query.direction,
        query.relation,
        query.status,
        query.limit,
        query.offset,
    )
    return RelationList(items=relations, total=total)


@endpoint(
    routes,
    "PATCH",
    "/relations/{relationId}",
    tag=TAG,
    path_params=RelationPath,
    body=RelationUpdateRequest,
    response=Relation,
    scopes=("diary:write",),
    errors=(RelationNotFound, PermissionDenied),
)
async def update_relation(
    request: web.Request, parsed: Parsed[RelationUpdateRequest, None, RelationPath]
) -> Relation:
    """Accept or reject a proposed relation (an accepted `supersedes` marks its target)."""
    relation_id = parsed.path.relationId
    await _writable_relation(request, relation_id)
    await execute(
        request,
        RelationUpdateWorkflow.run,
        RelationStatusChange(relation_id=relation_id, status=parsed.body.status),
        workflow_id=relation_update_workflow_id(relation_id),
        on_duplicate=OperationRunning("This relation is being updated"),
    )
    return (await _load_relation(request, relation_id)).relation


@endpoint(
    routes,
    "DELETE",
    "/relations/{relationId}",
    tag=TAG,
    status=204,
    path_params=RelationPath,
    scopes=("diary:write",),
    errors=(RelationNotFound, PermissionDenied),
)
async def delete_relation(
    request: web.Request, parsed: Parsed[None, None, RelationPath]
) -> web.Response:
    """Delete a relation."""
    relation_id = parsed.path.relationId
    await _writable_relation(request, relation_id)
    await execute(
        request,
        RelationDeleteWorkflow.run,
        RelationRef(relation_id=relation_id),
        workflow_id=relation_delete_workflow_id(relation_id),
        on_duplicate=OperationRunning("This relation is being deleted"),
    )
    return web.Response(status=204)
