"""Task artifacts (SPEC 2.6 "Task artifacts", 4.5, 8): HTTP shapes and workflow payloads.

An artifact is immutable bytes addressed by their CID (raw codec, sha2-256 over the exact bytes;
`schemas.kernel.cids.bytes_cid`). The bytes live once per CID in S3 (`artifacts/<cid>`, one
`artifact_blobs` row); what refers to them is either a *staged* row (team-scoped input bytes
waiting to be bound by `POST /tasks`: no record, never listed nor downloadable) or a
`task_artifacts` row (an input bound at task creation, `attemptN` null, or an attempt's output).

Bytes never travel through Temporal: the API streams them to S3 and the workflows here only
write the rows that name them (see `api.routes.task_artifacts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Final
from uuid import UUID

from pydantic import Field, StringConstraints

from schemas import limits
from schemas.base import Payload, RequestBody, ResponseBody
from schemas.kernel.cursors import CURSOR_MAX_CHARS
from schemas.numbers import SqlOrdinal

DEFAULT_CONTENT_TYPE: Final = "application/octet-stream"
"""What an artifact is labelled when the uploader names no `contentType` (the daemon's default)."""

# Printable ASCII without leading/trailing blanks: these values are echoed in response headers,
# so a newline or a control character must never get in.
_HEADER_SAFE = r"^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$"

Cid = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^b[a-z2-7]+$")]
ContentType = Annotated[
    str,
    StringConstraints(
        min_length=1,
        max_length=limits.ARTIFACT_CONTENT_TYPE_MAX_CHARS,
        pattern=r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(?:\s*;[\x20-\x7e]*)?$",
    ),
    Field(description="A media type such as `text/markdown; charset=utf-8`"),
]
ContentEncoding = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=limits.ARTIFACT_CONTENT_ENCODING_MAX_CHARS, pattern=_HEADER_SAFE
    ),
    Field(description="How the bytes are encoded (`gzip`, `br`…); the server never decodes them"),
]
ArtifactKind = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.ARTIFACT_KIND_MAX_CHARS),
]
ArtifactTitle = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.ARTIFACT_TITLE_MAX_CHARS),
]


# --- HTTP: queries and paths (closed) ----------------------------------------------------------


class StageQuery(RequestBody):
    """`PUT /task-artifacts/staged?contentType&contentEncoding`."""

    contentType: ContentType | None = None
    contentEncoding: ContentEncoding | None = None


class UploadQuery(RequestBody):
    """`PUT /tasks/{id}/attempts/{n}/artifacts?kind&title&contentType&contentEncoding`."""

    kind: ArtifactKind
    title: ArtifactTitle
    contentType: ContentType | None = None
    contentEncoding: ContentEncoding | None = None


class ArtifactListQuery(RequestBody):
    limit: int = Field(default=limits.ARTIFACTS_PAGE.default, ge=1, le=limits.ARTIFACTS_PAGE.max)
    cursor: str | None = Field(
        default=None,
        max_length=CURSOR_MAX_CHARS,
        description="`nextCursor` of the previous page of the same task",
    )


class TaskArtifactsPath(RequestBody):
    id: UUID


class AttemptArtifactsPath(RequestBody):
    id: UUID
    n: SqlOrdinal


class TaskArtifactContentPath(RequestBody):
    id: UUID
    cid: Cid


class AttemptArtifactContentPath(RequestBody):
    id: UUID
    n: SqlOrdinal
    cid: Cid


# --- HTTP: responses ---------------------------------------------------------------------------


class StagedArtifact(ResponseBody):
    """What staging answers: the CID to name in a task's `references`."""

    cid: str
    sizeBytes: int
    contentType: str


class TaskArtifact(ResponseBody):
    """An artifact bound to a task: an input (`attemptN` null) or an attempt's output."""

    id: UUID
    teamId: UUID
    taskId: UUID
    attemptN: int | None = None
    kind: str
    title: str
    role: str | None = Field(default=None, description="The reference role of an input artifact")
    contentType: str | None = None
    contentEncoding: str | None = None
    sizeBytes: int
    cid: str
    createdByAgentId: UUID | None = None
    createdByHumanId: UUID | None = None
    createdAt: datetime


class TaskArtifactList(ResponseBody):
    artifacts: list[TaskArtifact]
    nextCursor: str | None = Field(default=None, description="null on the last page")


def artifact_from_row(row: Mapping[str, Any]) -> TaskArtifact:
    """A `task_artifacts` row (or an `AttachedArtifact` dump) as the API answers it."""
    return TaskArtifact(
        id=row["id"],
        teamId=row["team_id"],
        taskId=row["task_id"],
        attemptN=row["attempt_n"],
        kind=row["kind"],
        title=row["title"],
        role=row["role"],
        contentType=row["content_type"],
        contentEncoding=row["content_encoding"],
        sizeBytes=row["size_bytes"],
        cid=row["cid"],
        createdByAgentId=row["created_by_agent_id"],
        createdByHumanId=row["created_by_human_id"],
        createdAt=row["created_at"],
    )


# --- workflow payloads -------------------------------------------------------------------------


class ArtifactStageInput(Payload):
    """Rows of a staged upload whose bytes the API has already hashed (and stores next)."""

    team_id: UUID
    cid: str
    size_bytes: int
    content_type: str
    content_encoding: str | None = None


class ArtifactAttachInput(Payload):
    """An attempt's output artifact: checked against the attempt under its row lock."""

    artifact_id: UUID
    team_id: UUID
    task_id: UUID
    attempt_n: int
    agent_id: UUID
    cid: str
    size_bytes: int
    kind: str
    title: str
    content_type: str
    content_encoding: str | None = None

    def same_metadata(self, other: AttachedArtifact) -> bool:
        """An upload of the same CID to the same attempt is a retry when it says the same."""
        return (self.kind, self.title, self.content_type, self.content_encoding) == (
            other.kind,
            other.title,
            other.content_type,
            other.content_encoding,
        )


class AttachedArtifact(Payload):
    """The `task_artifacts` row an attach wrote or found (field names are the columns)."""

    id: UUID
    team_id: UUID
    task_id: UUID
    attempt_n: int | None = None
    cid: str
    kind: str
    title: str
    role: str | None = None
    content_type: str | None = None
    content_encoding: str | None = None
    size_bytes: int
    created_by_agent_id: UUID | None = None
    created_by_human_id: UUID | None = None
    created_at: datetime
    created: bool = Field(default=False, description="False when the row existed already")


class ArtifactSweepInput(Payload):
    """One run of the maintenance sweep (the schedule's arguments)."""

    grace_sec: int = limits.ARTIFACT_ORPHAN_GRACE_SEC
    batch_max: int = limits.ARTIFACT_SWEEP_BATCH_MAX


class StagedExpiry(Payload):
    """Delete staged rows older than `before` that no task of their team binds."""

    before: datetime
    limit: int


class BlobSweep(Payload):
    """Delete blobs (row and S3 object) that nothing refers to any more."""

    limit: int


class SweepCount(Payload):
    deleted: int


class ArtifactSweepResult(Payload):
    staged_deleted: int
    blobs_deleted: int
