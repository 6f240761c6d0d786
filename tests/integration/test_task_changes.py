"""A task's changes wake those who watch it (infra/task_changes.py, migration 0026), on the real
stack: an attempt's start (the worker's projection of the heartbeat) and a batch of messages
the API appends each wake a watch of their task, begun after the task's earlier writes. The
waits are bounded only so that a missing wake-up fails the test instead of hanging it; no
duration is asserted."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from test_task_messages import Crew, claimed, crew, post, running

from infra.task_changes import TaskChanges

__all__ = ["crew"]  # the fixture, shared with the message tests
BOUND_S = 60


async def test_an_attempt_that_starts_wakes_the_watch_of_its_task(crew: Crew, db_pool: Any) -> None:
    task_id = await claimed(crew)
    async with TaskChanges(db_pool).watch(uuid.UUID(task_id)) as watch:
        status, beat = await crew.executor.call(
            "POST", f"/tasks/{task_id}/attempts/1/heartbeat", json={}, team=crew.team_id
        )
        assert status == 200, beat
        await asyncio.wait_for(watch.next(), BOUND_S)


async def test_appended_messages_wake_the_watch_of_their_task(crew: Crew, db_pool: Any) -> None:
    task_id = await running(crew)
    async with TaskChanges(db_pool).watch(uuid.UUID(task_id)) as watch:
        status, sent = await post(
            crew.executor, task_id, {"messages": [{"kind": "progress", "payload": "half"}]}
        )
        assert status == 201, sent
        await asyncio.wait_for(watch.next(), BOUND_S)
