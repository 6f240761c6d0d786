"""Task routes (SPEC 4.5): create, list, get, the type registry, attempts, grants, messages.

The attempt workflow `task/<taskId>` owns every state change of a task (claim, heartbeat,
complete, ... live in `routes/task_attempts.py`); these routes validate a new task and start
that workflow, read the rows it projects, write grants through a request workflow, and append
streamed messages, the one write the API makes itself (through `keys.MESSAGE_WRITER`).

Who may do what (SPEC 5 "Task authorization rules"; the permission engine decides):

- create: scope `task:write`; `propose_tasks` on the team (else 403
  `task-propose-forbidden`); a provenance diary that exists (else 404 `diary-not-found`) and
  that the caller can read (else 403 `provenance-diary-unreadable`).
- list: scope `task:read`; the `x-service-team-id` header (400 without); membership of that
  team in any role (else 404 `team-not-found`).
- get, attempts, read messages: scope `task:read`; membership of the owning team or an
  explicit Task grant (else 404).
- grants: scope `task:manage` (`task:read` to list them); the owning team's owners or managers,
  or an explicit task manager (Task `cancel`; else 403 `task-manage-forbidden`).
- append messages: scope `task:execute`; being the attempt's claimant (else 403
  `not-claimant`), and the attempt claimed or running: from the claim on, before the first
  heartbeat (else 409 `attempt-terminal`).

Choices where the spec is terse:
- Reading a task by id, like listing, is open to every member of the owning team including a
  bare executor: a daemon must be a member of the team whose queue it polls (SPEC 5), and it
  must be able to read what it may claim. Team `access` alone would hide the queue from it.
- An explicit grantee reads by id only; when it sends `x-service-team-id` it must be the owning
  team (another team is a 404, as for anyone).
- `claimable=true` keeps queued tasks whose claim condition holds now.
- `runtimeProfileId` lists the queue as that runtime profile of the team sees it: tasks pinned
  (`allowedProfiles`) to other profiles and types outside its policy's `taskTypes` are left
  out, unrestricted ones stay (400 `unknown-runtime-profile` for a profile not of the team).
  On create, each `allowedProfiles` entry must be a profile of the team (the same 400).
- A continuation (`input.continueFrom`, on a `continuable` type: freeform) must name a
  completed task of the same type and team
  that the caller can read; it inherits the source's project. The automatic claim condition
  (the source is `completed`) is added unless the request brings its own: the source is already
  completed, a terminal state, so the automatic one can never gate anything.
- An input reference naming an artifact binds a CID staged by the task's team; two references
  to the same CID are one binding and are rejected as ambiguous. The attempt workflow writes
  the `task_artifacts` rows from `TaskStart.references` when it inserts the task.
- `Idempotency-Key` (1..200 characters): the task id is a uuid5 of (team, creator, key), so
  concurrent retries start the same workflow and converge on one row; the canonical body's json
  CID tells a retry (201, the same task) from a reuse with another body (409
  `idempotency-key-reused`).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from uuid import UUID

import asyncpg
from aiohttp import web
from opentelemetry.propagate import inject
from temporalio.common import SearchAttributePair

from api import keys
from api.access import (
    allowed,
    attempt_scopes_denied,
    can_read,
    can_view_task,
    load_diary,
    require_team_visible,
    visible_task,
)
from api.auth import require_principal
from api.endpoint import Parsed, endpoint, render
from api.flows import execute
from api.headers import IDEMPOTENCY_HEADER, require_team_header, team_header
from api.idempotency import idempotency_key, key_reused, keyed_workflow_id, run_key
from api.pack_tasks import names_rendered_pack, rendered_pack_reference
from api.reads import reader
from api.task_flows import start_task
from api.task_type_checks import run_create_checks
from infra.repos import runtime_profiles, task_reads
from infra.repos.task_messages import AppendRefused, append_messages
from schemas.errors import (
    ArtifactNotStaged,
    AttemptFinished,
    AttemptNotFound,
    ClaimConditionTaskNotFound,
    ContinuationProjectMismatch,
    ContinuationSourceNotCompleted,
    ContinuationSourceNotFound,
    ContinuationTeamMismatch,
    ContinuationTypeMismatch,
    DiaryNotFound,
    DomainError,
    FieldError,
    GrantInProgress,
    IdempotencyKeyFailed,
    InternalError,
    NotClaimant,
    PermissionDenied,
    ProfileScopeDenied,
    ProjectNotFound,
    ProvenanceDiaryUnreadable,
    ReferenceDuplicate,
    ReferenceEmpty,
    ReferenceNotFound,
    ReferencesRequired,
    RequestInvalid,
    SubjectNotFound,
    TaskInputInvalid,
    TaskManageForbidden,
    TaskNotFound,
    TaskOwnerGone,
    TaskProposeForbidden,
    TeamMismatch,
    TeamNotFound,
    TeamRequired,
)
from schemas.kernel.cids import json_cid
from schemas.kernel.cursors import Keyset
from schemas.kernel.permissions import RelationTuple, Subject, TupleDelete, TupleWrite
from schemas.kernel.task_types import (
    TASK_TYPES,
    TaskType,
    get_task_type,
    input_schema_cid,
    validate_input,
)
from schemas.kernel.task_types import input_schema as type_input_schema
from schemas.principals import Principal
from schemas.runtime_profiles import profile_scope_denied, unknown_profile
from schemas.task_api import (
    NO_PROJECT,
    TASK_GRANT_RELATIONS,
    AppendMessagesRequest,
    AttemptPath,
    CreateTaskRequest,
    MessagesAppended,
    MessagesQuery,
    Task,
    TaskAttemptList,
    TaskGrant,
    TaskGrantList,
    TaskGrantRequest,
    TaskGrantRevoked,
    TaskList,
    TaskListQuery,
    TaskMessageList,
    TaskPath,
    TaskSchema,
    TaskSchemaList,
)
from schemas.task_attempts import report_refused
from schemas.tasks import TaskStart
from workflows.common import TASK_TYPE, TEAM_ID
from workflows.task_grants import (
    TaskGrantRevokeWorkflow,
    TaskGrantWriteWorkflow,
    task_grant_workflow_id,
)

routes = web.RouteTableDef()
TAG = "tasks"
TEAM_HEADER_DOC = ("x-service-team-id",)
LIST_CURSOR_SCOPE: Final = "tasks"
# uuid5 namespace of task ids derived from an Idempotency-Key (fixed forever: ids depend on it)
IDEMPOTENT_TASK_IDS: Final = uuid.UUID("6f0c2a52-52d4-5b8e-9a55-3c1f1e0a7b10")


def _pool(request: web.Request) -> asyncpg.Pool:
    return reader(request)  # the replica for a request that writes nothing (api/reads.py)


# --- the type registry ------------------------------------------------------------------------


@endpoint(
    routes,
    "GET",
    "/tasks/schemas",
    tag=TAG,
    response=TaskSchemaList,
    scopes=("task:read",),
)
async def list_task_schemas(request: web.Request, parsed: Parsed) -> TaskSchemaList:
    """The registered task types: output kind, input schema and its CID."""
    return TaskSchemaList(
        items=[
            TaskSchema(
                taskType=t.name,
                outputKind=t.output_kind,
                inputSchema=type_input_schema(t),
                inputSchemaCid=input_schema_cid(t),
                requiresReferences=t.requires_references,
            )
            for t in TASK_TYPES
        ]
    )


# --- create -----------------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/tasks",
    tag=TAG,
    status=201,
    body=CreateTaskRequest,
    response=Task,
    scopes=("task:write",),
    headers=TEAM_HEADER_DOC,
    errors=(
        RequestInvalid,
        PermissionDenied,
        DiaryNotFound,
        TaskOwnerGone,
        IdempotencyKeyFailed,
    ),
    # SPEC 4.5's own rule (a key names a task row: 201 with it again), not `api.flows`'
    idempotent=True,
)
async def create_task(
    request: web.Request, parsed: Parsed[CreateTaskRequest]
) -> web.StreamResponse:
    """Create a task (queued); its attempt workflow `task/<taskId>` starts at once.

    Order of checks: the body (closed; 400), the type and its input schema (400, a pointer per
    error), references required by the type (400); then `propose_tasks` on the team (403), the
    provenance diary (404 when missing, 403 when unreadable); then what depends on stored
    state: a replayed `Idempotency-Key` (201 with the same task, 409 with another body), the
    continuation source, the project, the pinned runtime profiles (`allowedProfiles`, each one
    of the team's), the staged artifacts and the claim condition (400).
    Nothing is written unless every check passes.
    """
    body = parsed.body
    principal = require_principal(request)
    key = idempotency_key(request)
    task_type = get_task_type(body.taskType)
    _check_team_header(request, body.teamId)
    _check_input(task_type, body)

    if not await allowed(request, "Team", body.teamId, "propose_tasks"):
        raise TaskProposeForbidden(
            "Proposing tasks needs an owner, a manager or an agent executor of the team"
        )
    diary = await load_diary(request, body.diaryId)
    if not await can_read(request, diary):
        raise ProvenanceDiaryUnreadable("The caller cannot read the provenance diary")

    request_cid = json_cid(body.canonical())
    task_id = uuid.uuid4()
    if key is not None:
        task_id = _idempotent_task_id(body.teamId, principal, key)
        replayed = await _replay(request, body.teamId, principal, key, request_cid)
        if replayed is not None:
            return render(replayed, 201)

    project_id, continuation_condition = await _continuation(request, body)
    await _check_project(request, body.teamId, project_id)
    await _check_allowed_profiles(request, body)
    references = await _bound_references(request, body)
    await run_create_checks(request, task_type, body.input, body.references)
    claim_condition = await _claim_condition(request, body, continuation_condition)

    start = TaskStart(
        task_id=task_id,
        team_id=body.teamId,
        diary_id=body.diaryId,
        project_id=project_id,
        task_type=task_type.name,
        title=body.title,
        input=body.input,
        input_cid=json_cid(body.input),
        input_schema_cid=input_schema_cid(task_type),
        output_kind=task_type.output_kind,
        correlation_id=body.correlationId,
        references=references,
        claim_condition=claim_condition,
        allowed_profiles=[p.model_dump(mode="json") for p in body.allowedProfiles],
        required_trust_level=body.requiredExecutorTrustLevel,
        max_attempts=body.maxAttempts,
        dispatch_timeout_sec=body.effective_dispatch_timeout_sec(),
        running_timeout_sec=body.effective_running_timeout_sec(),
        expires_at=datetime.now(UTC) + timedelta(seconds=body.effective_expires_in_sec()),
        proposed_by_agent_id=principal.agent_id,
        proposed_by_human_id=principal.human_id,
        idempotency_key=key,
        idempotency_cid=request_cid if key is not None else None,
        traceparent=_traceparent(),
    )
    await start_task(request, start)
    task = await task_reads.get_task(_pool(request), task_id)
    if task is None:
        # `start_task` returns once the row is committed, or at once when a workflow under this
        # id already ended: with a key, an earlier request's creation that failed (its run is
        # closed without a row), so this key cannot name a task any more.
        if key is not None:
            raise IdempotencyKeyFailed(
                f"An earlier request with this {IDEMPOTENCY_HEADER} failed; use a new key"
            )
        raise InternalError("The task was started but its row is not readable")
    if key is not None:
        # a concurrent first use of the key with another body may have won
        stored = await task_reads.task_for_idempotency_key(
            _pool(request), body.teamId, principal.subject_id, key
        )
        if stored is None or stored.idempotency_cid != request_cid:
            raise key_reused()
    return render(task, 201)


def _idempotent_task_id(team_id: UUID, principal: Principal, key: str) -> UUID:
    """The same (team, creator, key) always names the same task, so retries converge."""
    name = f"{team_id}|{principal.subject_ns}|{principal.subject_id}|{key}"
    return uuid.uuid5(IDEMPOTENT_TASK_IDS, name)


async def _replay(
    request: web.Request, team_id: UUID, principal: Principal, key: str, request_cid: str
) -> Task | None:
    found = await task_reads.task_for_idempotency_key(
        _pool(request), team_id, principal.subject_id, key
    )
    if found is None:
        return None
    if found.idempotency_cid != request_cid:
        raise key_reused()
    return await task_reads.get_task(_pool(request), found.id)


def _check_team_header(request: web.Request, team_id: UUID) -> None:
    header = team_header(request)
    if header is not None and header != team_id:
        raise TeamMismatch(
            "The x-service-team-id header names another team than teamId",
            errors=[FieldError(pointer="/teamId", message="differs from x-service-team-id")],
        )


def _check_input(task_type: TaskType, body: CreateTaskRequest) -> None:
    errors = validate_input(task_type, body.input)
    if errors:
        raise TaskInputInvalid(
            f"The input does not match the {task_type.name} input schema", errors=errors
        )
    if task_type.requires_references and not body.references:
        raise ReferencesRequired(
            f"A {task_type.name} task needs at least one reference",
            errors=[FieldError(pointer="/references", message="at least one is required")],
        )
    role = task_type.required_reference_role
    if role is not None and not any(ref.role == role for ref in body.references):
        raise ReferencesRequired(
            f"A {task_type.name} task needs a {role} reference",
            errors=[FieldError(pointer="/references", message=f"a {role} reference is required")],
        )
    for i, ref in enumerate(body.references):
        if ref.artifact is None and ref.taskId is None:
            raise ReferenceEmpty(
                "A reference names an artifact, a task, or both",
                errors=[FieldError(pointer=f"/references/{i}", message="names nothing")],
            )


async def _continuation(
    request: web.Request, body: CreateTaskRequest
) -> tuple[UUID | None, dict[str, Any] | None]:
    """The project and automatic claim condition of a continuation; `(projectId, None)` for
    any other task. The schema already rejected `execution.workspace` with `continueFrom`."""
    task_type = get_task_type(body.taskType)
    source_ref = body.input.get("continueFrom") if task_type.continuable else None
    if not isinstance(source_ref, dict):
        return body.projectId, None
    pointer = "/input/continueFrom"
    source_id = UUID(str(source_ref["taskId"]))
    source = await task_reads.get_task(_pool(request), source_id)
    if source is None or not await can_view_task(request, source.teamId, source.id):
        raise ContinuationSourceNotFound.at(f"{pointer}/taskId", "No such task")
    if source.teamId != body.teamId:
        raise ContinuationTeamMismatch.at(
            f"{pointer}/taskId", "The source task belongs to another team"
        )
    if source.taskType != task_type.name:
        raise ContinuationTypeMismatch.at(
            f"{pointer}/taskId", f"Only a {task_type.name} task can be continued"
        )
    attempt_n = source_ref.get("attemptN")
    completed = await task_reads.completed_attempt_n(_pool(request), source_id, attempt_n)
    if source.status != "completed" or completed is None:
        what = f"attempt {attempt_n}" if attempt_n is not None else "task"
        raise ContinuationSourceNotCompleted.at(
            f"{pointer}/{'attemptN' if attempt_n is not None else 'taskId'}",
            f"The source {what} is not completed",
        )
    inherited = source.projectId
    if "projectId" in body.model_fields_set and body.projectId != inherited:
        raise ContinuationProjectMismatch.at(
            "/projectId", "A continuation stays in its source's project; omit projectId"
        )
    condition = {"kind": "task_status", "taskId": str(source_id), "statuses": ["completed"]}
    return inherited, condition


async def _check_project(request: web.Request, team_id: UUID, project_id: UUID | None) -> None:
    if project_id is None:
        return
    if await task_reads.project_team(_pool(request), project_id) != team_id:
        raise ProjectNotFound.at("/projectId", "No such project in this team")


async def _check_allowed_profiles(request: web.Request, body: CreateTaskRequest) -> None:
    """Each pinned profile is one of the team's: a task pinned to none could never be claimed."""
    if not body.allowedProfiles:
        return
    known = await runtime_profiles.team_profile_ids(_pool(request), body.teamId)
    for i, pinned in enumerate(body.allowedProfiles):
        if pinned.profileId not in known:
            raise unknown_profile(f"/allowedProfiles/{i}/profileId")


async def _bound_references(request: web.Request, body: CreateTaskRequest) -> list[dict[str, Any]]:
    """The references as stored: artifact CIDs checked against the team's staged artifacts,
    `kind` defaulting to `input`, `title` to the CID (SPEC 2.6), tasks checked readable."""
    cids = [
        ref.artifact.cid
        for ref in body.references
        if ref.artifact is not None and not names_rendered_pack(ref)
    ]
    staged = await task_reads.staged_artifacts(_pool(request), body.teamId, cids) if cids else {}
    seen: set[str] = set()
    bound: list[dict[str, Any]] = []
    for i, ref in enumerate(body.references):
        stored: dict[str, Any] = {"role": ref.role, "taskId": None}
        if ref.taskId is not None:
            task = await task_reads.get_task(_pool(request), ref.taskId)
            if task is None or not await can_view_task(request, task.teamId, task.id):
                raise ReferenceNotFound.at(f"/references/{i}/taskId", "No such task")
            stored["taskId"] = str(ref.taskId)
        if names_rendered_pack(ref):
            stored["artifact"] = await rendered_pack_reference(request, ref, f"/references/{i}")
        elif ref.artifact is not None:
            cid = ref.artifact.cid
            pointer = f"/references/{i}/artifact/cid"
            if cid not in staged:
                raise ArtifactNotStaged.at(pointer, "Not an artifact staged by this team")
            if cid in seen:
                raise ReferenceDuplicate.at(pointer, "This CID is referenced twice")
            seen.add(cid)
            stored["artifact"] = {
                "cid": cid,
                "contentType": ref.artifact.contentType or staged[cid].content_type,
                "kind": ref.artifact.kind or "input",
                "title": ref.artifact.title or cid,
            }
        bound.append(stored)
    return bound


async def _claim_condition(
    request: web.Request, body: CreateTaskRequest, automatic: dict[str, Any] | None
) -> dict[str, Any] | None:
    if body.claimCondition is None:
        return automatic
    gate = await task_reads.get_task(_pool(request), body.claimCondition.taskId)
    if gate is None or not await can_view_task(request, gate.teamId, gate.id):
        raise ClaimConditionTaskNotFound.at("/claimCondition/taskId", "No such task")
    return body.claimCondition.model_dump(mode="json")


def _traceparent() -> str | None:
    """W3C trace context of this request, so the claim continues the creation's trace."""
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get("traceparent")


# --- list and get -------------------------------------------------------------------------------


@endpoint(
    routes,
    "GET",
    "/tasks",
    tag=TAG,
    query=TaskListQuery,
    response=TaskList,
    scopes=("task:read",),
    headers=TEAM_HEADER_DOC,
    errors=(RequestInvalid, TeamRequired, TeamNotFound),
)
async def list_tasks(
    request: web.Request, parsed: Parsed[None, TaskListQuery]
) -> web.StreamResponse:
    """The team's tasks, newest first, filtered; `nextCursor` pages with the same filters."""
    query = parsed.query
    team_id = require_team_header(request)
    await require_team_visible(request, team_id)
    where = task_reads.TaskFilter(
        team_id=team_id,
        statuses=query.status_filter(),
        task_types=query.type_filter(),
        correlation_id=query.correlationId,
        general_only=query.projectId == NO_PROJECT,
        project_id=query.projectId if isinstance(query.projectId, UUID) else None,
        diary_id=query.diaryId,
        claimable_only=bool(query.claimable),
        **await _profile_view(request, team_id, query.runtimeProfileId),
    )
    keyset = Keyset(
        request.app[keys.SETTINGS].secret_bytes, LIST_CURSOR_SCOPE, _cursor_binding(where)
    )
    tasks = await task_reads.list_tasks(
        _pool(request), where, keyset.after(query.cursor), query.limit + 1
    )
    page, next_cursor = keyset.page(tasks, query.limit, lambda t: (t.createdAt, t.id))
    listed = TaskList(items=page)
    payload = listed.model_dump(mode="json", exclude_none=True)
    payload["nextCursor"] = next_cursor  # null on the last page, not absent
    return render(payload)


async def _profile_view(
    request: web.Request, team_id: UUID, profile_id: UUID | None
) -> dict[str, Any]:
    """The filter fields of a runtime profile's view of the queue (none without a profile)."""
    if profile_id is None:
        return {}
    profile = await runtime_profiles.team_profile(_pool(request), team_id, profile_id)
    if profile is None:
        raise unknown_profile("/query/runtimeProfileId")
    return {"runtime_profile_id": profile.id, "profile_task_types": profile.policy.taskTypes}


def _cursor_binding(where: task_reads.TaskFilter) -> dict[str, str | bool | None]:
    """The filters a cursor is bound to: reusing it with others is a 400, not another page."""
    return {
        "team": str(where.team_id),
        "statuses": ",".join(where.statuses or []) or None,
        "types": ",".join(where.task_types or []) or None,
        "correlation": str(where.correlation_id) if where.correlation_id else None,
        "general": where.general_only,
        "project": str(where.project_id) if where.project_id else None,
        "diary": str(where.diary_id) if where.diary_id else None,
        "claimable": where.claimable_only,
        "profile": str(where.runtime_profile_id) if where.runtime_profile_id else None,
    }


@endpoint(
    routes,
    "GET",
    "/tasks/{id}",
    tag=TAG,
    path_params=TaskPath,
    response=Task,
    scopes=("task:read",),
    headers=TEAM_HEADER_DOC,
    errors=(TaskNotFound,),
)
async def get_task(request: web.Request, parsed: Parsed[None, None, TaskPath]) -> Task:
    """One task (owning-team members and explicit grantees; 404 for anyone else)."""
    return await visible_task(request, parsed.path.id)


@endpoint(
    routes,
    "GET",
    "/tasks/{id}/attempts",
    tag=TAG,
    path_params=TaskPath,
    response=TaskAttemptList,
    scopes=("task:read",),
    headers=TEAM_HEADER_DOC,
    errors=(TaskNotFound,),
)
async def list_task_attempts(
    request: web.Request, parsed: Parsed[None, None, TaskPath]
) -> TaskAttemptList:
    """The task's attempts, first to last."""
    task = await visible_task(request, parsed.path.id)
    return TaskAttemptList(items=await task_reads.list_attempts(_pool(request), task.id))


# --- grants ------------------------------------------------------------------------------------


async def _managed_task(request: web.Request, task_id: UUID) -> Task:
    """The task if the caller may share it: owning team owners/managers or a task manager."""
    task = await visible_task(request, task_id)
    if not (
        await allowed(request, "Team", task.teamId, "write")
        or await allowed(request, "Task", task_id, "cancel")
    ):
        raise TaskManageForbidden(
            "Sharing a task needs an owner or manager of its team or a task manager"
        )
    return task


def _grant_tuple(task_id: UUID, grant: TaskGrantRequest) -> RelationTuple:
    subject = Subject(
        ns=grant.subjectNs,
        id=str(grant.subjectId),
        relation="members" if grant.subjectNs == "Group" else None,
    )
    return RelationTuple.grant("Task", task_id, TASK_GRANT_RELATIONS[grant.role], subject)


@endpoint(
    routes,
    "POST",
    "/tasks/{id}/grants",
    tag=TAG,
    status=201,
    path_params=TaskPath,
    body=TaskGrantRequest,
    response=TaskGrant,
    scopes=("task:manage",),
    headers=TEAM_HEADER_DOC,
    errors=(TaskNotFound, PermissionDenied, GrantInProgress),
    idempotent=True,
)
async def create_task_grant(
    request: web.Request, parsed: Parsed[TaskGrantRequest, None, TaskPath]
) -> TaskGrant:
    """Make an agent, a human or a group's members writers (view, claim) or managers (view,
    claim, cancel) of one task. Granting twice is a no-op."""
    task_id = parsed.path.id
    grant = parsed.body
    task = await _managed_task(request, task_id)
    if not await task_reads.subject_exists(_pool(request), grant.subjectNs, grant.subjectId):
        raise SubjectNotFound(f"No such {grant.subjectNs}")
    key = run_key(request, "task-grant")
    await execute(
        request,
        TaskGrantWriteWorkflow.run,
        TupleWrite(tuples=[_grant_tuple(task_id, grant)]),
        workflow_id=keyed_workflow_id(
            key, task_grant_workflow_id(task_id, grant.subjectNs, grant.subjectId, grant.role)
        ),
        on_duplicate=GrantInProgress("This grant is being changed"),
        key=key,
        search=_search(task),
        team=task.teamId,
    )
    return TaskGrant(
        taskId=task_id, subjectId=grant.subjectId, subjectNs=grant.subjectNs, role=grant.role
    )


@endpoint(
    routes,
    "GET",
    "/tasks/{id}/grants",
    tag=TAG,
    path_params=TaskPath,
    response=TaskGrantList,
    scopes=("task:read",),
    headers=TEAM_HEADER_DOC,
    errors=(TaskNotFound, PermissionDenied),
)
async def list_task_grants(
    request: web.Request, parsed: Parsed[None, None, TaskPath]
) -> TaskGrantList:
    """Who holds explicit grants on the task (same authority as granting)."""
    task_id = parsed.path.id
    await _managed_task(request, task_id)
    return TaskGrantList(items=await task_reads.list_grants(_pool(request), task_id))


@endpoint(
    routes,
    "DELETE",
    "/tasks/{id}/grants",
    tag=TAG,
    path_params=TaskPath,
    body=TaskGrantRequest,
    response=TaskGrantRevoked,
    scopes=("task:manage",),
    headers=TEAM_HEADER_DOC,
    errors=(TaskNotFound, PermissionDenied, GrantInProgress),
)
async def revoke_task_grant(
    request: web.Request, parsed: Parsed[TaskGrantRequest, None, TaskPath]
) -> TaskGrantRevoked:
    """Remove one grant; revoking a grant that does not exist answers `revoked: false`."""
    task_id = parsed.path.id
    grant = parsed.body
    task = await _managed_task(request, task_id)
    result = await execute(
        request,
        TaskGrantRevokeWorkflow.run,
        TupleDelete(tuples=[_grant_tuple(task_id, grant)]),
        workflow_id=task_grant_workflow_id(task_id, grant.subjectNs, grant.subjectId, grant.role),
        on_duplicate=GrantInProgress("This grant is being changed"),
        search=_search(task),
        team=task.teamId,
    )
    return TaskGrantRevoked(revoked=result.deleted > 0)


def _search(task: Task) -> list[SearchAttributePair[Any]]:
    return [
        SearchAttributePair(TEAM_ID, str(task.teamId)),
        SearchAttributePair(TASK_TYPE, task.taskType),
    ]


# --- messages ----------------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/tasks/{id}/attempts/{n}/messages",
    tag=TAG,
    status=201,
    path_params=AttemptPath,
    body=AppendMessagesRequest,
    response=MessagesAppended,
    scopes=("task:execute",),
    headers=TEAM_HEADER_DOC,
    errors=(
        RequestInvalid,
        TaskNotFound,
        AttemptNotFound,
        PermissionDenied,
        NotClaimant,
        ProfileScopeDenied,
        AttemptFinished,
    ),
)
async def append_task_messages(
    request: web.Request, parsed: Parsed[AppendMessagesRequest, None, AttemptPath]
) -> MessagesAppended:
    """Append one message or a batch (≤ 200) to a claimed or running attempt (from the claim
    on, before the first heartbeat); the server numbers them (`seq`, gapless per attempt).
    Only the attempt's claimant may write."""
    path = parsed.path
    body = parsed.body
    principal = require_principal(request)
    messages = [m.model_dump(mode="json") for m in body.batch()]
    outcome = await append_messages(
        request.app[keys.MESSAGE_WRITER],
        path.id,
        path.n,
        principal.subject_id,
        messages,
        policy_allows=lambda policy: not attempt_scopes_denied(request, policy),
    )
    if isinstance(outcome, AppendRefused):
        raise await _append_refusal(request, path, outcome)
    return MessagesAppended(
        count=outcome.count, firstSeq=outcome.first_seq, lastSeq=outcome.last_seq
    )


async def _append_refusal(
    request: web.Request, path: AttemptPath, refused: AppendRefused
) -> DomainError:
    """404 when the caller cannot see the task or the attempt, else why it may not write."""
    await visible_task(request, path.id)
    if refused.reason == "no-attempt":
        return AttemptNotFound("No such attempt")
    if refused.reason == "profile-scope-denied":
        return profile_scope_denied(attempt_scopes_denied(request, refused.policy))
    return report_refused(refused.reason, path.n, refused.status or "", "posts messages")


@endpoint(
    routes,
    "GET",
    "/tasks/{id}/attempts/{n}/messages",
    tag=TAG,
    path_params=AttemptPath,
    query=MessagesQuery,
    response=TaskMessageList,
    scopes=("task:read",),
    headers=TEAM_HEADER_DOC,
    errors=(TaskNotFound, AttemptNotFound),
)
async def list_task_messages(
    request: web.Request, parsed: Parsed[None, MessagesQuery, AttemptPath]
) -> web.StreamResponse:
    """An attempt's messages after `afterSeq` (exclusive), in `seq` order."""
    path = parsed.path
    query = parsed.query
    await visible_task(request, path.id)
    attempt = await task_reads.get_attempt(_pool(request), path.id, path.n)
    if attempt is None:
        raise AttemptNotFound("No such attempt")
    items = await task_reads.list_messages(_pool(request), attempt, query.afterSeq, query.limit)
    listing = TaskMessageList(items=items, lastSeq=items[-1].seq if items else None)
    return render(listing.model_dump(mode="json"))  # a null payload stays in the JSON
