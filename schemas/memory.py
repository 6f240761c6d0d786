"""Models of memory: diaries, their grants, entries and typed relations (SPEC 2.1, 4.2).

HTTP bodies are closed and camelCase; workflow payloads tolerate unknown fields. Every limit is
`schemas.limits`. `entry_from_row` and `diary_from_row` are the one mapping from a database row
to the JSON an API client sees, shared by every route that returns entries (lists, search,
public feed).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AfterValidator,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from schemas import limits
from schemas.base import Instant, Payload, RequestBody, ResponseBody
from schemas.kernel.injection import Threat
from schemas.names import SubjectNames
from schemas.numbers import SqlCount, SqlOrdinal

Visibility = Literal["private", "moltnet", "public"]
EntryType = Literal["episodic", "semantic", "procedural", "reflection"]
RelationType = Literal[
    "supersedes", "elaborates", "contradicts", "supports", "caused_by", "references"
]
RelationStatus = Literal["proposed", "accepted", "rejected"]
GranteeNs = Literal["Agent", "Human", "Group"]
GrantRole = Literal["writer", "manager"]
CreatorNs = Literal["Agent", "Human"]
DiaryChange = Literal["write", "manage"]  # the Diary permissions beyond reading

# The Diary relation each grant role writes (permission model, SPEC 5).
GRANT_RELATIONS: Mapping[str, str] = {"writer": "writers", "manager": "managers"}

DiaryName = Annotated[str, StringConstraints(min_length=1, max_length=255, strip_whitespace=True)]
Title = Annotated[str, StringConstraints(max_length=limits.ENTRY_TITLE_MAX_CHARS)]
Content = Annotated[
    str,
    StringConstraints(
        min_length=limits.ENTRY_CONTENT_MIN_CHARS, max_length=limits.ENTRY_CONTENT_MAX_CHARS
    ),
]
Tag = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.ENTRY_TAG_MAX_CHARS, strip_whitespace=True),
]
Tags = Annotated[list[Tag], Field(max_length=limits.ENTRY_TAGS_MAX)]
Importance = Annotated[int, Field(ge=limits.ENTRY_IMPORTANCE_MIN, le=limits.ENTRY_IMPORTANCE_MAX)]


def _unique_tags(tags: list[str] | None) -> list[str] | None:
    """Tags are a set with a stable order: duplicates are dropped, first occurrence kept."""
    return None if tags is None else list(dict.fromkeys(tags))


# --- diaries ------------------------------------------------------------------------------


class DiaryCreateRequest(RequestBody):
    name: DiaryName
    visibility: Visibility = "private"
    signed: bool = Field(
        default=False, description="Every entry must be signed and chained to its predecessor"
    )


class DiaryUpdateRequest(RequestBody):
    name: DiaryName | None = None
    visibility: Visibility | None = None

    @model_validator(mode="after")
    def _something(self) -> DiaryUpdateRequest:
        if self.name is None and self.visibility is None:
            raise ValueError("Give at least one of name, visibility")
        return self


class DiaryPath(RequestBody):
    diaryId: UUID


class Diary(ResponseBody):
    id: UUID
    name: str
    visibility: Visibility
    signed: bool
    teamId: UUID
    createdBy: UUID
    createdAt: datetime
    updatedAt: datetime
    yourPermissions: list[DiaryChange] | None = Field(
        default=None,
        description="`GET /diaries/{diaryId}` only: which changes the caller may make (`write`: "
        "entries; `manage`: the diary and its grants); absent for an anonymous caller",
    )


class DiaryList(ResponseBody):
    items: list[Diary]


class DiaryListQuery(RequestBody):
    teamId: UUID | None = Field(default=None, description="Only diaries of this team")


def diary_from_row(row: Mapping[str, Any]) -> Diary:
    return Diary(
        id=row["id"],
        name=row["name"],
        visibility=row["visibility"],
        signed=row["signed"],
        teamId=row["team_id"],
        createdBy=row["created_by"],
        createdAt=row["created_at"],
        updatedAt=row["updated_at"],
    )


# --- grants -------------------------------------------------------------------------------


class GrantRequest(RequestBody):
    subjectId: UUID
    subjectNs: GranteeNs
    role: GrantRole


class GrantPath(RequestBody):
    diaryId: UUID


class Grant(SubjectNames):
    diaryId: UUID
    subjectId: UUID
    subjectNs: GranteeNs
    role: GrantRole
    createdAt: datetime | None = None


class GrantList(ResponseBody):
    items: list[Grant]


# --- entries ------------------------------------------------------------------------------


class EntryCreateRequest(RequestBody):
    content: Content
    title: Title | None = None
    tags: Tags = Field(default_factory=list)
    importance: Importance = limits.ENTRY_IMPORTANCE_DEFAULT
    entryType: EntryType = "semantic"
    signingRequestId: UUID | None = Field(
        default=None,
        description="A completed, valid signing request of the caller whose message is the "
        "entry CID (DECISIONS 'Signed entries')",
    )

    _dedupe = field_validator("tags")(_unique_tags)


class EntryUpdateRequest(RequestBody):
    content: Content | None = None
    title: Title | None = None
    tags: Tags | None = None
    importance: Importance | None = None
    entryType: EntryType | None = None

    _dedupe = field_validator("tags")(_unique_tags)

    @model_validator(mode="after")
    def _something(self) -> EntryUpdateRequest:
        if not self.model_fields_set:
            raise ValueError("Give at least one field to change")
        return self


class EntryPath(RequestBody):
    entryId: UUID


class DiaryEntryPath(RequestBody):
    diaryId: UUID
    entryId: UUID


def _past_instant(instant: datetime) -> datetime:
    """An `asOf` names a moment already past, in UTC. A future one is refused rather than clamped
    to now: the diary can still change before that moment, so a pack made "as of" it would not
    pin what was known, and the same request later would answer differently."""
    if instant > datetime.now(UTC):
        raise ValueError("asOf is in the future; name an instant already past")
    return instant.astimezone(UTC)


AS_OF_DESCRIPTION = (
    "An ISO 8601 instant with an offset, not in the future (400): the diary as it stood then, "
    "that is its entries created by then, each superseded only by a `supersedes` relation "
    "accepted by then. Entries show their current content (an edit since is not undone), and "
    "an entry or relation deleted since is gone from the past too"
)
AsOf = Annotated[Instant, AfterValidator(_past_instant), Field(description=AS_OF_DESCRIPTION)]
"""`asOf` on search, entry listing and packs (issue 26, time-aware retrieval)."""


def as_of_text(instant: datetime) -> str:
    """The one spelling of an instant a pack's params record (UTC, microseconds, `Z`), so the
    same instant written with another offset makes the same pack CID."""
    return instant.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class EntryListQuery(RequestBody):
    limit: int = Field(default=limits.ENTRIES_PAGE.default, ge=1, le=limits.ENTRIES_PAGE.max)
    offset: SqlCount = 0
    tags: str | None = Field(default=None, description="Comma-separated; entries carry all")
    excludeTags: str | None = Field(default=None, description="Comma-separated; none of these")
    entryType: EntryType | None = None
    asOf: AsOf | None = None


class EntryBatchDelete(RequestBody):
    ids: Annotated[list[UUID], Field(min_length=1, max_length=100)]


class BatchDeleted(ResponseBody):
    deleted: list[UUID]
    skipped: list[UUID]


ImportFormat = Literal["car", "mem0", "letta", "cogx"]
PeerFormat = Literal["mem0", "letta", "cogx"]


class EntryOrigin(ResponseBody):
    """Where an entry imported from another memory system came from (docs/imports.md)."""

    format: PeerFormat = Field(description="The file's format")
    id: str = Field(description="The record's id in its own system")
    createdAt: datetime | None = Field(default=None, description="As the source recorded it")
    updatedAt: datetime | None = Field(default=None, description="As the source recorded it")
    file: str = Field(description="CID (raw, sha2-256) of the imported file")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="The record's own metadata, as the source wrote it"
    )


class Entry(ResponseBody):
    id: UUID
    diaryId: UUID
    title: str | None = None
    content: str
    tags: list[str]
    importance: int
    entryType: EntryType
    injectionRisk: bool
    injectionThreats: list[Threat] = Field(default_factory=list)
    cid: str
    prevCid: str | None = None
    signed: bool
    signingRequestId: UUID | None = None
    contentSignature: str | None = None
    supersededBy: UUID | None = None
    hasEmbedding: bool
    accessCount: int
    lastAccessedAt: datetime | None = None
    createdBy: UUID
    createdAt: datetime
    updatedAt: datetime
    score: float | None = Field(default=None, description="Search results only")
    origin: EntryOrigin | None = Field(
        default=None, description="Entries imported from another memory system only"
    )


def entry_from_row(row: Mapping[str, Any], *, score: float | None = None) -> Entry:
    """The row needs the entry's columns (`origin` included) plus `has_embedding`
    (`embedding IS NOT NULL`)."""
    return Entry(
        id=row["id"],
        diaryId=row["diary_id"],
        title=row["title"],
        content=row["content"],
        tags=list(row["tags"]),
        importance=row["importance"],
        entryType=row["entry_type"],
        injectionRisk=row["injection_risk"],
        injectionThreats=[Threat.model_validate(t) for t in row["injection_threats"] or []],
        cid=row["cid"],
        prevCid=row["prev_cid"],
        signed=row["signing_request_id"] is not None,
        signingRequestId=row["signing_request_id"],
        contentSignature=row["content_signature"],
        supersededBy=row["superseded_by"],
        hasEmbedding=row["has_embedding"],
        accessCount=row["access_count"],
        lastAccessedAt=row["last_accessed_at"],
        createdBy=row["created_by"],
        createdAt=row["created_at"],
        updatedAt=row["updated_at"],
        score=score,
        origin=row["origin"],
    )


class EntryList(ResponseBody):
    items: list[Entry]
    total: int
    limit: int
    offset: int


class TagCount(ResponseBody):
    tag: str
    count: int


class TagHistogram(ResponseBody):
    tags: list[TagCount]
    total: int


class TagQuery(RequestBody):
    prefix: str | None = Field(default=None, max_length=limits.ENTRY_TAG_MAX_CHARS)
    minCount: SqlOrdinal = 1
    entryType: EntryType | None = None


class EntryVerification(ResponseBody):
    """`GET /diaries/{id}/entries/{entryId}/verify` (DECISIONS 'Signed entries')."""

    signed: bool
    cidMatches: bool
    signatureValid: bool
    chainValid: bool
    valid: bool
    cid: str
    agentFingerprint: str | None = None


# --- relations ----------------------------------------------------------------------------


class RelationMetadata(RequestBody):
    confidence: float | None = Field(default=None, ge=0, le=1)
    similarity: float | None = Field(default=None, ge=-1, le=1)


class RelationCreateRequest(RequestBody):
    targetId: UUID
    relation: RelationType
    status: Literal["proposed", "accepted"] = "proposed"
    metadata: RelationMetadata | None = None


class RelationUpdateRequest(RequestBody):
    status: RelationStatus


class RelationPath(RequestBody):
    relationId: UUID


class RelationListQuery(RequestBody):
    relation: RelationType | None = None
    status: RelationStatus | None = None
    direction: Literal["as_source", "as_target", "both"] = "both"
    limit: int = Field(default=limits.RELATIONS_PAGE.default, ge=1, le=limits.RELATIONS_PAGE.max)
    offset: SqlCount = 0


class Relation(ResponseBody):
    id: UUID
    sourceId: UUID
    targetId: UUID
    relation: RelationType
    status: RelationStatus
    sourceCidSnapshot: str
    targetCidSnapshot: str
    sourceTitle: str | None = Field(default=None, description="The source entry's title")
    targetTitle: str | None = Field(default=None, description="The target entry's title")
    workflowId: str | None = None
    confidence: float | None = None
    similarity: float | None = None
    createdAt: datetime
    updatedAt: datetime


class RelationList(ResponseBody):
    items: list[Relation]
    total: int


def relation_from_row(row: Mapping[str, Any]) -> Relation:
    metadata = row["metadata"] or {}
    return Relation(
        id=row["id"],
        sourceId=row["source_id"],
        targetId=row["target_id"],
        relation=row["relation"],
        status=row["status"],
        sourceCidSnapshot=row["source_cid_snapshot"],
        targetCidSnapshot=row["target_cid_snapshot"],
        sourceTitle=row["source_title"],
        targetTitle=row["target_title"],
        workflowId=row["workflow_id"],
        confidence=metadata.get("confidence"),
        similarity=metadata.get("similarity"),
        createdAt=row["created_at"],
        updatedAt=row["updated_at"],
    )


# --- workflow payloads --------------------------------------------------------------------


class DiaryCreateInput(Payload):
    diary_id: UUID
    team_id: UUID
    name: str
    visibility: Visibility
    signed: bool
    created_by: UUID
    created_by_ns: CreatorNs


class DiaryUpdateInput(Payload):
    diary_id: UUID
    name: str | None = None
    visibility: Visibility | None = None


class DiaryRef(Payload):
    diary_id: UUID


class GrantChange(Payload):
    diary_id: UUID
    subject_id: UUID
    subject_ns: GranteeNs
    role: GrantRole


class EntryDraft(Payload):
    """What an entry says, as the workflow scans, hashes and embeds it."""

    entry_id: UUID
    diary_id: UUID
    content: str
    title: str | None = None
    tags: list[str] = Field(default_factory=list)
    importance: int = limits.ENTRY_IMPORTANCE_DEFAULT
    entry_type: EntryType = "semantic"
    signing_request_id: UUID | None = None
    created_by: UUID
    created_by_ns: CreatorNs = "Agent"
    signed_diary: bool = False
    # The run was started on the embedding task queue, beside the model: it embeds with a local
    # activity. Runs started before the entry workflows moved there lack it (a regular activity
    # routed to that queue), so replay follows what each run recorded.
    embed_locally: bool = False


class EntryInsert(Payload):
    """The row to insert, with everything the workflow computed."""

    draft: EntryDraft
    cid: str
    injection_risk: bool
    injection_threats: list[dict[str, Any]] = Field(default_factory=list)
    embedding: list[float] | None = None


class EntryInserted(Payload):
    """The stored entry: the new one, or (`duplicate`) the live entry of the same content in the
    same diary, when the create was an exact duplicate and wrote nothing."""

    entry_id: UUID
    cid: str
    duplicate: bool = False
    # The entry as the API answers with it, so the route reads nothing back; None from a
    # worker built before this field, and the route then reads the row.
    entry: Entry | None = None


class EntryChange(Payload):
    """An update of some fields; None leaves a field as it is."""

    entry_id: UUID
    content: str | None = None
    title: str | None = None
    clear_title: bool = False
    tags: list[str] | None = None
    importance: int | None = None
    entry_type: EntryType | None = None


class EntryRewrite(Payload):
    """The update as the workflow stores it, with the recomputed CID, scan and vector."""

    change: EntryChange
    cid: str
    injection_risk: bool
    injection_threats: list[dict[str, Any]] = Field(default_factory=list)
    embedding: list[float] | None = None
    reembed: bool = False


class EntryRef(Payload):
    entry_id: UUID


class EntryRefs(Payload):
    entry_ids: list[UUID]


class EntriesDeleted(Payload):
    deleted: list[UUID]
    skipped: list[UUID]


class EntryEmbedding(Payload):
    entry_id: UUID
    text: str
    cid: str
    embedding: list[float] | None = None
    embed_locally: bool = False  # as `EntryDraft.embed_locally`, from the run that started it


class RelationCreateInput(Payload):
    relation_id: UUID
    source_id: UUID
    target_id: UUID
    relation: RelationType
    status: RelationStatus
    metadata: dict[str, Any] = Field(default_factory=dict)
    workflow_id: str | None = None


class RelationStatusChange(Payload):
    relation_id: UUID
    status: RelationStatus


class RelationRef(Payload):
    relation_id: UUID


class RelationWritten(Payload):
    relation_id: UUID
    created: bool


class EntryUpdateInput(Payload):
    """The change as asked, and the entry as it will read after it (what is scanned, hashed
    and, when the text changed, embedded)."""

    change: EntryChange
    merged: EntryDraft
    text_changed: bool
