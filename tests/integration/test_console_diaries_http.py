"""The console's diary and entry forms over plain HTTP (issue 24): a form sent twice with the
key its page minted is done once; an edit of a signed entry is the API's 409 beside the form;
a page's own bad query is a 400 page."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from actors import Actor, join_team
from test_console_http import get, post, token_in
from yarl import URL

from schemas.kernel.cids import entry_cid

KEY = re.compile(r'name="idempotencyKey" value="([0-9a-f]{32})"')


@pytest.fixture
async def manager_browser(stack: Any, actors: Any) -> AsyncIterator[tuple[Any, Actor, str, str]]:
    """A browser logged in as a human manager of an agent's team holding a diary:
    (session, the agent, team id, diary id)."""
    owner: Actor = await actors.agent()
    human: Actor = await actors.human()
    status, team = await owner.call("POST", "/teams", json={"name": "Quay"})
    assert status == 201, team
    await join_team(owner, team["id"], human, "manager")
    status, diary = await owner.call("POST", "/diaries", json={"name": "Quay log"}, team=team["id"])
    assert status == 201, diary
    jar = aiohttp.CookieJar(unsafe=True)
    jar.update_cookies({"cairn_session": human.auth["X-Session-Token"]}, URL(stack.base_url))
    async with aiohttp.ClientSession(base_url=stack.base_url, cookie_jar=jar) as session:
        yield session, owner, str(team["id"]), str(diary["id"])


def form_of(page: str, **fields: str) -> dict[str, str]:
    key = KEY.search(page)
    assert key, page[:500]
    return {"csrf": token_in(page), "idempotencyKey": key.group(1), **fields}


async def test_a_new_diary_sent_twice_is_created_once(manager_browser) -> None:
    http, owner, team, _ = manager_browser
    path = f"/console/teams/{team}/diaries"
    status, _, page = await get(http, path)
    assert status == 200
    form = form_of(page, name=f"Twice {uuid.uuid4().hex[:4]}", visibility="private")
    first = await post(http, path, form)
    again = await post(http, path, form)
    assert first[0] == again[0] == 303
    assert first[1]["Location"] == again[1]["Location"]
    status, listed = await owner.call("GET", "/diaries", team=team)
    assert [d["name"] for d in listed["items"]].count(form["name"]) == 1


async def test_an_entry_sent_twice_is_written_once(manager_browser) -> None:
    http, owner, _, diary = manager_browser
    path = f"/console/diaries/{diary}/entries/new"
    _, _, page = await get(http, path)
    form = form_of(page, content="Cargo manifest checked.", tags="cargo", importance="6")
    first = await post(http, path, form)
    again = await post(http, path, form)
    assert first[0] == again[0] == 303
    assert first[1]["Location"] == again[1]["Location"]
    status, listed = await owner.call("GET", f"/diaries/{diary}/entries")
    assert status == 200 and listed["total"] == 1
    assert listed["items"][0]["tags"] == ["cargo"] and listed["items"][0]["importance"] == 6


async def test_editing_a_signed_entry_is_refused_beside_the_form(manager_browser) -> None:
    http, owner, _, diary = manager_browser
    content = "Signed at the harbour office."
    cid = entry_cid(content, None, [], "semantic")
    status, asked = await owner.call("POST", "/crypto/signing-requests", json={"message": cid})
    assert status == 201, asked
    sign = f"/crypto/signing-requests/{asked['request_id']}/sign"
    status, _ = await owner.call(
        "POST", sign, json={"signature": owner.sign(asked["signing_payload"])}
    )
    assert status == 200
    body = {"content": content, "signingRequestId": asked["request_id"]}
    status, entry = await owner.call("POST", f"/diaries/{diary}/entries", json=body)
    assert status == 201, entry
    path = f"/console/entries/{entry['id']}/edit"
    _, _, page = await get(http, path)
    status, _, refused = await post(
        http, path, {"csrf": token_in(page), "content": "Rewritten", "importance": "5"}
    )
    assert status == 409 and 'data-testid="problem-entry"' in refused
    assert "immutable" in refused and "Rewritten" in refused  # what was typed is kept
    status, kept = await owner.call("GET", f"/entries/{entry['id']}")
    assert kept["content"] == content


async def test_a_bad_page_query_is_a_400_page(manager_browser) -> None:
    http, _, _, diary = manager_browser
    status, _, page = await get(http, f"/console/diaries/{diary}?offset=-1")
    assert status == 400 and 'data-testid="problem"' in page
