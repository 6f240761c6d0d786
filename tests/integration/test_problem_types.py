"""Problem `type` URIs resolve (DECISIONS "Trust at the edges"): a problem's type is
`{base_url}/problems/{code}`, and GET there describes the code from the one catalogue of
`schemas/errors.py`; `GET /problems` lists every code. Anonymous, on the real stack."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from schemas.errors import problem_types

PROBLEM_JSON = "application/problem+json"


@pytest.fixture(scope="module")
async def http(stack: Any) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=stack.base_url) as session:
        yield session


async def get(http: aiohttp.ClientSession, url: str, **headers: str) -> tuple[int, Any, str]:
    async with http.get(url, headers=headers) as response:
        return response.status, await response.text(), response.content_type


@pytest.mark.parametrize(
    "path,code",
    [
        ("/agents/whoami", "unauthorized"),
        ("/public/feed?limit=0", "validation-failed"),
        ("/nowhere", "not-found"),
        ("/tasks?limit=0", "unauthorized"),
    ],
)
async def test_a_problems_type_uri_describes_its_code(stack, http, path: str, code: str) -> None:
    async with http.get(path) as response:
        problem = await response.json(content_type=PROBLEM_JSON)
    assert problem["code"] == code
    assert problem["type"] == f"{stack.base_url}/problems/{code}"

    async with http.get(problem["type"]) as described:
        assert described.status == 200
        assert described.content_type == "application/json"
        entry = await described.json()
    assert entry["code"] == code and entry["type"] == problem["type"]
    assert (entry["status"], entry["title"]) == (problem["status"], problem["title"])
    assert entry["meaning"]


async def test_the_list_is_the_whole_catalogue(stack, http) -> None:
    async with http.get("/problems") as response:
        assert response.status == 200
        listed = (await response.json())["items"]
    expected = [
        {
            "code": p.code,
            "type": f"{stack.base_url}/problems/{p.code}",
            "title": p.title,
            "status": p.status,
            "meaning": p.meaning(),
        }
        for p in problem_types()
    ]
    assert listed == expected


async def test_an_unknown_code_is_a_404_problem(stack, http) -> None:
    status, text, content_type = await get(http, "/problems/no-such-code")
    assert (status, content_type) == (404, PROBLEM_JSON)
    assert '"code":"problem-type-not-found"' in text.replace(" ", "")


async def test_a_browser_gets_a_page(http) -> None:
    accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    status, page, content_type = await get(http, "/problems/invite-expired", Accept=accept)
    assert (status, content_type) == (200, "text/html")
    assert "<h1>The invite has expired</h1>" in page and "HTTP 410" in page
