"""SIGTERM drains `cairn api` (every process of `--processes 2`) and `cairn mcp` (DECISIONS
"Production beyond one machine"): readiness answers 503 at once while the listener still
accepts, a request in flight finishes with its 2xx, and the process exits 0.

The request in flight is a real slow one: an entry create whose workflow waits for a worker.
The API it goes to serves a task queue of its own, polled only once the test starts a worker
there, after the signal."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from actors import Actor, new_diary
from faultstack import serving_api
from mcp_support import client_headers, mcp_session, structured
from processes import service_env, wait_until
from test_api_processes import two_processes

from infra.devstack import free_port
from schemas.queues import embedding_queue_for
from workers.main import running_worker

DRAIN_S = "4"  # long enough to see the failed probe on a busy machine; no timing is asserted


@pytest.fixture(scope="module")
def idle_queue() -> str:
    return f"drain-{uuid.uuid4().hex[:8]}"


def idle_settings(stack: Any, queue: str, port: int) -> Any:
    return stack.settings.model_copy(
        update={"api_port": port, "temporal_task_queue": queue, "request_wait_s": 120.0}
    )


async def _workflows_on(stack: Any, queue: str) -> int:
    """Runs started on the service's queue or its embedding queue (where entries are written)."""
    query = f'TaskQueue IN ("{queue}", "{embedding_queue_for(queue)}")'
    return len([run async for run in stack.temporal.list_workflows(query)])


async def _ready_status(url: str) -> int:
    connector = aiohttp.TCPConnector(force_close=True)  # a new connection: any process answers
    async with aiohttp.ClientSession(connector=connector) as http, http.get(url) as response:
        return response.status


async def _create_entry(base: str, agent: Actor, diary_id: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{base}/diaries/{diary_id}/entries",
            json={"content": "written while the API drains"},
            headers={**agent.auth, "Idempotency-Key": uuid.uuid4().hex},
        ) as response,
    ):
        return response.status, await response.json(content_type=None)


@pytest.fixture
async def api_process(
    stack: Any, idle_queue: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    """`cairn api --processes 2` on the idle queue."""
    drains = {
        "SERVICE_TEMPORAL_TASK_QUEUE": idle_queue,
        "SERVICE_SHUTDOWN_DRAIN_S": DRAIN_S,
        "SERVICE_REQUEST_WAIT_S": "120",
        "SERVICE_BASE_URL": stack.base_url,  # the token issuer: the stack's tokens hold here
    }
    async with two_processes(stack, drains) as pair:
        yield pair


async def test_the_api_drains_on_sigterm(
    stack: Any, actors: Any, idle_queue: str, api_process: Any
) -> None:
    process, port = api_process
    base = f"http://127.0.0.1:{port}"
    agent = await actors.agent()
    diary = await new_diary(agent)  # through the stack, whose worker runs
    assert await _ready_status(f"{base}/health/ready") == 200

    in_flight = asyncio.create_task(_create_entry(base, agent, diary["id"]))
    await wait_until(lambda: _workflows_on(stack, idle_queue), what="the entry's run")
    process.terminate()
    await wait_until(_draining(f"{base}/health/ready"), what="readiness 503 while draining")
    assert not in_flight.done()

    async with running_worker(idle_settings(stack, idle_queue, port), stack.temporal):
        status, entry = await in_flight
    assert status == 201, entry
    assert await asyncio.wait_for(process.wait(), timeout=60) == 0


def _draining(url: str) -> Any:
    async def probe() -> bool:
        return await _ready_status(url) == 503

    return probe


async def test_the_mcp_server_drains_on_sigterm(stack: Any, actors: Any) -> None:
    queue = f"drain-mcp-{uuid.uuid4().hex[:8]}"
    api_port, mcp_port = free_port(), free_port()
    settings = idle_settings(stack, queue, api_port)
    agent = await actors.agent()
    diary = await new_diary(agent)
    env = service_env(stack.settings, api_port) | {
        "SERVICE_MCP_PORT": str(mcp_port),
        "SERVICE_MCP_API_URL": f"http://127.0.0.1:{api_port}",
        "SERVICE_SHUTDOWN_DRAIN_S": DRAIN_S,
    }
    ready = f"http://127.0.0.1:{mcp_port}/readyz"
    async with serving_api(settings, stack.temporal):
        process = await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "cairn", "mcp"],
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            await wait_until(_answers(ready), what="the MCP server")
            assert await _ready_status(ready) == 200
            url = f"http://127.0.0.1:{mcp_port}/mcp"
            async with mcp_session(url, client_headers(agent)) as session:
                # the client checks a result against the tool's output schema, listing the
                # tools first if it has not: list them now, while the listener is open
                await session.list_tools()
                call = session.call_tool(
                    "entries_create", {"diary_id": diary["id"], "content": "drained"}
                )
                in_flight = asyncio.create_task(call)
                await wait_until(lambda: _workflows_on(stack, queue), what="the entry's run")
                process.terminate()
                await wait_until(_draining(ready), what="readiness 503 while draining")
                live = f"http://127.0.0.1:{mcp_port}/healthz"
                assert await _ready_status(live) == 200  # the listener still accepts
                async with running_worker(settings, stack.temporal):
                    created = structured(await in_flight)
            assert created["content"] == "drained"
            assert await asyncio.wait_for(process.wait(), timeout=60) == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


def _answers(url: str) -> Any:
    async def probe() -> bool:
        try:
            return await _ready_status(url) == 200
        except aiohttp.ClientConnectionError:
            return False

    return probe
