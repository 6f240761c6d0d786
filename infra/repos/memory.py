"""Units of work on diaries, entries and relations. Each method is one transaction and
idempotent under retry (rows are keyed by ids the caller chose); the row and its permission
tuples change together, so a diary never exists without its team binding, nor an entry without
its parent tuple. A refusal is raised as the catalogue's problem inside the transaction, so
nothing is written, and reaches the client as it is (as in every repository)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from infra import permissions as tuples
from infra.db import Q
from infra.repos.signing import get_signing_request
from schemas.diary_archive import (
    DiaryImportInput,
    ImportedEntry,
    imported_entry_id,
    imported_relation_id,
)
from schemas.errors import (
    ChainConflict,
    DiaryHasSignedEntries,
    DiaryInUse,
    DomainError,
    SignatureCidMismatch,
    SigningRequestInvalid,
    SigningRequestNotFound,
    SigningRequestUsed,
)
from schemas.hygiene import (
    ConsolidationPage,
    ConsolidationPageResult,
    NearDuplicateProbe,
)
from schemas.kernel.cids import entry_cid
from schemas.kernel.crypto import fingerprint, parse_public_key
from schemas.kernel.diary_car import ArchivedSignature, DiaryArchive
from schemas.kernel.permissions import RelationTuple, Subject
from schemas.memory import (
    GRANT_RELATIONS,
    DiaryCreateInput,
    Entry,
    EntryInsert,
    EntryRewrite,
    GrantChange,
    RelationCreateInput,
    entry_from_row,
)


def diary_in_use(kind: str, count: int) -> DomainError:
    return DiaryInUse(
        f"{count} unfinished {kind}(s) name this diary: let them end first",
        extensions={"referencingKind": kind, "referencingCount": count},
    )


@dataclass(frozen=True)
class Inserted:
    """What an entry insert did: the entry's CID, or the live entry of the same content (whose
    CID it is then) when the create was an exact duplicate. `entry` is the
    stored entry (the new one, or that duplicate), read in the insert's transaction, so the API
    answers with it instead of reading it back."""

    cid: str
    duplicate_of: uuid.UUID | None = None
    entry: Entry | None = None


def _team_binding(diary_id: uuid.UUID, team_id: uuid.UUID) -> RelationTuple:
    return RelationTuple.grant("Diary", diary_id, "team", Subject(ns="Team", id=str(team_id)))


def _entry_parent(entry_id: uuid.UUID, diary_id: uuid.UUID) -> RelationTuple:
    return RelationTuple.grant(
        "DiaryEntry", entry_id, "parent", Subject(ns="Diary", id=str(diary_id))
    )


def _grant_tuple(change: GrantChange) -> RelationTuple:
    subject = Subject(
        ns=change.subject_ns,
        id=str(change.subject_id),
        relation="members" if change.subject_ns == "Group" else None,
    )
    return RelationTuple.grant("Diary", change.diary_id, GRANT_RELATIONS[change.role], subject)


async def _exact_duplicate(
    conn: asyncpg.Connection, entry_id: uuid.UUID, diary_id: uuid.UUID, content: str
) -> tuple[uuid.UUID, str] | None:
    """The live entry of the diary this content duplicates, with its CID, the refusal recorded
    under the id the create would have used (once, whatever the retries); None when new."""
    await conn.execute(Q.memory_lock_content_digest, diary_id, content)
    found = await conn.fetchrow(Q.memory_find_exact_duplicate, diary_id, content)
    if found is None:
        return None
    await conn.execute(Q.memory_record_refused_duplicate, entry_id, diary_id, found["id"])
    return found["id"], found["cid"]


async def _propose(
    conn: asyncpg.Connection, entry_id: uuid.UUID, min_similarity: float, workflow_id: str
) -> uuid.UUID | None:
    """The relation proposed from the entry to its nearest older near duplicate, if any."""
    proposed: uuid.UUID | None = await conn.fetchval(
        Q.memory_propose_near_duplicate, entry_id, min_similarity, uuid.uuid4(), workflow_id
    )
    return proposed


class MemoryRepo:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    # --- diaries --------------------------------------------------------------------------

    async def create_diary(self, inp: DiaryCreateInput) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                Q.memory_insert_diary,
                inp.diary_id,
                inp.created_by,
                inp.created_by_ns,
                inp.team_id,
                inp.name,
                inp.visibility,
                inp.signed,
            )
            await tuples.write_tuples(conn, [_team_binding(inp.diary_id, inp.team_id)])

    async def update_diary(
        self, diary_id: uuid.UUID, name: str | None, visibility: str | None
    ) -> None:
        await self._pool.execute(Q.memory_update_diary, diary_id, name, visibility)

    async def delete_diary(self, diary_id: uuid.UUID) -> None:
        """Delete the diary, its entries and every tuple naming them; signed entries are
        permanent, so a diary holding one is refused, and so is one that a non-terminal task
        names as its provenance or that a pending transfer moves (infra/foreign_keys.py)."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.fetchval(Q.memory_lock_diary, diary_id)
            if await conn.fetchval(Q.memory_diary_has_signed_entries, diary_id):
                raise DiaryHasSignedEntries("A diary with signed entries stays")
            references = await conn.fetchrow(Q.memory_diary_open_references, diary_id)
            for kind, count in references.items():
                if count:
                    raise diary_in_use(kind, count)
            for row in await conn.fetch(Q.memory_diary_entry_ids, diary_id):
                await tuples.delete_object(conn, "DiaryEntry", row["id"])
            await tuples.delete_object(conn, "Diary", diary_id)
            await conn.execute(Q.memory_delete_diary, diary_id)

    async def write_grant(self, change: GrantChange) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await tuples.write_tuples(conn, [_grant_tuple(change)])

    async def revoke_grant(self, change: GrantChange) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            return await tuples.delete_tuples(conn, [_grant_tuple(change)])

    # --- entries --------------------------------------------------------------------------

    async def insert_entry(self, inp: EntryInsert) -> Inserted:
        """Insert the entry and its parent tuple; returns the stored CID.

        An exact duplicate (the same content after trimming, in the same diary) inserts nothing
        and is counted (`entry_duplicates_refused`): the lookup shares the insert's transaction,
        under an advisory lock on (diary, content), so it costs no round trip of its own and two
        racing duplicates cannot both pass. It comes before the signature check: a signed
        diary's chain never holds the same content twice, and its signing request stays unused.

        In a signed diary the CID also covers the predecessor (`"p"`), the diary's kept chain
        head (one row, whatever the diary's length), read inside the transaction; the signing
        request must name exactly that CID, and the insert moves the head on. Two writers
        racing for the same predecessor meet the unique (diary, prev_cid) index: one wins.
        """
        draft = inp.draft
        async with self._pool.acquire() as conn, conn.transaction():
            existing = await conn.fetchrow(Q.memory_get_entry, draft.entry_id)
            if existing is not None:  # a retry after a committed attempt
                return Inserted(existing["cid"], entry=entry_from_row(existing))
            duplicate = await _exact_duplicate(conn, draft.entry_id, draft.diary_id, draft.content)
            if duplicate is not None:  # rare: the extra read is the worker's, once
                stored = await conn.fetchrow(Q.memory_get_entry, duplicate[0])
                return Inserted(
                    duplicate[1], duplicate_of=duplicate[0], entry=entry_from_row(stored)
                )
            cid, prev_cid, signature = inp.cid, None, None
            if draft.signed_diary:
                prev_cid = await conn.fetchval(Q.memory_chain_head, draft.diary_id)
                cid = entry_cid(draft.content, draft.title, draft.tags, draft.entry_type, prev_cid)
            if draft.signing_request_id is not None:
                signature = await _signature_for(
                    conn, draft.signing_request_id, draft.created_by, cid
                )
            try:
                row = await conn.fetchrow(
                    Q.memory_insert_entry,
                    draft.entry_id,
                    draft.diary_id,
                    draft.title,
                    draft.content,
                    inp.embedding,
                    draft.tags,
                    inp.injection_risk,
                    inp.injection_threats,
                    draft.importance,
                    draft.entry_type,
                    cid,
                    prev_cid,
                    draft.signing_request_id,
                    signature,
                    draft.created_by,
                    draft.created_by_ns,
                )
            except asyncpg.UniqueViolationError:
                raise ChainConflict(
                    "Another entry was appended to this signed diary first; "
                    "sign the entry again over the new predecessor"
                ) from None
            if draft.signed_diary:
                await conn.execute(Q.memory_advance_chain_head, draft.diary_id, cid)
            await tuples.write_tuples(conn, [_entry_parent(draft.entry_id, draft.diary_id)])
            # no row: the same id went in meanwhile (ON CONFLICT), and the API reads it back
            return Inserted(cid, entry=None if row is None else entry_from_row(row))

    async def rewrite_entry(self, inp: EntryRewrite) -> bool:
        change = inp.change
        row = await self._pool.fetchrow(
            Q.memory_update_entry,
            change.entry_id,
            change.content,
            change.clear_title,
            change.title,
            change.tags,
            change.importance,
            change.entry_type,
            inp.cid,
            inp.injection_risk,
            inp.reembed,
            inp.injection_threats,
            inp.embedding,
        )
        return row is not None

    async def set_embedding(self, entry_id: uuid.UUID, cid: str, embedding: list[float]) -> bool:
        return (
            await self._pool.fetchrow(Q.memory_set_embedding, entry_id, cid, embedding) is not None
        )

    async def delete_entries(
        self, entry_ids: Sequence[uuid.UUID]
    ) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
        """Delete unsigned entries and their parent tuples; signed or absent ones are skipped."""
        deleted: list[uuid.UUID] = []
        async with self._pool.acquire() as conn, conn.transaction():
            for entry_id in entry_ids:
                if await conn.fetchval(Q.memory_delete_entry, entry_id) is not None:
                    await tuples.delete_object(conn, "DiaryEntry", entry_id)
                    deleted.append(entry_id)
        return deleted, [e for e in entry_ids if e not in deleted]

    # --- relations ------------------------------------------------------------------------

    async def create_relation(self, inp: RelationCreateInput) -> tuple[uuid.UUID, bool]:
        """Insert the relation (idempotent by source, target and type); (id, created). A
        create asking for `accepted` that finds the relation only proposed (by the hygiene
        sweep, or by an earlier create) accepts it: the caller has confirmed the proposal."""
        async with self._pool.acquire() as conn, conn.transaction():
            inserted = await conn.fetchval(
                Q.memory_insert_relation,
                inp.relation_id,
                inp.source_id,
                inp.target_id,
                inp.relation,
                inp.status,
                inp.workflow_id,
                inp.metadata,
            )
            if inserted is None:
                existing = await conn.fetchrow(
                    Q.memory_existing_relation,
                    inp.source_id,
                    inp.target_id,
                    inp.relation,
                    inp.status == "accepted",
                )
                if existing["accepted"]:
                    await conn.execute(Q.memory_sync_superseded_by, inp.target_id)
                relation_id: uuid.UUID = existing["id"]
                return relation_id, False
            await conn.execute(Q.memory_sync_superseded_by, inp.target_id)
            return inserted, True

    async def set_relation_status(self, relation_id: uuid.UUID, status: str) -> bool:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(Q.memory_update_relation_status, relation_id, status)
            if row is not None:
                await conn.execute(Q.memory_sync_superseded_by, row["target_id"])
            return row is not None

    # --- hygiene --------------------------------------------------------------------------

    async def propose_near_duplicates(self, probe: NearDuplicateProbe) -> list[uuid.UUID]:
        """The relations proposed for these entries' nearest older near duplicates (each its
        own statement: a retry re-proposes nothing, a pair already related is skipped)."""
        async with self._pool.acquire() as conn:
            proposed = [
                await _propose(conn, entry_id, probe.min_similarity, probe.workflow_id)
                for entry_id in probe.entry_ids
            ]
        return [relation_id for relation_id in proposed if relation_id is not None]

    async def consolidate_page(self, page: ConsolidationPage) -> ConsolidationPageResult:
        """Probe each entry whose vector changed since the sweep last saw it (a page of
        `consolidation_pending`), then clear their marks. Each proposal is its own statement: a
        retried page re-proposes nothing, pairs already related are skipped."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(Q.memory_pending_page, page.limit)
            proposed = 0
            for row in rows:
                made = await _propose(conn, row["id"], page.min_similarity, page.workflow_id)
                proposed += made is not None
            await conn.execute(
                Q.memory_pending_done, [row["id"] for row in rows], [row["seq"] for row in rows]
            )
        return ConsolidationPageResult(scanned=len(rows), proposed=proposed)

    async def record_retrievals(self, entry_ids: Sequence[uuid.UUID]) -> None:
        """Mark entries a search or pack returned (a batch of the API's): one update."""
        await self._pool.execute(Q.memory_record_retrievals, sorted(set(entry_ids)))

    # --- imports --------------------------------------------------------------------------

    async def import_diary(
        self, inp: DiaryImportInput, archive: DiaryArchive, entries: list[ImportedEntry]
    ) -> None:
        await _write_import(self._pool, inp, archive, entries)

    async def entries_to_embed(self, entry_ids: Sequence[uuid.UUID]) -> list[EntryText]:
        """Those of the entries still without a vector."""
        rows = await self._pool.fetch(Q.archive_entries_to_embed, list(entry_ids))
        return [
            EntryText(
                id=row["id"],
                cid=row["cid"],
                title=row["title"],
                content=row["content"],
                tags=list(row["tags"]),
            )
            for row in rows
        ]

    async def delete_relation(self, relation_id: uuid.UUID) -> bool:
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(Q.memory_delete_relation, relation_id)
            if row is not None:
                await conn.execute(Q.memory_sync_superseded_by, row["target_id"])
            return row is not None


async def _signature_for(
    conn: asyncpg.Connection, request_id: uuid.UUID, author: uuid.UUID, cid: str
) -> str:
    """The signature of a completed, valid signing request of the author over `cid`."""
    request = await get_signing_request(conn, request_id)
    if request is None or request.agent_id != author:
        raise SigningRequestNotFound("No such signing request")
    if request.status != "completed" or not request.valid or request.signature is None:
        raise SigningRequestInvalid("The signing request has no valid signature")
    if request.message != cid:
        raise SignatureCidMismatch(f"The signed message is not the entry CID; sign {cid}")
    if await conn.fetchval(Q.memory_entry_signing_request_used, request.id) is not None:
        raise SigningRequestUsed("This signing request already signed an entry")
    return request.signature


# --- imports ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryText:
    """What an entry's embedding is computed from, and the CID it is stored against."""

    id: uuid.UUID
    cid: str
    title: str | None
    content: str
    tags: list[str]


async def _write_import(
    pool: asyncpg.Pool, inp: DiaryImportInput, archive: DiaryArchive, entries: list[ImportedEntry]
) -> None:
    """Create the diary of an archive in one transaction: the diary with its team binding,
    every entry (its CID, chain link, signature and creation time kept) with its parent tuple
    and imported signer, and the relations. A retry after a commit finds the diary and stops.

    A peer file's entries (Mem0, Letta, COGX) also pass the exact-duplicate rule of an entry
    create, and keep their origin; a link whose ends repeat one entry is dropped.

    An imported signed entry has no local signing request: it names itself as its request
    (`signing_request_id` = its own id, so it counts as signed everywhere: immutable,
    permanent), and `imported_signatures` holds the key and nonce its signature verifies with.
    """
    diary_id = inp.diary_id
    async with pool.acquire() as conn, conn.transaction():
        if await conn.fetchval(Q.memory_get_diary, diary_id) is not None:
            return
        await conn.execute(
            Q.memory_insert_diary,
            diary_id,
            inp.created_by,
            inp.created_by_ns,
            inp.team_id,
            inp.name or archive.name,
            archive.visibility,
            archive.signed,
        )
        ids = [imported_entry_id(diary_id, n) for n in range(len(entries))]
        if inp.format == "car":  # an archive keeps every entry, twins included, as exported
            await conn.executemany(
                Q.archive_insert_entry,
                [
                    _entry_row(inp, entry_id, item)
                    for entry_id, item in zip(ids, entries, strict=True)
                ],
            )
            stored = ids
        else:
            stored = await _insert_deduplicated(conn, inp, ids, entries)
        if archive.signed:  # once per import: the archive's own chain, as written
            await conn.execute(Q.memory_chain_head_from_entries, diary_id)
        await conn.executemany(
            Q.archive_insert_signature,
            [
                _signature_row(entry_id, item.entry.signature)
                for entry_id, item in zip(ids, entries, strict=True)
                if item.entry.signature is not None
            ],
        )
        await tuples.write_tuples(
            conn,
            [_team_binding(diary_id, inp.team_id)]
            + [_entry_parent(entry_id, diary_id) for entry_id in dict.fromkeys(stored)],
        )
        for n, relation in enumerate(archive.relations):
            source, target = stored[relation.source], stored[relation.target]
            if source == target:  # both ends repeat one entry: no relation to itself
                continue
            await conn.fetchval(
                Q.memory_insert_relation,
                imported_relation_id(diary_id, n),
                source,
                target,
                relation.relation,
                relation.status,
                None,
                relation.metadata,
            )
            await conn.execute(Q.memory_sync_superseded_by, target)


async def _insert_deduplicated(
    conn: asyncpg.Connection,
    inp: DiaryImportInput,
    ids: Sequence[uuid.UUID],
    entries: Sequence[ImportedEntry],
) -> list[uuid.UUID]:
    """The entries of a peer file under the exact-duplicate rule of an entry create: an entry
    repeating an earlier one's content (trimmed) is not written, is recorded as refused (as
    `_exact_duplicate` records one) and stands for that one. The diary is new, so only the file
    can hold an earlier copy: the file is compared with itself in one statement, and the rows
    go in batches, not one round trip each. Returns the stored entry of each position."""
    rows = await conn.fetch(Q.archive_first_of_each_content, [i.entry.content for i in entries])
    stored = [ids[row["first"] - 1] for row in rows]
    kept = [n for n, entry_id in enumerate(stored) if entry_id == ids[n]]
    await conn.executemany(
        Q.archive_insert_entry, [_entry_row(inp, ids[n], entries[n]) for n in kept]
    )
    await conn.executemany(
        Q.memory_record_refused_duplicate,
        [
            (ids[n], inp.diary_id, entry_id)
            for n, entry_id in enumerate(stored)
            if entry_id != ids[n]
        ],
    )
    return stored


def _entry_row(inp: DiaryImportInput, entry_id: uuid.UUID, item: ImportedEntry) -> tuple[Any, ...]:
    entry = item.entry
    return (
        entry_id,
        inp.diary_id,
        entry.title,
        entry.content,
        list(entry.tags),
        item.injection_risk,
        item.injection_threats,
        entry.importance,
        entry.entry_type,
        entry.cid,
        entry.prev_cid,
        None if entry.signature is None else entry_id,
        None if entry.signature is None else entry.signature.value,
        inp.created_by,
        inp.created_by_ns,
        entry.created_at,
        item.origin,
    )


def _signature_row(entry_id: uuid.UUID, signature: ArchivedSignature) -> tuple[Any, ...]:
    return (
        entry_id,
        signature.public_key,
        fingerprint(parse_public_key(signature.public_key)),
        uuid.UUID(signature.nonce),
    )
