"""The MCP server on a free port beside the test stack, and sessions of the official client
(`mcp.client.streamable_http`) over real HTTP."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from aiohttp import web
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp_types import CallToolResult

from infra.devstack import free_port
from schemas.connector import connector_secret

CHALLENGE_TOKEN = "challenge-token-0123456789"
TEMPORAL_UI = "http://temporal-ui.test:8233"
# the tests of the tools ask for the whole catalogue (the default view is tested on its own)
ALL_TOOLSETS = {"X-Service-Toolsets": "all"}


@contextlib.asynccontextmanager
async def proxy_at(forward: Any) -> AsyncIterator[str]:
    """`forward` (an aiohttp handler) serving every method of `/mcp` on a free port; yields
    that MCP URL."""
    app = web.Application()
    app.router.add_route("*", "/mcp", forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        await runner.cleanup()


def client_headers(actor: Any) -> dict[str, str]:
    return {"X-Client-Id": actor.client_id, "X-Client-Secret": actor.client_secret}


def basic_headers(actor: Any) -> dict[str, str]:
    pair = base64.b64encode(f"{actor.client_id}:{actor.client_secret}".encode()).decode()
    return {"Authorization": f"Basic {pair}"}


@contextlib.asynccontextmanager
async def mcp_session(
    url: str, headers: dict[str, str], *, everything: bool = True
) -> AsyncIterator[ClientSession]:
    """A session of the official client; `everything`: the whole catalogue (unless the URL or
    the headers choose), else the default view."""
    sent = {**ALL_TOOLSETS, **headers} if everything else headers
    async with (
        httpx2.AsyncClient(headers=sent, timeout=60) as http,
        streamable_http_client(url, http_client=http, terminate_on_close=False) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def problem_of(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    if isinstance(result.structured_content, dict):
        return result.structured_content
    return {"text": text_of(result)}


def dumps(value: Any) -> str:
    return json.dumps(value, default=str)


@contextlib.asynccontextmanager
async def connector_mcp(stack: Any) -> AsyncIterator[Any]:
    """The MCP server with the browser OAuth connector on, as `cairn mcp` runs it."""
    from toolserver.app import running
    from toolserver.config import ToolServerConfig

    port = free_port()
    config = ToolServerConfig(
        api_url=stack.base_url,
        public_url=f"http://127.0.0.1:{port}/mcp",
        port=port,
        temporal_ui_url=TEMPORAL_UI,
        temporal_namespace=stack.settings.temporal_namespace,
        connector_secret=connector_secret(stack.settings.secret_bytes),
    )
    async with running(config) as server:
        yield server


class MemoryStorage:
    """The official OAuth client's token storage, in memory (an MCP host keeps it on disk)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info
