"""The console's sharing forms over plain HTTP (issue 24): a proposal sent twice with the key
its page minted is made once, an empty destination is the API's 400 beside the form with
nothing written, and the pages say their server time."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from actors import Actor

from api.auth import SESSION_COOKIE

TOKEN = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
KEY = re.compile(r'name="idempotencyKey" value="([0-9a-f]{32}[^"]*)"')


@pytest.fixture
async def owner(actors: Any) -> Actor:
    return await actors.human("Ana Ferreira")


@pytest.fixture
async def console(stack: Any, owner: Actor) -> AsyncIterator[aiohttp.ClientSession]:
    """A browser of `owner`: their session cookie kept, no redirect followed."""
    jar = aiohttp.CookieJar(unsafe=True)  # 127.0.0.1 is an IP address: keep its cookies
    jar.update_cookies({SESSION_COOKIE: owner.auth["X-Session-Token"]})
    async with aiohttp.ClientSession(base_url=stack.base_url, cookie_jar=jar) as session:
        yield session


async def owned_diary_and_target(owner: Actor) -> tuple[str, str]:
    status, source = await owner.call("POST", "/teams", json={"name": "Harbour"})
    assert status == 201, source
    status, target = await owner.call("POST", "/teams", json={"name": "Lighthouse"})
    assert status == 201, target
    body = {"name": "Logbook", "visibility": "private"}
    status, diary = await owner.call("POST", "/diaries", json=body, team=source["id"])
    assert status == 201, diary
    return str(diary["id"]), str(target["id"])


async def form_of(console: aiohttp.ClientSession, path: str) -> tuple[str, str, Any]:
    async with console.get(path, allow_redirects=False) as response:
        assert response.status == 200, await response.text()
        body = await response.text()
        token, key = TOKEN.search(body), KEY.search(body)
        assert token and key, body[:500]
        return token.group(1), key.group(1), response.headers


async def send(
    console: aiohttp.ClientSession, path: str, form: dict[str, str]
) -> tuple[int, Any, str]:
    async with console.post(path, data=form, allow_redirects=False) as response:
        return response.status, response.headers, await response.text()


async def test_a_proposal_sent_twice_with_its_pages_key_is_made_once(
    console: aiohttp.ClientSession, owner: Actor
) -> None:
    diary_id, target = await owned_diary_and_target(owner)
    path = f"/console/diaries/{diary_id}/transfers"
    token, key, headers = await form_of(console, path)
    assert headers["Server-Timing"].startswith("app;dur=")
    form = {"csrf": token, "idempotencyKey": key, "team": target}
    for _ in range(2):  # a double click: without the key the second would be a 409
        status, headers, body = await send(console, path, form)
        assert status == 303, body
        assert headers["Location"] == f"{path}?done=transfer-started"
    status, history = await owner.call("GET", f"/diaries/{diary_id}/transfers")
    assert status == 200 and [t["destinationTeamId"] for t in history["items"]] == [target]


async def test_a_proposal_without_a_team_is_the_apis_400_beside_the_form(
    console: aiohttp.ClientSession, owner: Actor
) -> None:
    diary_id, _ = await owned_diary_and_target(owner)
    path = f"/console/diaries/{diary_id}/transfers"
    token, key, _ = await form_of(console, path)
    status, _, body = await send(console, path, {"csrf": token, "idempotencyKey": key})
    assert status == 400, body
    assert 'data-testid="problem-transfer"' in body and "/destinationTeamId" in body
    status, history = await owner.call("GET", f"/diaries/{diary_id}/transfers")
    assert status == 200 and history["items"] == []
