"""What every peer format is read into, and how it becomes the rows of a diary import.

A peer file is a list of entries (content, title, tags, type, the record's own id, timestamps
and metadata) and links between them by position. Each entry passes the checks of
`POST /diaries/{id}/entries` (`EntryCreateRequest`: content, title and tag limits) while it is
read, so a file is refused at its first record that the API would refuse, and named by it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Final, get_args
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, ValidationError

from schemas import limits
from schemas.errors import DomainError, ImportInvalid, PayloadTooLarge
from schemas.kernel.diary_car import ArchivedEntry, ArchivedRelation, DiaryArchive
from schemas.memory import EntryCreateRequest, EntryOrigin, PeerFormat, RelationType
from schemas.text import UNSTORABLE_TEXT_MESSAGE, unstorable_text_at

_RELATIONS: Final = frozenset(get_args(RelationType))
# A link another system asserted: kept as decided, like a relation an archive carries
LINK_STATUS: Final = "accepted"


class RecordRejected(ValueError):
    """The file is refused at `record` (the first bad one, in file order); `too_large` when what
    it holds passes a size limit (413) rather than being malformed (400)."""

    def __init__(self, record: str, reason: str, *, too_large: bool = False) -> None:
        super().__init__(f"{record}: {reason}")
        self.record = record
        self.reason = reason
        self.too_large = too_large


def refusal(rejected: RecordRejected) -> DomainError:
    """The problem a refused peer file is: 413 when it holds too much, else 400; both name the
    first bad record in `record`."""
    problem = PayloadTooLarge if rejected.too_large else ImportInvalid
    return problem(f"The file is refused at {rejected}", extensions={"record": rejected.record})


def _as_utc(value: Any) -> Any:
    """A peer's timestamp without an offset is UTC (what Mem0, Letta and COGX store)."""
    if isinstance(value, str) and value:
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value  # pydantic names the field
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


PeerTime = Annotated[AwareDatetime | None, BeforeValidator(_as_utc)]


class PeerRecord(BaseModel):
    """A record as another system writes it: fields this reader does not use are ignored (the
    formats grow), the ones it uses are checked."""

    model_config = ConfigDict(extra="ignore", frozen=True)


@dataclass(frozen=True)
class PeerEntry:
    content: str
    title: str | None
    tags: tuple[str, ...]
    entry_type: str
    record_id: str
    created_at: datetime | None = None
    updated_at: datetime | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PeerLink:
    """A link between two entries of the file, by position."""

    source: int
    target: int
    relation: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PeerFile:
    format: PeerFormat
    name: str  # the new diary's name unless `?name=` says otherwise
    entries: tuple[PeerEntry, ...]
    links: tuple[PeerLink, ...] = ()


def record_error(record: str, error: ValidationError) -> RecordRejected:
    """The first problem pydantic found in a record, with where in the record it is."""
    first = error.errors()[0]
    where = "/".join(str(part) for part in first["loc"])
    return RecordRejected(record, f"{where}: {first['msg']}" if where else first["msg"])


def validated(model: type[BaseModel], value: Any, record: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as error:
        raise record_error(record, error) from None


def storable(record: str, value: Any) -> Any:
    """The value, unless text in it is something Postgres cannot store (a NUL, a lone
    surrogate): the record is refused then, as a request carrying it would be."""
    at = unstorable_text_at(value)
    if at is not None:
        where = "/".join(str(part) for part in at)
        raise RecordRejected(
            record, f"{where}: {UNSTORABLE_TEXT_MESSAGE}" if where else UNSTORABLE_TEXT_MESSAGE
        )
    return value


def scope_tags(**scope: str | None) -> list[str]:
    """`user:alice`, `agent:helper`, …: a source's scoping ids kept as tags."""
    return [f"{kind}:{value}" for kind, value in scope.items() if value]


def entry(
    record: str,
    *,
    content: str,
    tags: Iterable[str],
    entry_type: str,
    record_id: str,
    title: str | None = None,
    created_at: datetime | None = None,
    updated_at: datetime | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> PeerEntry:
    """An entry of a peer file, held to the rules of an entry written through the API."""
    try:
        checked = EntryCreateRequest(
            content=content, title=title, tags=list(tags), entryType=entry_type
        )
    except ValidationError as error:
        raise record_error(record, error) from None
    storable(record, {"id": record_id, "metadata": dict(metadata or {})})
    _within_origin_limits(record, record_id, metadata or {})
    return PeerEntry(
        content=checked.content,
        title=checked.title or None,
        tags=tuple(checked.tags),
        entry_type=checked.entryType,
        record_id=record_id,
        created_at=created_at,
        updated_at=updated_at,
        metadata=dict(metadata or {}),
    )


def _within_origin_limits(record: str, record_id: str, metadata: Mapping[str, Any]) -> None:
    """A record's own id and metadata travel on its entry's `origin`: a file whose record holds
    more than the limits is refused at it (413), not stored."""
    if len(record_id) > limits.PEER_RECORD_ID_MAX_CHARS:
        raise RecordRejected(
            record, f"id: over {limits.PEER_RECORD_ID_MAX_CHARS} characters", too_large=True
        )
    size = len(json.dumps(dict(metadata), ensure_ascii=False, default=str).encode())
    if size > limits.PEER_RECORD_METADATA_MAX_BYTES:
        raise RecordRejected(
            record,
            f"metadata: {size} bytes of JSON, over {limits.PEER_RECORD_METADATA_MAX_BYTES}",
            too_large=True,
        )


def relation_for(predicate: str) -> str:
    """A peer's link type as ours: the same name when we have it, else `references`."""
    name = predicate.strip().lower().replace(" ", "_").replace("-", "_")
    return name if name in _RELATIONS else "references"


def to_archive(
    peer: PeerFile, *, diary_id: UUID, file_cid: str, imported_at: datetime
) -> tuple[DiaryArchive, list[dict[str, Any]]]:
    """The diary a peer file makes (private, unsigned, every entry at the default importance)
    and each entry's origin as stored. An entry without a creation time is created now."""
    entries = tuple(
        ArchivedEntry(
            content=e.content,
            title=e.title,
            tags=e.tags,
            entry_type=e.entry_type,
            importance=EntryCreateRequest.model_fields["importance"].default,
            created_at=e.created_at or imported_at,
        )
        for e in peer.entries
    )
    relations = tuple(
        ArchivedRelation(
            source=link.source,
            target=link.target,
            relation=link.relation,
            status=LINK_STATUS,
            metadata=link.metadata,
        )
        for link in peer.links
    )
    origins = [
        EntryOrigin(
            format=peer.format,
            id=e.record_id,
            createdAt=e.created_at,
            updatedAt=e.updated_at,
            file=file_cid,
            metadata=dict(e.metadata),
        ).model_dump(mode="json", exclude_none=True)
        for e in peer.entries
    ]
    archive = DiaryArchive(diary_id, peer.name, "private", False, entries, relations)
    return archive, origins
