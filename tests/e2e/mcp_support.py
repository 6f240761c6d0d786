"""The MCP server on a free port beside the test stack, and sessions of the official client
(`mcp.client.streamable_http`) over real HTTP."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

CHALLENGE_TOKEN = "challenge-token-0123456789"
TEMPORAL_UI = "http://temporal-ui.test:8233"


def client_headers(actor: Any) -> dict[str, str]:
    return {"X-Client-Id": actor.client_id, "X-Client-Secret": actor.client_secret}


def basic_headers(actor: Any) -> dict[str, str]:
    pair = base64.b64encode(f"{actor.client_id}:{actor.client_secret}".encode()).decode()
    return {"Authorization": f"Basic {pair}"}


@contextlib.asynccontextmanager
async def mcp_session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
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
