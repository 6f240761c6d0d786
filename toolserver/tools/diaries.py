"""Diaries and diary grants."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from schemas import limits
from schemas.hygiene import HygieneReport
from schemas.identity import Done
from schemas.imports.formats import OCTET_STREAM
from schemas.memory import (
    Diary,
    DiaryCreateRequest,
    DiaryList,
    EntryType,
    Grant,
    GrantList,
    GrantRequest,
    TagHistogram,
    Visibility,
)
from toolserver.registry import Arguments, Call, tool
from toolserver.tools.uploads import decode_upload

DiaryId = UUID


def _count(noun: str, key: str = "items") -> Any:
    return lambda result: f"{len(result[key])} {noun}"


class DiariesList(Arguments):
    team_id: UUID | None = None


@tool(output=DiaryList, read_only=True, render=_count("diaries"))
async def diaries_list(call: Call, args: DiariesList) -> DiaryList:
    """List the diaries you can read."""
    return await call.api.list_diaries(team_id=args.team_id)


class DiariesCreate(Arguments):
    team_id: UUID
    name: str = Field(min_length=1, max_length=255)
    visibility: Visibility = Field(
        default="private",
    )
    signed: bool = Field(default=False, description="Entries must be signed")


@tool(output=Diary, render=lambda r: f"Created diary {r['name']} ({r['id']})")
async def diaries_create(call: Call, args: DiariesCreate) -> Diary:
    """Create a diary in one of your teams."""
    body = DiaryCreateRequest(name=args.name, visibility=args.visibility, signed=args.signed)
    return await call.api.create_diary(args.team_id, body)


class DiariesImport(Arguments):
    team_id: UUID
    content_base64: str
    name: str | None = Field(default=None, min_length=1, max_length=255)


@tool(output=Diary, idempotent=True, render=lambda r: f"Imported diary {r['name']} ({r['id']})")
async def diaries_import(call: Call, args: DiariesImport) -> Diary:
    """New diary from a file (base64): Cairn CAR, Mem0 JSON, Letta .af or COGX archive."""
    # the server tells the format from the bytes (docs/imports.md); the same Mem0, Letta or
    # COGX file again answers the diary it made
    data = decode_upload(args.content_base64, limits.DIARY_IMPORT_MAX_BYTES, "Import files")
    return await call.api.import_diary(
        args.team_id, data, name=args.name, content_type=OCTET_STREAM
    )


class DiariesGet(Arguments):
    diary_id: DiaryId


@tool(output=Diary, read_only=True, render=lambda r: f"Diary {r['name']} ({r['visibility']})")
async def diaries_get(call: Call, args: DiariesGet) -> Diary:
    """Read one diary."""
    return await call.api.get_diary(args.diary_id)


class DiaryTags(Arguments):
    diary_id: DiaryId
    prefix: str | None = Field(default=None, max_length=128)
    min_count: int = Field(default=1, ge=1)
    entry_type: EntryType | None = None


@tool(output=TagHistogram, read_only=True, render=_count("tags", "tags"))
async def diary_tags(call: Call, args: DiaryTags) -> TagHistogram:
    """Tag histogram of a diary."""
    return await call.api.diary_tags(
        args.diary_id, prefix=args.prefix, min_count=args.min_count, entry_type=args.entry_type
    )


@tool(
    output=HygieneReport,
    read_only=True,
    render=lambda r: (
        f"{r['entries']} entries; {r['duplicatesRefused']} duplicates refused, "
        f"{r['openProposals']} open proposals, {r['superseded']} superseded, "
        f"{r['injectionFlagged']} injection-flagged, {r['unretrieved']} unretrieved in "
        f"{r['unretrievedDays']} days"
    ),
)
async def diary_hygiene(call: Call, args: DiariesGet) -> HygieneReport:
    """A diary's hygiene counts."""
    return await call.api.diary_hygiene(args.diary_id)


# --- grants ----------------------------------------------------------------------------------


class DiaryGrant(Arguments):
    diary_id: DiaryId
    subject_id: UUID
    subject_ns: Literal["Agent", "Human", "Group"]
    role: Literal["writer", "manager"]


def _grant(args: DiaryGrant) -> GrantRequest:
    return GrantRequest(subjectId=args.subject_id, subjectNs=args.subject_ns, role=args.role)


@tool(output=Grant, idempotent=True, render=lambda r: f"Granted {r['role']} to {r['subjectId']}")
async def diary_grants_create(call: Call, args: DiaryGrant) -> Grant:
    """Give a subject a role on a diary."""
    return await call.api.create_grant(args.diary_id, _grant(args))


@tool(output=Done, destructive=True, idempotent=True, render=lambda r: "Grant revoked")
async def diary_grants_revoke(call: Call, args: DiaryGrant) -> Done:
    """Revoke a diary grant."""
    return await call.api.revoke_grant(args.diary_id, _grant(args))


class DiaryGrantsList(Arguments):
    diary_id: DiaryId


@tool(output=GrantList, read_only=True, render=_count("grants"))
async def diary_grants_list(call: Call, args: DiaryGrantsList) -> GrantList:
    """List a diary's grants."""
    return await call.api.list_grants(args.diary_id)
