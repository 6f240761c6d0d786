"""The console's packs forms over plain HTTP (issue 24, "Packs"): a render sent twice is done
once, the API's refusals come back as the form's status with the problem beside the form and
nothing changed, a rendering's Markdown is text (never markup), and pages a person may not
read are the API's 404."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from actors import Actor, join_team
from test_console_http import browser_like, get, post, token_in

__all__ = ["browser_like"]  # the fixture, shared with test_console_http

KEY = re.compile(r'name="idempotencyKey" value="([0-9a-f]{32})"')


@pytest.fixture(scope="module")
async def setting(actors: Any) -> dict[str, Any]:
    owner: Actor = await actors.agent()
    manager: Actor = await actors.human()
    reader: Actor = await actors.human()
    status, team = await owner.call("POST", "/teams", json={"name": f"T {uuid.uuid4().hex[:4]}"})
    assert status == 201, team
    await join_team(owner, team["id"], manager, "manager")
    await join_team(owner, team["id"], reader, "member")
    body = {"name": f"D {uuid.uuid4().hex[:4]}", "visibility": "private"}
    status, diary = await owner.call("POST", "/diaries", json=body, team=team["id"])
    assert status == 201, diary
    path = f"/diaries/{diary['id']}/entries"
    status, entry = await owner.call("POST", path, json={"content": "Packed once.", "title": "T"})
    assert status == 201, entry
    return {"owner": owner, "manager": manager, "reader": reader, "diary": diary, "entry": entry}


async def new_pack(setting: dict[str, Any], **body: Any) -> dict[str, Any]:
    selection = [{"entryId": setting["entry"]["id"], "rank": 1}]
    path = f"/diaries/{setting['diary']['id']}/packs"
    status, pack = await setting["owner"].call("POST", path, json={"entries": selection, **body})
    assert status == 201, pack
    return dict(pack)


async def form_page(http: Any, human: Actor, path: str) -> tuple[str, str]:
    """The page as `human` sees it: its CSRF token and the idempotency key it minted."""
    http.cookie_jar.update_cookies({"cairn_session": human.auth["X-Session-Token"]})
    status, _, body = await get(http, path)
    assert status == 200, body[:500]
    key = KEY.search(body)
    return token_in(body), key.group(1) if key else ""


async def renderings(setting: dict[str, Any], pack_id: str) -> list[dict[str, Any]]:
    status, listed = await setting["owner"].call(
        "GET",
        f"/diaries/{setting['diary']['id']}/rendered-packs",
        params={"sourcePackId": pack_id},
    )
    assert status == 200, listed
    return list(listed["items"])


async def test_a_render_sent_twice_is_done_once(browser_like, setting) -> None:
    pack = await new_pack(setting, params={"twice": 1})
    path = f"/console/packs/{pack['packId']}"
    csrf, key = await form_page(browser_like, setting["manager"], path)
    assert key
    form = {"csrf": csrf, "idempotencyKey": key, "renderMethod": "server:pack-to-docs-v1"}
    first = await post(browser_like, f"{path}/render", form)
    again = await post(browser_like, f"{path}/render", form)
    assert first[0] == again[0] == 303
    assert first[1]["Location"] == again[1]["Location"]
    (rendering,) = await renderings(setting, pack["packId"])
    assert first[1]["Location"] == f"/console/rendered/{rendering['id']}?done=pack-rendered"


async def test_agent_markdown_is_shown_as_text(browser_like, setting) -> None:
    pack = await new_pack(setting, params={"markup": 1})
    path = f"/console/packs/{pack['packId']}"
    csrf, key = await form_page(browser_like, setting["manager"], path)
    markdown = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    form = {
        "csrf": csrf,
        "idempotencyKey": key,
        "renderMethod": "agent:raw",
        "renderedMarkdown": markdown,
    }
    status, headers, _ = await post(browser_like, f"{path}/render", form)
    assert status == 303, headers
    status, _, body = await get(browser_like, headers["Location"])
    assert status == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in body
    assert "<script>alert" not in body and "<img src=x" not in body


async def test_an_unpin_into_the_past_is_refused_beside_the_form(browser_like, setting) -> None:
    pack = await new_pack(setting, params={"past": 1}, pinned=True)
    path = f"/console/packs/{pack['packId']}"
    csrf, _ = await form_page(browser_like, setting["manager"], path)
    form = {"csrf": csrf, "pinned": "false", "expiresAt": "2001-02-03T04:05"}
    status, _, body = await post(browser_like, f"{path}/pin", form)
    assert status == 400
    assert 'data-testid="problem-pin"' in body and "Must be in the future" in body
    assert 'value="2001-02-03T04:05"' in body  # what was typed, kept
    status, read = await setting["owner"].call("GET", f"/packs/{pack['packId']}")
    assert status == 200 and read["pinned"] is True


async def test_a_reader_may_not_pin_or_render(browser_like, setting) -> None:
    pack = await new_pack(setting, params={"reader": 1})
    path = f"/console/packs/{pack['packId']}"
    csrf, key = await form_page(browser_like, setting["reader"], path)
    status, _, body = await post(browser_like, f"{path}/pin", {"csrf": csrf, "pinned": "true"})
    assert status == 403 and 'data-testid="problem-pin"' in body
    form = {"csrf": csrf, "idempotencyKey": key, "renderMethod": "server:pack-to-docs-v1"}
    status, _, body = await post(browser_like, f"{path}/render", form)
    assert status == 403 and 'data-testid="problem-render"' in body
    status, read = await setting["owner"].call("GET", f"/packs/{pack['packId']}")
    assert status == 200 and read["pinned"] is False
    assert await renderings(setting, pack["packId"]) == []


async def test_pages_follow_the_apis_refusals(browser_like, setting, actors) -> None:
    pack = await new_pack(setting, params={"stranger": 1})
    status, made = await setting["owner"].call(
        "POST", f"/packs/{pack['packId']}/render", json={"renderMethod": "server:pack-to-docs-v1"}
    )
    assert status == 201, made
    stranger: Actor = await actors.human()
    browser_like.cookie_jar.update_cookies({"cairn_session": stranger.auth["X-Session-Token"]})
    for path in (
        f"/console/packs/{pack['packId']}",
        f"/console/packs/{pack['packId']}/provenance",
        f"/console/packs/{pack['packId']}/diff?other={pack['packId']}",
        f"/console/rendered/{made['id']}",
        f"/console/diaries/{setting['diary']['id']}/packs",
    ):
        status, _, body = await get(browser_like, path)
        assert status == 404 and 'data-testid="problem"' in body, path
    browser_like.cookie_jar.update_cookies(
        {"cairn_session": setting["reader"].auth["X-Session-Token"]}
    )
    diary_packs = f"/console/diaries/{setting['diary']['id']}/packs"
    status, _, _ = await get(browser_like, f"{diary_packs}?offset=-1")
    assert status == 400
    status, _, _ = await get(browser_like, f"/console/packs/{pack['packId']}/diff")
    assert status == 400  # no pack to compare with
