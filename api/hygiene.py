"""What the API does for memory hygiene after it answered (issue 26): it batches the ids of the
entries it created, for their consolidation, and of the entries searches and packs returned.

Neither may cost the request it follows: `consolidate` and `retrieved` only add ids to sets in
memory. `flush_forever` hands them over every `hygiene_flush_sec` (and once at shutdown): the
new entries to an `EntryConsolidation` run (near-duplicate proposals), the returned ones to a
`RetrievalsRecord` run (which dates them for the report). So the create's latency includes no
consolidation, the search path never writes, the API's pool stays read-only, and a burst of
writes or searches costs one run per flush, not one per request. A batch lost with the process
(a crash before its flush) costs little: the daily `ConsolidationSweep` looks at every entry,
and an unrecorded retrieval only ages the report's "unretrieved" count.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

from temporalio.client import Client

from schemas import limits
from schemas.hygiene import ConsolidationInput, Retrievals
from schemas.priorities import WorkKind
from workflows.common import work_priority
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
        self._created: set[UUID] = set()
        self._retrieved: set[UUID] = set()

    def consolidate(self, entry_id: UUID) -> None:
        """A new entry, for the next consolidation batch."""
        self._created.add(entry_id)

    def retrieved(self, entry_ids: Iterable[UUID]) -> None:
        self._retrieved.update(entry_ids)

    async def flush_forever(self) -> None:
        while True:
            await asyncio.sleep(self._flush_sec)
            await self.flush()

    async def flush(self) -> None:
        await self._hand_over(
            self._created,
            lambda batch: (
                EntryConsolidationWorkflow.run,
                ConsolidationInput(entry_ids=batch),
                entry_consolidation_workflow_id(uuid.uuid4()),
            ),
        )
        await self._hand_over(
            self._retrieved,
            lambda batch: (
                RetrievalsRecordWorkflow.run,
                Retrievals(entry_ids=batch),
                retrievals_workflow_id(uuid.uuid4()),
            ),
        )

    async def close(self) -> None:
        """At shutdown: what was collected is handed over."""
        with contextlib.suppress(Exception):
            await self.flush()

    async def _hand_over(
        self, pending: set[UUID], run_of: Callable[[list[UUID]], tuple[Any, Any, str]]
    ) -> None:
        """Start one run per batch of at most `HYGIENE_BATCH_MAX` ids; a batch that cannot be
        started is kept for the next flush."""
        while pending:
            batch = sorted(pending)[: limits.HYGIENE_BATCH_MAX]
            pending.difference_update(batch)
            run, arg, workflow_id = run_of(batch)
            try:
                # a batch mixes teams' entries: it yields to requests, no team's turn
                await self._client.start_workflow(
                    run,
                    arg,
                    id=workflow_id,
                    task_queue=self._task_queue,
                    priority=work_priority(WorkKind.FOLLOW_UP),
                )
            except Exception:
                log.warning("hygiene batch not started; kept for the next flush", exc_info=True)
                pending.update(batch)
                return
