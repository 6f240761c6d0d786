"""The attempt workflow's messages (SPEC 3.1) and the HTTP bodies of the attempt routes (4.5).

`Task` (id `task/<taskId>`, `workflows.tasks`) owns a task's state machine. The API talks
to it through Updates whose validators answer the 409 guards of SPEC 3.1 before anything is
written: `created` (Update-with-Start: answers once the row exists), `claim`, `heartbeat`,
`complete`, `fail`, `abort`, `cancel`; and the `state` query. Each accepted message changes the
workflow's state first and then projects it into Postgres (`TaskProjection`), so the rows the
API reads are the workflow's state, one transaction per transition.

Wire names follow the reference (anchor-notes 3.1): claim `{leaseTtlSec?}`, heartbeat
`{leaseTtlSec?}` → `{cancelled, cancelReason, claimExpiresAt}`, complete
`{output, outputCid, contentSignature?, usage?}`, fail `{error: {code, message, retryable?}}`,
abort `{reason?}`, cancel `{reason}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Final, Literal
from uuid import UUID

from pydantic import Field, StringConstraints

from schemas import limits
from schemas.base import Payload, RequestBody, ResponseBody
from schemas.errors import (
    AttemptFinished,
    AttemptNotStarted,
    Conflict,
    Forbidden,
    NotClaimant,
    TaskFinished,
)
from schemas.kernel.attempts import ReportRefusal
from schemas.numbers import JsonCount
from schemas.task_api import DaemonState, Task, TaskAttempt
from schemas.tasks import AttemptStatus, TaskStatus

# --- names (contracts with running workflows) -------------------------------------------------

TASK_WORKFLOW: Final = "Task"
CREATED_UPDATE: Final = "created"
CLAIM_UPDATE: Final = "claim"
HEARTBEAT_UPDATE: Final = "heartbeat"
# Later heartbeats of a running attempt: liveness only, so a signal (see `Task.liveness`).
LIVENESS_SIGNAL: Final = "liveness"
COMPLETE_UPDATE: Final = "complete"
FAIL_UPDATE: Final = "fail"
ABORT_UPDATE: Final = "abort"
CANCEL_UPDATE: Final = "cancel"
STATE_QUERY: Final = "state"

TimeoutReason = Literal["dispatch_expired", "lease_expired", "running_total_exceeded"]


def task_workflow_id(task_id: UUID | str) -> str:
    return f"task/{task_id}"


def claim_condition_met(condition: Mapping[str, Any] | None, other_status: str | None) -> bool:
    """Whether a claim condition holds, given the status of the task it names (None when that
    task does not exist). `task_accepted` holds once the task is completed: its completed
    attempt is the accepted one. The same rule as `GET /tasks?claimable=true`."""
    if condition is None:
        return True
    if other_status is None:
        return False
    if condition.get("kind") == "task_status":
        return other_status in condition.get("statuses", ())
    if condition.get("kind") == "task_accepted":
        return other_status == "completed"
    return False


def attempt_finished(attempt_n: int, status: str) -> Conflict:
    return AttemptFinished(f"Attempt {attempt_n} is {status}")


def not_claimant(attempt_n: int, action: str = "reports on it") -> Forbidden:
    return NotClaimant(f"Only the claimant of attempt {attempt_n} {action}")


def report_refused(
    refusal: ReportRefusal, attempt_n: int, status: str, action: str = "reports on it"
) -> Forbidden | Conflict:
    """The problem of a refusal of `schemas.kernel.attempts` (one wording for every route)."""
    if refusal == "not-claimant":
        return not_claimant(attempt_n, action)
    if refusal == "not-started":
        return AttemptNotStarted(f"Attempt {attempt_n} has not started: send a heartbeat first")
    return attempt_finished(attempt_n, status)


def task_finished(status: str) -> Conflict:
    return TaskFinished(f"The task is {status}")


# --- the state the workflow keeps and projects ------------------------------------------------


class AttemptState(Payload):
    """One attempt as the workflow holds it; its result fields are set only when it ends."""

    attempt_id: UUID
    attempt_n: int
    agent_id: UUID
    lease_id: UUID
    status: AttemptStatus
    lease_ttl_sec: int
    claimed_at: datetime
    started_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    claim_expires_at: datetime | None = None
    finished_at: datetime | None = None
    traceparent: str
    timeout_reason: TimeoutReason | None = None
    output: dict[str, Any] | None = None
    output_cid: str | None = None
    content_signature: str | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    runtime_id: str | None = None
    daemon_state: dict[str, Any] | None = None
    # the runtime profile claimed under, frozen at claim (DECISIONS "Runtime profiles")
    runtime_profile_id: UUID | None = None
    runtime_profile_revision: int | None = None
    policy_snapshot: dict[str, Any] | None = None
    policy_snapshot_hash: str | None = None


class TaskState(Payload):
    """The mutable part of a task row. `claim_agent_id` mirrors the claimant tuple: set by a
    claim, cleared when the attempt ends, kept on cancel (the worker still heartbeats to
    learn about it). `completed_at` is when the task reached a terminal status."""

    status: TaskStatus = "queued"
    attempt_count: int = 0
    claim_agent_id: UUID | None = None
    claim_expires_at: datetime | None = None
    cancelled_by_agent_id: UUID | None = None
    cancelled_by_human_id: UUID | None = None
    cancel_reason: str | None = None
    cancelled_at: datetime | None = None
    completed_at: datetime | None = None


class TaskCarry(Payload):
    """What a run hands to the next one when it continues as new (history stays bounded)."""

    task: TaskState
    attempt: AttemptState | None = None
    trace_id: str


class TaskProjection(Payload):
    """One transition, written in one statement: the task's state, the attempt's row (when
    there is one) and the claimant tuple granted or revoked."""

    task_id: UUID
    task: TaskState
    attempt: AttemptState | None = None
    grant_claimant: UUID | None = None
    revoke_claimant: UUID | None = None


class TaskInserted(Payload):
    task_id: UUID
    created: bool = Field(description="false when the row already existed (a retry)")


class TaskExpiry(Payload):
    task_id: UUID
    at: datetime


# --- updates: requests and answers ------------------------------------------------------------


class TaskCreated(Payload):
    task_id: UUID


class ClaimCommand(Payload):
    agent_id: UUID
    lease_ttl_sec: int = limits.TASK_LEASE_DEFAULT_SEC
    runtime_id: str | None = None
    # the runtime profile as the API read it at claim: the attempt keeps exactly this
    runtime_profile_id: UUID | None = None
    runtime_profile_revision: int | None = None
    policy_snapshot: dict[str, Any] | None = None
    policy_snapshot_hash: str | None = None


class ClaimGranted(Payload):
    attempt_n: int
    attempt_id: UUID
    claim_expires_at: datetime
    traceparent: str


class HeartbeatCommand(Payload):
    agent_id: UUID
    attempt_n: int
    lease_ttl_sec: int | None = None


class HeartbeatAck(Payload):
    cancelled: bool
    cancel_reason: str | None = None
    claim_expires_at: datetime | None = None


class CompleteCommand(Payload):
    agent_id: UUID
    attempt_n: int
    output: dict[str, Any]
    output_cid: str
    content_signature: str | None = None
    usage: dict[str, Any] | None = None
    daemon_state: dict[str, Any] | None = None


class FailCommand(Payload):
    agent_id: UUID
    attempt_n: int
    error: dict[str, Any]
    retryable: bool = False


class AbortCommand(Payload):
    agent_id: UUID
    attempt_n: int
    reason: str | None = None


class CancelCommand(Payload):
    subject_ns: Literal["Agent", "Human"]
    subject_id: UUID
    reason: str


class Settled(Payload):
    """Where a complete, fail, abort or cancel left the task."""

    status: TaskStatus
    attempt_status: AttemptStatus | None = None


# --- HTTP ------------------------------------------------------------------------------------

LeaseTtl = Annotated[int, Field(ge=limits.TASK_LEASE_MIN_SEC, le=limits.TASK_LEASE_MAX_SEC)]
Reason = Annotated[str, StringConstraints(min_length=1, max_length=limits.TASK_REASON_MAX_CHARS)]


class ClaimRequest(RequestBody):
    leaseTtlSec: LeaseTtl = Field(
        default=limits.TASK_LEASE_DEFAULT_SEC,
        description="silence longer than this after a heartbeat times the attempt out",
    )
    runtimeId: (
        Annotated[str, StringConstraints(min_length=1, max_length=limits.RUNTIME_ID_MAX_CHARS)]
        | None
    ) = Field(
        default=None,
        description="the claiming runtime's stable id (a daemon's), kept on the attempt",
    )
    runtimeProfileId: UUID | None = Field(
        default=None,
        description="claim under this runtime profile of the task's team: its policy narrows "
        "what is claimed and the attempt's scopes; a task with allowedProfiles needs one of them",
    )


class ClaimResponse(ResponseBody):
    task: Task
    attemptN: int
    attempt: TaskAttempt
    traceparent: str = Field(description="W3C trace context continuing the task's creation")


class HeartbeatRequest(RequestBody):
    leaseTtlSec: LeaseTtl | None = Field(
        default=None, description="a new lease for this and later heartbeats"
    )


class HeartbeatResponse(ResponseBody):
    cancelled: bool
    cancelReason: str | None = None
    claimExpiresAt: datetime | None = None


class Usage(RequestBody):
    inputTokens: JsonCount
    outputTokens: JsonCount
    cacheReadTokens: JsonCount | None = None
    cacheWriteTokens: JsonCount | None = None
    toolCalls: JsonCount | None = None
    model: Annotated[str, StringConstraints(max_length=200)] | None = None
    provider: Annotated[str, StringConstraints(max_length=200)] | None = None


class CompleteRequest(RequestBody):
    output: dict[str, Any] = Field(description="valid against the task type's output schema")
    outputCid: Annotated[str, StringConstraints(min_length=1, max_length=256)] = Field(
        description="json-codec CID of the RFC 8785 form of `output`"
    )
    contentSignature: (
        Annotated[str, StringConstraints(min_length=1, max_length=limits.SIGNATURE_B64_MAX_CHARS)]
        | None
    ) = Field(default=None, description="base64 Ed25519 signature over the UTF-8 outputCid")
    usage: Usage | None = None
    daemonState: DaemonState | None = Field(
        default=None, description="the executing daemon's slot, as it reports it at complete"
    )


class FailError(RequestBody):
    code: Annotated[
        str, StringConstraints(min_length=1, max_length=limits.TASK_ERROR_CODE_MAX_CHARS)
    ]
    message: Annotated[
        str, StringConstraints(min_length=1, max_length=limits.TASK_ERROR_MESSAGE_MAX_CHARS)
    ]
    retryable: bool = Field(default=False, description="requeue the task when it has attempts left")


class FailRequest(RequestBody):
    error: FailError


class AbortRequest(RequestBody):
    reason: Reason | None = None


class CancelRequest(RequestBody):
    reason: Reason
