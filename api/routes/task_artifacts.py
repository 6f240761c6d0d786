"""Task-artifact routes (SPEC 2.6 "Task artifacts", 4.5, 8): stage, upload, list, download.

- `PUT /task-artifacts/staged?contentType&contentEncoding` (header `x-service-team-id`) stages
  input bytes for the team → `{cid, sizeBytes, contentType}`. Staged bytes are no record: never
  listed nor downloadable until `POST /tasks` binds them through a reference.
- `PUT /tasks/{id}/attempts/{n}/artifacts?kind&title&contentType&contentEncoding` attaches an
  output to a running attempt, by its claimant only → the artifact.
- `GET /tasks/{id}/artifacts?limit&cursor` → `{artifacts, nextCursor}` (inputs and outputs).
- `GET /tasks/{id}/artifacts/{cid}/content` (a CID bound anywhere on the task, inputs included)
  and `GET /tasks/{id}/attempts/{n}/artifacts/{cid}/content` stream the bytes as
  `application/octet-stream` with the headers `x-service-task-artifact-id`, `-cid`,
  `-content-type` and `-content-encoding`.

How an upload runs. The body is streamed in chunks into a temporary file while its CID is
computed (`BytesCidHasher`), and refused with 413 the moment it passes 25 MiB, before anything
is written. S3 is asked whether the object is there already (identical bytes are stored once):
with S3 down that answers 503 before anything is written. Then a workflow writes the rows that
name the CID (the permission checks are redone there under the attempt's row lock), and only
then are the bytes put at `artifacts/<cid>` (unless they were there). Bytes never travel
through Temporal: this request handler is the one place that writes them, the documented
exception (like task messages) to "every write is an activity". Rows first, object second:
the sweep deletes an object only while it holds the row of its blob, so an object is never
deleted under a row that names it; a request that dies between the two leaves a row whose
bytes a retry supplies (a staged row is swept after its grace period anyway).

Spooling to a file, rather than streaming a multipart upload to a temporary key and copying it
to the CID key, was measured faster here (bench/tasks_artifacts.py): one PUT of a known key,
no server-side copy, and no upload at all when the bytes are already stored.

Who may do what:
- stage: scope `task:write`; a member of the team (else 404 `team-not-found`) that may propose
  tasks in it (Team `propose_tasks`, else 403 `task-propose-forbidden`), since staged bytes
  exist only to be bound by a task it creates.
- upload: scope `task:execute`; the task visible to the caller (else 404); the attempt's
  claimant (else 403 `not-claimant`); the attempt running (409 `attempt-not-started` before
  the first heartbeat, `attempt-finished` after it ended).
- list and download: scope `task:read`; the task visible to the caller (else 404).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import IO, Any, Final, TypeVar
from uuid import UUID

from aiohttp import web
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)

from api import keys
from api.access import allowed, require_attempt_scopes, require_team_visible, visible_task
from api.auth import require_principal
from api.endpoint import Parsed, endpoint
from api.flows import waiting_on_workflow
from api.headers import TEAM_HEADER, require_team_header
from api.middleware import REQUEST_ID_HEADER
from api.reads import reader
from infra.repos import artifacts as artifact_reads
from infra.repos import team_reads
from infra.repos.artifacts import ArtifactBlob
from infra.s3 import BlobReader, artifact_key
from schemas import limits
from schemas.artifacts import (
    DEFAULT_CONTENT_TYPE,
    ArtifactAttachInput,
    ArtifactListQuery,
    ArtifactStageInput,
    AttemptArtifactContentPath,
    AttemptArtifactsPath,
    StagedArtifact,
    StageQuery,
    TaskArtifact,
    TaskArtifactContentPath,
    TaskArtifactList,
    TaskArtifactsPath,
    UploadQuery,
    artifact_from_row,
)
from schemas.errors import (
    ArtifactContentMissing,
    ArtifactMetadataConflict,
    ArtifactNotFound,
    AttemptFinished,
    AttemptNotFound,
    AttemptNotStarted,
    NotClaimant,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    ProfileScopeDenied,
    RequestInvalid,
    TaskNotFound,
    TaskProposeForbidden,
    TeamNotActive,
    TeamNotFound,
    TeamRequired,
    UnsupportedMediaType,
)
from schemas.kernel.attempts import is_claimant
from schemas.kernel.cids import BytesCidHasher
from schemas.kernel.cursors import Keyset
from workflows.artifacts import (
    ArtifactAttachWorkflow,
    ArtifactStageWorkflow,
    attach_workflow_id,
    stage_workflow_id,
)
from workflows.common import TEAM_ID

routes = web.RouteTableDef()
log = logging.getLogger(__name__)
TAG = "tasks"
UPLOAD_BUCKET: Final = "artifact_upload"
LIST_CURSOR_SCOPE: Final = "task-artifacts"
OCTET_STREAM: Final = "application/octet-stream"
ARTIFACT_ID_HEADER: Final = "x-service-task-artifact-id"
ARTIFACT_CID_HEADER: Final = "x-service-task-artifact-cid"
ARTIFACT_TYPE_HEADER: Final = "x-service-task-artifact-content-type"
ARTIFACT_ENCODING_HEADER: Final = "x-service-task-artifact-content-encoding"

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")


# --- receiving bytes --------------------------------------------------------------------------


@dataclass(frozen=True)
class SpooledBody:
    """A received request body: in a temporary file, with its size and CID."""

    file: IO[bytes]
    size: int
    cid: str


def _too_large() -> PayloadTooLarge:
    return PayloadTooLarge(f"An artifact is at most {limits.ARTIFACT_MAX_BYTES} bytes (25 MiB)")


def _check_body_type(request: web.Request) -> None:
    """The body is raw bytes: `application/octet-stream`, or no Content-Type at all. Anything
    else (a form, JSON) is almost always a client sending the wrong thing by accident."""
    if request.headers.get("Content-Type") and request.content_type != OCTET_STREAM:
        raise UnsupportedMediaType(
            f"Send the artifact as {OCTET_STREAM}, not {request.content_type}"
        )


def _absorb(file: IO[bytes], hasher: BytesCidHasher, pending: list[bytes]) -> None:
    """Hash and spool one block (runs in a thread: both release the GIL on large buffers)."""
    block = b"".join(pending)
    hasher.update(block)
    file.write(block)


@contextlib.asynccontextmanager
async def spooled_body(request: web.Request) -> AsyncIterator[SpooledBody]:
    """Read the body a block at a time into a temporary file, hashing as it goes; 413 as soon
    as it passes the limit (a declared Content-Length over it is refused before reading).
    The file is deleted when the block ends, whatever happens."""
    _check_body_type(request)
    declared = request.content_length
    if declared is not None and declared > limits.ARTIFACT_MAX_BYTES:
        raise _too_large()
    hasher = BytesCidHasher()
    with tempfile.TemporaryFile(prefix="cairn-artifact-") as file:
        pending: list[bytes] = []
        pending_bytes = 0
        async for chunk in request.content.iter_any():
            if hasher.size + pending_bytes + len(chunk) > limits.ARTIFACT_MAX_BYTES:
                raise _too_large()
            pending.append(chunk)
            pending_bytes += len(chunk)
            if pending_bytes >= limits.ARTIFACT_STREAM_CHUNK_BYTES:
                await asyncio.to_thread(_absorb, file, hasher, pending)
                pending, pending_bytes = [], 0
        if pending:
            await asyncio.to_thread(_absorb, file, hasher, pending)
        yield SpooledBody(file=file, size=hasher.size, cid=hasher.cid())


async def already_stored(request: web.Request, body: SpooledBody) -> bool:
    """Whether the bytes are at their CID already (dedupe by content). Asked before any row is
    written: with S3 down this fails (503) and the upload leaves nothing behind."""
    return bool(await request.app[keys.BLOBS].exists(artifact_key(body.cid)))


async def store_bytes(request: web.Request, body: SpooledBody, *, stored: bool) -> None:
    """Put the bytes at their CID unless they were stored already."""
    if not stored:
        await request.app[keys.BLOBS].put_file(artifact_key(body.cid), body.file, body.size)


async def run_upload_workflow(
    request: web.Request,
    run: Callable[[Any, ArgT], Awaitable[ResultT]],
    arg: ArgT,
    *,
    workflow_id: str,
    team_id: UUID,
) -> ResultT:
    """Start the workflow that writes an upload's rows and await it. Its id is the CID's, so
    two identical uploads at once share one run (USE_EXISTING) instead of one failing."""
    app = request.app
    async with waiting_on_workflow(request):
        result: ResultT = await app[keys.TEMPORAL].execute_workflow(
            run,
            arg,
            id=workflow_id,
            task_queue=app[keys.SETTINGS].temporal_task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=TypedSearchAttributes([SearchAttributePair(TEAM_ID, str(team_id))]),
        )
    return result


# --- staging ----------------------------------------------------------------------------------


async def _proposing_team(request: web.Request, team_id: UUID) -> None:
    """The team of the header, if the caller may create tasks in it (and so stage for them)."""
    team = await team_reads.get_team(request.app[keys.READ_POOL], team_id)
    await require_team_visible(request, team_id)
    if team is None:
        raise TeamNotFound("No such team")
    if not await allowed(request, "Team", team_id, "propose_tasks"):
        raise TaskProposeForbidden("Staging artifacts needs 'propose_tasks' on the team")
    if team.status != "active":
        raise TeamNotActive("The team is not active")


@endpoint(
    routes,
    "PUT",
    "/task-artifacts/staged",
    tag=TAG,
    query=StageQuery,
    response=StagedArtifact,
    scopes=("task:write",),
    headers=(TEAM_HEADER,),
    rate_bucket=UPLOAD_BUCKET,
    errors=(
        TeamRequired,
        TeamNotFound,
        PermissionDenied,
        TaskProposeForbidden,
        TeamNotActive,
        PayloadTooLarge,
        UnsupportedMediaType,
    ),
)
async def stage_task_artifact(
    request: web.Request, parsed: Parsed[None, StageQuery]
) -> StagedArtifact:
    """Stage bytes (≤ 25 MiB, `application/octet-stream`) for binding at task creation."""
    team_id = require_team_header(request)
    await _proposing_team(request, team_id)
    query = parsed.query
    content_type = query.contentType or DEFAULT_CONTENT_TYPE
    async with spooled_body(request) as body:
        stored = await already_stored(request, body)
        await run_upload_workflow(
            request,
            ArtifactStageWorkflow.run,
            ArtifactStageInput(
                team_id=team_id,
                cid=body.cid,
                size_bytes=body.size,
                content_type=content_type,
                content_encoding=query.contentEncoding,
            ),
            workflow_id=stage_workflow_id(team_id, body.cid),
            team_id=team_id,
        )
        await store_bytes(request, body, stored=stored)
    return StagedArtifact(cid=body.cid, sizeBytes=body.size, contentType=content_type)


# --- output artifacts -------------------------------------------------------------------------


@endpoint(
    routes,
    "PUT",
    "/tasks/{id}/attempts/{n}/artifacts",
    tag=TAG,
    path_params=AttemptArtifactsPath,
    query=UploadQuery,
    response=TaskArtifact,
    scopes=("task:execute",),
    headers=(TEAM_HEADER,),
    rate_bucket=UPLOAD_BUCKET,
    errors=(
        TaskNotFound,
        AttemptNotFound,
        NotClaimant,
        ProfileScopeDenied,
        AttemptNotStarted,
        AttemptFinished,
        ArtifactMetadataConflict,
        PayloadTooLarge,
        UnsupportedMediaType,
    ),
)
async def upload_task_artifact(
    request: web.Request, parsed: Parsed[None, UploadQuery, AttemptArtifactsPath]
) -> TaskArtifact:
    """Attach an output artifact to a running attempt (its claimant only); the same bytes
    again with the same metadata answer the existing artifact."""
    path = parsed.path
    query = parsed.query
    principal = require_principal(request)
    task = await visible_task(request, path.id)
    pool = request.app[keys.READ_POOL]
    # Checked before the body is read, so a refused upload costs nothing; again in the workflow.
    attempt = await artifact_reads.get_attempt(pool, path.id, path.n)
    if attempt is not None and is_claimant(attempt.claimed_by_agent_id, principal.agent_id):
        require_attempt_scopes(request, attempt.policy_snapshot)
    artifact_reads.attempt_guard(attempt, path.n, principal.agent_id)
    assert principal.agent_id is not None  # the guard refuses anyone but the claiming agent
    async with spooled_body(request) as body:
        stored = await already_stored(request, body)
        attached = await run_upload_workflow(
            request,
            ArtifactAttachWorkflow.run,
            ArtifactAttachInput(
                artifact_id=uuid.uuid4(),
                team_id=task.teamId,
                task_id=path.id,
                attempt_n=path.n,
                agent_id=principal.agent_id,
                cid=body.cid,
                size_bytes=body.size,
                kind=query.kind,
                title=query.title,
                content_type=query.contentType or DEFAULT_CONTENT_TYPE,
                content_encoding=query.contentEncoding,
            ),
            workflow_id=attach_workflow_id(path.id, path.n, body.cid),
            team_id=task.teamId,
        )
        await store_bytes(request, body, stored=stored)
    return artifact_from_row(attached.model_dump())


# --- listing ----------------------------------------------------------------------------------


@endpoint(
    routes,
    "GET",
    "/tasks/{id}/artifacts",
    tag=TAG,
    path_params=TaskArtifactsPath,
    query=ArtifactListQuery,
    response=TaskArtifactList,
    scopes=("task:read",),
    headers=(TEAM_HEADER,),
    errors=(TaskNotFound, RequestInvalid),
)
async def list_task_artifacts(
    request: web.Request, parsed: Parsed[None, ArtifactListQuery, TaskArtifactsPath]
) -> web.StreamResponse:
    """The artifacts bound to a task (inputs, then outputs as uploaded), a page at a time."""
    path = parsed.path
    query = parsed.query
    await visible_task(request, path.id)
    keyset = Keyset(
        request.app[keys.SETTINGS].secret_bytes, LIST_CURSOR_SCOPE, {"taskId": str(path.id)}
    )
    artifacts = await artifact_reads.list_page(
        reader(request), path.id, keyset.after(query.cursor), query.limit + 1
    )
    page, next_cursor = keyset.page(artifacts, query.limit, lambda a: (a.createdAt, a.id))
    listing = TaskArtifactList(artifacts=page, nextCursor=next_cursor)
    payload = listing.model_dump(mode="json", exclude_none=True)
    for artifact in payload["artifacts"]:
        artifact.setdefault("attemptN", None)  # null for an input, not absent
    payload["nextCursor"] = next_cursor  # null on the last page, not absent
    return web.json_response(payload)


# --- downloads --------------------------------------------------------------------------------


def _no_such_artifact() -> NotFound:
    return ArtifactNotFound("No such artifact on this task")


async def _stream(request: web.Request, artifact: ArtifactBlob) -> web.StreamResponse:
    """Send the artifact's bytes as they come from S3, with its metadata in headers."""
    reader: BlobReader | None = await request.app[keys.BLOBS].open(artifact_key(artifact.cid))
    if reader is None:  # its upload has not stored the bytes (yet)
        raise ArtifactContentMissing("The artifact's bytes are not stored (yet): retry shortly")
    response = web.StreamResponse(
        headers=_metadata_headers(artifact) | _middleware_headers(request)
    )
    response.content_type = OCTET_STREAM
    response.content_length = reader.size
    try:
        await response.prepare(request)
        async for chunk in reader.chunks(limits.ARTIFACT_STREAM_CHUNK_BYTES):
            await response.write(chunk)
        await response.write_eof()
    except Exception as exc:
        # Headers are gone: a problem body can no longer be sent, and anything written now
        # would be taken for content. Cut the connection so the client sees a short body.
        log.warning("artifact download of %s cut short: %r", artifact.cid, exc)
        if request.transport is not None:
            request.transport.close()
    finally:
        reader.close()
    return response


def _middleware_headers(request: web.Request) -> dict[str, str]:
    """What the problem middleware adds to every response, set here before the headers are
    sent (it adds them after the handler returns, too late for a streamed response)."""
    headers = {REQUEST_ID_HEADER: request[keys.REQUEST_ID]}
    quota = request.get(keys.RATE_QUOTA)
    if quota is not None:
        headers["x-ratelimit-limit"] = str(quota.limit)
        headers["x-ratelimit-remaining"] = str(quota.remaining)
        headers["x-ratelimit-reset"] = str(quota.reset_sec)
    return headers


def _metadata_headers(artifact: ArtifactBlob) -> dict[str, str]:
    headers = {
        ARTIFACT_ID_HEADER: str(artifact.id),
        ARTIFACT_CID_HEADER: artifact.cid,
        ARTIFACT_TYPE_HEADER: artifact.content_type or DEFAULT_CONTENT_TYPE,
    }
    if artifact.content_encoding:
        headers[ARTIFACT_ENCODING_HEADER] = artifact.content_encoding
    return headers


@endpoint(
    routes,
    "GET",
    "/tasks/{id}/artifacts/{cid}/content",
    tag=TAG,
    path_params=TaskArtifactContentPath,
    scopes=("task:read",),
    headers=(TEAM_HEADER,),
    raw_response=OCTET_STREAM,
    errors=(TaskNotFound, ArtifactNotFound),
)
async def download_task_artifact_by_cid(
    request: web.Request, parsed: Parsed[None, None, TaskArtifactContentPath]
) -> web.StreamResponse:
    """The bytes of a CID bound anywhere on the task (an input, or any attempt's output)."""
    path = parsed.path
    await visible_task(request, path.id)
    artifact = await artifact_reads.bound_on_task(reader(request), path.id, path.cid)
    if artifact is None:
        raise _no_such_artifact()
    return await _stream(request, artifact)


@endpoint(
    routes,
    "GET",
    "/tasks/{id}/attempts/{n}/artifacts/{cid}/content",
    tag=TAG,
    path_params=AttemptArtifactContentPath,
    scopes=("task:read",),
    headers=(TEAM_HEADER,),
    raw_response=OCTET_STREAM,
    errors=(TaskNotFound, AttemptNotFound, ArtifactNotFound),
)
async def download_task_artifact(
    request: web.Request, parsed: Parsed[None, None, AttemptArtifactContentPath]
) -> web.StreamResponse:
    """The bytes of one attempt's output artifact."""
    path = parsed.path
    await visible_task(request, path.id)
    artifact = await artifact_reads.bound_on_attempt(reader(request), path.id, path.n, path.cid)
    if artifact is None:
        raise _no_such_artifact()
    return await _stream(request, artifact)
