"""The console's front door in a real browser (issue 24, "Who am I"): sign up, log in with a
refusal shown beside the form, the human named by email and display name (never a bare id),
their teams by name with their role, log out; axe-core on every page."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from actors import PASSWORD, Actor, join_team
from browser_support import chromium, log_in
from console_support import SCREENSHOTS, audit, logged_in
from playwright.async_api import Browser, expect


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium(SCREENSHOTS) as launched:
        yield launched


async def test_a_new_person_signs_up_and_is_named_by_their_display_name(
    stack: Any, browser: Browser
) -> None:
    context = await browser.new_context(base_url=stack.base_url)
    page = await context.new_page()
    await page.goto("/console/")
    await audit(page, "login")
    email = f"ada-{uuid.uuid4().hex[:8]}@example.org"
    await page.fill("#register-email", email)
    await page.fill("#register-name", "Ada Lovelace")
    await page.fill("#register-password", PASSWORD)
    await page.click("#register button")
    await expect(page.get_by_test_id("me")).to_have_text("Ada Lovelace")
    await expect(page.get_by_test_id("whoami")).to_contain_text(email)
    await context.close()


async def test_a_wrong_password_is_refused_beside_the_form_and_the_right_one_logs_in(
    stack: Any, actors: Any, browser: Browser
) -> None:
    human: Actor = await actors.human()
    context = await browser.new_context(base_url=stack.base_url)
    page = await context.new_page()
    await page.goto("/console/")
    await log_in(page, human.extra["email"], "not the password at all")
    problem = page.get_by_test_id("problem-login")
    await expect(problem).to_contain_text("Wrong email or password")
    await expect(page.locator("#email")).to_have_value(human.extra["email"])
    await log_in(page, human.extra["email"])
    await expect(page.get_by_test_id("whoami")).to_contain_text(human.extra["email"])
    cookie = next(c for c in await context.cookies() if c["name"] == "cairn_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    assert not cookie["secure"]  # loopback only: tests/integration/test_console_http.py
    await context.close()


async def test_the_home_page_names_teams_and_roles_and_log_out_ends_the_session(
    stack: Any, actors: Any, browser: Browser
) -> None:
    owner: Actor = await actors.agent()
    human: Actor = await actors.human()
    name = f"Lighthouse {uuid.uuid4().hex[:4]}"
    status, team = await owner.call("POST", "/teams", json={"name": name})
    assert status == 201, team
    await join_team(owner, team["id"], human, "manager")
    context = await logged_in(browser, stack.base_url, human)
    page = await context.new_page()
    await page.goto("/console/")
    row = page.get_by_test_id("team-row").filter(has_text=name)
    await expect(row).to_contain_text("manager")
    await expect(page.get_by_test_id("me")).to_have_text(human.extra["email"])
    assert str(human.subject_id) not in await page.locator("main").inner_text()
    await audit(page, "home")
    await page.get_by_role("button", name="Log out").click()
    await expect(page.locator("#login")).to_be_visible()
    status, _ = await human.call("GET", "/teams")
    assert status == 401  # the session itself ended, not just the cookie
    await context.close()


async def test_a_person_gets_in_and_around_with_the_keyboard_alone(
    stack: Any, actors: Any, browser: Browser
) -> None:
    """Keyboard only: the first Tab reaches the skip link, the login form is filled and sent
    with Tab, typing and Enter, and the team page is reached by tabbing to its link."""
    owner: Actor = await actors.agent()
    human: Actor = await actors.human()
    name = f"Keyboard {uuid.uuid4().hex[:4]}"
    status, team = await owner.call("POST", "/teams", json={"name": name})
    assert status == 201, team
    await join_team(owner, team["id"], human, "member")
    context = await browser.new_context(base_url=stack.base_url)
    page = await context.new_page()
    await page.goto("/console/")
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    await page.keyboard.press("Enter")  # on to the page's content: the next Tab is the form's
    await page.keyboard.press("Tab")
    await expect(page.locator("#email")).to_be_focused()
    await page.keyboard.type(human.extra["email"])
    await page.keyboard.press("Tab")
    await page.keyboard.type(PASSWORD)
    await page.keyboard.press("Enter")
    await expect(page.get_by_test_id("whoami")).to_contain_text(human.extra["email"])
    link = page.get_by_test_id("team-link").filter(has_text=name)
    for _ in range(30):
        if await link.evaluate("element => element === document.activeElement"):
            break
        await page.keyboard.press("Tab")
    await expect(link).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(page.locator("h1")).to_have_text(name)
    await context.close()
