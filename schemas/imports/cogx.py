"""COGX 0.1, Cognee's exchange format (docs/imports.md "COGX"): `manifest.json` plus one JSONL
file per record kind, sent as a zip or a gzip-compressed tar (at the top, or in one folder).

    manifest.json         {"cogx_version": "0.1", "source_system", "exported_at", "counts", ...}
    memories.jsonl        {"kind": "memory", "external_id", "content", "categories", "scope",
                           "created_at", "updated_at", "metadata", "external_system"}
    memory_blocks.jsonl   {"kind": "memory_block", "external_id", "label", "value", "limit", ...}
    documents.jsonl       {"kind": "document", "external_id", "content", "title", ...}
    facts.jsonl           {"kind": "fact", "external_id", "subject_ref", "predicate",
                           "object_ref", "fact_text", "confidence", ...}

Memories and memory blocks are `semantic` entries, documents `episodic` ones; scope ids
(user, agent, session, run) and categories (a block: its label) become tags. A fact whose
subject and object are both records of the file is a relation between their entries (its
predicate when it names one of ours, else `references`, the predicate kept in the relation's
metadata); other facts, entities, episodes and raw nodes are graph data, not memory records,
and are not imported. A file of a newer major version than 0 is refused.
"""

from __future__ import annotations

import gzip
import io
import json
import posixpath
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from pydantic import Field

from schemas import limits
from schemas.imports.peer import (
    PeerEntry,
    PeerFile,
    PeerLink,
    PeerRecord,
    PeerTime,
    RecordRejected,
    entry,
    relation_for,
    scope_tags,
    storable,
    validated,
)

MANIFEST: Final = "manifest.json"
MEMORIES: Final = "memories.jsonl"
BLOCKS: Final = "memory_blocks.jsonl"
DOCUMENTS: Final = "documents.jsonl"
FACTS: Final = "facts.jsonl"
READ_FILES: Final = (MANIFEST, MEMORIES, BLOCKS, DOCUMENTS, FACTS)
SUPPORTED_MAJOR: Final = 0
Member = TypeVar("Member")
ZIP_MAGIC: Final = b"PK\x03\x04"
GZIP_MAGIC: Final = b"\x1f\x8b"


class Manifest(PeerRecord):
    cogx_version: str
    source_system: str = "unknown"
    exported_at: PeerTime = None


class Scope(PeerRecord):
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None


class Record(PeerRecord):
    kind: str | None = None
    external_id: str = Field(min_length=1)
    external_system: str | None = None
    scope: Scope = Field(default_factory=Scope)
    created_at: PeerTime = None
    updated_at: PeerTime = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Memory(Record):
    content: str
    categories: list[str] = Field(default_factory=list)


class MemoryBlock(Record):
    label: str = Field(min_length=1)
    value: str
    limit: int | None = None


class Document(Record):
    content: str
    title: str | None = None


class Fact(Record):
    subject_ref: str
    predicate: str
    object_ref: str
    fact_text: str | None = None
    confidence: float | None = None


def is_archive(data: bytes) -> bool:
    return data.startswith(ZIP_MAGIC) or data.startswith(GZIP_MAGIC)


# --- the container ------------------------------------------------------------------------


class _Budget:
    """What the unpacked files may weigh in all: an upload's limit, so a small archive cannot
    expand into more than a plain upload could carry."""

    def __init__(self) -> None:
        self.left = limits.DIARY_IMPORT_MAX_BYTES

    def take(self, name: str, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise RecordRejected(
                name,
                f"the unpacked files pass {limits.DIARY_IMPORT_MAX_BYTES} bytes",
                too_large=True,
            )


def _base(names: list[str]) -> str:
    """The folder holding the manifest: the archive's top, or its one folder."""
    manifests = sorted(
        (n for n in names if posixpath.basename(n) == MANIFEST), key=lambda n: n.count("/")
    )
    if not manifests:
        raise RecordRejected(MANIFEST, "missing: not a COGX archive")
    return posixpath.dirname(manifests[0])


def _picked(
    members: Mapping[str, Member], size: Callable[[Member], int], read: Callable[[Member], bytes]
) -> dict[str, bytes]:
    """The COGX files among an archive's members, within the budget."""
    budget = _Budget()
    base = _base(list(members))
    files = {}
    for name in READ_FILES:
        member = members.get(posixpath.join(base, name))
        if member is not None:
            budget.take(name, size(member))
            files[name] = read(member)
    return files


def _zip_files(data: bytes) -> dict[str, bytes]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = {i.filename: i for i in archive.infolist() if not i.is_dir()}
            return _picked(members, lambda info: info.file_size, archive.read)
    # what a damaged or encrypted member raises: a refusal of the file, never a server error
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, RuntimeError, OSError) as error:
        raise RecordRejected("the zip file", f"unreadable ({error})") from None


def _tar_files(data: bytes) -> dict[str, bytes]:
    try:
        # read through a bounded stream: the gzip cannot expand past the budget unseen
        raw = gzip.GzipFile(fileobj=io.BytesIO(data)).read(limits.DIARY_IMPORT_MAX_BYTES + 1)
        if len(raw) > limits.DIARY_IMPORT_MAX_BYTES:
            _Budget().take("the tar file", len(raw))
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as archive:
            members = {m.name.removeprefix("./"): m for m in archive.getmembers() if m.isfile()}

            def read(member: tarfile.TarInfo) -> bytes:
                extracted = archive.extractfile(member)
                return extracted.read() if extracted is not None else b""

            return _picked(members, lambda member: member.size, read)
    except (tarfile.TarError, zlib.error, OSError, EOFError) as error:
        raise RecordRejected("the tar file", f"unreadable ({error})") from None


def unpack(data: bytes) -> dict[str, bytes]:
    """The COGX files of a zip or a .tar.gz, by name."""
    return _zip_files(data) if data.startswith(ZIP_MAGIC) else _tar_files(data)


def _json(text: bytes, where: str) -> Any:
    try:
        return json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RecordRejected(where, f"not JSON ({error})") from None


def _lines(files: Mapping[str, bytes], name: str) -> list[tuple[str, Any]]:
    """Each non-blank line of a JSONL file as (its name, its value)."""
    found = []
    for n, line in enumerate(files.get(name, b"").splitlines(), 1):
        if line.strip():
            where = f"{name} line {n}"
            found.append((where, _json(line, where)))
    return found


# --- records to entries ---------------------------------------------------------------------


def _scope(record: Record) -> list[str]:
    scope = record.scope
    return scope_tags(
        user=scope.user_id, agent=scope.agent_id, session=scope.session_id, run=scope.run_id
    )


def _memory(where: str, memory: Memory) -> PeerEntry:
    return _entry(where, memory, memory.content, [*_scope(memory), *memory.categories])


def _block(where: str, block: MemoryBlock) -> PeerEntry:
    return _entry(where, block, block.value, [block.label, *_scope(block)], title=block.label)


def _document(where: str, document: Document) -> PeerEntry:
    return _entry(
        where, document, document.content, _scope(document), "episodic", title=document.title
    )


def _entry(
    where: str,
    record: Record,
    content: str,
    tags: list[str],
    entry_type: str = "semantic",
    title: str | None = None,
) -> PeerEntry:
    metadata = dict(record.metadata)
    if record.external_system:
        metadata.setdefault("externalSystem", record.external_system)
    return entry(
        f"{where} ({record.external_id})",
        content=content,
        title=title,
        tags=tags,
        entry_type=entry_type,
        record_id=record.external_id,
        created_at=record.created_at,
        updated_at=record.updated_at,
        metadata=metadata,
    )


_KINDS: Final[tuple[tuple[str, str, type[Record], Callable[[str, Any], PeerEntry]], ...]] = (
    (MEMORIES, "memory", Memory, _memory),
    (BLOCKS, "memory_block", MemoryBlock, _block),
    (DOCUMENTS, "document", Document, _document),
)


def _checked(where: str, value: Any, kind: str, model: type[Record]) -> Any:
    record = validated(model, value, where)
    if record.kind not in (None, kind):
        raise RecordRejected(where, f"kind: {record.kind!r} in the file of {kind!r} records")
    return record


def to_entries(files: Mapping[str, bytes]) -> tuple[tuple[PeerEntry, ...], tuple[PeerLink, ...]]:
    entries: list[PeerEntry] = []
    positions: dict[str, int] = {}
    for name, kind, model, convert in _KINDS:
        for where, value in _lines(files, name):
            record = _checked(where, value, kind, model)
            positions.setdefault(record.external_id, len(entries))
            entries.append(convert(where, record))
    links: dict[tuple[int, int, str], PeerLink] = {}
    for where, value in _lines(files, FACTS):
        fact: Fact = _checked(where, value, "fact", Fact)
        source, target = positions.get(fact.subject_ref), positions.get(fact.object_ref)
        if source is None or target is None or source == target:
            continue  # a fact about entities: graph data, not a link between memory records
        relation = relation_for(fact.predicate)
        metadata: dict[str, Any] = {"predicate": fact.predicate, "factId": fact.external_id}
        if fact.confidence is not None:
            metadata["confidence"] = fact.confidence
        storable(where, metadata)
        links.setdefault((source, target, relation), PeerLink(source, target, relation, metadata))
    return tuple(entries), tuple(links.values())


def read(data: bytes) -> PeerFile:
    files = unpack(data)
    if MANIFEST not in files:
        raise RecordRejected(MANIFEST, "missing: not a COGX archive")
    manifest: Manifest = validated(Manifest, _json(files[MANIFEST], MANIFEST), MANIFEST)
    major = manifest.cogx_version.split(".")[0]
    if not major.isdigit() or int(major) > SUPPORTED_MAJOR:
        raise RecordRejected(
            MANIFEST, f"cogx_version {manifest.cogx_version!r}: this reader takes 0.x"
        )
    entries, links = to_entries(files)
    name = storable(MANIFEST, f"COGX import from {manifest.source_system}"[:255])
    return PeerFile(format="cogx", name=name, entries=entries, links=links)
