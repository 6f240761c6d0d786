"""What the API does for memory hygiene after it answered (issue 26): it starts an entry's
consolidation, and it batches the entry ids searches and packs returned.

Neither may cost the request it follows:
- `consolidate` starts `EntryConsolidation` in a task of its own, after the create's response
  is decided; the create's latency never includes that start. A start lost with the process
  (a crash right after the answer) is caught by the daily `ConsolidationSweep`.
- `retrieved` only adds ids to a set in memory. `flush_forever` hands the set to a
  `RetrievalsRecord` workflow every `retrievals_flush_sec` (and once at shutdown), which stores
  the access count and time: the search path never writes, and the API's pool stays read-only.
  An id returned twice in one period is counted once; a batch lost in a crash only ages the
  report's "unretrieved" count, never hides an entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterable
from uuid import UUID

from temporalio.client import Client
from temporalio.exceptions import WorkflowAlreadyStartedError

from schemas import limits
from schemas.hygiene import ConsolidationInput, Retrievals
from workflows.consolidation import (
    EntryConsolidationWorkflow,
    RetrievalsRecordWorkflow,
    entry_consolidation_workflow_id,
    retrievals_workflow_id,
)

log = logging.getLogger(__name__)


class Hygiene:
    def __init__(self, client: Client, task_queue: str, flush_sec: float) -> None:
        self._client = client
        self._task_queue = task_queue
        self._flush_sec = flush_sec
        self._retrieved: set[UUID] = set()
        self._starts: set[asyncio.Task[None]] = set()

    def consolidate(self, entry_id: UUID) -> None:
        """Start the new entry's consolidation without waiting for it."""
        task = asyncio.create_task(self._start_consolidation(entry_id))
        self._starts.add(task)
        task.add_done_callback(self._starts.discard)

    def retrieved(self, entry_ids: Iterable[UUID]) -> None:
        self._retrieved.update(entry_ids)

    async def flush_forever(self) -> None:
        while True:
            await asyncio.sleep(self._flush_sec)
            await self.flush()

    async def flush(self) -> None:
        """Hand the ids collected so far to a `RetrievalsRecord` run (batches of at most
        `RETRIEVALS_FLUSH_MAX`); a batch that cannot be started is kept for the next flush."""
        while self._retrieved:
            batch = sorted(self._retrieved)[: limits.RETRIEVALS_FLUSH_MAX]
            self._retrieved.difference_update(batch)
            try:
                await self._client.start_workflow(
                    RetrievalsRecordWorkflow.run,
                    Retrievals(entry_ids=batch),
                    id=retrievals_workflow_id(uuid.uuid4()),
                    task_queue=self._task_queue,
                )
            except Exception:
                log.warning("retrievals not recorded yet; kept for the next flush", exc_info=True)
                self._retrieved.update(batch)
                return

    async def close(self) -> None:
        """At shutdown: the starts under way finish, and what was collected is flushed."""
        if self._starts:
            await asyncio.gather(*self._starts, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.flush()

    async def _start_consolidation(self, entry_id: UUID) -> None:
        try:
            await self._client.start_workflow(
                EntryConsolidationWorkflow.run,
                ConsolidationInput(entry_id=entry_id),
                id=entry_consolidation_workflow_id(entry_id),
                task_queue=self._task_queue,
            )
        except WorkflowAlreadyStartedError:
            pass  # a keyed retry of the same create
        except Exception:
            log.warning("consolidation not started; the sweep will look at it", exc_info=True)
