"""The HTTP contract of `POST /a2a` (its OpenAPI document says: a JSON object): a body that is
no JSON object (malformed JSON included) is a 400 problem; an object that is no valid JSON-RPC
request is JSON-RPC's own answer, in-band (-32600), as the protocol says. Found by the live
schemathesis acceptance run, which saw `{}` answered 200 while the document declared a binary
string."""

from __future__ import annotations

from typing import Any

import pytest
from actors import Actor

from api.openapi import build_openapi

A2A = {"A2A-Version": "1.0"}


async def post(agent: Actor, body: Any) -> tuple[int, Any, str]:
    async with agent.http.post("/a2a", json=body, headers={**agent.auth, **A2A}) as response:
        return response.status, await response.json(content_type=None), response.content_type


@pytest.mark.parametrize("body", [[], "a string", 3, [{"jsonrpc": "2.0"}]])
async def test_a_body_that_is_no_json_object_is_a_400_problem(actors: Any, body: Any) -> None:
    agent = await actors.agent()
    status, problem, content_type = await post(agent, body)
    assert status == 400 and content_type == "application/problem+json", problem
    assert problem["code"] == "validation-failed"


async def test_malformed_json_is_a_400_problem(actors: Any) -> None:
    agent = await actors.agent()
    headers = {**agent.auth, **A2A, "Content-Type": "application/json"}
    async with agent.http.post("/a2a", data=b":", headers=headers) as response:
        problem = await response.json(content_type=None)
        assert response.status == 400, problem
        assert problem["code"] == "validation-failed"


async def test_an_object_that_is_no_json_rpc_request_is_answered_in_band(actors: Any) -> None:
    agent = await actors.agent()
    status, body, _ = await post(agent, {})
    assert status == 200, body
    assert body["error"]["code"] == -32600


def test_openapi_documents_the_body_as_a_json_object() -> None:
    operation = build_openapi("http://localhost")["paths"]["/a2a"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert schema == {"type": "object"}
    assert "400" in operation["responses"]
