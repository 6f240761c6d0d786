"""Fixtures of the e2e tests: the MCP server beside the module's stack."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp_support import CHALLENGE_TOKEN, TEMPORAL_UI

from infra.devstack import free_port


@pytest.fixture(scope="module")
async def mcp_server(stack: Any) -> AsyncIterator[Any]:
    """`cairn mcp` (the same app) on a free port, talking to the stack's API over HTTP."""
    from toolserver.app import running
    from toolserver.config import ToolServerConfig

    port = free_port()
    config = ToolServerConfig(
        api_url=stack.base_url,
        public_url=f"http://127.0.0.1:{port}/mcp",
        port=port,
        temporal_ui_url=TEMPORAL_UI,
        temporal_namespace=stack.settings.temporal_namespace,
        challenge_token=CHALLENGE_TOKEN,
    )
    async with running(config) as server:
        yield server
