"""HTTP models of the task queue (SPEC 2.6, 4.5; DECISIONS "Tasks") and the one mapping from a
`tasks` / `task_attempts` / `task_messages` row to the JSON a client sees.

`task_from_row` and `attempt_from_row` are shared by every route that answers a task or an
attempt (create, get, list, claim, complete, ...), so the wire shape is written once. Request
bodies are closed (`RequestBody`); responses tolerate growth: SPEC 2.6 rule 5 makes attempt
responses additive, so a client parsing `TaskAttempt` ignores fields a newer server adds.

`CreateTaskRequest` is the spec's `CreateTaskReq` table, field for field. Where the spec is
silent the bounds are the reference's (anchor-notes 4, 9) or ours, named in `schemas.limits`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Final, Literal
from uuid import UUID

from pydantic import ConfigDict, Field, StringConstraints, field_validator, model_validator

from schemas import limits
from schemas.base import DateTime, RequestBody, ResponseBody
from schemas.kernel.cursors import CURSOR_MAX_CHARS
from schemas.names import SubjectNames
from schemas.numbers import SqlCount, SqlOrdinal
from schemas.tasks import (
    AttemptStatus,
    ClaimCondition,
    TaskReference,
    TaskStatus,
    TrustLevel,
)

OutputKind = Literal["artifact", "judgment"]
GranteeNs = Literal["Agent", "Human", "Group"]
TaskGrantRole = Literal["writer", "manager"]
# The Task relation each grant role writes (permission model, SPEC 5).
TASK_GRANT_RELATIONS: Final[Mapping[str, str]] = {"writer": "writers", "manager": "managers"}
TASK_GRANT_ROLES: Final[Mapping[str, TaskGrantRole]] = {"writers": "writer", "managers": "manager"}

MESSAGE_KIND_PATTERN: Final = rf"^[a-z_]{{1,{limits.TASK_MESSAGE_KIND_MAX_CHARS}}}$"
NO_PROJECT: Final = "none"  # the `projectId` filter value for General tasks (list only)

TaskTypeName = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.TASK_TYPE_MAX_CHARS)
]
Title = Annotated[str, StringConstraints(min_length=1, max_length=limits.TASK_TITLE_MAX_CHARS)]
TimeoutSec = Annotated[int, Field(ge=limits.TASK_TIMEOUT_MIN_SEC, le=limits.TASK_TIMEOUT_MAX_SEC)]
MessageKind = Annotated[str, StringConstraints(pattern=MESSAGE_KIND_PATTERN)]


# --- create ---------------------------------------------------------------------------------


class AllowedProfile(RequestBody):
    profileId: UUID


class CreateTaskRequest(RequestBody):
    """`POST /tasks` (SPEC 4.5 `CreateTaskReq`). Closed: an unknown field is a 400."""

    taskType: TaskTypeName = Field(description="a registered type (GET /tasks/schemas)")
    teamId: UUID = Field(description="the owning team")
    diaryId: UUID = Field(description="provenance diary; must exist and be readable")
    title: Title | None = None
    projectId: UUID | None = Field(
        default=None,
        description="omit for General work; an explicitly empty value and `none` are rejected",
    )
    input: dict[str, Any] = Field(description="validated against the type's input schema")
    references: list[TaskReference] = Field(
        default_factory=list, max_length=limits.TASK_REFERENCES_MAX
    )
    allowedProfiles: list[AllowedProfile] = Field(
        default_factory=list, max_length=limits.TASK_ALLOWED_PROFILES_MAX
    )
    correlationId: UUID | None = Field(
        default=None, description="groups tasks for queries; does not prevent duplicates"
    )
    claimCondition: ClaimCondition | None = None
    maxAttempts: int = Field(
        default=limits.TASK_MAX_ATTEMPTS_DEFAULT, ge=1, le=limits.TASK_MAX_ATTEMPTS_MAX
    )
    expiresInSec: int | None = Field(
        default=None,
        ge=1,
        le=limits.TASK_EXPIRES_IN_MAX_SEC,
        description="a never-claimed task expires after this; default 90 days",
    )
    requiredExecutorTrustLevel: TrustLevel | None = None
    dispatchTimeoutSec: TimeoutSec | None = Field(
        default=None, description="overrides the 300 s heartbeat window"
    )
    runningTimeoutSec: TimeoutSec | None = Field(
        default=None, description="overrides the 7200 s result deadline"
    )

    @field_validator("projectId", mode="before")
    @classmethod
    def _project_given_means_a_project(cls, value: Any) -> Any:
        """SPEC 4.5: omit `projectId` for General work; `""`, null and `none` are rejected."""
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ValueError("must be a project id when present; omit it for General work")
        if isinstance(value, str) and value.strip().lower() == NO_PROJECT:
            raise ValueError("`none` is a list filter; omit projectId for General work")
        return value

    def effective_expires_in_sec(self) -> int:
        return self.expiresInSec or limits.TASK_EXPIRES_IN_DEFAULT_SEC

    def effective_dispatch_timeout_sec(self) -> int:
        return self.dispatchTimeoutSec or limits.ATTEMPT_HEARTBEAT_WINDOW_SEC

    def effective_running_timeout_sec(self) -> int:
        return self.runningTimeoutSec or limits.ATTEMPT_RESULT_DEADLINE_SEC

    def canonical(self) -> dict[str, Any]:
        """The request with every default made explicit: the value whose json CID an
        `Idempotency-Key` is bound to (DECISIONS: idempotency request CID). Omitting a field
        and sending its default are the same request."""
        body = self.model_dump(mode="json")
        body["expiresInSec"] = self.effective_expires_in_sec()
        body["dispatchTimeoutSec"] = self.effective_dispatch_timeout_sec()
        body["runningTimeoutSec"] = self.effective_running_timeout_sec()
        body["requiredExecutorTrustLevel"] = self.requiredExecutorTrustLevel or "selfDeclared"
        return body


IdempotencyKey = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.IDEMPOTENCY_KEY_MAX_CHARS)
]


# --- responses: task, attempt ---------------------------------------------------------------


class Task(ResponseBody):
    """A task as the API answers it (SPEC 2.6 `tasks`, plus the create and cancel fields)."""

    id: UUID
    taskType: str
    title: str | None = None
    teamId: UUID
    diaryId: UUID
    projectId: UUID | None = None
    outputKind: OutputKind
    input: dict[str, Any]
    inputCid: str
    inputSchemaCid: str
    references: list[dict[str, Any]] = Field(default_factory=list)
    correlationId: UUID | None = None
    claimCondition: dict[str, Any] | None = None
    allowedProfiles: list[dict[str, Any]] = Field(default_factory=list)
    requiredExecutorTrustLevel: TrustLevel | None = None
    status: TaskStatus
    maxAttempts: int
    attemptCount: int = 0
    dispatchTimeoutSec: int
    runningTimeoutSec: int
    proposedByAgentId: UUID | None = None
    proposedByHumanId: UUID | None = None
    claimAgentId: UUID | None = None
    claimExpiresAt: datetime | None = None
    cancelledByAgentId: UUID | None = None
    cancelledByHumanId: UUID | None = None
    cancelReason: str | None = None
    cancelledAt: datetime | None = None
    workflowId: str
    expiresAt: datetime | None = None
    queuedAt: datetime
    completedAt: datetime | None = None
    createdAt: datetime
    updatedAt: datetime


class DaemonState(ResponseBody):
    """What the executing daemon last reported about its slot (closed record, SPEC 2.6)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reportedAt: DateTime
    slotResumableUntil: DateTime | None = None


class TaskAttempt(ResponseBody):
    """One attempt (SPEC 2.6 `task_attempts`). Additive (rule 5): unknown fields are ignored, so
    a client built on this model keeps working against a newer server."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: UUID
    taskId: UUID
    attemptN: int
    status: AttemptStatus
    workflowId: str
    runtimeId: str | None = None
    leaseId: UUID
    leaseTtlSec: int
    claimedByAgentId: UUID
    claimedByFingerprint: str | None = Field(
        default=None, description="the claimant agent's fingerprint (in the attempts list)"
    )
    claimedAt: datetime
    startedAt: datetime | None = None
    lastHeartbeatAt: datetime | None = None
    claimExpiresAt: datetime | None = None
    finishedAt: datetime | None = None
    output: Any = None
    outputCid: str | None = None
    contentSignature: str | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    timeoutReason: str | None = None
    # response-only fields of SPEC 2.6: the runtime profile claimed under, frozen at claim
    runtimeProfileId: UUID | None = None
    runtimeProfileRevision: int | None = None
    policySnapshotHash: str | None = None
    daemonState: DaemonState | None = None


class TaskList(ResponseBody):
    items: list[Task]
    nextCursor: str | None = Field(
        default=None, description="pass as `cursor` with the same filters; null on the last page"
    )


class TaskAttemptList(ResponseBody):
    items: list[TaskAttempt]


def _col(row: Mapping[str, Any], name: str) -> Any:
    """A column that a query may leave out (the mapping is shared by several queries)."""
    return row.get(name)


def task_from_row(row: Mapping[str, Any]) -> Task:
    """The one mapping from a `tasks` row (every column of the table) to the API's JSON."""
    return Task(
        id=row["id"],
        taskType=row["task_type"],
        title=row["title"],
        teamId=row["team_id"],
        diaryId=row["diary_id"],
        projectId=row["project_id"],
        outputKind=row["output_kind"],
        input=row["input"],
        inputCid=row["input_cid"],
        inputSchemaCid=row["input_schema_cid"],
        references=row["references"] or [],
        correlationId=row["correlation_id"],
        claimCondition=row["claim_condition"],
        allowedProfiles=row["allowed_profiles"] or [],
        requiredExecutorTrustLevel=row["required_trust_level"],
        status=row["status"],
        maxAttempts=row["max_attempts"],
        attemptCount=row["attempt_count"],
        dispatchTimeoutSec=row["dispatch_timeout_sec"],
        runningTimeoutSec=row["running_timeout_sec"],
        proposedByAgentId=row["proposed_by_agent_id"],
        proposedByHumanId=row["proposed_by_human_id"],
        claimAgentId=row["claim_agent_id"],
        claimExpiresAt=row["claim_expires_at"],
        cancelledByAgentId=row["cancelled_by_agent_id"],
        cancelledByHumanId=row["cancelled_by_human_id"],
        cancelReason=row["cancel_reason"],
        cancelledAt=row["cancelled_at"],
        workflowId=row["workflow_id"],
        expiresAt=row["expires_at"],
        queuedAt=row["queued_at"],
        completedAt=row["completed_at"],
        createdAt=row["created_at"],
        updatedAt=row["updated_at"],
    )


def attempt_from_row(row: Mapping[str, Any]) -> TaskAttempt:
    """The one mapping from a `task_attempts` row to the API's JSON. Columns added later (a
    runtime profile, a daemon state) are read when the query selects them."""
    return TaskAttempt(
        id=row["id"],
        taskId=row["task_id"],
        attemptN=row["attempt_n"],
        status=row["status"],
        workflowId=row["workflow_id"],
        runtimeId=row["runtime_id"],
        leaseId=row["lease_id"],
        leaseTtlSec=row["lease_ttl_sec"],
        claimedByAgentId=row["claimed_by_agent_id"],
        claimedByFingerprint=_col(row, "claimed_by_fingerprint"),
        claimedAt=row["claimed_at"],
        startedAt=row["started_at"],
        lastHeartbeatAt=row["last_heartbeat_at"],
        claimExpiresAt=row["claim_expires_at"],
        finishedAt=row["finished_at"],
        output=row["output"],
        outputCid=row["output_cid"],
        contentSignature=row["content_signature"],
        usage=row["usage"],
        error=row["error"],
        timeoutReason=row["timeout_reason"],
        runtimeProfileId=_col(row, "runtime_profile_id"),
        runtimeProfileRevision=_col(row, "runtime_profile_revision"),
        policySnapshotHash=_col(row, "policy_snapshot_hash"),
        daemonState=_col(row, "daemon_state"),
    )


# --- schemas ---------------------------------------------------------------------------------


class TaskSchema(ResponseBody):
    taskType: str
    outputKind: OutputKind
    inputSchema: dict[str, Any]
    inputSchemaCid: str
    # a create without `references` is refused (SPEC 4.5); clients check it before posting
    requiresReferences: bool = False


class TaskSchemaList(ResponseBody):
    items: list[TaskSchema]


# --- list and paths -------------------------------------------------------------------------


class TaskListQuery(RequestBody):
    """`GET /tasks` filters (DECISIONS "Tasks"). Every filter narrows; `claimable=true` keeps
    queued tasks whose claim condition is met right now."""

    status: TaskStatus | None = None
    statuses: Annotated[list[TaskStatus], Field(min_length=1, max_length=8)] | None = None
    taskType: TaskTypeName | None = None
    taskTypes: Annotated[list[TaskTypeName], Field(min_length=1, max_length=20)] | None = None
    correlationId: UUID | None = None
    projectId: UUID | Literal["none"] | None = Field(
        default=None, description="a project id, or `none` for General tasks only"
    )
    diaryId: UUID | None = None
    claimable: bool | None = None
    runtimeProfileId: UUID | None = Field(
        default=None,
        description="the view of a runtime profile of the team: tasks pinned to other profiles "
        "(allowedProfiles) and task types outside its policy are left out",
    )
    limit: int = Field(default=limits.TASKS_PAGE.default, ge=1, le=limits.TASKS_PAGE.max)
    cursor: Annotated[str, StringConstraints(max_length=CURSOR_MAX_CHARS)] | None = None

    def status_filter(self) -> list[str] | None:
        wanted = {*(self.statuses or []), *([self.status] if self.status else [])}
        return sorted(wanted) or None

    def type_filter(self) -> list[str] | None:
        wanted = {*(self.taskTypes or []), *([self.taskType] if self.taskType else [])}
        return sorted(wanted) or None


class TaskPath(RequestBody):
    id: UUID


class AttemptPath(RequestBody):
    id: UUID
    n: SqlOrdinal


# --- grants ---------------------------------------------------------------------------------


class TaskGrantRequest(RequestBody):
    subjectId: UUID
    subjectNs: GranteeNs
    role: TaskGrantRole


class TaskGrant(SubjectNames):
    taskId: UUID
    subjectId: UUID
    subjectNs: GranteeNs
    role: TaskGrantRole
    createdAt: datetime | None = None


class TaskGrantList(ResponseBody):
    items: list[TaskGrant]


class TaskGrantRevoked(ResponseBody):
    revoked: bool = Field(description="false when no such grant existed")


# --- messages -------------------------------------------------------------------------------


class TaskMessageIn(RequestBody):
    kind: MessageKind = Field(description=f"{MESSAGE_KIND_PATTERN}, e.g. log, progress, text_delta")
    payload: Any = Field(description="any JSON value")


class AppendMessagesRequest(RequestBody):
    """One message (`{kind, payload}`) or a batch (`{messages: [...]}`, at most 200)."""

    kind: MessageKind | None = None
    payload: Any = None
    messages: (
        Annotated[
            list[TaskMessageIn], Field(min_length=1, max_length=limits.TASK_MESSAGES_BATCH_MAX)
        ]
        | None
    ) = None

    @model_validator(mode="after")
    def _one_form(self) -> AppendMessagesRequest:
        single = self.kind is not None or "payload" in self.model_fields_set
        if self.messages is not None and single:
            raise ValueError("send either {kind, payload} or {messages: [...]}, not both")
        if self.messages is None and (self.kind is None or "payload" not in self.model_fields_set):
            raise ValueError("send {kind, payload} or {messages: [...]}")
        return self

    def batch(self) -> list[TaskMessageIn]:
        if self.messages is not None:
            return list(self.messages)
        assert self.kind is not None
        return [TaskMessageIn(kind=self.kind, payload=self.payload)]


class MessagesAppended(ResponseBody):
    count: int
    firstSeq: int
    lastSeq: int


class TaskMessage(ResponseBody):
    id: UUID = Field(description="the message's own id (SPEC 2.6), beside `seq`")
    taskId: UUID
    attemptN: int
    seq: int
    timestamp: datetime
    kind: str
    payload: Any = None


class TaskMessageList(ResponseBody):
    items: list[TaskMessage]
    lastSeq: int | None = Field(
        default=None, description="seq of the last item; pass as `afterSeq` for the next page"
    )


class MessagesQuery(RequestBody):
    afterSeq: SqlCount = Field(default=0, description="exclusive")
    limit: int = Field(
        default=limits.TASK_MESSAGES_PAGE.default, ge=1, le=limits.TASK_MESSAGES_PAGE.max
    )


def message_from_row(task_id: UUID, attempt_n: int, row: Mapping[str, Any]) -> TaskMessage:
    return TaskMessage(
        id=row["id"],
        taskId=task_id,
        attemptN=attempt_n,
        seq=row["seq"],
        timestamp=row["ts"],
        kind=row["kind"],
        payload=row["payload"],
    )
