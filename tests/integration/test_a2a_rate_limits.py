"""An A2A call counts once in the caller's global bucket: `POST /a2a` is counted as it arrives,
and the task route it runs counts only in that route's own bucket (`api.auth.authorize`'s
`counted`). A refusal past the limit is the same 429 problem as REST's."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from actors import Actor
from test_rate_limits import Clock, agent_on, limited_app

LIMIT = 3


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
async def narrow(stack: Any, clock: Clock) -> AsyncIterator[aiohttp.ClientSession]:
    async with (
        limited_app(stack, clock, rate_limit_global_auth=f"{LIMIT}/minute") as base_url,
        aiohttp.ClientSession(base_url=base_url) as http,
    ):
        yield http


async def call(agent: Actor, body: dict[str, Any]) -> tuple[int, Any, Any]:
    headers = {**agent.auth, "A2A-Version": "1.0"}
    async with agent.http.post("/a2a", json=body, headers=headers) as response:
        return response.status, await response.json(content_type=None), response.headers


def cancel_task(task_id: str) -> dict[str, Any]:
    """A POST route run for an A2A call: both would count in the global authenticated bucket."""
    return {"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": task_id}}


async def test_an_a2a_call_counts_once_in_the_global_bucket(actors: Any, narrow: Any) -> None:
    agent = await agent_on(actors, narrow)
    for _ in range(LIMIT):
        status, body, _ = await call(agent, cancel_task(str(uuid.uuid4())))
        assert status == 200, body
        assert body["error"]["code"] == -32001  # TaskNotFoundError: counted, answered
    status, problem, headers = await call(agent, cancel_task(str(uuid.uuid4())))
    assert status == 429, problem
    assert problem["code"] == "rate-limit-exceeded" and "Retry-After" in headers
