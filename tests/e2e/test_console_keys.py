"""The console's agent keys in a real browser (issue 24, "Agent keys"; SPEC 3.5, 4.6): a team's
keys for its owners and managers, a team key for an agent member with its secret shown once
(never again: not on a later page, not for the same form sent again), rotation and revocation
that take effect over REST at once, and a plain member refused; axe-core on every page."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import pytest
from actors import Actor, holding_key, join_team
from browser_support import chromium
from console_support import SCREENSHOTS, audit, logged_in
from playwright.async_api import Browser, Page, expect

from schemas import limits
from schemas.principals import DAEMON_MIN_SCOPES


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium(SCREENSHOTS) as launched:
        yield launched


async def _team(actors: Any, human_role: str) -> tuple[str, str, Actor, Actor]:
    """A team with `human` in `human_role` (an owner founds it; else an agent does and invites
    them) and an agent `worker` as a plain member: (team id, team name, human, worker)."""
    human: Actor = await actors.human()
    founder: Actor = human if human_role == "owner" else await actors.agent()
    name = f"Keys {uuid.uuid4().hex[:6]}"
    status, team = await founder.call("POST", "/teams", json={"name": name})
    assert status == 201, team
    if founder is not human:
        await join_team(founder, team["id"], human, human_role)
    worker: Actor = await actors.agent()
    await join_team(founder, team["id"], worker, "member")
    return team["id"], name, human, worker


async def _works(agent: Actor, secret: str, team: str) -> bool:
    """Whether `secret` authenticates `agent` in `team` over REST right now."""
    status, me = await holding_key(agent, secret).call("GET", "/agents/whoami", team=team)
    assert status in (200, 401), me
    if status == 200:
        assert me["credentialBinding"]["boundTeamId"] == team
    return status == 200


async def _rest_key(agent: Actor, team: str, name: str) -> str:
    """A team key of `agent`, issued through its own token; its secret."""
    body = {"agentId": str(agent.subject_id), "name": name}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    status, key = await agent.call("POST", "/agent-keys", json=body, team=team, headers=headers)
    assert status == 201, key
    return str(key["secret"])


def _row(page: Page, name: str) -> Any:
    return page.get_by_test_id("key-row").filter(has_text=name)


async def test_a_manager_creates_a_key_whose_secret_is_shown_once_and_works(
    stack: Any, actors: Any, browser: Browser, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # the API and its worker run in this process
    team, team_name, human, worker = await _team(actors, "manager")
    context = await logged_in(browser, stack.base_url, human)
    page = await context.new_page()
    await page.goto(f"/console/teams/{team}/keys")
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Agent keys of {team_name}")
    await expect(page.get_by_test_id("no-keys")).to_be_visible()
    await audit(page, "agent-keys-empty")

    name = f"daemon on build-{uuid.uuid4().hex[:4]}"
    await page.select_option("#agentId", label=f"{worker.fingerprint} (member)")
    await page.fill("#name", name)
    await page.fill("#ttlDays", "7")
    for scope in DAEMON_MIN_SCOPES:  # the daemon's minimum comes checked
        await expect(page.get_by_label(scope, exact=True)).to_be_checked()
    await page.get_by_label("diary:read", exact=True).check()
    sent = await page.locator("#create-key").evaluate("f => [...new FormData(f)]")
    async with page.expect_response(lambda r: r.request.method == "POST") as answered:
        await page.get_by_role("button", name="Create key").click()
    response = await answered.value
    assert response.status == 200 and response.headers["cache-control"] == "no-store"
    assert "location" not in response.headers  # the POST's own answer, never a redirect
    warning = page.get_by_test_id("secret-warning")
    await expect(warning).to_contain_text("it will not be shown again")
    secret = (await page.get_by_test_id("secret").inner_text()).strip()
    assert secret.startswith("service_ak_")
    assert secret not in page.url
    await audit(page, "agent-key-secret")
    await page.get_by_role("button", name="Copy secret").click()
    await expect(page.get_by_role("button", name=re.compile("Copied|Selected"))).to_be_visible()

    assert await _works(worker, secret, team)  # the secret is the agent's key over REST

    # the same form again (a reload, the back button): the route's 409, the secret not again
    again = await page.request.post(
        f"/console/teams/{team}/keys",
        data=urlencode([(k, v) for k, v in sent]),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    shown = await again.text()
    assert again.status == 409, shown[:500]
    assert "already created" in shown and secret not in shown

    await page.goto(f"/console/teams/{team}/keys")
    row = _row(page, name)
    await expect(row).to_have_count(1)  # one key for one form, however often it was sent
    await expect(row.get_by_test_id("key-agent")).to_have_text(worker.fingerprint)
    await expect(row.get_by_test_id("key-status")).to_have_text("active")
    await expect(row).to_contain_text("diary:read")
    main = await page.locator("main").inner_text()
    assert secret not in await page.content()
    assert str(worker.subject_id) not in main  # the agent by fingerprint, never a bare id
    await audit(page, "agent-keys")
    await page.goto("/console/")
    assert secret not in await page.content()
    await context.close()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert f"/console/teams/{team}/keys" in logged  # the requests were logged ...
    assert secret not in logged  # ... and the secret nowhere


async def test_a_refused_key_is_explained_beside_the_form(
    stack: Any, actors: Any, browser: Browser
) -> None:
    team, _, human, worker = await _team(actors, "owner")
    context = await logged_in(browser, stack.base_url, human)
    page = await context.new_page()
    await page.goto(f"/console/teams/{team}/keys")
    await page.select_option("#agentId", label=f"{worker.fingerprint} (member)")
    name = f"too long {uuid.uuid4().hex[:4]}"
    await page.fill("#name", name)
    # past the limit: the browser would stop it, so lift the constraint to ask the route
    await page.locator("#ttlDays").evaluate("e => e.removeAttribute('max')")
    await page.fill("#ttlDays", str(limits.AGENT_KEY_TTL_DAYS_MAX + 1))
    await page.get_by_role("button", name="Create key").click()
    problem = page.get_by_test_id("problem-create")
    await expect(problem).to_contain_text("/ttlDays")
    await expect(page.locator("#name")).to_have_value(name)  # what was typed stays
    assert not await page.get_by_test_id("secret").count()
    await audit(page, "agent-keys-refused-create")

    # the agent leaves the team while the page is open: the route refuses a key for it
    status, _ = await human.call("DELETE", f"/teams/{team}/members/{worker.subject_id}")
    assert status == 200
    await page.fill("#ttlDays", "30")
    await page.get_by_role("button", name="Create key").click()
    await expect(page.get_by_test_id("problem-create")).to_contain_text("not a current member")
    assert not await page.get_by_test_id("secret").count()
    status, keys = await human.call("GET", "/agent-keys", team=team)
    assert status == 200 and keys["items"] == []
    await context.close()


async def test_the_team_keys_are_paged(stack: Any, actors: Any, browser: Browser) -> None:
    team, _, human, worker = await _team(actors, "owner")
    size = limits.AGENT_KEYS_PAGE.default
    await _rest_key(worker, team, "paged-00")  # the oldest, alone on the second page
    await asyncio.gather(*(_rest_key(worker, team, f"paged-{n:02d}") for n in range(1, size + 1)))
    context = await logged_in(browser, stack.base_url, human)
    page = await context.new_page()
    await page.goto(f"/console/teams/{team}/keys")
    await expect(page.get_by_test_id("key-row")).to_have_count(size)
    await expect(_row(page, "paged-00")).to_have_count(0)  # newest first
    await page.get_by_test_id("next-page").click()
    await expect(page.get_by_test_id("key-row")).to_have_count(1)
    await expect(_row(page, "paged-00")).to_have_count(1)
    await expect(page.get_by_test_id("next-page")).to_have_count(0)
    await audit(page, "agent-keys-page-2")
    await context.close()


async def test_rotation_shows_the_new_secret_once_and_the_old_one_stops_working(
    stack: Any, actors: Any, browser: Browser, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    team, _, human, worker = await _team(actors, "manager")
    name = f"rotating-{uuid.uuid4().hex[:4]}"
    old = await _rest_key(worker, team, name)
    assert await _works(worker, old, team)
    context = await logged_in(browser, stack.base_url, human)
    page = await context.new_page()
    await page.goto(f"/console/teams/{team}/keys")
    row = _row(page, name)
    await row.get_by_text("Rotate…").click()
    form = row.locator("form[action$='/rotate']")
    sent = await form.evaluate("f => [...new FormData(f)]")
    action = await form.get_attribute("action")
    async with page.expect_response(lambda r: r.request.method == "POST") as answered:
        await row.get_by_role("button", name=f"Rotate {name}").click()
    response = await answered.value
    assert response.headers["cache-control"] == "no-store" and "location" not in response.headers
    await expect(page.get_by_test_id("secret-warning")).to_contain_text("stopped working")
    new = (await page.get_by_test_id("secret").inner_text()).strip()
    assert new.startswith("service_ak_") and new != old and new not in page.url
    await audit(page, "agent-key-rotated")
    assert await _works(worker, new, team)
    assert not await _works(worker, old, team)

    # the same form again (a reload, the back button): the route's 409, nothing rotates twice
    again = await page.request.post(
        str(action),
        data=urlencode([(k, v) for k, v in sent]),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    shown = await again.text()
    assert again.status == 409, shown[:500]
    assert "already rotated" in shown and new not in shown
    assert await _works(worker, new, team)  # the secret shown once still works

    await page.goto(f"/console/teams/{team}/keys")
    await expect(_row(page, name)).to_contain_text("rotated")
    assert new not in await page.content()
    await context.close()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "/rotate" in logged and new not in logged


async def test_revocation_needs_a_reason_and_the_key_stops_working(
    stack: Any, actors: Any, browser: Browser
) -> None:
    team, _, human, worker = await _team(actors, "owner")
    name = f"leaked-{uuid.uuid4().hex[:4]}"
    secret = await _rest_key(worker, team, name)
    context = await logged_in(browser, stack.base_url, human)
    page = await context.new_page()
    await page.goto(f"/console/teams/{team}/keys")
    row = _row(page, name)
    await row.get_by_text("Revoke…").click()
    reason = row.get_by_label("Reason")
    assert await reason.get_attribute("required") is not None  # the browser asks first
    # without a reason the route refuses it, beside the form (the browser's check lifted)
    await reason.evaluate("e => e.removeAttribute('required')")
    await row.get_by_role("button", name=f"Revoke {name}").click()
    row = _row(page, name)
    await expect(row.get_by_test_id(re.compile("^problem-revoke-"))).to_contain_text("/reason")
    await expect(row.get_by_test_id("key-status")).to_have_text("active")
    assert await _works(worker, secret, team)
    await audit(page, "agent-keys-refused-revoke")

    await row.get_by_label("Reason").select_option("key_compromise")
    await row.get_by_role("button", name=f"Revoke {name}").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("revoked")
    row = _row(page, name)
    await expect(row.get_by_test_id("key-status")).to_have_text("revoked")
    await expect(row).to_contain_text("key compromise")
    await expect(row.get_by_text("Revoke…")).to_have_count(0)
    await expect(row.get_by_text("Rotate…")).to_have_count(0)
    assert not await _works(worker, secret, team)
    await audit(page, "agent-keys-revoked")
    await context.close()


async def test_a_plain_member_is_refused_the_keys_and_an_outsider_sees_no_team(
    stack: Any, actors: Any, browser: Browser
) -> None:
    team, _, member, worker = await _team(actors, "member")
    context = await logged_in(browser, stack.base_url, member)
    page = await context.new_page()
    response = await page.goto(f"/console/teams/{team}/keys")
    assert response is not None and response.status == 403
    await expect(page.get_by_test_id("problem")).to_contain_text("owners and managers")
    await audit(page, "agent-keys-forbidden")
    # the create form sent anyway (with this browser's own form token) is refused too
    token = await page.locator("input[name=csrf]").first.get_attribute("value")
    form = {
        "csrf": token or "",
        "idempotencyKey": uuid.uuid4().hex,
        "agentId": str(worker.subject_id),
        "name": "not mine to make",
    }
    refused = await page.request.post(f"/console/teams/{team}/keys", form=form)
    assert refused.status == 403
    assert "service_ak_" not in await refused.text()
    status, keys = await worker.call("GET", "/agent-keys", team=team)
    assert status == 200 and keys["items"] == []  # nothing was minted
    await context.close()

    outsider: Actor = await actors.human()
    context = await logged_in(browser, stack.base_url, outsider)
    page = await context.new_page()
    response = await page.goto(f"/console/teams/{team}/keys")
    assert response is not None and response.status == 404
    await expect(page.get_by_test_id("problem")).to_be_visible()
    await context.close()
