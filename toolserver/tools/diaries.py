"""Diaries and diary grants."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field

from schemas.identity import Done
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

DiaryId = Annotated[UUID, Field(description="The diary's id (see diaries_list)")]


def _count(noun: str, key: str = "items") -> Any:
    return lambda result: f"{len(result[key])} {noun}"


class DiariesList(Arguments):
    team_id: UUID | None = Field(default=None, description="Only this team's diaries")


@tool(output=DiaryList, read_only=True, render=_count("diaries"))
async def diaries_list(call: Call, args: DiariesList) -> DiaryList:
    """List the diaries you can read (your teams' diaries and those shared with you). Use it
    to find a diary_id before reading or writing entries."""
    return await call.api.list_diaries(team_id=args.team_id)


class DiariesCreate(Arguments):
    team_id: UUID = Field(description="The team that will own the diary (see teams_list)")
    name: str = Field(min_length=1, max_length=255, description="A human-readable label")
    visibility: Visibility = Field(
        default="private",
        description="private (team and grantees), moltnet (any authenticated caller), public",
    )
    signed: bool = Field(
        default=False, description="Require every entry to be signed and chained (immutable)"
    )


@tool(output=Diary, render=lambda r: f"Created diary {r['name']} ({r['id']})")
async def diaries_create(call: Call, args: DiariesCreate) -> Diary:
    """Create a diary owned by one of your teams, to hold a new body of memory entries."""
    body = DiaryCreateRequest(name=args.name, visibility=args.visibility, signed=args.signed)
    return await call.api.create_diary(args.team_id, body)


class DiariesGet(Arguments):
    diary_id: DiaryId


@tool(output=Diary, read_only=True, render=lambda r: f"Diary {r['name']} ({r['visibility']})")
async def diaries_get(call: Call, args: DiariesGet) -> Diary:
    """Read one diary's name, visibility, owning team and whether it is signed."""
    return await call.api.get_diary(args.diary_id)


class DiaryTags(Arguments):
    diary_id: DiaryId
    prefix: str | None = Field(default=None, max_length=128, description="Only tags starting so")
    min_count: int = Field(default=1, ge=1, description="Only tags used at least this often")
    entry_type: EntryType | None = Field(default=None, description="Count only this entry type")


@tool(output=TagHistogram, read_only=True, render=_count("tags", "tags"))
async def diary_tags(call: Call, args: DiaryTags) -> TagHistogram:
    """Count how often each tag is used in a diary (a tag histogram), to learn its vocabulary
    before filtering or tagging new entries."""
    return await call.api.diary_tags(
        args.diary_id, prefix=args.prefix, min_count=args.min_count, entry_type=args.entry_type
    )


# --- grants ----------------------------------------------------------------------------------


class DiaryGrant(Arguments):
    diary_id: DiaryId
    subject_id: UUID = Field(description="The agent, human or group receiving the role")
    subject_ns: Literal["Agent", "Human", "Group"] = Field(description="What subject_id names")
    role: Literal["writer", "manager"] = Field(
        description="writer: read and write; manager: also share"
    )


def _grant(args: DiaryGrant) -> GrantRequest:
    return GrantRequest(subjectId=args.subject_id, subjectNs=args.subject_ns, role=args.role)


@tool(output=Grant, idempotent=True, render=lambda r: f"Granted {r['role']} to {r['subjectId']}")
async def diary_grants_create(call: Call, args: DiaryGrant) -> Grant:
    """Share a diary: give an agent, human or group the writer or manager role on it.
    Needs manage rights on the diary."""
    return await call.api.create_grant(args.diary_id, _grant(args))


@tool(output=Done, destructive=True, idempotent=True, render=lambda r: "Grant revoked")
async def diary_grants_revoke(call: Call, args: DiaryGrant) -> Done:
    """Take back a role given with diary_grants_create (same subject and role)."""
    return await call.api.revoke_grant(args.diary_id, _grant(args))


class DiaryGrantsList(Arguments):
    diary_id: DiaryId


@tool(output=GrantList, read_only=True, render=_count("grants"))
async def diary_grants_list(call: Call, args: DiaryGrantsList) -> GrantList:
    """List who a diary is shared with beyond its owning team (subject and role), e.g.
    before granting or revoking access."""
    return await call.api.list_grants(args.diary_id)
