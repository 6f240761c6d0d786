"""The MCP server end to end: the official client over HTTP against the real stack.

The catalogue, its contract (snake_case arguments, typed schemas, hints), authentication by
each header form and its refusals, the prompt and the /.well-known/ challenge.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp
import httpx2
import pytest
from mcp_support import (
    CHALLENGE_TOKEN,
    basic_headers,
    client_headers,
    dumps,
    mcp_session,
    problem_of,
    structured,
    text_of,
)

from schemas.version import VERSION
from toolserver.contract import committed

SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
# spec 4.7
CATALOGUE = {
    "service_whoami", "agent_lookup",
    "diaries_list", "diaries_create", "diaries_get", "diary_tags", "diary_hygiene",
    "diary_grants_create", "diary_grants_revoke", "diary_grants_list",
    "teams_list", "teams_create", "teams_delete", "teams_join", "team_members_list",
    "team_member_update_role", "team_member_remove", "teams_invite_create",
    "teams_invite_list", "teams_invite_delete",
    "entries_create", "entries_get", "entries_list", "entries_update", "entries_delete",
    "entries_search",
    "relations_create", "relations_list", "relations_update", "relations_delete",
    "crypto_prepare_signature", "crypto_submit_signature", "crypto_signing_status",
    "crypto_verify",
    "tasks_schemas", "tasks_create", "tasks_continue", "tasks_get", "tasks_list",
    "tasks_cancel", "tasks_attempts_list", "tasks_messages_list", "tasks_artifacts_stage",
    "tasks_artifacts_list", "tasks_artifacts_upload", "tasks_artifacts_download",
    "tasks_console_link", "tasks_app_open", "entries_map_open",
    "packs_get", "packs_list", "packs_preview", "packs_create", "packs_update",
    "packs_render_preview", "packs_render", "rendered_packs_get", "rendered_packs_list",
    "rendered_packs_update", "packs_provenance", "packs_diff",
}  # fmt: skip
# beyond the spec's list: the two apps' own reads, hidden from the model (MCP Apps visibility)
APP_ONLY = {"tasks_app_counts", "entries_map_points"}
# beyond the spec's list, shown to the model: imports of memory files (issue 33 §2)
ISSUED = {"diaries_import"}


def _property_names(schema: Any) -> list[str]:
    """Every argument name in an input schema, nested objects and $defs included."""
    names: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                names += list(value)
                for sub in value.values():
                    # the task input is the REST type's own document, not our argument names
                    if not (isinstance(sub, dict) and sub.get("title") == "Input"):
                        names += _property_names(sub)
            elif key != "properties":
                names += _property_names(value)
    elif isinstance(schema, list):
        for item in schema:
            names += _property_names(item)
    return names


async def test_list_tools_is_the_catalogue_with_typed_snake_case_contracts(
    mcp_server: Any, actors: Any
) -> None:
    agent = await actors.agent()
    async with mcp_session(mcp_server.url, client_headers(agent)) as session:
        listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == CATALOGUE | APP_ONLY | ISSUED
    hidden = {
        n for n, t in tools.items() if (t.meta or {}).get("ui", {}).get("visibility") == ["app"]
    }
    assert hidden == APP_ONLY
    for name, tool in tools.items():
        assert tool.description and len(tool.description) >= 12, name
        assert tool.input_schema["type"] == "object", name
        assert tool.output_schema and tool.output_schema["type"] == "object", name
        bad = [arg for arg in _property_names(tool.input_schema) if not SNAKE.match(arg)]
        assert bad == [], (name, bad)
        hints = tool.annotations
        assert hints is not None and hints.read_only_hint is not None, name
        assert hints.destructive_hint is not None and hints.idempotent_hint is not None, name
    assert tools["entries_get"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["entries_delete"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["tasks_cancel"].input_schema["required"] == ["id", "team_id", "reason"]
    # what tools/list serves is the committed contract (spec 9)
    snapshot = committed()["tools"]
    assert {name: tool.input_schema for name, tool in tools.items()} == {
        name: entry["inputSchema"] for name, entry in snapshot.items()
    }


async def test_server_info_names_the_service_and_its_version(mcp_server: Any, actors: Any) -> None:
    agent = await actors.agent()
    headers = client_headers(agent)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
    ):
        from mcp.client.session import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async with (
            streamable_http_client(mcp_server.url, http_client=http) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            initialized = await session.initialize()
    assert initialized.server_info.name == "cairn"
    assert initialized.server_info.version == VERSION


# --- authentication ------------------------------------------------------------------------


async def test_each_header_form_authenticates(mcp_server: Any, actors: Any) -> None:
    agent = await actors.agent()
    for headers in (client_headers(agent), basic_headers(agent)):
        async with mcp_session(mcp_server.url, headers) as session:
            me = structured(await session.call_tool("service_whoami", {}))
        assert me["subjectId"] == str(agent.subject_id)
        assert me["fingerprint"] == agent.fingerprint
        assert me["publicKey"] == agent.public_key
        assert me["clientId"] == agent.client_id
        assert me["identityId"] == str(agent.identity_id)


async def _raw_post(url: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, data=body, headers={**sent, **headers}) as response,
    ):
        return response.status, await response.json(content_type=None)


@pytest.mark.parametrize(
    "form",
    ["none", "wrong-secret", "unknown-client", "basic-wrong", "basic-garbage", "rest-jwt",
     "unknown-agent-key"],
)  # fmt: skip
async def test_refusals_are_401_before_any_message_is_parsed(
    mcp_server: Any, actors: Any, form: str
) -> None:
    agent = await actors.agent()
    secret = agent.client_secret
    headers = {
        "none": {},
        "wrong-secret": {"X-Client-Id": agent.client_id, "X-Client-Secret": secret[:-2] + "xx"},
        "unknown-client": {"X-Client-Id": "no-such-client", "X-Client-Secret": secret},
        "basic-wrong": basic_headers(type("A", (), {"client_id": agent.client_id,
                                                    "client_secret": "nope"})()),
        "basic-garbage": {"Authorization": "Basic %%%not-base64"},
        "rest-jwt": agent.auth,  # a REST access token is never accepted as the MCP bearer
        "unknown-agent-key": {"Authorization": "Bearer service_ak_unknown0000000000"},
    }[form]  # fmt: skip
    # not even JSON: a 401 proves the body was never parsed
    status, body = await _raw_post(mcp_server.url, headers, b"{this is not json")
    assert status == 401, body
    assert body["error"] in {"invalid_request", "invalid_client", "invalid_token"}
    assert secret not in str(body)


async def _personal_team(agent: Any) -> str:
    status, body = await agent.call("GET", "/teams")
    assert status == 200, body
    return str(next(team["id"] for team in body["items"] if team["personal"]))


async def test_an_agent_key_bearer_acts_as_its_agent_until_revoked(
    mcp_server: Any, actors: Any
) -> None:
    agent = await actors.agent()
    team = await _personal_team(agent)
    # bound to the identity: a team-bound key needs x-service-team-id on every REST call
    payload = {
        "agentId": str(agent.subject_id),
        "name": "mcp",
        "bindingScope": "identity",
        "scopes": ["agent:profile", "pack:read"],
    }
    status, key = await agent.call(
        "POST", "/agent-keys", json=payload, headers={"Idempotency-Key": "mcp-key"}
    )
    assert status == 201, key
    assert key["secret"].startswith("service_ak_")
    bearer = {"Authorization": f"Bearer {key['secret']}"}

    async with mcp_session(mcp_server.url, bearer) as session:
        me = structured(await session.call_tool("service_whoami", {}))
        assert me["subjectId"] == str(agent.subject_id)
        packs = structured(await session.call_tool("packs_list", {"team_id": team}))
        assert packs["total"] == 0
        # the key lacks pack:write: the API refuses the call, the server reports it
        refused = problem_of(
            await session.call_tool(
                "packs_create",
                {"diary_id": str(agent.subject_id), "entries": [{"entry_id": team, "rank": 1}]},
            )
        )
        assert refused["status"] == 403

    status, revoked = await agent.call(
        "POST",
        f"/agent-keys/{key['id']}/revoke",
        params={"bindingScope": "identity"},
        json={"reason": "superseded"},
    )
    assert status == 200, revoked
    async with mcp_session(mcp_server.url, bearer) as session:
        # the gate remembered the key for a minute: the API refuses it, the server forgets it
        gone = problem_of(await session.call_tool("service_whoami", {}))
        assert gone["status"] == 401
    status, body = await _raw_post(mcp_server.url, bearer, b"{this is not json")
    assert status == 401, body
    assert key["secret"] not in str(body)


async def _team_key(agent: Any, team: str) -> str:
    """A key bound to `team`, with the daemon's minimum scopes (task:read among them)."""
    status, key = await agent.call(
        "POST",
        "/agent-keys",
        json={"agentId": str(agent.subject_id), "name": "mcp-team"},
        headers={"Idempotency-Key": f"mcp-team-{team}", "x-service-team-id": team},
    )
    assert status == 201, key
    assert key["bindingScope"] == "team" and key["teamId"] == team
    return str(key["secret"])


async def test_a_team_key_acts_in_the_team_its_team_header_names(
    mcp_server: Any, actors: Any
) -> None:
    agent, stranger = await actors.agent(), await actors.agent()
    team, other_team = await _personal_team(agent), await _personal_team(stranger)
    secret = await _team_key(agent, team)
    bearer = {"Authorization": f"Bearer {secret}"}

    # with its team: every REST call of the request carries it
    async with mcp_session(mcp_server.url, {**bearer, "X-Service-Team-Id": team}) as session:
        me = structured(await session.call_tool("service_whoami", {}))
        assert me["subjectId"] == str(agent.subject_id)
        schemas = structured(await session.call_tool("tasks_schemas", {}))
        assert "freeform" in {item["taskType"] for item in schemas["items"]}
        listed = structured(await session.call_tool("tasks_list", {"team_id": team}))
        assert listed["items"] == []
        # an explicit team_id still decides the team a call addresses: the key's is not it
        elsewhere = problem_of(await session.call_tool("tasks_list", {"team_id": other_team}))
        assert (elsewhere["status"], elsewhere["code"]) == (403, "key-team-mismatch")

    # without it: the spec's refusal (5.4 rule 4), as the tool's error result
    async with mcp_session(mcp_server.url, bearer) as session:
        missing = problem_of(await session.call_tool("tasks_schemas", {}))
        assert (missing["status"], missing["code"]) == (403, "key-team-header-required")

    # another team's id: refused by the key's binding
    async with mcp_session(mcp_server.url, {**bearer, "X-Service-Team-Id": other_team}) as session:
        wrong = problem_of(await session.call_tool("tasks_schemas", {}))
        assert (wrong["status"], wrong["code"]) == (403, "key-team-mismatch")
    assert secret not in dumps(wrong)


async def test_concurrent_callers_each_keep_their_own_team(mcp_server: Any, actors: Any) -> None:
    """The team travels with its request (the ASGI scope), never in shared state: two team keys
    of two teams, their calls interleaved, each acts in its own team."""
    callers = [await actors.agent(), await actors.agent()]
    teams = [await _personal_team(caller) for caller in callers]
    headers = [
        {"Authorization": f"Bearer {await _team_key(caller, team)}", "X-Service-Team-Id": team}
        for caller, team in zip(callers, teams, strict=True)
    ]
    async with (
        mcp_session(mcp_server.url, headers[0]) as first,
        mcp_session(mcp_server.url, headers[1]) as second,
    ):
        calls = [
            session.call_tool("tasks_list", {"team_id": team})
            for _ in range(8)
            for session, team in ((first, teams[0]), (second, teams[1]))
        ] + [
            session.call_tool("tasks_schemas", {}) for _ in range(8) for session in (first, second)
        ]
        results = await asyncio.gather(*calls)
    assert [result.is_error for result in results] == [False] * len(calls), [
        text_of(result) for result in results if result.is_error
    ]


async def test_an_identity_key_needs_no_team_header(mcp_server: Any, actors: Any) -> None:
    agent, stranger = await actors.agent(), await actors.agent()
    team, other_team = await _personal_team(agent), await _personal_team(stranger)
    payload = {
        "agentId": str(agent.subject_id),
        "name": "mcp-identity",
        "bindingScope": "identity",
        "scopes": ["agent:profile", "task:read"],
    }
    status, key = await agent.call(
        "POST", "/agent-keys", json=payload, headers={"Idempotency-Key": "mcp-identity-key"}
    )
    assert status == 201, key
    bearer = {"Authorization": f"Bearer {key['secret']}"}
    async with mcp_session(mcp_server.url, bearer) as session:
        structured(await session.call_tool("tasks_schemas", {}))
        assert structured(await session.call_tool("tasks_list", {"team_id": team}))["items"] == []
    # a team header is the team the call acts in: only where the agent is a member
    async with mcp_session(mcp_server.url, {**bearer, "X-Service-Team-Id": team}) as session:
        structured(await session.call_tool("tasks_schemas", {}))
    async with mcp_session(mcp_server.url, {**bearer, "X-Service-Team-Id": other_team}) as session:
        outsider = problem_of(await session.call_tool("tasks_schemas", {}))
        assert (outsider["status"], outsider["code"]) == (403, "key-team-not-authorized")


@pytest.mark.parametrize("value", ["not-a-uuid", "", "123", "' OR 1=1 --"])
async def test_a_malformed_team_header_is_400_before_any_message_is_parsed(
    mcp_server: Any, actors: Any, value: str
) -> None:
    agent = await actors.agent()
    headers = {**client_headers(agent), "X-Service-Team-Id": value}
    status, body = await _raw_post(mcp_server.url, headers, b"{this is not json")
    assert status == 400, body
    assert (
        body["error"] == "invalid_request"
        and "X-Service-Team-Id".lower() in body["error_description"].lower()
    )
    # no credentials at all is still the 401 of the credential check
    status, body = await _raw_post(mcp_server.url, {"X-Service-Team-Id": value}, b"{}")
    assert status == 401, body


async def test_transport_security_accepts_only_known_hosts(mcp_server: Any, actors: Any) -> None:
    agent = await actors.agent()
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    headers = {**client_headers(agent), "mcp-protocol-version": "2025-11-25"}
    status, _ = await _raw_post(mcp_server.url, headers, ping)
    assert status == 200
    rebinding = {**headers, "Host": "evil.example:8001"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            mcp_server.url,
            data=ping,
            headers={
                **rebinding,
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
            },
        ) as response,
    ):
        assert response.status in (400, 403, 421)


async def test_the_token_is_exchanged_once_per_client_and_renewed_on_401(
    mcp_server: Any, actors: Any
) -> None:
    agent = await actors.agent()
    backend = mcp_server.backend
    before = backend.token_exchanges
    for _ in range(3):
        async with mcp_session(mcp_server.url, client_headers(agent)) as session:
            structured(await session.call_tool("diaries_list", {}))
    assert backend.token_exchanges == before + 1
    # a token the API no longer accepts (here: forged into the cache) is renewed once
    from client.rest import ClientCredentials

    key = ClientCredentials(agent.client_id, agent.client_secret).cache_key
    backend.tokens._tokens[key].value = "not-a-valid-token"
    async with mcp_session(mcp_server.url, client_headers(agent)) as session:
        structured(await session.call_tool("diaries_list", {}))
    assert backend.token_exchanges == before + 2


async def test_a_secret_never_appears_in_results_or_errors(
    mcp_server: Any, actors: Any, caplog: pytest.LogCaptureFixture
) -> None:
    agent = await actors.agent()
    caplog.set_level("DEBUG")
    async with mcp_session(mcp_server.url, client_headers(agent)) as session:
        results = [
            await session.call_tool("service_whoami", {}),
            await session.call_tool(
                "diaries_get", {"diary_id": "00000000-0000-0000-0000-0000000000aa"}
            ),
            await session.call_tool("entries_get", {"entry_id": "not-a-uuid"}),
        ]
    wrong = {"X-Client-Id": agent.client_id, "X-Client-Secret": agent.client_secret + "x"}
    await _raw_post(mcp_server.url, wrong, b"{}")
    seen = " ".join(str(r.model_dump()) for r in results) + caplog.text
    assert agent.client_secret not in seen


# --- the prompt and the challenge ----------------------------------------------------------


async def test_sign_message_prompt_walks_the_signing_flow(mcp_server: Any, actors: Any) -> None:
    agent = await actors.agent()
    async with mcp_session(mcp_server.url, client_headers(agent)) as session:
        listed = await session.list_prompts()
        assert [p.name for p in listed.prompts] == ["sign_message"]
        assert [a.name for a in listed.prompts[0].arguments or []] == ["message"]
        prompt = await session.get_prompt("sign_message", {"message": "hello cairn"})
        text = prompt.messages[0].content.text  # type: ignore[union-attr]
        steps = ["crypto_prepare_signature", "crypto_submit_signature", "crypto_signing_status"]
        assert all(step in text for step in steps) and "hello cairn" in text
        # and the flow it describes works, step by step
        prepared = structured(
            await session.call_tool("crypto_prepare_signature", {"message": "hello cairn"})
        )
        assert prepared["signingInput"] == f"hello cairn.{prepared['nonce']}"
        signature = agent.sign(prepared["signingInput"])
        submitted = await session.call_tool(
            "crypto_submit_signature", {"id": prepared["id"], "signature": signature}
        )
        assert structured(submitted) == {"status": "completed", "valid": True}
        status = structured(
            await session.call_tool("crypto_signing_status", {"id": prepared["id"]})
        )
        assert status["status"] == "completed" and status["valid"] is True
        verified = await session.call_tool(
            "crypto_verify",
            {
                "message": "hello cairn",
                "signature": signature,
                "fingerprint": agent.fingerprint,
                "nonce": prepared["nonce"],
            },
        )
        assert structured(verified) == {"valid": True}
        bad = await session.call_tool("crypto_submit_signature", {"id": prepared["id"]})
        assert bad.is_error and "signature" in text_of(bad)
        neither = await session.call_tool("crypto_verify", {"message": "x", "signature": "AA=="})
        assert problem_of(neither)["status"] == 400


async def test_well_known_challenge_is_public_and_configured(mcp_server: Any) -> None:
    base = mcp_server.url.removesuffix("/mcp")
    async with aiohttp.ClientSession() as http:
        async with http.get(base + "/.well-known/openai-apps-challenge") as response:
            assert response.status == 200
            assert await response.text() == CHALLENGE_TOKEN
        async with http.get(base + "/.well-known/other") as response:
            assert response.status == 404


async def test_challenge_is_404_when_unset(stack: Any) -> None:
    from infra.devstack import free_port
    from toolserver.app import running
    from toolserver.config import ToolServerConfig

    port = free_port()
    async with running(ToolServerConfig(api_url=stack.base_url, port=port)) as server:
        base = server.url.removesuffix("/mcp")
        async with (
            aiohttp.ClientSession() as http,
            http.get(base + "/.well-known/openai-apps-challenge") as response,
        ):
            assert response.status == 404
