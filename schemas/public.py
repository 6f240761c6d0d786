"""Models of the public feed (SPEC 1 "Public feed", 5 "Public endpoints"): entries of `public`
diaries, read without authentication.

An item is the entry's content and its author's public identity (fingerprint and key, so a
reader can check signatures), nothing about the diary's team or the entry's internals.
Injection-flagged entries are left out unless the reader asks for them with
`includeSuspicious=true`; an item still says `injectionRisk` so that a reader who asked knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import Field, StringConstraints, field_validator

from schemas import limits
from schemas.base import RequestBody, ResponseBody
from schemas.embedding import SearchType
from schemas.kernel.cursors import CURSOR_MAX_CHARS
from schemas.memory import EntryType

FeedTag = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.ENTRY_TAG_MAX_CHARS, strip_whitespace=True),
]
ENTRY_TYPES: frozenset[str] = frozenset({"episodic", "semantic", "procedural", "reflection"})


class PublicAuthor(ResponseBody):
    fingerprint: str
    publicKey: str


class PublicEntry(ResponseBody):
    id: UUID
    title: str | None = None
    content: str
    tags: list[str]
    entryType: EntryType
    injectionRisk: bool
    createdAt: datetime
    author: PublicAuthor | None = Field(
        default=None, description="The writing agent; absent for an entry a human wrote"
    )
    score: float | None = Field(default=None, description="Search results only")


def public_entry_from_row(row: Mapping[str, Any], *, score: float | None = None) -> PublicEntry:
    """A row of the `public_*` statements (entry columns plus the agent's key) as an item."""
    author = None
    if row["fingerprint"] is not None:
        author = PublicAuthor(fingerprint=row["fingerprint"], publicKey=row["public_key"])
    return PublicEntry(
        id=row["id"],
        title=row["title"],
        content=row["content"],
        tags=list(row["tags"]),
        entryType=row["entry_type"],
        injectionRisk=row["injection_risk"],
        createdAt=row["created_at"],
        author=author,
        score=score,
    )


class PublicFeedQuery(RequestBody):
    limit: int = Field(
        default=limits.PUBLIC_FEED_PAGE.default, ge=1, le=limits.PUBLIC_FEED_PAGE.max
    )
    cursor: str | None = Field(
        default=None,
        max_length=CURSOR_MAX_CHARS,
        description="`nextCursor` of the previous page, with the same tag and includeSuspicious",
    )
    tag: FeedTag | None = None
    includeSuspicious: bool = False


class PublicFeed(ResponseBody):
    items: list[PublicEntry]
    nextCursor: str | None = Field(description="null on the last page")


class PublicEntryPath(RequestBody):
    entryId: UUID


class PublicEntryQuery(RequestBody):
    includeSuspicious: bool = Field(
        default=False, description="Also answer for an injection-flagged entry (else 404)"
    )


class PublicSearchQuery(RequestBody):
    q: Annotated[
        str,
        StringConstraints(
            strip_whitespace=True,
            min_length=limits.PUBLIC_SEARCH_QUERY_MIN_CHARS,
            max_length=limits.PUBLIC_SEARCH_QUERY_MAX_CHARS,
        ),
    ]
    limit: int = Field(
        default=limits.PUBLIC_SEARCH_PAGE.default, ge=1, le=limits.PUBLIC_SEARCH_PAGE.max
    )
    tag: FeedTag | None = None
    entryTypes: str | None = Field(
        default=None, description="Comma-separated entry types (any of them)"
    )
    excludeSuperseded: bool = False
    includeSuspicious: bool = False

    @field_validator("entryTypes")
    @classmethod
    def _known_types(cls, value: str | None) -> str | None:
        if value is None:
            return None
        unknown = sorted(set(split_list(value)) - ENTRY_TYPES)
        if unknown:
            raise ValueError(f"unknown entry types: {', '.join(unknown)}")
        return value

    def entry_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(split_list(self.entryTypes or "")))


def split_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


class PublicSearchResult(ResponseBody):
    items: list[PublicEntry]
    query: str
    search_type: SearchType
