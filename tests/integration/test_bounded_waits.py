"""Waits on a workflow are bounded (DECISIONS "Production beyond one machine"): with no worker
alive, a write answers 503 `service-unavailable` with Retry-After within SERVICE_REQUEST_WAIT_S;
its run is left to finish, and the same keyed request, once a worker is back, answers the one
result (one row, not a second write).

The API under test shares the stack's Postgres and Temporal but serves a task queue of its own,
on which a worker runs only when the test starts one."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from actors import Actor, new_diary
from faultstack import serving_api

from infra.devstack import free_port
from workers.main import running_worker

WAIT_S = 1.0
HANG_S = 120


@pytest.fixture(scope="module")
async def idle_settings(stack: Any) -> Any:
    """The stack's settings on a queue no worker polls (yet), with a short bound. The base URL
    stays the stack's: it is the token issuer, so the stack's tokens hold here too."""
    return stack.settings.model_copy(
        update={
            "api_port": free_port(),
            "temporal_task_queue": f"idle-{uuid.uuid4().hex[:8]}",
            "request_wait_s": WAIT_S,
        }
    )


@pytest.fixture(scope="module")
async def idle_http(stack: Any, idle_settings: Any) -> AsyncIterator[aiohttp.ClientSession]:
    async with serving_api(idle_settings, stack.temporal):
        url = f"http://127.0.0.1:{idle_settings.api_port}"
        async with aiohttp.ClientSession(base_url=url) as http:
            yield http


async def _create_entry(
    http: aiohttp.ClientSession, agent: Actor, diary_id: str, key: str
) -> tuple[int, dict[str, Any], str | None]:
    async with http.post(
        f"/diaries/{diary_id}/entries",
        json={"content": f"written once ({key})"},
        headers={**agent.auth, "Idempotency-Key": key},
    ) as response:
        body = await response.json(content_type=None)
        return response.status, body, response.headers.get("Retry-After")


async def test_a_keyed_write_waits_no_longer_than_the_bound_and_answers_once_a_worker_is_back(
    stack: Any, actors: Any, idle_http: aiohttp.ClientSession, idle_settings: Any, db_pool: Any
) -> None:
    agent = await actors.agent()
    diary = await new_diary(agent)  # through the stack, whose worker runs
    key = f"bounded-{uuid.uuid4().hex}"

    # the limit only bounds a hang (an unbounded wait would never answer); no timing is asserted
    answer = _create_entry(idle_http, agent, diary["id"], key)
    status, problem, retry_after = await asyncio.wait_for(answer, HANG_S)
    assert status == 503, problem
    assert problem["code"] == "service-unavailable"
    assert "Idempotency-Key" in problem["detail"]
    assert retry_after is not None and int(retry_after) > 0

    async with running_worker(idle_settings, stack.temporal):
        status, entry, _ = await _create_entry(idle_http, agent, diary["id"], key)
        assert status == 201, entry
        status, again, _ = await _create_entry(idle_http, agent, diary["id"], key)
        assert status == 201, again
    assert again["id"] == entry["id"]
    rows = await db_pool.fetchval(
        "SELECT count(*) FROM diary_entries WHERE diary_id = $1", uuid.UUID(diary["id"])
    )
    assert rows == 1
