"""Models of the task queue shared by the REST layer and the attempt workflow (SPEC 2.6, 3.1,
4.5; DECISIONS "Tasks").

`TaskStart` is everything the attempt workflow `task/<taskId>` needs to insert the task row and
run it: the API validates the request (closed body, the type's input schema, references, claim
condition, permissions) and the workflow owns every state change from then on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field

from schemas import limits
from schemas.base import Payload, RequestBody

TaskStatus = Literal[
    "queued", "dispatched", "running", "completed", "failed", "cancelled", "expired"
]
AttemptStatus = Literal[
    "claimed", "running", "completed", "failed", "cancelled", "aborted", "timed_out"
]
TERMINAL_TASK_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled", "expired"})
TERMINAL_ATTEMPT_STATUSES: frozenset[str] = frozenset(
    {"completed", "failed", "cancelled", "aborted", "timed_out"}
)
TrustLevel = Literal["selfDeclared", "agentSigned", "releaseVerifiedTool", "sandboxAttested"]
ReferenceRole = Literal["context", "judged_work", "reviewed_diff", "target_source"]

Cid = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^b[a-z2-7]+$")]


# --- references and claim conditions (request shapes, closed) -----------------------------


class ArtifactRef(RequestBody):
    cid: Cid
    contentType: Annotated[str, Field(max_length=200)] | None = None
    kind: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    title: Annotated[str, Field(min_length=1, max_length=255)] | None = None


class TaskReference(RequestBody):
    """`{artifact: {cid, contentType?, kind?, title?}, role, taskId | null}` (SPEC 2.6). An input
    reference binds a staged artifact of the team; `kind` defaults to `input`, `title` to the
    CID."""

    artifact: ArtifactRef | None = None
    role: ReferenceRole
    taskId: UUID | None = None


class TaskStatusCondition(RequestBody):
    kind: Literal["task_status"]
    taskId: UUID
    statuses: Annotated[list[TaskStatus], Field(min_length=1, max_length=8)]


class TaskAcceptedCondition(RequestBody):
    kind: Literal["task_accepted"]
    taskId: UUID


ClaimCondition = Annotated[TaskStatusCondition | TaskAcceptedCondition, Field(discriminator="kind")]


# --- the workflow's start payload ---------------------------------------------------------


class TaskStart(Payload):
    """The validated task: the attempt workflow inserts it as the `tasks` row, then runs it."""

    task_id: UUID
    team_id: UUID
    diary_id: UUID
    project_id: UUID | None = None
    task_type: str
    title: str | None = None
    input: dict[str, Any]
    input_cid: str
    input_schema_cid: str
    output_kind: Literal["artifact", "judgment"]
    correlation_id: UUID | None = None
    references: list[dict[str, Any]] = Field(default_factory=list)
    claim_condition: dict[str, Any] | None = None
    allowed_profiles: list[dict[str, Any]] = Field(default_factory=list)
    required_trust_level: TrustLevel | None = None
    max_attempts: int = limits.TASK_MAX_ATTEMPTS_DEFAULT
    dispatch_timeout_sec: int = limits.ATTEMPT_HEARTBEAT_WINDOW_SEC
    running_timeout_sec: int = limits.ATTEMPT_RESULT_DEADLINE_SEC
    expires_at: datetime | None = None
    proposed_by_agent_id: UUID | None = None
    proposed_by_human_id: UUID | None = None
    idempotency_key: str | None = None
    idempotency_cid: str | None = None
    traceparent: str | None = Field(
        default=None, description="W3C trace context of the creating request; claims continue it"
    )
