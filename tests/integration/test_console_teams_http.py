"""The console's teams pages over plain HTTP (issue 24): a new-team form sent twice (a double
click, a resend) creates one team; a stranger's team page is the API's 404; the team page
names members, never by a bare id."""

from __future__ import annotations

import re
import uuid

import aiohttp
from actors import Actor, join_team
from test_console_http import browser_like, get, post, token_in

__all__ = ["browser_like"]  # the fixture, used by name
KEY = re.compile(r'name="idempotencyKey" value="([0-9a-f]{32})"')


def log_in_as(http: aiohttp.ClientSession, human: Actor) -> None:
    http.cookie_jar.update_cookies({"cairn_session": human.auth["X-Session-Token"]})


async def test_a_new_team_form_sent_twice_creates_one_team(browser_like, actors) -> None:
    human: Actor = await actors.human()
    log_in_as(browser_like, human)
    status, _, body = await get(browser_like, "/console/teams/new")
    assert status == 200  # the literal path, not a team whose id is "new"
    key = KEY.search(body)
    assert key, body[:800]
    name = f"Twice {uuid.uuid4().hex[:6]}"
    form = {"csrf": token_in(body), "idempotencyKey": key.group(1), "name": name}
    places = set()
    for _ in range(2):
        status, headers, page = await post(browser_like, "/console/teams", form)
        assert status == 303, page
        places.add(headers["Location"].split("?")[0])
    status, listed = await human.call("GET", "/teams")
    assert [team["name"] for team in listed["items"]].count(name) == 1
    assert places == {f"/console/teams/{t['id']}" for t in listed["items"] if t["name"] == name}


async def test_a_strangers_team_page_is_the_apis_404(browser_like, actors) -> None:
    owner: Actor = await actors.agent()
    stranger: Actor = await actors.human()
    status, team = await owner.call("POST", "/teams", json={"name": "closed"})
    assert status == 201
    log_in_as(browser_like, stranger)
    status, _, body = await get(browser_like, f"/console/teams/{team['id']}")
    assert status == 404 and "No such team" in body


async def test_the_team_page_names_members_and_never_shows_their_ids(browser_like, actors) -> None:
    owner: Actor = await actors.human("Nia Named")
    agent: Actor = await actors.agent()
    plain: Actor = await actors.human()
    status, team = await owner.call("POST", "/teams", json={"name": "named"})
    assert status == 201
    await join_team(owner, team["id"], agent, "executor")
    await join_team(owner, team["id"], plain, "member")
    log_in_as(browser_like, owner)
    status, headers, body = await get(browser_like, f"/console/teams/{team['id']}")
    assert status == 200 and headers["Server-Timing"].startswith("app;dur=")
    assert "Nia Named" in body and agent.fingerprint in body and plain.extra["email"] in body
    shown = re.sub(r'(action|for|id|href|data-testid)="[^"]*"', "", body)
    for actor in (owner, agent, plain):
        assert str(actor.subject_id) not in shown
