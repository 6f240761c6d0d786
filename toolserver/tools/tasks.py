"""Tasks: the type registry, create (checked locally first), continue, read, list, cancel,
attempts, messages and artifacts (bytes as base64), and the Temporal UI link."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from schemas import limits
from schemas.artifacts import StagedArtifact, TaskArtifact, TaskArtifactList
from schemas.errors import (
    ContinuationSourceNotCompleted,
    ReferencesRequired,
    TaskInputInvalid,
    UnknownTaskType,
)
from schemas.kernel.task_types import CONTINUABLE_TYPE_NAMES, is_continuable
from schemas.task_api import (
    CreateTaskRequest,
    Task,
    TaskAttemptList,
    TaskList,
    TaskMessageList,
    TaskSchemaList,
)
from schemas.tasks import (
    ArtifactRef,
    ReferenceRole,
    TaskAcceptedCondition,
    TaskReference,
    TaskStatus,
    TaskStatusCondition,
    TrustLevel,
)
from toolserver.registry import Arguments, Call, NoArguments, tool
from toolserver.tools.uploads import decode_upload

TaskId = UUID
TeamId = UUID
AttemptN = Annotated[int, Field(ge=1)]
Base64 = str  # the standard alphabet
ContentType = Annotated[str, Field(max_length=limits.ARTIFACT_CONTENT_TYPE_MAX_CHARS)]
ContentEncoding = Annotated[str, Field(max_length=limits.ARTIFACT_CONTENT_ENCODING_MAX_CHARS)]


def _task_text(result: dict[str, Any]) -> str:
    title = f" {result['title']!r}" if result.get("title") else ""
    return f"Task {result['id']} ({result['taskType']}){title} is {result['status']}"


@tool(
    output=TaskSchemaList,
    read_only=True,
    render=lambda r: "Task types: " + ", ".join(t["taskType"] for t in r["items"]),
)
async def tasks_schemas(call: Call, args: NoArguments) -> TaskSchemaList:
    """The registered task types and their input schemas."""
    return await call.api.task_schemas()


# --- create ----------------------------------------------------------------------------------


class ArtifactArg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cid: str
    content_type: ContentType | None = None
    kind: str | None = Field(default=None, max_length=limits.ARTIFACT_KIND_MAX_CHARS)
    title: str | None = Field(default=None, max_length=limits.ARTIFACT_TITLE_MAX_CHARS)


class ReferenceArg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: ReferenceRole
    artifact: ArtifactArg | None = None
    task_id: UUID | None = None

    def rest(self) -> TaskReference:
        artifact = None
        if self.artifact is not None:
            artifact = ArtifactRef(
                cid=self.artifact.cid,
                contentType=self.artifact.content_type,
                kind=self.artifact.kind,
                title=self.artifact.title,
            )
        return TaskReference(artifact=artifact, role=self.role, taskId=self.task_id)


class ClaimConditionArg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["task_status", "task_accepted"]
    task_id: UUID
    statuses: list[TaskStatus] | None = Field(default=None, description="task_status only")


def _claim_condition(arg: ClaimConditionArg | None) -> Any:
    if arg is None:
        return None
    if arg.kind == "task_accepted":
        return TaskAcceptedCondition(kind="task_accepted", taskId=arg.task_id)
    return TaskStatusCondition(kind="task_status", taskId=arg.task_id, statuses=arg.statuses or [])


class TasksCreate(Arguments):
    task_type: str = Field(min_length=1, max_length=64)
    team_id: TeamId
    diary_id: UUID
    input: dict[str, Any]
    title: str | None = Field(default=None, min_length=1, max_length=limits.TASK_TITLE_MAX_CHARS)
    project_id: UUID | None = None
    references: list[ReferenceArg] = Field(
        default_factory=list, max_length=limits.TASK_REFERENCES_MAX
    )
    correlation_id: UUID | None = None
    claim_condition: ClaimConditionArg | None = None
    max_attempts: int = Field(
        default=limits.TASK_MAX_ATTEMPTS_DEFAULT, ge=1, le=limits.TASK_MAX_ATTEMPTS_MAX
    )
    expires_in_sec: int | None = Field(default=None, ge=1, le=limits.TASK_EXPIRES_IN_MAX_SEC)
    required_executor_trust_level: TrustLevel | None = None
    dispatch_timeout_sec: int | None = Field(
        default=None, ge=limits.TASK_TIMEOUT_MIN_SEC, le=limits.TASK_TIMEOUT_MAX_SEC
    )
    running_timeout_sec: int | None = Field(
        default=None, ge=limits.TASK_TIMEOUT_MIN_SEC, le=limits.TASK_TIMEOUT_MAX_SEC
    )
    idempotency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
    )


async def check_locally(
    call: Call, task_type: str, task_input: dict[str, Any], references: int
) -> None:
    """Spec 4.7: validate the input against the registered schema (cached by its CID) and the
    type's `requiresReferences` before posting, so the model gets every error at once."""
    schema = await call.backend.task_types.get(call.api, task_type)
    if schema is None:
        raise UnknownTaskType(f"No task type {task_type!r}; see tasks_schemas")
    errors = [
        {
            "pointer": "/input/" + "/".join(str(p) for p in error.absolute_path),
            "detail": error.message,
        }
        for error in call.backend.task_types.validator(schema).iter_errors(task_input)
    ]
    if errors:
        raise TaskInputInvalid(
            f"The input does not match the {task_type} schema ({schema.inputSchemaCid})",
            extensions={"errors": errors[:20]},
        )
    if schema.requiresReferences and references == 0:
        raise ReferencesRequired(f"A {task_type} task needs at least one reference")


def _create_request(**fields: Any) -> CreateTaskRequest:
    """The REST body with the fields that were given: an explicit null `projectId` means
    something else than none (a 400), so absent values stay absent."""
    return CreateTaskRequest(**{name: value for name, value in fields.items() if value is not None})


@tool(output=Task, render=_task_text)
async def tasks_create(call: Call, args: TasksCreate) -> Task:
    """Propose a task to a team's queue."""
    await check_locally(call, args.task_type, args.input, len(args.references))
    body = _create_request(
        taskType=args.task_type,
        teamId=args.team_id,
        diaryId=args.diary_id,
        title=args.title,
        projectId=args.project_id,
        input=args.input,
        references=[reference.rest() for reference in args.references],
        correlationId=args.correlation_id,
        claimCondition=_claim_condition(args.claim_condition),
        maxAttempts=args.max_attempts,
        expiresInSec=args.expires_in_sec,
        requiredExecutorTrustLevel=args.required_executor_trust_level,
        dispatchTimeoutSec=args.dispatch_timeout_sec,
        runningTimeoutSec=args.running_timeout_sec,
    )
    return await call.api.create_task(body, idempotency_key=args.idempotency_key)


class TasksContinue(Arguments):
    task_id: UUID
    team_id: TeamId
    brief: str = Field(min_length=1)
    mode: Literal["extend", "fork"] = Field(
        default="extend",
    )
    title: str | None = Field(default=None, min_length=1, max_length=limits.TASK_TITLE_MAX_CHARS)
    attempt_n: int | None = Field(default=None, ge=1, description="Default: the accepted attempt")
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


@tool(output=Task, render=_task_text)
async def tasks_continue(call: Call, args: TasksContinue) -> Task:
    """Continue a completed freeform task."""
    source = await call.api.get_task(args.task_id, team_id=args.team_id)
    if not is_continuable(source.taskType) or source.status != "completed":
        raise ContinuationSourceNotCompleted(
            f"Only a completed task of a continuable type ({', '.join(CONTINUABLE_TYPE_NAMES)}) "
            f"can be continued; this one is a {source.taskType} task in status {source.status}",
        )
    continue_from: dict[str, Any] = {"taskId": str(source.id), "mode": args.mode}
    if args.attempt_n is not None:
        continue_from["attemptN"] = args.attempt_n
    task_input = {"brief": args.brief, "continueFrom": continue_from}
    await check_locally(call, source.taskType, task_input, 0)
    body = _create_request(
        taskType=source.taskType,
        teamId=source.teamId,
        diaryId=source.diaryId,
        title=args.title,
        input=task_input,
        claimCondition=TaskStatusCondition(
            kind="task_status", taskId=source.id, statuses=["completed"]
        ),
    )
    return await call.api.create_task(body, idempotency_key=args.idempotency_key)


# --- read ------------------------------------------------------------------------------------


class TaskRef(Arguments):
    id: TaskId
    team_id: TeamId | None = None


@tool(output=Task, read_only=True, render=_task_text)
async def tasks_get(call: Call, args: TaskRef) -> Task:
    """Read one task."""
    return await call.api.get_task(args.id, team_id=args.team_id)


class TasksList(Arguments):
    team_id: UUID
    status: TaskStatus | None = None
    task_type: str | None = Field(default=None, max_length=64)
    project_id: str | None = Field(default=None, description="Or `none` for General")
    correlation_id: UUID | None = None
    diary_id: UUID | None = None
    claimable: bool | None = None
    limit: int = Field(default=limits.TASKS_PAGE.default, ge=1, le=limits.TASKS_PAGE.max)
    cursor: str | None = Field(default=None, max_length=512)


def _tasks_text(result: dict[str, Any]) -> str:
    more = " (more: pass nextCursor as cursor)" if result.get("nextCursor") else ""
    return f"{len(result['items'])} tasks{more}"


@tool(output=TaskList, read_only=True, render=_tasks_text)
async def tasks_list(call: Call, args: TasksList) -> TaskList:
    """Page through a team's task queue, newest first."""
    return await call.api.list_tasks(
        args.team_id,
        status=args.status,
        taskType=args.task_type,
        projectId=args.project_id,
        correlationId=args.correlation_id,
        diaryId=args.diary_id,
        claimable=args.claimable,
        limit=args.limit,
        cursor=args.cursor,
    )


class TasksCancel(Arguments):
    id: TaskId
    team_id: TeamId
    reason: str = Field(min_length=1, max_length=512)


@tool(output=Task, destructive=True, idempotent=True, render=_task_text)
async def tasks_cancel(call: Call, args: TasksCancel) -> Task:
    """Cancel an unfinished task (needs task:manage)."""
    return await call.api.cancel_task(args.id, args.team_id, args.reason)


@tool(output=TaskAttemptList, read_only=True, render=lambda r: f"{len(r['items'])} attempts")
async def tasks_attempts_list(call: Call, args: TaskRef) -> TaskAttemptList:
    """List a task's attempts and their outputs."""
    return await call.api.list_attempts(args.id, team_id=args.team_id)


class MessagesList(Arguments):
    task_id: TaskId
    attempt_n: AttemptN
    team_id: TeamId | None = None
    after_seq: int = Field(default=0, ge=0)
    limit: int = Field(
        default=limits.TASK_MESSAGES_PAGE.default, ge=1, le=limits.TASK_MESSAGES_PAGE.max
    )


@tool(output=TaskMessageList, read_only=True, render=lambda r: f"{len(r['items'])} messages")
async def tasks_messages_list(call: Call, args: MessagesList) -> TaskMessageList:
    """An attempt's messages; pass lastSeq as after_seq to follow."""
    return await call.api.list_messages(
        args.task_id,
        args.attempt_n,
        team_id=args.team_id,
        after_seq=args.after_seq,
        limit=args.limit,
    )


# --- artifacts -------------------------------------------------------------------------------


def _decode(content_base64: str) -> bytes:
    return decode_upload(content_base64, limits.ARTIFACT_MAX_BYTES, "Artifacts")


class ArtifactsStage(Arguments):
    team_id: TeamId
    content_base64: Base64
    content_type: ContentType | None = None
    content_encoding: ContentEncoding | None = None


@tool(output=StagedArtifact, idempotent=True, render=lambda r: f"Staged {r['cid']}")
async def tasks_artifacts_stage(call: Call, args: ArtifactsStage) -> StagedArtifact:
    """Stage input bytes for tasks_create; returns a CID."""
    return await call.api.stage_artifact(
        args.team_id,
        _decode(args.content_base64),
        content_type=args.content_type,
        content_encoding=args.content_encoding,
    )


class ArtifactsList(Arguments):
    task_id: TaskId
    team_id: TeamId
    limit: int = Field(default=limits.ARTIFACTS_PAGE.default, ge=1, le=limits.ARTIFACTS_PAGE.max)
    cursor: str | None = Field(default=None, max_length=512)


@tool(output=TaskArtifactList, read_only=True, render=lambda r: f"{len(r['artifacts'])} artifacts")
async def tasks_artifacts_list(call: Call, args: ArtifactsList) -> TaskArtifactList:
    """List a task's artifacts."""
    return await call.api.list_artifacts(
        args.task_id, args.team_id, limit=args.limit, cursor=args.cursor
    )


class ArtifactsUpload(Arguments):
    task_id: TaskId
    attempt_n: AttemptN
    team_id: TeamId
    kind: str = Field(min_length=1, max_length=limits.ARTIFACT_KIND_MAX_CHARS)
    title: str = Field(min_length=1, max_length=limits.ARTIFACT_TITLE_MAX_CHARS)
    content_base64: Base64
    content_type: ContentType | None = None
    content_encoding: ContentEncoding | None = None


@tool(output=TaskArtifact, idempotent=True, render=lambda r: f"Uploaded {r['title']} ({r['cid']})")
async def tasks_artifacts_upload(call: Call, args: ArtifactsUpload) -> TaskArtifact:
    """Attach an output file to your running attempt."""
    return await call.api.upload_artifact(
        args.task_id,
        args.attempt_n,
        args.team_id,
        _decode(args.content_base64),
        kind=args.kind,
        title=args.title,
        content_type=args.content_type,
        content_encoding=args.content_encoding,
    )


class ArtifactsDownload(Arguments):
    task_id: TaskId
    team_id: TeamId
    cid: str = Field(min_length=1, max_length=256)
    attempt_n: AttemptN | None = None


class DownloadedArtifact(BaseModel):
    cid: str
    contentType: str
    contentEncoding: str | None = None
    sizeBytes: int
    contentBase64: str


@tool(
    output=DownloadedArtifact,
    read_only=True,
    render=lambda r: f"{r['sizeBytes']} bytes of {r['contentType']}",
)
async def tasks_artifacts_download(call: Call, args: ArtifactsDownload) -> DownloadedArtifact:
    """An artifact's bytes (base64) by CID."""
    got = await call.api.download_artifact(
        args.task_id, args.team_id, args.cid, attempt_n=args.attempt_n
    )
    return DownloadedArtifact(
        cid=got.headers.get("x-service-task-artifact-cid", args.cid),
        contentType=got.headers.get("x-service-task-artifact-content-type", got.content_type),
        contentEncoding=got.headers.get("x-service-task-artifact-content-encoding"),
        sizeBytes=len(got.content),
        contentBase64=base64.b64encode(got.content).decode(),
    )


class ConsoleLink(BaseModel):
    taskId: UUID
    workflowId: str
    url: str


@tool(output=ConsoleLink, read_only=True, render=lambda r: f"Temporal UI: {r['url']}")
async def tasks_console_link(call: Call, args: TaskRef) -> ConsoleLink:
    """The Temporal UI link of a task's workflow."""
    task = await call.api.get_task(args.id, team_id=args.team_id)
    return ConsoleLink(
        taskId=task.id, workflowId=task.workflowId, url=call.backend.temporal_link(task.workflowId)
    )
