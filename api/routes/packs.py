"""Context pack and rendered pack routes (SPEC 2.5, 4.7 Packs, 5 ContextPack).

Reads follow the pack's diary (`ContextPack.read = parent.read`): a pack of a private diary the
caller cannot read is a 404. Writes need scope `pack:write` and `write` on the diary (403 when
the caller can read but not write). Creating and rendering run as workflows; previews compute
the same result from the read pool and store nothing.

Choices where the spec is terse:
- Creating a selection that is already a pack answers that pack with 200 (201 when new). The
  workflow id is the diary and the request's CID, so concurrent retries meet one run; the pack
  id is the run's, so an entry edited since makes a new pack, never a clash. A repeat that
  differs only in `supersedesPackId` is a 409 (`pack-supersedes-conflict`): the CID cannot
  carry both links.
- `supersedesPackId` names a pack of the same diary, so a provenance graph never leaves it.
- Only `server:pack-to-docs-v1` is a server render method; another `server:` name is a 400.
- A pack whose entry was deleted since can still be read, diffed and rendered by an agent, but
  no longer by the server (409 `pack-entry-deleted`): its content is gone.
- `verifiedTaskId` names a completed `judge_pack` task whose `judged_work` reference carries
  this rendered pack's CID; it is set once and not cleared (a verification is a fact).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import asyncpg
from aiohttp import web
from temporalio.common import SearchAttributePair

from api import keys
from api.access import allowed, readable_diary, require, require_team_visible
from api.auth import require_principal
from api.endpoint import Parsed, endpoint, render
from api.flows import execute
from api.headers import require_team_header
from api.idempotency import keyed_workflow_id, run_key
from api.reads import reader
from infra.repos import packs as repo
from schemas.errors import (
    DiaryNotFound,
    ExpiryInPast,
    ExpiryInvalid,
    ExpiryRequired,
    JsonNotCanonical,
    NotFound,
    PackBusy,
    PackDiffCrossDiary,
    PackEntryDeleted,
    PackInjectionFlagged,
    PackNotFound,
    PackSupersedesConflict,
    PackSupersedesNotFound,
    PermissionDenied,
    PinInvalid,
    PinnedExpiry,
    RenderBusy,
    RenderedPackBusy,
    RenderedPackNotFound,
    RequestInvalid,
    TeamNotFound,
    TeamRequired,
    VerificationFixed,
    VerificationTaskInvalid,
)
from schemas.kernel.cids import json_cid
from schemas.kernel.task_types import VERIFYING_TYPE_NAMES
from schemas.memory import DiaryPath
from schemas.packs import (
    ContextPack,
    PackCatalogQuery,
    PackCidDiffPath,
    PackCidPath,
    PackCompiled,
    PackCreateInput,
    PackCreateRequest,
    PackDiff,
    PackDiffPath,
    PackGetQuery,
    PackList,
    PackListQuery,
    PackPath,
    PackUpdateInput,
    PackUpdateRequest,
    ProvenanceGraph,
    ProvenanceQuery,
    RenderedListQuery,
    RenderedPack,
    RenderedPackList,
    RenderedPackUpdateInput,
    RenderedPackUpdateRequest,
    RenderInput,
    RenderRequest,
    compile_stats,
    diff_packs,
    provenance_graph,
)
from workflows.common import DIARY_ID
from workflows.packs import (
    PackCreateWorkflow,
    PackRenderWorkflow,
    PackUpdateWorkflow,
    RenderedPackUpdateWorkflow,
    pack_update_workflow_id,
    pack_workflow_id,
    render_workflow_id,
    rendered_update_workflow_id,
)

routes = web.RouteTableDef()
TAG = "packs"
READ = ("pack:read",)
WRITE = ("pack:write",)
NO_SUCH_PACK = "No such pack"
NO_SUCH_RENDERED = "No such rendered pack"


def _pool(request: web.Request) -> asyncpg.Pool:
    return reader(request)  # the replica for a request that writes nothing (api/reads.py)


def _request_cid(body: Any) -> str:
    """The natural key of a request: the CID of its canonical JSON (400 for values JSON
    cannot carry exactly, such as NaN or integers beyond 2**53)."""
    try:
        return json_cid(body.model_dump(mode="json", exclude_unset=True))
    except ValueError as exc:
        raise JsonNotCanonical(f"The body cannot be canonicalised: {exc}") from None


# --- who may see and change a pack ---------------------------------------------------------


async def _visible(request: web.Request, pack: ContextPack | None) -> ContextPack:
    if pack is None:
        raise PackNotFound(NO_SUCH_PACK)
    try:
        await readable_diary(request, pack.diaryId)
    except NotFound:
        raise PackNotFound(NO_SUCH_PACK) from None
    return pack


async def readable_pack(
    request: web.Request, pack_id: UUID, *, entries: bool = False
) -> ContextPack:
    return await _visible(request, await repo.get_pack(_pool(request), pack_id, entries=entries))


async def _readable_pack_by_cid(
    request: web.Request, cid: str, *, entries: bool = False
) -> ContextPack:
    return await _visible(request, await repo.get_pack_by_cid(_pool(request), cid, entries=entries))


async def _writable_diary(request: web.Request, diary_id: UUID) -> None:
    """Diary `write`, asked first: it implies `read` (SPEC 5), so a writer costs one check;
    only a refusal asks whether the caller may read (403) or not (404)."""
    if await allowed(request, "Diary", diary_id, "write"):
        return
    await readable_diary(request, diary_id)  # 404 (or 401) for who cannot read it
    raise PermissionDenied("You lack 'write' on this Diary")


async def _writable_pack(request: web.Request, pack_id: UUID) -> ContextPack:
    pack = await repo.get_pack(_pool(request), pack_id)
    if pack is None:
        raise PackNotFound(NO_SUCH_PACK)
    try:
        await _writable_diary(request, pack.diaryId)
    except NotFound:
        raise PackNotFound(NO_SUCH_PACK) from None
    return pack


async def _readable_rendered(request: web.Request, rendered_id: UUID) -> RenderedPack:
    rendered = await repo.get_rendered(_pool(request), rendered_id)
    if rendered is None:
        raise RenderedPackNotFound(NO_SUCH_RENDERED)
    try:
        await readable_diary(request, rendered.diaryId)
    except NotFound:
        raise RenderedPackNotFound(NO_SUCH_RENDERED) from None
    return rendered


# --- packs ---------------------------------------------------------------------------------


async def _check_supersedes(request: web.Request, diary_id: UUID, pack_id: UUID | None) -> None:
    if pack_id is None:
        return
    previous = await repo.get_pack(_pool(request), pack_id)
    if previous is None or previous.diaryId != diary_id:
        raise PackSupersedesNotFound.at("/supersedesPackId", "Must name a pack of the same diary")


@endpoint(
    routes,
    "POST",
    "/diaries/{diaryId}/packs/preview",
    tag=TAG,
    path_params=DiaryPath,
    body=PackCreateRequest,
    response=PackCompiled,
    scopes=WRITE,
    errors=(RequestInvalid, DiaryNotFound, PermissionDenied, PackInjectionFlagged),
)
async def preview_pack(
    request: web.Request, parsed: Parsed[PackCreateRequest, None, DiaryPath]
) -> PackCompiled:
    """Compile a selection as `POST /diaries/{id}/packs` would, and store nothing."""
    diary_id = parsed.path.diaryId
    body = parsed.body
    await _writable_diary(request, diary_id)
    await _check_supersedes(request, diary_id, body.supersedesPackId)
    selection = [(e.entryId, e.rank) for e in body.entries]
    found = await repo.selected_entries(_pool(request), [i for i, _ in selection])
    sources = repo.checked_selection(diary_id, selection, found, force=body.force, as_of=body.asOf)
    params = body.hashed_params()
    pack = repo.compiled(diary_id, body.packType, params, sources, body.tokenBudget)
    return PackCompiled(
        diaryId=diary_id,
        packCid=pack.pack_cid,
        packType=body.packType,
        params=params,
        entries=pack.entries,
        droppedEntryIds=pack.dropped,
        compileStats=compile_stats(pack.entries, body.tokenBudget),
    )


@endpoint(
    routes,
    "POST",
    "/diaries/{diaryId}/packs",
    tag=TAG,
    status=201,
    also=((200, "The same selection again: the existing pack"),),
    path_params=DiaryPath,
    body=PackCreateRequest,
    response=PackCompiled,
    scopes=WRITE,
    errors=(
        RequestInvalid,
        DiaryNotFound,
        PermissionDenied,
        PackBusy,
        PackInjectionFlagged,
        PackSupersedesConflict,
    ),
    idempotent=True,
)
async def create_pack(
    request: web.Request, parsed: Parsed[PackCreateRequest, None, DiaryPath]
) -> web.StreamResponse | PackCompiled:
    """Materialize a selection of the diary's entries as a content-addressed pack: each entry
    at a compression level that fits `tokenBudget`; 409 listing injection-flagged entries
    unless `force`. The same selection again answers the existing pack (200)."""
    diary_id = parsed.path.diaryId
    body = parsed.body
    principal = require_principal(request)
    await _writable_diary(request, diary_id)
    key = run_key(request, "pack")
    workflow_id = keyed_workflow_id(key, pack_workflow_id(diary_id, _request_cid(body)))
    created = await execute(
        request,
        PackCreateWorkflow.run,
        PackCreateInput(
            diary_id=diary_id,
            pack_type=body.packType,
            params=body.hashed_params(),
            selection=[(e.entryId, e.rank) for e in body.entries],
            token_budget=body.tokenBudget,
            pinned=body.pinned,
            force=body.force,
            supersedes_pack_id=body.supersedesPackId,
            created_by=principal.subject_id,
            created_by_ns=principal.subject_ns,
            as_of=body.asOf,
        ),
        workflow_id=workflow_id,
        on_duplicate=PackBusy("This pack is being created"),
        key=key,
        search=[SearchAttributePair(DIARY_ID, str(diary_id))],
    )
    pack = await repo.get_pack(_pool(request), created.pack_id, entries=True)
    assert pack is not None and pack.entries is not None
    kept = {e.entryId for e in pack.entries}
    request.app[keys.HYGIENE].retrieved(kept)  # batched for the hygiene report
    result = PackCompiled(
        packId=pack.id,
        created=created.created,
        diaryId=diary_id,
        packCid=pack.packCid,
        packType=pack.packType,
        params=pack.params,
        entries=pack.entries,
        droppedEntryIds=[e.entryId for e in body.entries if e.entryId not in kept],
        compileStats=compile_stats(pack.entries, pack.tokenBudget),
    )
    return result if created.created else render(result, 200)


@endpoint(
    routes,
    "GET",
    "/packs/{id}",
    tag=TAG,
    path_params=PackPath,
    query=PackGetQuery,
    response=ContextPack,
    scopes=READ,
    errors=(PackNotFound,),
)
async def get_pack(
    request: web.Request, parsed: Parsed[None, PackGetQuery, PackPath]
) -> ContextPack:
    """One pack (`expand=entries` adds its entries), by its diary's visibility."""
    entries = parsed.query.expand == "entries"
    return await readable_pack(request, parsed.path.id, entries=entries)


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}/packs",
    tag=TAG,
    path_params=DiaryPath,
    query=PackListQuery,
    response=PackList,
    scopes=READ,
    errors=(DiaryNotFound,),
)
async def list_diary_packs(
    request: web.Request, parsed: Parsed[None, PackListQuery, DiaryPath]
) -> PackList:
    """A diary's packs, newest first, paged by limit and offset."""
    diary_id = parsed.path.diaryId
    query = parsed.query
    await readable_diary(request, diary_id)
    items, total = await repo.list_diary_packs(
        _pool(request), diary_id, query.limit, query.offset, entries=query.expand == "entries"
    )
    return PackList(items=items, total=total, limit=query.limit, offset=query.offset)


@endpoint(
    routes,
    "GET",
    "/packs",
    tag=TAG,
    query=PackCatalogQuery,
    response=PackList,
    scopes=READ,
    headers=("x-service-team-id",),
    errors=(RequestInvalid, TeamRequired, TeamNotFound),
)
async def list_team_packs(request: web.Request, parsed: Parsed[None, PackCatalogQuery]) -> PackList:
    """The team catalogue: packs of every diary of the team of `x-service-team-id` (needs
    Team `access`), optionally only those holding `containsEntry`, with their renderings
    when `includeRendered=true`."""
    team_id = require_team_header(request)
    await require_team_visible(request, team_id, "access")
    query = parsed.query
    items, total = await repo.list_team_packs(
        _pool(request),
        team_id,
        query.containsEntry,
        query.limit,
        query.offset,
        entries=query.expand == "entries",
        rendered=query.includeRendered,
    )
    return PackList(items=items, total=total, limit=query.limit, offset=query.offset)


def _future(moment: datetime, pointer: str) -> datetime:
    if moment.tzinfo is None:
        raise ExpiryInvalid.at(pointer, "Give a time zone (e.g. a trailing Z)")
    if moment <= datetime.now(UTC):
        raise ExpiryInPast.at(pointer, "Must be in the future")
    return moment


def pin_change(
    pinned_now: bool, fields: set[str], pinned: bool | None, expires_at: datetime | None
) -> tuple[bool, datetime | None] | None:
    """(pinned, expiresAt) after a change of either; None when neither changes. Pinning
    clears the expiry; an unpinned pack always has a future one."""
    if "pinned" in fields and pinned is None:
        raise PinInvalid.at("/pinned", "Must be true or false")
    if pinned is True:
        if expires_at is not None:
            raise PinnedExpiry.at("/expiresAt", "A pinned pack does not expire")
        return True, None
    if pinned is False or "expiresAt" in fields:
        if expires_at is None:
            raise ExpiryRequired.at("/expiresAt", "An unpinned pack needs a future expiresAt")
        if pinned is None and pinned_now:
            raise PinnedExpiry.at("/expiresAt", "A pinned pack does not expire; unpin it with it")
        return False, _future(expires_at, "/expiresAt")
    return None


@endpoint(
    routes,
    "PATCH",
    "/packs/{id}",
    tag=TAG,
    path_params=PackPath,
    body=PackUpdateRequest,
    response=ContextPack,
    scopes=WRITE,
    errors=(RequestInvalid, PackNotFound, PermissionDenied),
)
async def update_pack(
    request: web.Request, parsed: Parsed[PackUpdateRequest, None, PackPath]
) -> ContextPack:
    """Pin a pack (its expiry is cleared) or unpin it with a future `expiresAt`."""
    body = parsed.body
    pack = await _writable_pack(request, parsed.path.id)
    change = pin_change(pack.pinned, set(body.model_fields_set), body.pinned, body.expiresAt)
    assert change is not None  # the body names at least one of the two
    pinned, expires_at = change
    await execute(
        request,
        PackUpdateWorkflow.run,
        PackUpdateInput(pack_id=pack.id, pinned=pinned, expires_at=expires_at),
        workflow_id=pack_update_workflow_id(pack.id, _request_cid(body)),
        on_duplicate=PackBusy("This pack is being updated"),
    )
    return await readable_pack(request, pack.id)


# --- provenance and diff -------------------------------------------------------------------


async def _provenance(request: web.Request, root: ContextPack, depth: int) -> ProvenanceGraph:
    ancestors, truncated = await repo.pack_ancestors(_pool(request), root.id, depth)
    return provenance_graph(root, ancestors, depth, truncated)


@endpoint(
    routes,
    "GET",
    "/packs/{id}/provenance",
    tag=TAG,
    path_params=PackPath,
    query=ProvenanceQuery,
    response=ProvenanceGraph,
    scopes=READ,
    errors=(PackNotFound,),
)
async def pack_provenance(
    request: web.Request, parsed: Parsed[None, ProvenanceQuery, PackPath]
) -> ProvenanceGraph:
    """The Merkle DAG of a pack: the packs it supersedes (up to `depth` hops, 0..10) and the
    entry CIDs each includes, as nodes and edges."""
    root = await readable_pack(request, parsed.path.id, entries=True)
    return await _provenance(request, root, parsed.query.depth)


@endpoint(
    routes,
    "GET",
    "/packs/by-cid/{cid}/provenance",
    tag=TAG,
    path_params=PackCidPath,
    query=ProvenanceQuery,
    response=ProvenanceGraph,
    scopes=READ,
    errors=(PackNotFound,),
)
async def pack_provenance_by_cid(
    request: web.Request, parsed: Parsed[None, ProvenanceQuery, PackCidPath]
) -> ProvenanceGraph:
    """The provenance graph of the pack with this CID."""
    root = await _readable_pack_by_cid(request, parsed.path.cid, entries=True)
    return await _provenance(request, root, parsed.query.depth)


def _diff(base: ContextPack, other: ContextPack) -> PackDiff:
    if base.diaryId != other.diaryId:
        raise PackDiffCrossDiary("Only packs of the same diary can be compared")
    return diff_packs(base, other)


@endpoint(
    routes,
    "GET",
    "/packs/{id}/diff/{otherId}",
    tag=TAG,
    path_params=PackDiffPath,
    response=PackDiff,
    scopes=READ,
    errors=(RequestInvalid, PackNotFound),
)
async def diff_pack(request: web.Request, parsed: Parsed[None, None, PackDiffPath]) -> PackDiff:
    """What changed from this pack to the other: added, removed, reordered and
    compression-changed entries, with stats (same diary only)."""
    base = await readable_pack(request, parsed.path.id, entries=True)
    other = await readable_pack(request, parsed.path.otherId, entries=True)
    return _diff(base, other)


@endpoint(
    routes,
    "GET",
    "/packs/by-cid/{cid}/diff/by-cid/{otherCid}",
    tag=TAG,
    path_params=PackCidDiffPath,
    response=PackDiff,
    scopes=READ,
    errors=(RequestInvalid, PackNotFound),
)
async def diff_pack_by_cid(
    request: web.Request, parsed: Parsed[None, None, PackCidDiffPath]
) -> PackDiff:
    """The diff of two packs named by CID."""
    base = await _readable_pack_by_cid(request, parsed.path.cid, entries=True)
    other = await _readable_pack_by_cid(request, parsed.path.otherCid, entries=True)
    return _diff(base, other)


# --- rendered packs ------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/packs/{id}/render/preview",
    tag=TAG,
    path_params=PackPath,
    body=RenderRequest,
    response=RenderedPack,
    scopes=WRITE,
    errors=(RequestInvalid, PackNotFound, PermissionDenied, PackEntryDeleted),
)
async def preview_render(
    request: web.Request, parsed: Parsed[RenderRequest, None, PackPath]
) -> RenderedPack:
    """Render a pack as `POST /packs/{id}/render` would, and store nothing."""
    body = parsed.body
    pack = await _writable_pack(request, parsed.path.id)
    made = await repo.rendering(_pool(request), pack, body.renderMethod, body.renderedMarkdown)
    return made.model_copy(update={"pinned": body.pinned, "description": body.description})


@endpoint(
    routes,
    "POST",
    "/packs/{id}/render",
    tag=TAG,
    status=201,
    also=((200, "The same rendering again: the existing one"),),
    path_params=PackPath,
    body=RenderRequest,
    response=RenderedPack,
    scopes=WRITE,
    errors=(RequestInvalid, PackNotFound, PermissionDenied, RenderBusy, PackEntryDeleted),
    idempotent=True,
)
async def render_pack(
    request: web.Request, parsed: Parsed[RenderRequest, None, PackPath]
) -> web.StreamResponse | RenderedPack:
    """Store the immutable Markdown of a pack: `server:pack-to-docs-v1` renders it here; an
    agent-defined `renderMethod` brings `renderedMarkdown`. Addressed by its CID: the same
    rendering again answers the existing one (200)."""
    body = parsed.body
    principal = require_principal(request)
    pack = await _writable_pack(request, parsed.path.id)
    # the cheap refusals before a workflow starts (the step decides them again)
    repo.check_render_request(body.renderMethod, body.renderedMarkdown)
    key = run_key(request, "pack-render")
    workflow_id = keyed_workflow_id(key, render_workflow_id(pack.id, _request_cid(body)))
    created = await execute(
        request,
        PackRenderWorkflow.run,
        RenderInput(
            pack_id=pack.id,
            render_method=body.renderMethod,
            markdown=body.renderedMarkdown,
            pinned=body.pinned,
            description=body.description,
            created_by=principal.subject_id,
            created_by_ns=principal.subject_ns,
        ),
        workflow_id=workflow_id,
        on_duplicate=RenderBusy("This pack is being rendered"),
        key=key,
        search=[SearchAttributePair(DIARY_ID, str(pack.diaryId))],
    )
    rendered = await repo.get_rendered(_pool(request), created.rendered_id)
    assert rendered is not None
    result = rendered.model_copy(update={"created": created.created})
    return result if created.created else render(result, 200)


@endpoint(
    routes,
    "GET",
    "/rendered-packs/{id}",
    tag=TAG,
    path_params=PackPath,
    response=RenderedPack,
    scopes=READ,
    errors=(RenderedPackNotFound,),
)
async def get_rendered_pack(
    request: web.Request, parsed: Parsed[None, None, PackPath]
) -> RenderedPack:
    """One rendered pack with its Markdown, by its diary's visibility."""
    return await _readable_rendered(request, parsed.path.id)


@endpoint(
    routes,
    "GET",
    "/packs/{id}/rendered",
    tag=TAG,
    path_params=PackPath,
    response=RenderedPack,
    scopes=READ,
    errors=(PackNotFound,),
)
async def latest_rendered_pack(
    request: web.Request, parsed: Parsed[None, None, PackPath]
) -> RenderedPack:
    """The latest rendering of a pack (404 when it has none)."""
    pack = await readable_pack(request, parsed.path.id)
    rendered = await repo.latest_rendered(_pool(request), pack.id)
    if rendered is None:
        raise RenderedPackNotFound("This pack has not been rendered")
    return rendered


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}/rendered-packs",
    tag=TAG,
    path_params=DiaryPath,
    query=RenderedListQuery,
    response=RenderedPackList,
    scopes=READ,
    errors=(DiaryNotFound,),
)
async def list_rendered_packs(
    request: web.Request, parsed: Parsed[None, RenderedListQuery, DiaryPath]
) -> RenderedPackList:
    """A diary's rendered packs (without content), newest first; filters `sourcePackId` and
    `renderMethod`."""
    diary_id = parsed.path.diaryId
    query = parsed.query
    await readable_diary(request, diary_id)
    items, total = await repo.list_rendered(
        _pool(request), diary_id, query.sourcePackId, query.renderMethod, query.limit, query.offset
    )
    return RenderedPackList(items=items, total=total, limit=query.limit, offset=query.offset)


async def _check_verification(request: web.Request, rendered: RenderedPack, task_id: UUID) -> None:
    task = await repo.get_judge_task(_pool(request), task_id)
    if (
        task is None
        or task.task_type not in VERIFYING_TYPE_NAMES
        or task.status != "completed"
        or rendered.packCid not in repo.judged_cids(task)
    ):
        raise VerificationTaskInvalid.at(
            "/verifiedTaskId",
            "Must name a completed task of a verifying type "
            f"({', '.join(VERIFYING_TYPE_NAMES)}) whose judged_work reference carries "
            f"this rendered pack's CID ({rendered.packCid})",
        )


@endpoint(
    routes,
    "PATCH",
    "/rendered-packs/{id}",
    tag=TAG,
    path_params=PackPath,
    body=RenderedPackUpdateRequest,
    response=RenderedPack,
    scopes=WRITE,
    errors=(RequestInvalid, RenderedPackNotFound, PermissionDenied),
)
async def update_rendered_pack(
    request: web.Request, parsed: Parsed[RenderedPackUpdateRequest, None, PackPath]
) -> RenderedPack:
    """Pin or unpin (with a future `expiresAt`), describe, or record the judge task that
    verified this rendering. Its content never changes."""
    body = parsed.body
    rendered = await _readable_rendered(request, parsed.path.id)
    await require(request, "Diary", rendered.diaryId, "write")
    assert rendered.id is not None
    fields = set(body.model_fields_set)
    change = pin_change(rendered.pinned, fields, body.pinned, body.expiresAt)
    pinned, expires_at = change or (rendered.pinned, rendered.expiresAt)
    if body.verifiedTaskId is not None:
        await _check_verification(request, rendered, body.verifiedTaskId)
    elif "verifiedTaskId" in fields:
        raise VerificationFixed.at("/verifiedTaskId", "A verification cannot be removed")
    await execute(
        request,
        RenderedPackUpdateWorkflow.run,
        RenderedPackUpdateInput(
            rendered_id=rendered.id,
            pinned=pinned,
            expires_at=expires_at,
            description=body.description,
            set_description="description" in fields,
            verified_task_id=body.verifiedTaskId,
        ),
        workflow_id=rendered_update_workflow_id(rendered.id, _request_cid(body)),
        on_duplicate=RenderedPackBusy("This rendered pack is being updated"),
    )
    return await _readable_rendered(request, rendered.id)
