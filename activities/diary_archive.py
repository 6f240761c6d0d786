"""Side effects of a diary import (`workflows.diary_archive`): write the staged file's rows (a
Cairn archive, or a Mem0, Letta or COGX file: `schemas.imports`), embed the new entries in
batches, discard the staged file.

The API verified the archive before staging it; the write step reads it back from S3 and runs
the same checks again (the bytes crossed a network and a store since), so a row is only ever
written from a file that verifies.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from temporalio import activity

from activities.heartbeats import heartbeat, heartbeating
from schemas import limits
from schemas.diary_archive import (
    DiaryImported,
    DiaryImportInput,
    EntriesEmbedded,
    ImportedEntries,
    ImportedEntry,
    imported_entry_id,
)
from schemas.embedding import EmbedRequest
from schemas.errors import ArchiveInvalid, ArchiveNotStaged
from schemas.imports.formats import read_peer_file
from schemas.imports.peer import RecordRejected, refusal, to_archive
from schemas.kernel.cids import bytes_cid
from schemas.kernel.diary_car import ArchiveRejected, DiaryArchive, read_archive
from schemas.kernel.embedding_text import entry_embedding_text
from schemas.kernel.injection import entry_verdict

if TYPE_CHECKING:
    from activities.embedding import EmbeddingActivities
    from infra.repos.memory import MemoryRepo
    from infra.s3 import BlobStore


class DiaryArchiveActivities:
    def __init__(self, repo: MemoryRepo, blobs: BlobStore | None) -> None:
        self._repo = repo
        self._blobs = blobs

    def _store(self) -> BlobStore:
        if self._blobs is None:
            raise RuntimeError("this worker has no S3 store for staged archives")
        return self._blobs

    async def _staged(self, key: str) -> bytes:
        reader = await self._store().open(key)
        if reader is None:
            raise ArchiveNotStaged("The staged archive is gone")
        if reader.size > limits.DIARY_IMPORT_MAX_BYTES:
            reader.close()
            raise ArchiveInvalid("The staged archive is too large")
        chunks = []
        async for chunk in reader.chunks(limits.ARTIFACT_STREAM_CHUNK_BYTES):
            chunks.append(chunk)
            heartbeat()
        return b"".join(chunks)

    @activity.defn(name="diary_archive.write")
    async def write(self, inp: DiaryImportInput) -> DiaryImported:
        """Create the diary, its entries, signatures and relations in one transaction."""
        data = await self._staged(inp.archive_key)
        async with heartbeating():
            # CPU work (checks, signatures, injection scans) off the worker's event loop
            if inp.format == "car":
                archive, scanned = await asyncio.to_thread(_checked_and_scanned, data)
            else:
                archive, scanned = await asyncio.to_thread(_peer_entries_scanned, data, inp)
            await self._repo.import_diary(inp, archive, scanned)
        return DiaryImported(entries=len(archive.entries))

    @activity.defn(name="diary_archive.discard")
    async def discard(self, inp: DiaryImportInput) -> None:
        """Delete the staged file (missing is fine: a retry after it went)."""
        await self._store().delete_many([inp.archive_key])


def _checked_and_scanned(data: bytes) -> tuple[DiaryArchive, list[ImportedEntry]]:
    """The archive, checked, and each entry with its injection scan (as for any new entry)."""
    try:
        archive = read_archive(data)
    except ArchiveRejected as rejected:
        raise ArchiveInvalid(str(rejected), extensions={"block": rejected.block}) from None
    scanned = [
        ImportedEntry(entry, *entry_verdict(entry.title, entry.content))
        for entry in archive.entries
    ]
    return archive, scanned


def _peer_entries_scanned(
    data: bytes, inp: DiaryImportInput
) -> tuple[DiaryArchive, list[ImportedEntry]]:
    """A peer file's entries, checked as the API checked them, each with its injection scan and
    its origin; an entry the source left undated is created at the import."""
    try:
        peer = read_peer_file(data)
    except RecordRejected as rejected:
        raise refusal(rejected) from None
    archive, origins = to_archive(
        peer,
        diary_id=inp.diary_id,
        file_cid=bytes_cid(data),
        imported_at=datetime.now(UTC),
    )
    scanned = [
        ImportedEntry(entry, *entry_verdict(entry.title, entry.content), origin=origin)
        for entry, origin in zip(archive.entries, origins, strict=True)
    ]
    return archive, scanned


class ImportEmbeddingActivities:
    """On the embedding task queue, beside the model: embeds a batch of imported entries and
    stores the vectors, so no vector passes through workflow history."""

    def __init__(self, embedding: EmbeddingActivities, repo: MemoryRepo) -> None:
        self._embedding = embedding
        self._repo = repo

    @activity.defn(name="diary_archive.embed_entries")
    async def embed_entries(self, inp: ImportedEntries) -> EntriesEmbedded:
        ids = [imported_entry_id(inp.diary_id, n) for n in range(inp.start, inp.stop)]
        pending = await self._repo.entries_to_embed(ids)
        if not pending:
            return EntriesEmbedded(embedded=0)
        texts = [entry_embedding_text(e.title, e.content, e.tags) for e in pending]
        async with heartbeating():  # the model run of a whole batch
            result = await self._embedding.embed_passages(EmbedRequest(texts=texts))
        for done, (entry, vector) in enumerate(zip(pending, result.vectors, strict=True), 1):
            await self._repo.set_embedding(entry.id, entry.cid, vector)
            heartbeat(done)
        return EntriesEmbedded(embedded=len(pending))
