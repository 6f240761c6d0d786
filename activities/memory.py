"""Side effects of memory: diary, grant, entry and relation rows with their tuples. One
transaction per activity, idempotent under retry; a refusal becomes a non-retryable problem."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from activities.heartbeats import heartbeating
from schemas.errors import EntryImmutable
from schemas.hygiene import (
    ConsolidationPage,
    ConsolidationPageResult,
    NearDuplicateProbe,
    NearDuplicateProposals,
    Retrievals,
)
from schemas.memory import (
    DiaryCreateInput,
    DiaryRef,
    DiaryUpdateInput,
    EntriesDeleted,
    EntryEmbedding,
    EntryInsert,
    EntryInserted,
    EntryRefs,
    EntryRewrite,
    GrantChange,
    RelationCreateInput,
    RelationRef,
    RelationStatusChange,
    RelationWritten,
)

if TYPE_CHECKING:
    from infra.repos.memory import MemoryRepo


class MemoryActivities:
    def __init__(self, repo: MemoryRepo) -> None:
        self._repo = repo

    @activity.defn(name="memory.create_diary")
    async def create_diary(self, inp: DiaryCreateInput) -> None:
        await self._repo.create_diary(inp)

    @activity.defn(name="memory.update_diary")
    async def update_diary(self, inp: DiaryUpdateInput) -> None:
        await self._repo.update_diary(inp.diary_id, inp.name, inp.visibility)

    @activity.defn(name="memory.delete_diary")
    async def delete_diary(self, inp: DiaryRef) -> None:
        await self._repo.delete_diary(inp.diary_id)

    @activity.defn(name="memory.write_grant")
    async def write_grant(self, inp: GrantChange) -> None:
        await self._repo.write_grant(inp)

    @activity.defn(name="memory.revoke_grant")
    async def revoke_grant(self, inp: GrantChange) -> None:
        await self._repo.revoke_grant(inp)

    @activity.defn(name="memory.insert_entry")
    async def insert_entry(self, inp: EntryInsert) -> EntryInserted:
        inserted = await self._repo.insert_entry(inp)
        if inserted.duplicate_of is not None:
            return EntryInserted(
                entry_id=inserted.duplicate_of,
                cid=inserted.cid,
                duplicate=True,
                entry=inserted.entry,
            )
        return EntryInserted(entry_id=inp.draft.entry_id, cid=inserted.cid, entry=inserted.entry)

    @activity.defn(name="memory.rewrite_entry")
    async def rewrite_entry(self, inp: EntryRewrite) -> None:
        if not await self._repo.rewrite_entry(inp):
            raise EntryImmutable("Signed entries are immutable")

    @activity.defn(name="memory.set_embedding")
    async def set_embedding(self, inp: EntryEmbedding) -> None:
        """Store a late vector; a no-op when the entry changed or went away meanwhile."""
        if inp.embedding is not None:
            await self._repo.set_embedding(inp.entry_id, inp.cid, inp.embedding)

    @activity.defn(name="memory.delete_entries")
    async def delete_entries(self, inp: EntryRefs) -> EntriesDeleted:
        deleted, skipped = await self._repo.delete_entries(inp.entry_ids)
        return EntriesDeleted(deleted=deleted, skipped=skipped)

    @activity.defn(name="memory.propose_near_duplicates")
    async def propose_near_duplicates(self, inp: NearDuplicateProbe) -> NearDuplicateProposals:
        return NearDuplicateProposals(relation_ids=await self._repo.propose_near_duplicates(inp))

    @activity.defn(name="memory.consolidate_page")
    async def consolidate_page(self, inp: ConsolidationPage) -> ConsolidationPageResult:
        async with heartbeating():  # a page of nearest-neighbour probes
            return await self._repo.consolidate_page(inp)

    @activity.defn(name="memory.record_retrievals")
    async def record_retrievals(self, inp: Retrievals) -> None:
        await self._repo.record_retrievals(inp.entry_ids)

    @activity.defn(name="memory.create_relation")
    async def create_relation(self, inp: RelationCreateInput) -> RelationWritten:
        relation_id, created = await self._repo.create_relation(inp)
        return RelationWritten(relation_id=relation_id, created=created)

    @activity.defn(name="memory.set_relation_status")
    async def set_relation_status(self, inp: RelationStatusChange) -> None:
        await self._repo.set_relation_status(inp.relation_id, inp.status)

    @activity.defn(name="memory.delete_relation")
    async def delete_relation(self, inp: RelationRef) -> None:
        await self._repo.delete_relation(inp.relation_id)
