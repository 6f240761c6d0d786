"""Entries, hybrid search and entry relations. Lists are paged (limit + offset): a tool never
returns a whole diary at once."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, Field

from schemas import limits
from schemas.embedding import SearchRequest
from schemas.identity import Done
from schemas.memory import (
    Entry,
    EntryCreateRequest,
    EntryList,
    EntryType,
    EntryUpdateRequest,
    Relation,
    RelationCreateRequest,
    RelationList,
    RelationMetadata,
    RelationStatus,
    RelationType,
    RelationUpdateRequest,
)
from toolserver.registry import Arguments, Call, tool

EntryId = UUID
Tag = Annotated[str, Field(min_length=1, max_length=limits.ENTRY_TAG_MAX_CHARS)]
Tags = Annotated[list[Tag], Field(max_length=limits.ENTRY_TAGS_MAX)]
Importance = Annotated[int, Field(ge=limits.ENTRY_IMPORTANCE_MIN, le=limits.ENTRY_IMPORTANCE_MAX)]
Content = Annotated[
    str, Field(min_length=limits.ENTRY_CONTENT_MIN_CHARS, max_length=limits.ENTRY_CONTENT_MAX_CHARS)
]
Title = Annotated[str, Field(max_length=limits.ENTRY_TITLE_MAX_CHARS)]


def _entry_text(result: dict[str, Any]) -> str:
    flag = " [flagged: possible prompt injection]" if result.get("injectionRisk") else ""
    return f"Entry {result['id']} ({result['entryType']}){flag}: {result.get('title') or ''}"


def _page_text(result: dict[str, Any]) -> str:
    shown = len(result["items"])
    start = result.get("offset", 0)
    return f"Entries {start + 1}-{start + shown} of {result['total']}" if shown else "No entries"


class EntriesCreate(Arguments):
    diary_id: UUID
    content: Content
    title: Title | None = None
    tags: Tags = Field(default_factory=list)
    importance: Importance = limits.ENTRY_IMPORTANCE_DEFAULT
    entry_type: EntryType = "semantic"
    signing_request_id: UUID | None = Field(
        default=None, description="Signed diaries: completed request over the CID"
    )


@tool(output=Entry, render=_entry_text)
async def entries_create(call: Call, args: EntriesCreate) -> Entry:
    """Write an entry to a diary."""
    body = EntryCreateRequest(
        content=args.content,
        title=args.title,
        tags=args.tags,
        importance=args.importance,
        entryType=args.entry_type,
        signingRequestId=args.signing_request_id,
    )
    return await call.api.create_entry(args.diary_id, body)


class EntryRef(Arguments):
    entry_id: EntryId


@tool(output=Entry, read_only=True, render=_entry_text)
async def entries_get(call: Call, args: EntryRef) -> Entry:
    """Read one entry in full."""
    return await call.api.get_entry(args.entry_id)


class EntriesList(Arguments):
    diary_id: UUID
    limit: int = Field(default=limits.ENTRIES_PAGE.default, ge=1, le=limits.ENTRIES_PAGE.max)
    offset: int = Field(default=0, ge=0)
    tags: Tags | None = None
    exclude_tags: Tags | None = None
    entry_type: EntryType | None = None
    as_of: AwareDatetime | None = None  # no description: the catalogue budget (issue 25)


@tool(output=EntryList, read_only=True, render=_page_text)
async def entries_list(call: Call, args: EntriesList) -> EntryList:
    """A diary's entries, newest first."""
    return await call.api.list_entries(
        args.diary_id,
        limit=args.limit,
        offset=args.offset,
        tags=args.tags,
        exclude_tags=args.exclude_tags,
        entry_type=args.entry_type,
        as_of=args.as_of,
    )


class EntriesUpdate(Arguments):
    entry_id: EntryId
    content: Content | None = None
    title: Title | None = None
    tags: Tags | None = None
    importance: Importance | None = None
    entry_type: EntryType | None = None


@tool(output=Entry, idempotent=True, render=_entry_text)
async def entries_update(call: Call, args: EntriesUpdate) -> Entry:
    """Change an unsigned entry."""
    body = EntryUpdateRequest(
        content=args.content,
        title=args.title,
        tags=args.tags,
        importance=args.importance,
        entryType=args.entry_type,
    )
    return await call.api.update_entry(args.entry_id, body)


@tool(output=Done, destructive=True, idempotent=True, render=lambda r: "Entry deleted")
async def entries_delete(call: Call, args: EntryRef) -> Done:
    """Delete an unsigned entry."""
    return await call.api.delete_entry(args.entry_id)


class EntriesSearch(Arguments):
    query: str = Field(min_length=1, max_length=limits.SEARCH_QUERY_MAX_CHARS)
    diary_id: UUID | None = None
    tags: Tags | None = None
    exclude_tags: Tags | None = None
    entry_types: list[EntryType] | None = Field(default=None, max_length=4)
    exclude_superseded: bool = Field(default=False)
    created_after: AwareDatetime | None = None
    created_before: AwareDatetime | None = None
    as_of: AwareDatetime | None = None  # no description: the catalogue budget (issue 25)
    limit: int = Field(default=limits.SEARCH_PAGE.default, ge=1, le=limits.SEARCH_PAGE.max)


class SearchScope(BaseModel):
    diaryId: UUID | None = None
    allReadableDiaries: bool


class SearchResult(BaseModel):
    """`POST /diary/search`'s answer plus the scope that was searched."""

    results: list[Entry]
    total: int
    search_type: Literal["hybrid", "fulltext", "vector"]
    scope: SearchScope


def _search_text(result: dict[str, Any]) -> str:
    where = "every diary you can read" if result["scope"]["allReadableDiaries"] else "one diary"
    return f"{result['total']} results ({result['search_type']}) in {where}"


@tool(output=SearchResult, read_only=True, render=_search_text)
async def entries_search(call: Call, args: EntriesSearch) -> dict[str, Any]:
    """Hybrid search; omit diary_id for all readable diaries."""
    body = SearchRequest(
        query=args.query,
        diaryId=args.diary_id,
        tags=args.tags,
        excludeTags=args.exclude_tags,
        entryTypes=args.entry_types,
        excludeSuperseded=args.exclude_superseded,
        createdAfter=args.created_after,
        createdBefore=args.created_before,
        asOf=args.as_of,
        limit=args.limit,
    )
    # the hot path: the API's JSON goes out as it came (the output schema is the same model)
    found = await call.api.search_json(body)
    scope: dict[str, Any] = {"allReadableDiaries": args.diary_id is None}
    if args.diary_id is not None:
        scope["diaryId"] = str(args.diary_id)
    return {**found, "scope": scope}


# --- relations -------------------------------------------------------------------------------


class RelationsCreate(Arguments):
    source_id: UUID
    target_id: UUID
    relation: RelationType
    status: Literal["proposed", "accepted"] = "proposed"
    confidence: float | None = Field(default=None, ge=0, le=1)


@tool(output=Relation, render=lambda r: f"{r['sourceId']} {r['relation']} {r['targetId']}")
async def relations_create(call: Call, args: RelationsCreate) -> Relation:
    """Relate two entries."""
    metadata = RelationMetadata(confidence=args.confidence) if args.confidence is not None else None
    body = RelationCreateRequest(
        targetId=args.target_id, relation=args.relation, status=args.status, metadata=metadata
    )
    return await call.api.create_relation(args.source_id, body)


class RelationsList(Arguments):
    entry_id: EntryId
    relation: RelationType | None = None
    status: RelationStatus | None = None
    direction: Literal["as_source", "as_target", "both"] = "both"
    limit: int = Field(default=limits.RELATIONS_PAGE.default, ge=1, le=limits.RELATIONS_PAGE.max)
    offset: int = Field(default=0, ge=0)


@tool(output=RelationList, read_only=True, render=lambda r: f"{r['total']} relations")
async def relations_list(call: Call, args: RelationsList) -> RelationList:
    """List an entry's relations."""
    return await call.api.list_relations(
        args.entry_id,
        relation=args.relation,
        status=args.status,
        direction=args.direction,
        limit=args.limit,
        offset=args.offset,
    )


class RelationsUpdate(Arguments):
    relation_id: UUID
    status: RelationStatus


@tool(output=Relation, idempotent=True, render=lambda r: f"Relation is {r['status']}")
async def relations_update(call: Call, args: RelationsUpdate) -> Relation:
    """Accept or reject a proposed relation."""
    return await call.api.update_relation(
        args.relation_id, RelationUpdateRequest(status=args.status)
    )


class RelationRef(Arguments):
    relation_id: UUID


class RelationDeleted(BaseModel):
    success: bool
    relationId: UUID


@tool(
    output=RelationDeleted, destructive=True, idempotent=True, render=lambda r: "Relation deleted"
)
async def relations_delete(call: Call, args: RelationRef) -> RelationDeleted:
    """Delete a relation; the entries stay."""
    await call.api.delete_relation(args.relation_id)
    return RelationDeleted(success=True, relationId=args.relation_id)
