"""A task's changes wake those who watch it (infra/task_changes.py, migration 0028), on the real
stack: an attempt's start (the worker's projection of the heartbeat) and a batch of messages
the API appends each wake a watch of their task, begun after the task's earlier writes; a write
that changes neither the status nor the messages (a lease, an attempt's heartbeat time) notifies
nobody, since a notifying commit takes Postgres's notify-queue lock (migration 0029). The
waits are bounded only so that a missing wake-up fails the test instead of hanging it; no
duration is asserted. A quiet A2A stream of a task says it is alive (an SSE comment), so
proxies keep it open and a client that left is found."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from test_task_messages import Crew, claimed, crew, post, running

from infra.task_changes import CHANNEL, TaskChanges

__all__ = ["crew"]  # the fixture, shared with the message tests
BOUND_S = 60


@pytest.fixture(scope="module")
def stack_settings() -> dict[str, object]:
    return {"a2a_stream_keepalive_s": 0.2}  # a quiet A2A stream says so soon


async def test_an_attempt_that_starts_wakes_the_watch_of_its_task(crew: Crew, db_pool: Any) -> None:
    task_id = await claimed(crew)
    async with TaskChanges(db_pool).watch(uuid.UUID(task_id)) as watch:
        status, beat = await crew.executor.call(
            "POST", f"/tasks/{task_id}/attempts/1/heartbeat", json={}, team=crew.team_id
        )
        assert status == 200, beat
        await asyncio.wait_for(watch.next(), BOUND_S)


async def test_only_a_status_change_of_the_rows_notifies(crew: Crew, db_pool: Any) -> None:
    task_id = await claimed(crew)
    heard: asyncio.Queue[str] = asyncio.Queue()

    def hear(*args: Any) -> None:
        heard.put_nowait(args[3])

    async with db_pool.acquire() as listener:
        await listener.add_listener(CHANNEL, hear)
        # a lease and a heartbeat time, as a liveness heartbeat writes them, then a status change
        await db_pool.execute(
            "UPDATE tasks SET claim_expires_at = claim_expires_at + interval '1 second'"
            " WHERE id = $1",
            task_id,
        )
        await db_pool.execute(
            "UPDATE task_attempts SET last_heartbeat_at = now() WHERE task_id = $1", task_id
        )
        await db_pool.execute("UPDATE tasks SET status = 'running' WHERE id = $1", task_id)
        # notifications arrive in commit order: everything above is heard before this one
        await db_pool.execute("SELECT pg_notify($1, 'end')", CHANNEL)
        payloads = [await asyncio.wait_for(heard.get(), BOUND_S)]
        while payloads[-1] != "end":
            payloads.append(await asyncio.wait_for(heard.get(), BOUND_S))
        await listener.remove_listener(CHANNEL, hear)
    assert payloads == [task_id, "end"]


async def test_appended_messages_wake_the_watch_of_their_task(crew: Crew, db_pool: Any) -> None:
    task_id = await running(crew)
    async with TaskChanges(db_pool).watch(uuid.UUID(task_id)) as watch:
        status, sent = await post(
            crew.executor, task_id, {"messages": [{"kind": "progress", "payload": "half"}]}
        )
        assert status == 201, sent
        await asyncio.wait_for(watch.next(), BOUND_S)


async def test_a_quiet_a2a_stream_keeps_alive(crew: Crew, stack: Any) -> None:
    task_id = await claimed(crew)
    body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
    headers = {**crew.owner.auth, "A2A-Version": "1.0"}
    async with (
        httpx.AsyncClient(base_url=stack.base_url, timeout=BOUND_S) as http,
        http.stream("POST", "/a2a", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.aiter_lines()
        first = await anext(lines)
        assert json.loads(first.removeprefix("data: "))["result"]["task"]["id"] == task_id
        assert [await anext(lines) for _ in range(3)] == ["", ": keep-alive", ""]
