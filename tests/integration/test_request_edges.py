"""The edges of a request, on the running API (issue 23): unstorable text anywhere is a 400
naming its JSON pointer, integers beyond their column are a 400, JSON bodies are read by JSON's
own types, array query parameters take repeats and commas, and the server's own refusals of an
oversized request line or header are 414 / 431 problems."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from actors import Actor, new_diary, personal_team

from schemas import limits

PROBLEM = "application/problem+json"


async def _raw_json(actor: Actor, method: str, path: str, text: str) -> tuple[int, Any]:
    """Send JSON text as written: the client's encoder cannot carry a lone surrogate escape."""
    headers = {"Content-Type": "application/json"}
    return await actor.call(method, path, data=text.encode(), headers=headers)


def _pointers(problem: dict[str, Any]) -> list[str]:
    return [error["pointer"] for error in problem.get("errors", [])]


@pytest.fixture(scope="module")
async def agent(actors: Any) -> Actor:
    return await actors.agent()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
async def diary(agent: Actor) -> dict[str, Any]:
    return await new_diary(agent)


async def test_a_nul_in_a_search_query_is_a_400_naming_it(agent: Actor) -> None:
    status, problem = await agent.call("POST", "/diary/search", json={"query": "find\x00me"})
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert _pointers(problem) == ["/query"] and "/query" in problem["detail"]


async def test_a_lone_surrogate_in_a_tag_is_named_by_its_index(agent: Actor, diary: Any) -> None:
    text = '{"content": "fine", "tags": ["a", "b", "c", "x\\ud800"]}'
    status, problem = await _raw_json(agent, "POST", f"/diaries/{diary['id']}/entries", text)
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert _pointers(problem) == ["/tags/3"]
    status, listed = await agent.call("GET", f"/diaries/{diary['id']}/entries")
    assert status == 200 and listed["items"] == [], listed


async def test_unstorable_text_in_free_form_json_is_named(agent: Actor, diary: Any) -> None:
    entry = await agent.call("POST", f"/diaries/{diary['id']}/entries", json={"content": "x"})
    body = {"entries": [{"entryId": entry[1]["id"], "rank": 1}], "params": {"note": "a\x00"}}
    status, problem = await agent.call("POST", f"/diaries/{diary['id']}/packs", json=body)
    assert (status, problem["code"]) == (400, "validation-failed")
    assert _pointers(problem) == ["/params/note"], problem


async def test_a_nul_in_a_query_or_path_value_is_a_400(agent: Actor) -> None:
    team = await personal_team(agent)
    status, problem = await agent.call("GET", "/tasks", params={"cursor": "a\x00"}, team=team)
    assert (status, problem["code"]) == (400, "validation-failed")
    assert _pointers(problem) == ["/query/cursor"], problem
    status, problem = await agent.call("GET", "/agents/abcd%00efgh")
    assert (status, problem["code"]) == (400, "validation-failed")
    assert _pointers(problem) == ["/path/fingerprint"], problem


async def test_a_one_value_query_parameter_given_twice_is_a_400(agent: Actor) -> None:
    """Which of two values was meant cannot be told: refused, on the REST API and on a console
    page alike (found by the live schemathesis run: a page took the first of several)."""
    team = await personal_team(agent)
    params = [("limit", "5"), ("limit", "6")]
    status, problem = await agent.call("GET", "/tasks", params=params, team=team)
    assert (status, problem["code"]) == (400, "validation-failed")
    assert _pointers(problem) == ["/query/limit"], problem
    status, listed = await agent.call("GET", "/tasks", params=[("limit", "5")], team=team)
    assert status == 200, listed
    page = [("done", "profile-saved"), ("done", "x")]
    async with agent.http.get("/console/", params=page, allow_redirects=False) as response:
        assert response.status == 400 and "/query/done" in await response.text()


async def test_a_nul_in_a_form_body_is_a_400(agent: Actor) -> None:
    form = {"grant_type": "client_credentials", "client_id": "a\x00", "client_secret": "b"}
    async with agent.http.post("/oauth2/token", data=form) as response:
        status, body = response.status, await response.json(content_type=None)
    assert status in (400, 401), body  # RFC 6749's own error body, never a 500


async def test_a_pack_rank_beyond_a_postgres_integer_is_a_400(agent: Actor, diary: Any) -> None:
    entry = await agent.call("POST", f"/diaries/{diary['id']}/entries", json={"content": "r"})
    body = {"entries": [{"entryId": entry[1]["id"], "rank": 121660867788975}]}
    status, problem = await agent.call("POST", f"/diaries/{diary['id']}/packs", json=body)
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert _pointers(problem) == ["/entries/0/rank"]


async def test_a_json_body_is_read_by_json_types(agent: Actor) -> None:
    team = await personal_team(agent)
    body = {"name": "strict", "visibility": "private", "signed": 0}
    status, problem = await agent.call("POST", "/diaries", json=body, team=team)
    assert (status, problem["code"]) == (400, "validation-failed")
    assert _pointers(problem) == ["/signed"], problem
    status, problem = await agent.call("POST", "/diary/search", json={"query": "q", "limit": "5"})
    assert status == 400 and _pointers(problem) == ["/limit"], problem


async def test_task_type_filters_take_the_repeated_key_and_the_comma_form(agent: Actor) -> None:
    team = await personal_team(agent)
    diary = await new_diary(agent)
    made = {}
    for task_type in ("freeform", "fulfill_brief"):
        body = {
            "taskType": task_type,
            "teamId": team,
            "diaryId": diary["id"],
            "input": {"brief": "b"},
        }
        status, task = await agent.call("POST", "/tasks", json=body, team=team)
        assert status == 201, task
        made[task_type] = task["id"]
    for query in ("taskTypes=freeform&taskTypes=fulfill_brief", "taskTypes=freeform,fulfill_brief"):
        status, listed = await agent.call("GET", f"/tasks?{query}", team=team)
        assert status == 200, listed
        assert {item["taskType"] for item in listed["items"]} == {"freeform", "fulfill_brief"}
    status, listed = await agent.call("GET", "/tasks?taskTypes=fulfill_brief", team=team)
    assert [item["id"] for item in listed["items"]] == [made["fulfill_brief"]]


# --- the HTTP parser's own refusals ----------------------------------------------------------


async def _raw_request(base_url: str, head: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send a request head byte for byte; the status, headers and body of the answer."""
    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        writer.write(head)
        await writer.drain()
        answer = await reader.read()  # the server closes the connection after an error
    finally:
        writer.close()
    head_text, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head_text.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    return int(status_line.split()[1]), headers, body


def _problem_of(headers: dict[str, str], body: bytes, status: int) -> dict[str, Any]:
    assert headers["content-type"].startswith(PROBLEM), headers
    problem: dict[str, Any] = json.loads(body)
    assert problem["status"] == status and problem["type"].endswith(problem["code"])
    return problem


async def test_a_request_line_over_8_kib_is_a_414_problem(stack: Any) -> None:
    target = "/health?pad=" + "a" * limits.REQUEST_LINE_MAX_BYTES
    head = f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    status, headers, body = await _raw_request(stack.base_url, head)
    assert status == 414
    assert _problem_of(headers, body, 414)["code"] == "uri-too-long"


async def test_a_header_over_8_kib_or_too_many_headers_is_a_431_problem(stack: Any) -> None:
    big = f"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: {'b' * 9000}\r\n\r\n".encode()
    many = "".join(f"X-H{n}: v\r\n" for n in range(limits.REQUEST_HEADERS_MAX + 1))
    crowded = f"GET /health HTTP/1.1\r\nHost: x\r\n{many}\r\n".encode()
    for head in (big, crowded):
        status, headers, body = await _raw_request(stack.base_url, head)
        assert status == 431
        assert _problem_of(headers, body, 431)["code"] == "header-fields-too-large"


async def test_a_malformed_request_is_a_400_problem(stack: Any) -> None:
    status, headers, body = await _raw_request(
        stack.base_url, b"GET /health HTTP/1.1\r\nBad\r\n\r\n"
    )
    assert status == 400
    assert _problem_of(headers, body, 400)["code"] == "malformed-request"


async def test_a_request_within_the_limits_is_served(stack: Any) -> None:
    target = "/health?pad=" + "a" * 7000
    head = f"GET {target} HTTP/1.1\r\nHost: x\r\nX-Pad: {'b' * 7000}\r\nConnection: close\r\n\r\n"
    status, _, _ = await _raw_request(stack.base_url, head.encode())
    assert status == 200


async def test_the_openapi_document_lists_414_and_431(agent: Actor) -> None:
    status, document = await agent.call("GET", "/openapi.json")
    assert status == 200
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert {"414", "431"} <= set(operation["responses"]), (method, path)


async def test_a_header_that_is_not_utf8_is_never_a_500(stack: Any, agent: Actor) -> None:
    head = b"GET /agents/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\r\n"
    head += b"X-Session-Token: \xff\r\nIdempotency-Key: \xff\r\nConnection: close\r\n\r\n"
    status, headers, body = await _raw_request(stack.base_url, head)
    assert status == 400, body
    assert _pointers(_problem_of(headers, body, 400))[0].startswith("/headers/")


async def test_a_405_allows_only_the_methods_of_the_route_its_path_names(agent: Actor) -> None:
    """`/teams/join` is its own route (POST): `/teams/{id}`'s GET and DELETE are not allowed."""
    async with agent.http.options("/teams/join", headers=agent.auth) as response:
        assert response.status == 405
        assert set(response.headers["Allow"].split(",")) == {"POST"}


async def test_a_literal_path_asked_with_another_method_is_a_405(agent: Actor) -> None:
    """`GET /teams/join` is not `GET /teams/{id}` with the id `join`."""
    async with agent.http.get("/teams/join", headers=agent.auth) as response:
        assert response.status == 405
        assert set(response.headers["Allow"].split(",")) == {"POST"}


async def test_a_405_allows_every_method_of_its_path(agent: Actor, diary: Any) -> None:
    """A path's methods may be declared on several routes: `Allow` names them all."""
    async with agent.http.options(f"/diaries/{diary['id']}/packs", headers=agent.auth) as answer:
        assert answer.status == 405
        assert {"GET", "POST"} <= set(answer.headers["Allow"].split(","))
