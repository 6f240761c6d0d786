"""The toolsets a connection enabled survive its requests landing on another replica: two real
`cairn mcp` processes over one stack, behind a round-robin proxy (a load balancer without
affinity), and one session of the official client through it (toolserver.toolsets: the
enabled set rides in a cookie the client carries, not in a process's memory)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web
from mcp_support import client_headers, mcp_session, proxy_at, structured, text_of
from processes import service_env, start_cairn, stop_cairn, wait_until

from infra.devstack import free_port
from toolserver.registry import CATALOGUE
from toolserver.toolsets import DISCOVERY_NAME

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "host"}


@contextlib.asynccontextmanager
async def mcp_replicas(stack: Any, count: int) -> AsyncIterator[list[str]]:
    """`count` `cairn mcp` processes talking to the stack's API; yields their MCP URLs."""
    ports = [free_port() for _ in range(count)]
    processes = []
    try:
        for port in ports:
            env = service_env(stack.settings, free_port()) | {
                "SERVICE_MCP_PORT": str(port),
                "SERVICE_MCP_API_URL": stack.base_url,
            }
            processes.append(await start_cairn("mcp", env))
        for port in ports:
            await wait_until(_ready(f"http://127.0.0.1:{port}/readyz"), what="an MCP replica")
        yield [f"http://127.0.0.1:{port}/mcp" for port in ports]
    finally:
        for process in processes:
            await stop_cairn(process)


def _ready(url: str) -> Any:
    async def probe() -> bool:
        try:
            async with aiohttp.ClientSession() as http, http.get(url) as answer:
                return answer.status == 200
        except aiohttp.ClientConnectionError:
            return False

    return probe


@contextlib.asynccontextmanager
async def round_robin(targets: list[str], served: list[tuple[int, str]]) -> AsyncIterator[str]:
    """A proxy sending each request to the next of `targets` in turn, noting in `served` which
    one took each JSON-RPC method; yields its own MCP URL."""
    session = aiohttp.ClientSession(auto_decompress=False)
    turn = 0

    async def forward(request: web.Request) -> web.StreamResponse:
        nonlocal turn
        index, turn = turn % len(targets), turn + 1
        body = await request.read()
        with contextlib.suppress(ValueError):
            served.append((index, str(json.loads(body or b"{}").get("method"))))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with session.request(
            request.method, targets[index], params=request.query, headers=headers, data=body
        ) as answer:
            payload = await answer.read()
            kept = [(k, v) for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP]
            response = web.Response(status=answer.status, body=payload)
            for name, value in kept:
                response.headers.add(name, value)
            return response

    try:
        async with proxy_at(forward) as url:
            yield url
    finally:
        await session.close()


async def test_an_enabled_toolset_holds_on_another_replica(stack: Any, actors: Any) -> None:
    agent = await actors.agent()
    teams = {d.name for d in CATALOGUE if d.toolset == "teams"}
    served: list[tuple[int, str]] = []
    async with (
        mcp_replicas(stack, 2) as replicas,
        round_robin(replicas, served) as url,
        mcp_session(url, client_headers(agent), everything=False) as session,
    ):
        before = {tool.name for tool in (await session.list_tools()).tools}
        enabled = structured(await session.call_tool(DISCOVERY_NAME, {"toolset": "teams"}))
        after = {tool.name for tool in (await session.list_tools()).tools}
        listed = await session.call_tool("teams_list", {})
    assert not before & teams and enabled["enabled"] == "teams"
    assert after == before | teams
    assert not listed.is_error, text_of(listed)
    # the enabling call and the listing after it were answered by different processes
    calls = [index for index, method in served if method == "tools/call"]
    lists = [index for index, method in served if method == "tools/list"]
    assert len(lists) == 2 and calls[0] != lists[1], served
    assert {index for index, _ in served} == {0, 1}
