"""An A2A stream (`api.a2a._follow`) is driven by its task's changes, not by a clock: after its
first read it waits on `TaskRows.changes` and reads the rows again only when woken.

The rows here are a task held in memory (the route layer reads Postgres for real, and
tests/integration/test_task_changes.py wakes a watch from the real triggers); what this
holds is the stream's own loop: one read per change, nothing in between."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from uuid import UUID

from a2a.types.a2a_pb2 import Task, TaskState, TaskStatusUpdateEvent
from aiohttp.test_utils import make_mocked_request

from api import a2a
from schemas.task_api import Task as CairnTask
from schemas.task_api import TaskAttempt, TaskMessage
from schemas.tasks import TaskStatus


class Woken:
    """`api.a2a.Changes` the test wakes by hand, counting the waits."""

    def __init__(self) -> None:
        self.waits = 0
        self.waiting = asyncio.Event()  # set when the stream begins a wait
        self.changed = asyncio.Event()

    async def next(self) -> None:
        self.waits += 1
        self.waiting.set()
        await self.changed.wait()
        self.changed.clear()


class HeldRows:
    """`api.a2a.TaskRows` over one task in memory, counting the reads of its row."""

    def __init__(self, task: CairnTask) -> None:
        self.current = task
        self.reads = 0
        self.woken = Woken()

    async def task(self, task_id: UUID) -> CairnTask | None:
        self.reads += 1
        return self.current

    async def attempts(self, task_id: UUID) -> list[TaskAttempt]:
        return []

    async def messages(self, attempt: TaskAttempt, after_seq: int) -> list[TaskMessage]:
        return []

    @contextlib.asynccontextmanager
    async def changes(self, task_id: UUID) -> AsyncIterator[Woken]:
        yield self.woken


def task(status: TaskStatus) -> CairnTask:
    now = datetime.now(UTC)
    return CairnTask(
        id=uuid.uuid4(),
        taskType="freeform",
        teamId=uuid.uuid4(),
        diaryId=uuid.uuid4(),
        outputKind="artifact",
        input={"brief": "a haiku"},
        inputCid="bafy-input",
        inputSchemaCid="bafy-schema",
        status=status,
        maxAttempts=1,
        dispatchTimeoutSec=60,
        runningTimeoutSec=60,
        workflowId="task/x",
        queuedAt=now,
        createdAt=now,
        updatedAt=now,
    )


async def until_waiting(woken: Woken, waits: int) -> None:
    await woken.waiting.wait()
    woken.waiting.clear()
    assert woken.waits == waits


async def test_the_stream_reads_again_only_when_its_task_changes() -> None:
    queued = task("queued")
    rows = HeldRows(queued)
    call = a2a.Call(request=make_mocked_request("POST", "/a2a"), rows=rows)
    events = a2a._follow(call, queued)
    first = await anext(events)
    assert isinstance(first, Task) and first.status.state == TaskState.TASK_STATE_SUBMITTED

    pending = asyncio.ensure_future(anext(events))
    await until_waiting(rows.woken, 1)
    assert rows.reads == 1  # one read, then a wait on the task's change, not a sleep
    assert not pending.done()

    rows.current = queued.model_copy(update={"status": "running"})
    rows.woken.changed.set()
    working = await pending
    assert isinstance(working, TaskStatusUpdateEvent)
    assert working.status.state == TaskState.TASK_STATE_WORKING
    assert rows.reads == 2

    pending = asyncio.ensure_future(anext(events))
    await until_waiting(rows.woken, 2)
    assert rows.reads == 2 and not pending.done()
    rows.current = queued.model_copy(update={"status": "cancelled"})
    rows.woken.changed.set()
    final = await pending
    assert isinstance(final, TaskStatusUpdateEvent)
    assert final.status.state == TaskState.TASK_STATE_CANCELED
    assert [e async for e in events] == []  # the final status ends the stream
