"""Payloads of the diary import workflow and how its rows are named.

The file imported is a Cairn archive (CAR) or a peer file (Mem0, Letta, COGX: schemas.imports).
The archive itself never passes through workflow history (Temporal caps a payload at 2 MiB):
the API stages the verified CAR file in S3 and the workflow passes its key; each step reads
what it needs from there or from the database.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final
from uuid import UUID

from pydantic import Field

from schemas.base import Payload, RequestBody
from schemas.kernel.diary_car import ArchivedEntry
from schemas.memory import CreatorNs, DiaryName, ImportFormat

# uuid5 namespace of imported rows: ids derive from (new diary, position), so a retried step
# writes the same rows and the workflow can name them without carrying them.
_IMPORT_NAMESPACE: Final = uuid.UUID("5b0c8e52-7d0f-4bde-9a59-2f3c3a1e6d10")
STAGED_PREFIX: Final = "diary-imports/"


def imported_entry_id(diary_id: UUID, position: int) -> UUID:
    """The id of the entry at `position` of the archive imported as `diary_id`."""
    return uuid.uuid5(_IMPORT_NAMESPACE, f"{diary_id}/entries/{position}")


def imported_relation_id(diary_id: UUID, position: int) -> UUID:
    return uuid.uuid5(_IMPORT_NAMESPACE, f"{diary_id}/relations/{position}")


def staged_archive_key(diary_id: UUID, archive_cid: str, file_format: ImportFormat = "car") -> str:
    """Where the API stages an upload for the import of `diary_id` (one object per import, so
    one import discarding its file never pulls it from under another)."""
    return f"{STAGED_PREFIX}{diary_id}/{archive_cid}.{file_format}"


def peer_import_diary_id(team_id: UUID, file_cid: str) -> UUID:
    """The diary a peer file (Mem0, Letta, COGX) becomes in a team: one per file, so importing
    the same file again names the same diary and writes nothing new (docs/imports.md)."""
    return uuid.uuid5(_IMPORT_NAMESPACE, f"teams/{team_id}/peer-files/{file_cid}")


class DiaryImportInput(Payload):
    """Create `diary_id` in `team_id` from the staged archive (already verified by the API)."""

    diary_id: UUID
    team_id: UUID
    name: str | None = None  # None: the archive's own name
    created_by: UUID
    created_by_ns: CreatorNs = "Agent"
    archive_key: str
    # a Cairn archive, or a peer file read by `schemas.imports.formats.read_peer_file`
    format: ImportFormat = "car"


class DiaryImported(Payload):
    entries: int


class ImportedEntries(Payload):
    """Positions `start`..`stop` (exclusive) of an imported diary's entries."""

    diary_id: UUID
    start: int
    stop: int


class EntriesEmbedded(Payload):
    embedded: int


@dataclass(frozen=True)
class ImportedEntry:
    """An archived entry with what the server computes for it anew (its injection scan)."""

    entry: ArchivedEntry
    injection_risk: bool
    injection_threats: list[dict[str, Any]]
    origin: dict[str, Any] | None = None  # an entry of a peer file: where it came from


class DiaryImportQuery(RequestBody):
    """`POST /diaries/import?name=`: the new diary's name (the archive's when omitted)."""

    name: DiaryName | None = Field(default=None, description="Name of the new diary")
