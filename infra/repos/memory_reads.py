"""Reads of diaries, entries, relations, grants and tags for the API (SPEC 4.2, 4.3).

Functions take a pool or a connection first (the API passes its read-only pool) and return the
wire model where the route renders what it reads (`Diary`, `Entry`, `Relation`), and a row
model (`infra.repos.rows`) where it decides on columns the wire does not show.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import asyncpg

from infra.db import Q
from infra.permissions import Closure, ClosureArgs
from infra.repos.rows import Db, GrantTuple, Row, fetch_all, fetch_one
from schemas import limits
from schemas.hygiene import HygieneReport
from schemas.kernel.diary_car import (
    ArchivedEntry,
    ArchivedRelation,
    ArchivedSignature,
    DiaryArchive,
)
from schemas.memory import (
    Diary,
    Entry,
    Grant,
    Relation,
    TagCount,
    diary_from_row,
    entry_from_row,
    relation_from_row,
)


class EntryRef(Row):
    """What a batch delete decides on: the entry's diary and whether it is signed."""

    id: UUID
    diary_id: UUID
    signing_request_id: UUID | None


class LocatedRelation(Row):
    """A relation and the diary of its source entry (whose permissions govern it)."""

    relation: Relation
    diary_id: UUID


class Signer(Row):
    """The signing request behind a signed entry, with the signer's key."""

    message: str
    nonce: UUID
    signature: str | None
    public_key: str
    fingerprint: str


class EntryFilter(Row):
    """`GET /diaries/{id}/entries` filters (None: no filter)."""

    diary_id: UUID
    tags: list[str] | None = None
    exclude_tags: list[str] | None = None
    entry_type: str | None = None
    as_of: datetime | None = None  # the diary as it stood then (see memory_list_entries)

    def args(
        self,
    ) -> tuple[UUID, list[str] | None, list[str] | None, str | None, datetime | None]:
        return (self.diary_id, self.tags, self.exclude_tags, self.entry_type, self.as_of)


# --- diaries ----------------------------------------------------------------------------------


async def get_diary(db: Db, diary_id: UUID) -> Diary | None:
    row = await db.fetchrow(Q.memory_get_diary, diary_id)
    return None if row is None else diary_from_row(row)


async def get_diary_with_closure(
    db: Db, diary_id: UUID, closure_args: ClosureArgs
) -> tuple[Diary, Closure] | None:
    """The diary and its permission closure (`PostgresPermissionEngine.closure_args`), in one
    statement: what reading a diary and deciding on it costs."""
    row = await db.fetchrow(Q.diary_with_closure, str(diary_id), *closure_args)
    if row is None:
        return None
    return diary_from_row(row), Closure.of_rows(row["closure"])


async def list_diaries(db: Db, diary_ids: Sequence[UUID], team_id: UUID | None) -> list[Diary]:
    """The diaries among `diary_ids` (those the caller can read), of one team when given."""
    rows = await db.fetch(Q.memory_list_diaries, list(diary_ids), team_id)
    return [diary_from_row(row) for row in rows]


async def subject_exists(db: Db, subject_ns: str, subject_id: UUID) -> bool:
    """Whether the agent, human or group a grant names exists."""
    query = {"Agent": Q.memory_agent_exists, "Human": Q.memory_human_exists}.get(
        subject_ns, Q.memory_group_exists
    )
    return await db.fetchval(query, subject_id) is not None


async def list_grants(db: Db, diary_id: UUID) -> list[Grant]:
    """Who holds writer or manager grants on the diary."""
    tuples = await fetch_all(db, GrantTuple, Q.memory_list_grants, str(diary_id))
    return [Grant(diaryId=diary_id, **held.grant()) for held in tuples]


async def tag_histogram(
    db: Db, diary_id: UUID, prefix: str | None, min_count: int, entry_type: str | None
) -> list[TagCount]:
    """How many entries carry each tag, most used first."""
    rows = await db.fetch(Q.memory_tag_histogram, diary_id, prefix, min_count, entry_type)
    return [TagCount(tag=row["tag"], count=row["count"]) for row in rows]


# --- entries ----------------------------------------------------------------------------------


async def get_entry(db: Db, entry_id: UUID) -> Entry | None:
    row = await db.fetchrow(Q.memory_get_entry, entry_id)
    return None if row is None else entry_from_row(row)


async def list_entries(
    db: Db, where: EntryFilter, limit: int, offset: int
) -> tuple[list[Entry], int]:
    """One page of the diary's entries, newest first, and how many match in all."""
    rows = await db.fetch(Q.memory_list_entries, *where.args(), limit, offset)
    if offset == 0 and len(rows) < limit:
        return [entry_from_row(row) for row in rows], len(rows)  # all of them: nothing to count
    total: int = await db.fetchval(Q.memory_count_entries, *where.args())
    return [entry_from_row(row) for row in rows], total


async def entry_refs(db: Db, entry_ids: Sequence[UUID]) -> list[EntryRef]:
    return await fetch_all(db, EntryRef, Q.memory_get_entries_for_change, list(entry_ids))


async def entry_signer(db: Db, signing_request_id: UUID) -> Signer | None:
    return await fetch_one(db, Signer, Q.memory_entry_signer, signing_request_id)


async def diary_has_cid(db: Db, diary_id: UUID, cid: str) -> bool:
    """Whether an entry of the diary has this CID."""
    return await db.fetchval(Q.memory_entry_by_cid, diary_id, cid) is not None


# --- relations --------------------------------------------------------------------------------


async def hygiene(db: Db, diary_id: UUID) -> HygieneReport:
    row = await db.fetchrow(Q.memory_hygiene, diary_id, float(limits.HYGIENE_UNRETRIEVED_SEC))
    return HygieneReport(
        diaryId=diary_id,
        entries=row["entries"],
        duplicatesRefused=row["duplicates_refused"],
        openProposals=row["open_proposals"],
        superseded=row["superseded"],
        injectionFlagged=row["injection_flagged"],
        unretrieved=row["unretrieved"],
    )


async def get_relation(db: Db, relation_id: UUID) -> LocatedRelation | None:
    row = await db.fetchrow(Q.memory_get_relation, relation_id)
    if row is None:
        return None
    return LocatedRelation(relation=relation_from_row(row), diary_id=row["diary_id"])


async def list_relations(
    db: Db,
    entry_id: UUID,
    direction: str,
    relation: str | None,
    status: str | None,
    limit: int,
    offset: int,
) -> tuple[list[Relation], int]:
    """One page of the entry's relations (`direction`: as_source, as_target, both), and how
    many match in all."""
    rows = await db.fetch(
        Q.memory_list_relations, entry_id, direction, relation, status, limit, offset
    )
    total: int = rows[0]["total"] if rows else 0
    return [relation_from_row(row) for row in rows], total


# --- archives ---------------------------------------------------------------------------------


async def diary_archive(pool: asyncpg.Pool, diary: Diary) -> DiaryArchive:
    """The diary as `schemas.kernel.diary_car` writes it: entries and the relations between
    them, read in one snapshot (a relation never names an entry the read did not see)."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        rows = await conn.fetch(Q.archive_entries, diary.id)
        relation_rows = await conn.fetch(Q.archive_relations, diary.id)
    position = {row["id"]: n for n, row in enumerate(rows)}
    return DiaryArchive(
        diary_id=diary.id,
        name=diary.name,
        visibility=diary.visibility,
        signed=diary.signed,
        entries=tuple(_archived_entry(row, diary.signed) for row in rows),
        relations=tuple(
            ArchivedRelation(
                source=position[row["source_id"]],
                target=position[row["target_id"]],
                relation=row["relation"],
                status=row["status"],
                metadata=row["metadata"],
            )
            for row in relation_rows
        ),
    )


def _archived_entry(row: asyncpg.Record, chained: bool) -> ArchivedEntry:
    signature = None
    if row["content_signature"] is not None and row["signer_public_key"] is not None:
        signature = ArchivedSignature(
            public_key=row["signer_public_key"],
            nonce=str(row["signature_nonce"]),
            value=row["content_signature"],
        )
    return ArchivedEntry(
        content=row["content"],
        title=row["title"],
        tags=tuple(row["tags"]),
        entry_type=row["entry_type"],
        importance=row["importance"],
        created_at=row["created_at"],
        prev_cid=row["prev_cid"] if chained else None,
        signature=signature,
    )
