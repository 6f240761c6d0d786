"""The worker's own metrics beside the Temporal SDK's: the depth of Cairn's task queue.

`cairn.task_queue.depth` is an observable gauge of unfinished tasks by `cairn.task.type` and
`cairn.task.status` (queued, dispatched, running), counted in Postgres. Postgres, not Temporal's
`describe_task_queue`, because a Cairn task waits for a daemon's claim in the `tasks` table: its
workflow is parked on a timer, so Temporal's backlog never sees it (Temporal's own queues are
covered by the SDK's schedule-to-start latencies). Teams are not an attribute: their number
grows without bound, and a metric's series must not.

The SDK calls a gauge's callback from its export thread, where no query can run, so a task in
the worker's event loop refreshes a snapshot every export interval and the callback reads it.
Every type and status is reported, zero included, so a drained queue reads 0 rather than its
last non-zero value.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Iterable
from datetime import timedelta

import asyncpg
from opentelemetry.metrics import CallbackOptions, Meter, Observation

from infra.repos.task_reads import count_open_tasks
from schemas.kernel.task_types import TASK_TYPES

log = logging.getLogger("cairn.worker")
QUEUE_DEPTH = "cairn.task_queue.depth"
OPEN_STATUSES = ("queued", "dispatched", "running")


class TaskQueueDepth:
    """The gauge and the snapshot it reports; `refresh()` counts again."""

    def __init__(self, pool: asyncpg.Pool, meter: Meter) -> None:
        self._pool = pool
        self._counts: dict[tuple[str, str], int] = {}
        meter.create_observable_gauge(
            QUEUE_DEPTH,
            callbacks=[self._observe],
            unit="{task}",
            description="Unfinished Cairn tasks by type and status.",
        )

    async def refresh(self) -> None:
        counts = dict.fromkeys(itertools.product((t.name for t in TASK_TYPES), OPEN_STATUSES), 0)
        for row in await count_open_tasks(self._pool):
            counts[(row.task_type, row.status)] = row.tasks
        self._counts = counts

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(tasks, {"cairn.task.type": task_type, "cairn.task.status": status})
            for (task_type, status), tasks in self._counts.items()
        ]


@contextlib.asynccontextmanager
async def reporting_queue_depth(
    pool: asyncpg.Pool, meter: Meter, every: timedelta
) -> AsyncIterator[TaskQueueDepth]:
    """Refresh the gauge every `every` until the block ends (a failed count keeps the last)."""
    depth = TaskQueueDepth(pool, meter)

    async def refresh_forever() -> None:
        while True:
            try:
                await depth.refresh()
            except (OSError, asyncpg.PostgresError) as exc:
                log.warning("counting the task queue failed: %s", exc)
            await asyncio.sleep(every.total_seconds())

    task = asyncio.create_task(refresh_forever())
    try:
        yield depth
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
