"""Context packs and rendered packs in Postgres: typed reads for the API, and the units of work
of the pack workflows (`PackRepo`, one transaction per method, idempotent under retry).

A pack is inserted with its entries and its `ContextPack#parent@Diary` tuple in one
transaction, keyed by its CID: a second insert of the same selection finds the first. A
rendered pack is keyed by its own CID the same way, and its content never changes (a trigger
of migration 0007 refuses it). Deleting a diary removes both (cascade; the diary's tuples go
with every tuple naming it, pack parents included).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeAlias
from uuid import UUID

import asyncpg

from infra import permissions as tuples
from infra.db import Q
from schemas import limits
from schemas.base import Payload
from schemas.errors import (
    JsonNotCanonical,
    PackBudgetTooSmall,
    PackEntryAfterAsOf,
    PackEntryDeleted,
    PackEntryNotInDiary,
    PackInjectionFlagged,
    PackNotFound,
    PackSupersedesConflict,
    PackSupersedesNotFound,
    RenderedMarkdownNotAllowed,
    RenderedMarkdownRequired,
    RenderedPackNotFound,
    UnknownRenderMethod,
)
from schemas.kernel.cids import content_hash, rendered_pack_cid_from_hash
from schemas.kernel.compression import estimate_tokens
from schemas.kernel.pack_render import (
    SERVER_RENDER_METHODS,
    RenderEntry,
    is_server_method,
    render_pack_to_docs_v1,
)
from schemas.kernel.permissions import RelationTuple, Subject
from schemas.packs import (
    CompiledPack,
    ContextPack,
    PackCreated,
    PackCreateInput,
    PackEntryOut,
    PackSource,
    PackUpdateInput,
    RenderCreated,
    RenderedPack,
    RenderedPackUpdateInput,
    RenderedSummary,
    RenderInput,
    compile_pack,
)

Db: TypeAlias = asyncpg.Pool | asyncpg.Connection


# --- reads --------------------------------------------------------------------------------


def _pack(row: Mapping[str, Any], entries: list[PackEntryOut] | None = None) -> ContextPack:
    return ContextPack(
        id=row["id"],
        diaryId=row["diary_id"],
        packCid=row["pack_cid"],
        packType=row["pack_type"],
        params=row["params"],
        payload=row["payload"],
        tokenBudget=row["token_budget"],
        createdBy=row["created_by"],
        supersedesPackId=row["supersedes_pack_id"],
        pinned=row["pinned"],
        expiresAt=row["expires_at"],
        createdAt=row["created_at"],
        updatedAt=row["updated_at"],
        entryCount=row["entry_count"],
        totalTokens=row["total_tokens"],
        entries=entries,
    )


def _entry(row: Mapping[str, Any]) -> PackEntryOut:
    return PackEntryOut(
        entryId=row["entry_id"],
        entryCidSnapshot=row["entry_cid_snapshot"],
        rank=row["rank"],
        compressionLevel=row["compression_level"],
        originalTokens=row["original_tokens"],
        packedTokens=row["packed_tokens"],
        title=row["title"],
    )


async def _entries_of(db: Db, pack_ids: Sequence[UUID]) -> dict[UUID, list[PackEntryOut]]:
    grouped: dict[UUID, list[PackEntryOut]] = defaultdict(list)
    for row in await db.fetch(Q.pack_entries_of, list(pack_ids)):
        grouped[row["pack_id"]].append(_entry(row))
    return grouped


async def _with_entries(db: Db, rows: Sequence[Mapping[str, Any]]) -> list[ContextPack]:
    entries = await _entries_of(db, [r["id"] for r in rows])
    return [_pack(r, entries.get(r["id"], [])) for r in rows]


async def get_pack(db: Db, pack_id: UUID, *, entries: bool = False) -> ContextPack | None:
    row = await db.fetchrow(Q.pack_get, pack_id)
    if row is None:
        return None
    return (await _with_entries(db, [row]))[0] if entries else _pack(row)


async def get_pack_by_cid(db: Db, cid: str, *, entries: bool = False) -> ContextPack | None:
    row = await db.fetchrow(Q.pack_get_by_cid, cid)
    if row is None:
        return None
    return (await _with_entries(db, [row]))[0] if entries else _pack(row)


async def list_diary_packs(
    db: Db, diary_id: UUID, limit: int, offset: int, *, entries: bool = False
) -> tuple[list[ContextPack], int]:
    """A page of a diary's packs, newest first, and how many there are in all."""
    rows = await db.fetch(Q.pack_list_by_diary, diary_id, limit, offset)
    total = rows[0]["total"] if rows else await db.fetchval(Q.pack_count_by_diary, diary_id)
    packs = await _with_entries(db, rows) if entries else [_pack(r) for r in rows]
    return packs, int(total)


async def list_team_packs(
    db: Db,
    team_id: UUID,
    contains_entry: UUID | None,
    limit: int,
    offset: int,
    *,
    entries: bool = False,
    rendered: bool = False,
) -> tuple[list[ContextPack], int]:
    """A page of the packs of a team's diaries (the team catalogue), newest first."""
    rows = await db.fetch(Q.pack_list_by_team, team_id, contains_entry, limit, offset)
    total = (
        rows[0]["total"]
        if rows
        else await db.fetchval(Q.pack_count_by_team, team_id, contains_entry)
    )
    packs = await _with_entries(db, rows) if entries else [_pack(r) for r in rows]
    if rendered and packs:
        summaries = await _rendered_summaries(db, [p.id for p in packs])
        packs = [p.model_copy(update={"renderedPacks": summaries.get(p.id, [])}) for p in packs]
    return packs, int(total)


async def _rendered_summaries(
    db: Db, pack_ids: Sequence[UUID]
) -> dict[UUID, list[RenderedSummary]]:
    grouped: dict[UUID, list[RenderedSummary]] = defaultdict(list)
    for row in await db.fetch(Q.rendered_summaries_of, list(pack_ids)):
        grouped[row["source_pack_id"]].append(
            RenderedSummary(
                id=row["id"],
                packCid=row["pack_cid"],
                renderMethod=row["render_method"],
                totalTokens=row["total_tokens"],
                pinned=row["pinned"],
                createdAt=row["created_at"],
            )
        )
    return grouped


async def pack_ancestors(
    db: Db, pack_id: UUID, depth: int
) -> tuple[list[tuple[int, ContextPack]], bool]:
    """The packs `pack_id` supersedes up to `depth` hops, with entries, nearest first; and
    whether an older one lies beyond `depth`."""
    found = await db.fetch(Q.pack_ancestors, pack_id, depth + 1)
    truncated = any(r["hops"] > depth for r in found)
    ancestors: list[tuple[int, ContextPack]] = []
    for row in found:
        if row["hops"] > depth:
            continue
        pack = await get_pack(db, row["id"], entries=True)
        if pack is not None:
            ancestors.append((row["hops"], pack))
    return ancestors, truncated


class SelectedEntry(PackSource):
    """A selected entry as the pack create and preview read it."""

    diary_id: UUID
    injection_risk: bool
    injection_threats: list[dict[str, Any]]
    created_at: datetime


async def selected_entries(db: Db, entry_ids: Sequence[UUID]) -> dict[UUID, SelectedEntry]:
    rows = await db.fetch(Q.pack_entries_for_selection, list(entry_ids))
    return {
        r["id"]: SelectedEntry(
            entry_id=r["id"],
            rank=1,
            cid=r["cid"],
            content=r["content"],
            title=r["title"],
            diary_id=r["diary_id"],
            injection_risk=r["injection_risk"],
            injection_threats=list(r["injection_threats"] or []),
            created_at=r["created_at"],
        )
        for r in rows
    }


def _selected(count: int) -> str:
    """The subject of a refusal, singular or plural: "1 selected entry is", "2 … are"."""
    return "1 selected entry is" if count == 1 else f"{count} selected entries are"


def checked_selection(
    diary_id: UUID,
    selection: Sequence[tuple[UUID, int]],
    found: Mapping[UUID, SelectedEntry],
    *,
    force: bool,
    as_of: datetime | None = None,
) -> list[PackSource]:
    """The selection as compile sources: 400 when an entry is not in the diary, or (`as_of`)
    was not yet in it then; 409 listing the injection-flagged ones unless `force`."""
    missing = [i for i, _ in selection if i not in found or found[i].diary_id != diary_id]
    if missing:
        raise PackEntryNotInDiary(
            f"{_selected(len(missing))} not in this diary",
            extensions={"entryIds": [str(i) for i in missing]},
        )
    later = [i for i, _ in selection if as_of is not None and found[i].created_at > as_of]
    if later:
        raise PackEntryAfterAsOf(
            f"{_selected(len(later))} newer than asOf",
            extensions={"entryIds": [str(i) for i in later]},
        )
    flagged = [found[i] for i, _ in selection if found[i].injection_risk]
    if flagged and not force:
        raise PackInjectionFlagged(
            f"{_selected(len(flagged))} flagged for prompt injection; "
            "send force: true to pack them anyway",
            extensions={
                "flagged": [
                    {
                        "id": str(e.entry_id),
                        "threats": e.injection_threats[: limits.INJECTION_MAX_THREATS],
                    }
                    for e in flagged
                ]
            },
        )
    return [
        PackSource(
            entry_id=i, rank=rank, cid=found[i].cid, content=found[i].content, title=found[i].title
        )
        for i, rank in selection
    ]


def compiled(
    diary_id: UUID,
    pack_type: str,
    params: Mapping[str, Any],
    sources: Sequence[PackSource],
    token_budget: int | None,
) -> CompiledPack:
    """`compile_pack`, with what it refuses as 400 problems."""
    try:
        result = compile_pack(diary_id, pack_type, params, sources, token_budget)
    except ValueError as exc:
        raise JsonNotCanonical(f"The params cannot be content-addressed: {exc}") from None
    if not result.entries:
        raise PackBudgetTooSmall("Not even the first entry fits the token budget")
    return result


def _rendered(row: Mapping[str, Any]) -> RenderedPack:
    return RenderedPack(
        id=row["id"],
        packCid=row["pack_cid"],
        sourcePackId=row["source_pack_id"],
        sourcePackCid=row["source_pack_cid"],
        diaryId=row["diary_id"],
        content=row["content"],
        contentHash=row["content_hash"],
        renderMethod=row["render_method"],
        totalTokens=row["total_tokens"],
        description=row["description"],
        createdBy=row["created_by"],
        verifiedTaskId=row["verified_task_id"],
        pinned=row["pinned"],
        expiresAt=row["expires_at"],
        createdAt=row["created_at"],
        updatedAt=row["updated_at"],
    )


async def get_rendered(db: Db, rendered_id: UUID, *, content: bool = True) -> RenderedPack | None:
    row = await db.fetchrow(Q.rendered_get, rendered_id, content)
    return None if row is None else _rendered(row)


async def get_rendered_by_cid(db: Db, cid: str) -> RenderedPack | None:
    row = await db.fetchrow(Q.rendered_get_by_cid, cid)
    return None if row is None else _rendered(row)


async def latest_rendered(db: Db, pack_id: UUID) -> RenderedPack | None:
    row = await db.fetchrow(Q.rendered_latest, pack_id)
    return None if row is None else _rendered(row)


async def list_rendered(
    db: Db,
    diary_id: UUID,
    source_pack_id: UUID | None,
    render_method: str | None,
    limit: int,
    offset: int,
) -> tuple[list[RenderedPack], int]:
    """A page of a diary's rendered packs (without their content), newest first."""
    filters = (diary_id, source_pack_id, render_method)
    rows = await db.fetch(Q.rendered_list, *filters, limit, offset)
    total = rows[0]["total"] if rows else await db.fetchval(Q.rendered_count, *filters)
    return [_rendered(r) for r in rows], int(total)


async def render_entries(db: Db, pack_id: UUID) -> list[RenderEntry] | None:
    """What the server renderer prints of a pack; None when an entry was deleted since."""
    rows = await db.fetch(Q.pack_render_entries, pack_id)
    if not all(r["present"] for r in rows):
        return None
    return [
        RenderEntry(
            entryId=r["entry_id"],
            rank=r["rank"],
            title=r["title"],
            content=r["content"],
            entryCidSnapshot=r["entry_cid_snapshot"],
            compressionLevel=r["compression_level"],
            originalTokens=r["original_tokens"],
            packedTokens=r["packed_tokens"],
        )
        for r in rows
    ]


def check_render_request(render_method: str, markdown: str | None) -> None:
    """400 unless a server method comes without Markdown and any other method with it."""
    if is_server_method(render_method):
        if markdown is not None:
            raise RenderedMarkdownNotAllowed(
                "A server render method renders itself; omit renderedMarkdown"
            )
        if render_method not in SERVER_RENDER_METHODS:
            raise UnknownRenderMethod(
                f"Unknown server render method {render_method!r}; the server knows "
                + ", ".join(sorted(SERVER_RENDER_METHODS))
            )
    elif markdown is None:
        raise RenderedMarkdownRequired("An agent-defined render method needs renderedMarkdown")


async def rendering(
    db: Db, pack: ContextPack, render_method: str, markdown: str | None
) -> RenderedPack:
    """The rendered pack `render_method` makes of `pack` (nothing stored): the server method
    renders here; an agent-defined one must bring its Markdown. 400 otherwise."""
    check_render_request(render_method, markdown)
    if is_server_method(render_method):
        entries = await render_entries(db, pack.id)
        if entries is None:
            raise PackEntryDeleted(
                "An entry of this pack was deleted; it can no longer be rendered by the server"
            )
        markdown = render_pack_to_docs_v1(pack.id, pack.createdAt, entries)
    assert markdown is not None
    digest = content_hash(markdown)
    return RenderedPack(
        packCid=rendered_pack_cid_from_hash(digest, render_method, pack.packCid),
        sourcePackId=pack.id,
        sourcePackCid=pack.packCid,
        diaryId=pack.diaryId,
        content=markdown,
        contentHash=digest,
        renderMethod=render_method,
        totalTokens=estimate_tokens(markdown),
        pinned=False,
    )


class JudgeTask(Payload):
    """A task as a rendered pack's verification needs it."""

    id: UUID
    task_type: str
    status: str
    references: list[dict[str, Any]]


async def get_judge_task(db: Db, task_id: UUID) -> JudgeTask | None:
    row = await db.fetchrow(Q.pack_judge_task, task_id)
    if row is None:
        return None
    return JudgeTask(
        id=row["id"],
        task_type=row["task_type"],
        status=row["status"],
        references=list(row["references"] or []),
    )


def judged_cids(task: JudgeTask) -> set[str]:
    """The CIDs a task's `judged_work` references carry."""
    return {
        str(ref["artifact"]["cid"])
        for ref in task.references
        if ref.get("role") == "judged_work" and isinstance(ref.get("artifact"), dict)
    }


# --- units of work ------------------------------------------------------------------------


def _pack_parent(pack_id: UUID, diary_id: UUID) -> RelationTuple:
    return RelationTuple.grant(
        "ContextPack", pack_id, "parent", Subject(ns="Diary", id=str(diary_id))
    )


def _ttl_seconds() -> float:
    return float(limits.PACK_TTL_SEC)


class PackRepo:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create_pack(self, inp: PackCreateInput) -> PackCreated:
        """Read the selected entries, fit them to the budget, address the pack and insert it
        with its entries and parent tuple, all in one transaction. The same selection again
        finds the existing pack; the same one superseding another pack is a 409."""
        pack_id = _chosen(inp.pack_id)
        async with self._pool.acquire() as conn, conn.transaction():
            found = await selected_entries(conn, [i for i, _ in inp.selection])
            sources = checked_selection(
                inp.diary_id, inp.selection, found, force=inp.force, as_of=inp.as_of
            )
            pack = compiled(inp.diary_id, inp.pack_type, inp.params, sources, inp.token_budget)
            existing = await get_pack_by_cid(conn, pack.pack_cid)
            if existing is not None:
                return _existing(existing, inp)
            await _check_supersedes(conn, inp)
            inserted = await conn.fetchval(
                Q.pack_insert,
                pack_id,
                inp.diary_id,
                pack.pack_cid,
                inp.pack_type,
                inp.params,
                pack.payload,
                inp.token_budget,
                inp.created_by,
                inp.created_by_ns,
                inp.supersedes_pack_id,
                inp.pinned,
                _ttl_seconds(),
            )
            if inserted is None:  # a concurrent create of the same selection won
                raced = await get_pack_by_cid(conn, pack.pack_cid)
                assert raced is not None
                return _existing(raced, inp)
            await _insert_entries(conn, pack_id, pack.entries)
            await tuples.write_tuples(conn, [_pack_parent(pack_id, inp.diary_id)])
            return PackCreated(pack_id=pack_id, created=True)

    async def update_pack(self, inp: PackUpdateInput) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            if await conn.fetchval(Q.pack_update, inp.pack_id, inp.pinned, inp.expires_at) is None:
                raise PackNotFound("No such pack")

    async def render(self, inp: RenderInput) -> RenderCreated:
        """Render (or take the agent's Markdown), address and insert a rendered pack; the same
        rendering again finds the existing one."""
        rendered_id = _chosen(inp.rendered_id)
        async with self._pool.acquire() as conn, conn.transaction():
            pack = await get_pack(conn, inp.pack_id)
            if pack is None:
                raise PackNotFound("No such pack")
            made = await rendering(conn, pack, inp.render_method, inp.markdown)
            assert made.content is not None
            inserted = await conn.fetchval(
                Q.rendered_insert,
                rendered_id,
                made.packCid,
                pack.id,
                pack.diaryId,
                made.content,
                made.contentHash,
                inp.render_method,
                made.totalTokens,
                inp.description,
                inp.created_by,
                inp.created_by_ns,
                inp.pinned,
                _ttl_seconds(),
            )
            if inserted is None:
                existing: UUID = await conn.fetchval(Q.rendered_id_by_cid, made.packCid)
                return RenderCreated(rendered_id=existing, created=existing == rendered_id)
            return RenderCreated(rendered_id=rendered_id, created=True)

    async def update_rendered(self, inp: RenderedPackUpdateInput) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            updated = await conn.fetchval(
                Q.rendered_update,
                inp.rendered_id,
                inp.pinned,
                inp.expires_at,
                inp.set_description,
                inp.description,
                inp.verified_task_id,
            )
            if updated is None:
                raise RenderedPackNotFound("No such rendered pack")

    async def delete_expired_rendered(self, before: datetime, limit: int) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            deleted: int = await conn.fetchval(Q.rendered_delete_expired, before, limit)
            return deleted

    async def delete_expired_packs(self, before: datetime, limit: int) -> int:
        """Delete expired unpinned packs (entries cascade) and their parent tuples."""
        async with self._pool.acquire() as conn, conn.transaction():
            ids = [r["id"] for r in await conn.fetch(Q.pack_expired, before, limit)]
            for pack_id in ids:
                await tuples.delete_object(conn, "ContextPack", pack_id)
            await conn.execute(Q.pack_delete_many, ids)
            return len(ids)


def _chosen(row_id: UUID | None) -> UUID:
    """The id the workflow chose for a new row (it always sets one before the step)."""
    if row_id is None:
        raise ValueError("the workflow chooses the new row's id")
    return row_id


def _existing(pack: ContextPack, inp: PackCreateInput) -> PackCreated:
    if pack.supersedesPackId != inp.supersedes_pack_id:
        raise PackSupersedesConflict(
            "This selection is already pack "
            f"{pack.id}, which supersedes {pack.supersedesPackId or 'no pack'}",
            extensions={"packId": str(pack.id)},
        )
    return PackCreated(pack_id=pack.id, created=pack.id == inp.pack_id)


async def _check_supersedes(conn: asyncpg.Connection, inp: PackCreateInput) -> None:
    if inp.supersedes_pack_id is None:
        return
    previous = await get_pack(conn, inp.supersedes_pack_id)
    if previous is None or previous.diaryId != inp.diary_id:
        raise PackSupersedesNotFound("supersedesPackId must name a pack of the same diary")


async def _insert_entries(
    conn: asyncpg.Connection, pack_id: UUID, entries: Sequence[PackEntryOut]
) -> None:
    await conn.execute(
        Q.pack_insert_entries,
        pack_id,
        [e.entryId for e in entries],
        [e.entryCidSnapshot for e in entries],
        [e.compressionLevel for e in entries],
        [e.originalTokens for e in entries],
        [e.packedTokens for e in entries],
        [e.rank for e in entries],
    )


async def task_diary(db: Db, task_id: UUID) -> UUID | None:
    """The provenance diary of a task."""
    diary_id: UUID | None = await db.fetchval(Q.pack_task_diary, task_id)
    return diary_id
