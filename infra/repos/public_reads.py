"""Reads of the public feed (SPEC 4.3 "public"): entries of public diaries, with their authors.

Functions take a pool or a connection first and return `PublicEntry` items; an entry whose
diary is not (or no longer) public is never returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from infra.db import Q
from infra.repos.rows import Db
from schemas.public import PublicEntry, public_entry_from_row


async def feed_page(
    db: Db,
    tag: str | None,
    include_suspicious: bool,
    after: tuple[datetime, UUID] | None,
    limit: int,
) -> list[PublicEntry]:
    """Up to `limit` entries, newest first, strictly after the keyset position `after`."""
    after_at, after_id = after if after is not None else (None, None)
    rows = await db.fetch(Q.public_feed_page, tag, include_suspicious, after_at, after_id, limit)
    return [public_entry_from_row(row) for row in rows]


async def public_entry(db: Db, entry_id: UUID) -> PublicEntry | None:
    row = await db.fetchrow(Q.public_entry, entry_id)
    return None if row is None else public_entry_from_row(row)


async def public_diary_ids(db: Db) -> tuple[UUID, ...]:
    """The scope of a public search: every public diary."""
    return tuple(row["id"] for row in await db.fetch(Q.public_diary_ids))


async def public_entries(db: Db, entry_ids: Sequence[UUID]) -> dict[UUID, PublicEntry]:
    """The entries among `entry_ids` that are (still) in public diaries, by id."""
    rows = await db.fetch(Q.public_entries_by_ids, list(entry_ids))
    return {row["id"]: public_entry_from_row(row) for row in rows}
