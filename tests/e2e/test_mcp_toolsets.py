"""What a connection sees (toolserver.toolsets), end to end with the official client: the
default view and its discovery tool, toolsets by query and header (`all`: the whole catalogue),
narrowed by the credential's scopes, the read-only mode, hidden tools (the apps' own included)
failing as unknown ones, the stable order, and the 2026-07-28 cache hints. The enabled toolsets
across two `cairn mcp` replicas: tests/e2e/test_mcp_replicas.py."""

from __future__ import annotations

import json
import uuid
from typing import Any

import aiohttp
import httpx2
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_support import ALL_TOOLSETS, client_headers, mcp_session, structured, text_of
from mcp_types import ToolListChangedNotification

from toolserver.registry import CATALOGUE
from toolserver.toolsets import COOKIE, DISCOVERY_NAME, TOOLSETS, app_only

APP_ONLY = {d.name for d in CATALOGUE if app_only(d)}
READ_ONLY = {d.name for d in CATALOGUE if d.read_only}
DEFAULT_BUDGET = 10


def members(*toolsets: str) -> set[str]:
    return {d.name for d in CATALOGUE if d.toolset in toolsets}


async def listed(url: str, headers: dict[str, str], *, everything: bool = True) -> list[str]:
    async with mcp_session(url, headers, everything=everything) as session:
        return [tool.name for tool in (await session.list_tools()).tools]


async def test_without_a_choice_a_connection_sees_the_default_view(
    mcp_server: Any, actors: Any
) -> None:
    agent = await actors.agent()
    names = await listed(mcp_server.url, client_headers(agent), everything=False)
    assert len(names) <= DEFAULT_BUDGET and DISCOVERY_NAME in names
    assert {"entries_create", "entries_search", "entries_get", "diaries_list"} <= set(names)
    assert not APP_ONLY & set(names)  # the apps' own reads no longer leak into every view
    # `all` by query or header: the whole catalogue
    assert set(await listed(f"{mcp_server.url}?toolsets=all", client_headers(agent))) == {
        d.name for d in CATALOGUE
    }


class Notifications:
    """What the server sent the client besides answers."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            self.methods.append(message.method)


async def test_the_discovery_tool_enables_a_toolset_for_the_connection(
    mcp_server: Any, actors: Any
) -> None:
    agent = await actors.agent()
    heard = Notifications()
    async with (
        httpx2.AsyncClient(headers=client_headers(agent), timeout=60) as http,
        streamable_http_client(mcp_server.url, http_client=http) as streams,
        ClientSession(streams[0], streams[1], message_handler=heard) as session,
    ):
        await session.initialize()
        before = {tool.name for tool in (await session.list_tools()).tools}
        hidden = await session.call_tool("teams_list", {})
        offered = structured(await session.call_tool(DISCOVERY_NAME, {}))
        enabled = structured(await session.call_tool(DISCOVERY_NAME, {"toolset": "teams"}))
        after = {tool.name for tool in (await session.list_tools()).tools}
        teams = await session.call_tool("teams_list", {})
        cookie = http.cookies.get(COOKIE)
    assert text_of(hidden) == "Unknown tool: teams_list"
    assert {t["name"] for t in offered["toolsets"]} == set(TOOLSETS)
    assert all(t["about"] and not t["enabled"] for t in offered["toolsets"])
    assert enabled["enabled"] == "teams"
    assert [t["name"] for t in enabled["toolsets"] if t["enabled"]] == ["teams"]
    assert "notifications/tools/list_changed" in heard.methods
    assert after == before | members("teams")
    assert not teams.is_error, text_of(teams)
    assert cookie == "teams"


async def test_a_toolset_beyond_the_scopes_cannot_be_enabled(mcp_server: Any, actors: Any) -> None:
    agent = await actors.agent()
    key = await scoped_key(agent, ["agent:profile", "diary:read", "diary:write"], "no-tasks")
    async with mcp_session(mcp_server.url, key, everything=False) as session:
        refused = await session.call_tool(DISCOVERY_NAME, {"toolset": "tasks"})
        names = {tool.name for tool in (await session.list_tools()).tools}
    assert refused.is_error and (refused.structured_content or {})["code"] == "missing-scope"
    assert not names & members("tasks")  # neither the task loop nor the apps' counts


async def test_toolsets_are_chosen_per_connection_by_query_or_header(
    mcp_server: Any, actors: Any
) -> None:
    agent = await actors.agent()
    headers = client_headers(agent)
    everything = await listed(mcp_server.url, headers)
    assert set(everything) == {d.name for d in CATALOGUE}
    assert everything == sorted(everything)  # a stable order, by name

    memory = await listed(f"{mcp_server.url}?toolsets=memory", headers)
    assert set(memory) == members("memory")
    by_header = await listed(mcp_server.url, {**headers, "X-Service-Toolsets": "tasks, teams"})
    assert set(by_header) == members("tasks", "teams")
    # the query wins over the header
    both = await listed(
        f"{mcp_server.url}?toolsets=crypto", {**headers, "X-Service-Toolsets": "tasks"}
    )
    assert set(both) == members("crypto")


async def test_read_only_mode_lists_only_read_only_tools(mcp_server: Any, actors: Any) -> None:
    agent = await actors.agent()
    headers = client_headers(agent)
    by_query = await listed(f"{mcp_server.url}?readonly=true", headers)
    assert set(by_query) == READ_ONLY
    assert "entries_search" in by_query and "entries_create" not in by_query
    by_header = await listed(
        f"{mcp_server.url}?toolsets=memory", {**headers, "X-Service-Read-Only": "true"}
    )
    assert set(by_header) == members("memory") & READ_ONLY


async def test_a_hidden_tool_fails_as_an_unknown_tool(mcp_server: Any, actors: Any) -> None:
    agent = await actors.agent()
    headers = client_headers(agent)
    async with mcp_session(f"{mcp_server.url}?toolsets=memory&readonly=1", headers) as session:
        hidden = await session.call_tool("teams_list", {})
        writing = await session.call_tool("diaries_create", {"team_id": str(agent.subject_id)})
        unknown = await session.call_tool("no_such_tool", {})
        # the apps' own reads follow their toolset: the task queue's is hidden here, the
        # diary map's stays callable (the host keeps it from the model)
        counts = await session.call_tool("tasks_app_counts", {"team_id": str(agent.subject_id)})
        points = await session.call_tool("entries_map_points", {"diary_id": str(uuid.uuid4())})
        shown = await session.call_tool("diaries_list", {})
    assert hidden.is_error and text_of(hidden) == "Unknown tool: teams_list"
    assert writing.is_error and text_of(writing) == "Unknown tool: diaries_create"
    assert unknown.is_error and text_of(unknown) == "Unknown tool: no_such_tool"
    assert text_of(counts) == "Unknown tool: tasks_app_counts"
    assert "Unknown tool" not in text_of(points)
    assert not shown.is_error, text_of(shown)


async def test_an_unknown_toolset_is_refused_before_any_message(
    mcp_server: Any, actors: Any
) -> None:
    agent = await actors.agent()
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{mcp_server.url}?toolsets=memory,everything",
            headers={**client_headers(agent), "content-type": "application/json"},
            data=b"{}",
        ) as refused,
    ):
        body = await refused.json()
    assert refused.status == 400
    assert "everything" in body["error_description"]


async def scoped_key(agent: Any, scopes: list[str], name: str) -> dict[str, str]:
    """An identity-bound agent key of `agent` with these scopes, as a bearer header."""
    payload = {
        "agentId": str(agent.subject_id),
        "name": name,
        "bindingScope": "identity",
        "scopes": scopes,
    }
    status, key = await agent.call(
        "POST", "/agent-keys", json=payload, headers={"Idempotency-Key": f"toolsets-{name}"}
    )
    assert status == 201, key
    return {"Authorization": f"Bearer {key['secret']}"}


async def test_the_credential_scopes_narrow_the_toolsets(mcp_server: Any, actors: Any) -> None:
    agent = await actors.agent()
    bearer = await scoped_key(agent, ["agent:profile", "diary:read", "diary:write"], "memory")
    names = await listed(mcp_server.url, bearer)
    # no task, pack or signing scope: those toolsets are not shown
    assert set(names) == members("memory", "teams", "identity")
    # asking for tasks does not widen what the scopes allow
    assert set(await listed(f"{mcp_server.url}?toolsets=tasks,memory", bearer)) == members("memory")
    async with mcp_session(mcp_server.url, bearer) as session:
        refused = await session.call_tool("tasks_list", {"team_id": str(agent.subject_id)})
    assert text_of(refused) == "Unknown tool: tasks_list"
    assert set(TOOLSETS) == {"memory", "packs", "tasks", "teams", "identity", "crypto"}


async def test_lists_carry_cache_hints_at_2026_07_28_only(mcp_server: Any, actors: Any) -> None:
    agent = await actors.agent()
    headers = {**client_headers(agent), **ALL_TOOLSETS}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(
            streamable_http_client(mcp_server.url, http_client=http), mode="2026-07-28"
        ) as modern,
    ):
        tools = await modern.list_tools()
        prompts = await modern.list_prompts()
    assert (tools.ttl_ms, tools.cache_scope) == (300_000, "private")
    assert (prompts.ttl_ms, prompts.cache_scope) == (300_000, "public")
    names = [tool.name for tool in tools.tools]
    assert names == sorted(names) and set(names) == {d.name for d in CATALOGUE}

    # a 2025-11-25 client gets the list as before, without the new fields
    async with (
        aiohttp.ClientSession() as raw,
        raw.post(
            mcp_server.url,
            headers={
                **headers,
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2025-11-25",
            },
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        ) as answer,
    ):
        legacy = await answer.json()
    assert answer.status == 200, legacy
    assert "ttlMs" not in legacy["result"] and "cacheScope" not in legacy["result"]
    assert [tool["name"] for tool in legacy["result"]["tools"]] == names


async def enabling_answer(url: str, headers: dict[str, str], accept: str) -> Any:
    """A raw 2025-11-25 `tools/call` of the discovery tool: (status, content type, cookie,
    body)."""
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": DISCOVERY_NAME, "arguments": {"toolset": "crypto"}},
    }
    sent = {
        **headers,
        "content-type": "application/json",
        "accept": accept,
        "mcp-protocol-version": "2025-11-25",
    }
    async with aiohttp.ClientSession() as raw, raw.post(url, headers=sent, json=call) as answer:
        body = await answer.text()
        return answer.status, answer.content_type, answer.cookies.get(COOKIE), body


async def test_the_enabling_answer_is_sse_only_for_a_client_that_accepts_it(
    mcp_server: Any, actors: Any
) -> None:
    agent = await actors.agent()
    headers = client_headers(agent)
    status, kind, cookie, body = await enabling_answer(
        mcp_server.url, headers, "application/json, text/event-stream"
    )
    assert (status, kind) == (200, "text/event-stream")
    assert cookie is not None and cookie.value == "crypto" and cookie["path"] == "/mcp"
    events = [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data")]
    assert json.loads(events[0])["method"] == "notifications/tools/list_changed"
    assert json.loads(events[1])["result"]["structuredContent"]["enabled"] == "crypto"

    status, kind, cookie, body = await enabling_answer(mcp_server.url, headers, "application/json")
    assert (status, kind) == (200, "application/json")
    assert cookie is not None and cookie.value == "crypto"
    assert json.loads(body)["result"]["structuredContent"]["enabled"] == "crypto"
