"""Diary import: write the staged archive's rows in one step, then embed the new entries in
batches beside the model, then discard the staged file.

Only references pass through history (the S3 key of the staged CAR file, entry positions,
counts), never the file, an entry or a vector: an archive can be far above Temporal's 2 MiB
payload cap. An embedding batch that keeps failing leaves its entries text-only (search falls
back to full text for them), as an entry create does.
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.diary_archive import DiaryArchiveActivities, ImportEmbeddingActivities
    from schemas import limits
    from schemas.diary_archive import DiaryImported, DiaryImportInput, ImportedEntries
    from workflows.common import (
        LONG_LIVED,
        LONG_STEP_HEARTBEAT,
        STEP_FAILURES,
        embedding_task_queue,
        run_activity,
    )

# Reading and checking a file of up to 32 MiB, then one transaction of its rows.
WRITE_TIMEOUT = timedelta(minutes=2)
EMBED_BATCH_TIMEOUT = timedelta(minutes=1)
EMBED_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)


def diary_import_workflow_id(diary_id: UUID) -> str:
    return f"diaries/{diary_id}/import"


@workflow.defn(name="DiaryImport", versioning_behavior=LONG_LIVED)
class DiaryImportWorkflow:
    @workflow.run
    async def run(self, inp: DiaryImportInput) -> DiaryImported:
        try:
            imported = await run_activity(
                DiaryArchiveActivities.write,
                inp,
                start_to_close=WRITE_TIMEOUT,
                heartbeat=LONG_STEP_HEARTBEAT,
            )
        finally:  # written or not, the staged file has served
            await run_activity(DiaryArchiveActivities.discard, inp)
        batch = limits.DIARY_IMPORT_EMBED_BATCH
        for start in range(0, imported.entries, batch):
            await self._embed(
                ImportedEntries(
                    diary_id=inp.diary_id, start=start, stop=min(start + batch, imported.entries)
                )
            )
        return imported

    async def _embed(self, entries: ImportedEntries) -> None:
        try:
            await workflow.execute_activity_method(
                ImportEmbeddingActivities.embed_entries,
                entries,
                task_queue=embedding_task_queue(),
                start_to_close_timeout=EMBED_BATCH_TIMEOUT,
                heartbeat_timeout=LONG_STEP_HEARTBEAT,
                retry_policy=EMBED_RETRY,
            )
        except STEP_FAILURES:
            workflow.logger.warning("an embedding batch failed; its entries stay text-only")
