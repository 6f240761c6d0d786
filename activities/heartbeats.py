"""Heartbeats of the long activities (sweeps, imports, embedding batches).

A worker that dies mid-activity stops heartbeating, and the server retries the attempt on
another worker once `heartbeat_timeout` (`workflows.common.LONG_STEP_HEARTBEAT`) has passed,
instead of at the step's start-to-close timeout. Loops report their progress with
`activity.heartbeat(done)`; a single long await (one transaction, one model run, one bulk
delete) runs inside `heartbeating()`, which reports while it waits. Both do nothing when the
caller set no heartbeat timeout (a local activity, a short request step), so the same activity
serves both kinds of caller.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio import activity

from schemas import limits

# Reports per heartbeat timeout: one lost or late report never times a live attempt out.
BEATS_PER_TIMEOUT = 3
# How often a worker sends the reports on (`Worker(max_heartbeat_throttle_interval=...)`). The
# SDK's default, 80 % of the timeout, leaves a busy machine 2 s of slack before a live
# attempt is timed out; a third of it leaves two reports' worth.
HEARTBEAT_SEND_INTERVAL = timedelta(
    seconds=limits.ACTIVITY_HEARTBEAT_TIMEOUT_SEC / BEATS_PER_TIMEOUT
)


def heartbeat(*details: Any) -> None:
    """Report progress if the caller asked for heartbeats (the SDK throttles the sends)."""
    if activity.info().heartbeat_timeout:
        activity.heartbeat(*details)


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat in the background while the block runs, a few times per heartbeat timeout."""
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        yield
        return
    beats = asyncio.create_task(_beat_every(timeout.total_seconds() / BEATS_PER_TIMEOUT))
    try:
        yield
    finally:
        beats.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beats


async def _beat_every(interval_s: float) -> None:
    while True:
        activity.heartbeat()
        await asyncio.sleep(interval_s)
