"""Wake-ups on a task's changes, from Postgres: `task_changed` is notified with the task id
whenever its status changes or messages of it are appended, by any process (migrations 0028 and
0029; other writes of its rows, a lease or a heartbeat time, notify nobody).

One connection of the pool listens while anyone watches (an A2A stream), and goes back to the
pool when the last watch ends (the pool's reset unlistens it). The notification says only that
the task changed: a watcher reads the rows again, so a burst of changes is one read.

A lost listening connection wakes every watcher; the next wait listens again on a fresh
connection and returns at once, so the changes made while nobody listened are read.
Behind a transaction pooler (`SERVICE_DATABASE_TRANSACTION_POOLER`) a session's LISTEN does
not hold: there the watch wakes every `A2A_STREAM_POLL_SEC` instead (docs/a2a-internals.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final
from uuid import UUID

import asyncpg

from schemas import limits

CHANNEL: Final = "task_changed"


class Watch:
    """One follower's wake-ups on one task."""

    def __init__(self, source: TaskChanges) -> None:
        self._source = source
        self._changed = asyncio.Event()

    async def next(self) -> None:
        """Return once the task changed since the last call (or since the watch began)."""
        if await self._source.listen():
            return  # listening afresh: what changed while nobody listened is read now
        await self._changed.wait()
        self._changed.clear()

    def wake(self) -> None:
        self._changed.set()


class TaskChanges:
    """The task changes of one API process (see the module)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._watches: dict[str, set[Watch]] = {}
        self._listening: Any = None  # the pool's connection that listens, while one does
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def watch(self, task_id: UUID) -> AsyncIterator[Watch]:
        """Wake-ups on `task_id` from now on (the listener is up before this yields)."""
        watch = Watch(self)
        watchers = self._watches.setdefault(str(task_id), set())
        watchers.add(watch)
        try:
            await self.listen()
            yield watch
        finally:
            watchers.discard(watch)
            if not watchers:
                del self._watches[str(task_id)]
            if not self._watches:
                await self._stop()

    async def listen(self) -> bool:
        """Make sure a connection listens; True when this call had to start one."""
        async with self._lock:
            if self._listening is not None:
                if not self._listening.is_closed():
                    return False
                await self._pool.release(self._listening)  # lost: the pool drops it
            connection = await self._pool.acquire()
            connection.add_termination_listener(self._lost)
            await connection.add_listener(CHANNEL, self._notified)
            self._listening = connection
            return True

    async def _stop(self) -> None:
        async with self._lock:
            connection = self._listening
            if connection is None or self._watches:
                return  # a watch began meanwhile: it keeps the listener
            self._listening = None
            connection.remove_termination_listener(self._lost)
            with contextlib.suppress(asyncpg.PostgresError, OSError):
                await connection.remove_listener(CHANNEL, self._notified)
            await self._pool.release(connection)

    def _notified(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        for watch in self._watches.get(payload, ()):
            watch.wake()

    def _lost(self, connection: Any) -> None:
        for watchers in self._watches.values():
            for watch in watchers:
                watch.wake()


class PolledTaskChanges:
    """For a transaction pooler, where no session listens: a wake-up every poll interval."""

    @contextlib.asynccontextmanager
    async def watch(self, task_id: UUID) -> AsyncIterator[Polled]:
        yield Polled()


class Polled:
    async def next(self) -> None:
        await asyncio.sleep(limits.A2A_STREAM_POLL_SEC)
