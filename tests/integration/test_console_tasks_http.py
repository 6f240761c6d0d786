"""The console's task forms over plain HTTP (issue 24): a new-task form sent twice (a double
click, a resend) creates one task, by the idempotency key its page minted; the task page says
its server time."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from actors import Actor, join_team

TOKEN = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
KEY = re.compile(r'name="idempotencyKey" value="([0-9a-f]{32})"')


@pytest.fixture
async def manager_browser(
    stack: Any, actors: Any
) -> AsyncIterator[tuple[aiohttp.ClientSession, Any]]:
    owner: Actor = await actors.agent()
    human: Actor = await actors.human()
    status, team = await owner.call("POST", "/teams", json={"name": "twice"})
    assert status == 201, team
    await join_team(owner, team["id"], human, "manager")
    body = {"name": "twice log", "visibility": "private"}
    status, diary = await owner.call("POST", "/diaries", json=body, team=team["id"])
    assert status == 201, diary
    jar = aiohttp.CookieJar(unsafe=True)
    jar.update_cookies({"cairn_session": human.auth["X-Session-Token"]})
    async with aiohttp.ClientSession(base_url=stack.base_url, cookie_jar=jar) as http:
        yield http, (owner, team["id"], diary["id"], human)


async def test_a_new_task_form_sent_twice_creates_one_task(manager_browser: Any) -> None:
    http, (owner, team_id, diary_id, _) = manager_browser
    new = f"/console/teams/{team_id}/tasks/new"
    async with http.get(new) as response:
        page = await response.text()
        assert response.status == 200, page
        assert "app;dur=" in response.headers["Server-Timing"]
    title = f"Once {uuid.uuid4().hex[:6]}"
    form = {
        "csrf": TOKEN.search(page).group(1),  # type: ignore[union-attr]
        "idempotencyKey": KEY.search(page).group(1),  # type: ignore[union-attr]
        "taskType": "freeform",
        "diaryId": diary_id,
        "title": title,
        "input.brief": "Do it once",
    }
    locations = []
    for _ in range(2):
        async with http.post(new, data=form, allow_redirects=False) as response:
            assert response.status == 303, await response.text()
            locations.append(response.headers["Location"])
    assert locations[0] == locations[1]
    status, listed = await owner.call("GET", "/tasks", team=team_id)
    assert status == 200, listed
    assert [t["title"] for t in listed["items"]].count(title) == 1
    async with http.get(locations[0].split("?")[0]) as response:
        assert response.status == 200 and title in await response.text()


async def test_the_new_task_form_offers_the_teams_own_diaries(
    manager_browser: Any, actors: Any
) -> None:
    """The provenance diary is chosen among the team's diaries, not among every diary the person
    can read in their other teams."""
    http, (_, team_id, _, human) = manager_browser
    other_owner: Actor = await actors.agent()
    status, other = await other_owner.call("POST", "/teams", json={"name": "elsewhere"})
    assert status == 201, other
    await join_team(other_owner, other["id"], human, "member")
    body = {"name": "elsewhere log", "visibility": "private"}
    status, diary = await other_owner.call("POST", "/diaries", json=body, team=other["id"])
    assert status == 201, diary
    status, readable = await human.call("GET", "/diaries")
    assert status == 200 and "elsewhere log" in {d["name"] for d in readable["items"]}, readable
    async with http.get(f"/console/teams/{team_id}/tasks/new") as response:
        page = await response.text()
        assert response.status == 200, page
    assert "twice log" in page
    assert "elsewhere log" not in page
