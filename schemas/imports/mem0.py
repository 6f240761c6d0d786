"""Mem0: the JSON of the open-source library's `Memory.get_all()`, or of the hosted client's
paged listing (docs/imports.md "Mem0").

    {"results": [{"id", "memory", "metadata", "categories", "created_at", "updated_at",
                  "user_id", "agent_id", "run_id", ...}, ...],
     "count": n, "next": url | null, "previous": url | null}     (the last three: hosted, paged)

Each memory is a `semantic` entry; its user, agent and run ids become `user:…`, `agent:…` and
`run:…` tags and its categories tags of their own. One file is one diary: a paged listing is
imported page by page into diaries of their own, or joined into one `results` list first.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import Field

from schemas.imports.peer import (
    PeerEntry,
    PeerFile,
    PeerRecord,
    PeerTime,
    entry,
    scope_tags,
    validated,
)

DIARY_NAME: Final = "Mem0 memories"


class Mem0Memory(PeerRecord):
    id: str = Field(min_length=1)
    memory: str
    metadata: dict[str, Any] | None = None
    categories: list[str] | None = None
    created_at: PeerTime = None
    updated_at: PeerTime = None
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None


class Mem0Listing(PeerRecord):
    """The envelope; memories are checked one at a time, so the first bad one is named."""

    results: list[Any]
    count: int | None = None
    next: str | None = None
    previous: str | None = None


def is_mem0(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("results"), list)


def to_entries(listing: Mem0Listing) -> tuple[PeerEntry, ...]:
    entries = []
    for n, raw in enumerate(listing.results):
        where = f"results/{n}"
        memory: Mem0Memory = validated(Mem0Memory, raw, where)
        tags = scope_tags(user=memory.user_id, agent=memory.agent_id, run=memory.run_id)
        entries.append(
            entry(
                f"{where} (id {memory.id})",
                content=memory.memory,
                tags=[*tags, *(memory.categories or [])],
                entry_type="semantic",
                record_id=memory.id,
                created_at=memory.created_at,
                updated_at=memory.updated_at,
                metadata=memory.metadata,
            )
        )
    return tuple(entries)


def read(document: Any) -> PeerFile:
    listing: Mem0Listing = validated(Mem0Listing, document, "the file")
    return PeerFile(format="mem0", name=DIARY_NAME, entries=to_entries(listing))
