"""The console's rules over plain HTTP (issue 24, "Safe" and "Honest errors"): CSRF tokens on
every form, bound to the browser (a visitor cookie, then the session), the session cookie's
flags, the pages' Content-Security-Policy, cross-origin refusal for cookie-authenticated
writes on the REST API, and refusals rendered as pages."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from actors import PASSWORD, Actor

from api.auth import cookie_secure

TOKEN = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


@pytest.fixture
async def browser_like(stack: Any) -> AsyncIterator[aiohttp.ClientSession]:
    """Keeps cookies and follows no redirect, like a browser's address bar request by request."""
    jar = aiohttp.CookieJar(unsafe=True)  # 127.0.0.1 is an IP address: keep its cookies
    async with aiohttp.ClientSession(base_url=stack.base_url, cookie_jar=jar) as session:
        yield session


async def get(http: aiohttp.ClientSession, path: str) -> tuple[int, Any, str]:
    async with http.get(path, allow_redirects=False) as response:
        return response.status, response.headers, await response.text()


async def post(
    http: aiohttp.ClientSession, path: str, form: dict[str, str], **headers: str
) -> tuple[int, Any, str]:
    async with http.post(path, data=form, allow_redirects=False, headers=headers) as response:
        return response.status, response.headers, await response.text()


def token_in(body: str) -> str:
    found = TOKEN.search(body)
    assert found, body[:500]
    return found.group(1)


async def test_pages_allow_only_the_consoles_own_script_and_style(browser_like) -> None:
    status, headers, body = await get(browser_like, "/console/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    policy = headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    assert "frame-ancestors 'none'" in policy and "form-action 'self'" in policy
    assert headers["Cache-Control"] == "no-store"
    assert "<script>" not in body and "style=" not in body  # nothing inline to allow


async def test_a_login_form_needs_the_token_bound_to_this_browser(browser_like, actors) -> None:
    human: Actor = await actors.human()
    credentials = {"email": human.extra["email"], "password": PASSWORD}
    _, headers, body = await get(browser_like, "/console/")
    visitor = headers.getall("Set-Cookie")
    assert any("cairn_csrf=" in c and "HttpOnly" in c and "SameSite=Strict" in c for c in visitor)
    token = token_in(body)
    status, headers, page = await post(browser_like, "/console/login", credentials)
    assert status == 400 and "csrf" in page  # no token at all
    status, _, page = await post(browser_like, "/console/login", {**credentials, "csrf": "0" * 64})
    assert status == 403 and "Form token missing or stale" in page
    async with aiohttp.ClientSession(base_url=str(browser_like._base_url)) as other_browser:
        status, _, _ = await post(other_browser, "/console/login", {**credentials, "csrf": token})
        assert status == 403  # the token is this browser's: another one cannot replay it
    status, headers, _ = await post(browser_like, "/console/login", {**credentials, "csrf": token})
    assert status == 303 and headers["Location"] == "/console/"
    session = next(c for c in headers.getall("Set-Cookie") if c.startswith("cairn_session="))
    assert "HttpOnly" in session and "SameSite=Lax" in session and "Secure" not in session
    # logged in, the forms carry a token bound to the session: the visitor's is stale
    status, _, page = await post(browser_like, "/console/logout", {"csrf": token})
    assert status == 403
    _, _, home = await get(browser_like, "/console/")
    status, headers, _ = await post(browser_like, "/console/logout", {"csrf": token_in(home)})
    assert (status, headers["Location"]) == (303, "/console/")
    status, _, page = await get(browser_like, "/console/")
    assert status == 200 and 'id="login"' in page


def test_the_session_cookie_is_secure_everywhere_but_on_loopback() -> None:
    assert not cookie_secure("http://127.0.0.1:8000")
    assert not cookie_secure("http://localhost:8000")
    assert not cookie_secure("http://[::1]:8000")
    assert cookie_secure("https://cairn.example.org")
    assert cookie_secure("http://cairn.internal:8000")  # plain HTTP off loopback: no cookie


async def test_a_cookie_write_from_another_origin_is_refused(stack, actors) -> None:
    human: Actor = await actors.human()
    cookie = {"Cookie": f"cairn_session={human.auth['X-Session-Token']}"}
    body = {"name": "from elsewhere"}
    async with aiohttp.ClientSession(base_url=stack.base_url) as http:
        foreign = {**cookie, "Origin": "https://evil.example"}
        async with http.post("/teams", json=body, headers=foreign) as response:
            problem = await response.json(content_type=None)
            assert response.status == 403 and problem["code"] == "cross-origin-refused"
        async with http.get("/teams", headers=foreign) as response:
            assert response.status == 200  # a read changes nothing: the origin does not matter
        own = {**cookie, "Origin": stack.base_url}
        async with http.post("/teams", json=body, headers=own) as response:
            assert response.status == 201, await response.text()
        # the session token sent as a header is no ambient credential: no page can send it
        header = {**human.auth, "Origin": "https://evil.example"}
        async with http.post("/teams", json={"name": "by header"}, headers=header) as response:
            assert response.status == 201, await response.text()


async def test_a_refusal_on_a_page_is_a_page_with_the_problem(browser_like, actors) -> None:
    human: Actor = await actors.human()
    browser_like.cookie_jar.update_cookies({"cairn_session": human.auth["X-Session-Token"]})
    status, headers, body = await get(browser_like, "/console/teams/not-a-uuid/tasks")
    assert status == 400 and headers["Content-Type"].startswith("text/html")
    assert "Invalid path" in body and 'data-testid="problem"' in body
    assert "Traceback" not in body


async def test_a_visitor_is_sent_to_log_in_and_back(browser_like) -> None:
    status, headers, _ = await get(
        browser_like, "/console/teams/00000000-0000-4000-8000-000000000000/tasks"
    )
    assert status == 303
    assert headers["Location"] == (
        "/console/?next=/console/teams/00000000-0000-4000-8000-000000000000/tasks"
    )
    status, _, body = await get(browser_like, headers["Location"])
    assert status == 200 and 'name="next" value="/console/teams/' in body


async def test_no_console_form_acts_without_this_browsers_token(stack, actors) -> None:
    """Every console form (each POST route of the console, walked from the registry) refuses
    a request without the token of the session that sends it: a 400 (the token is a required
    field) or 403 (a wrong one), never the action's redirect."""
    from api.endpoint import ENDPOINTS

    human: Actor = await actors.human()
    cookie = {"Cookie": f"cairn_session={human.auth['X-Session-Token']}"}
    forms = [s for s in ENDPOINTS if s.tag == "console" and s.method == "POST"]
    assert len(forms) >= 4
    some_id = "00000000-0000-4000-8000-000000000001"
    async with aiohttp.ClientSession(base_url=stack.base_url) as http:
        for spec in forms:
            path = re.sub(r"\{[^}]+\}", some_id, spec.path)
            for token in ({}, {"csrf": "f" * 64}):
                async with http.post(
                    path, data=token, headers=cookie, allow_redirects=False
                ) as response:
                    assert response.status in (400, 403), (spec.path, token, response.status)
            # the token of another browser, fields and all: refused before anything runs
            _, _, home = await get(http, "/console/")  # an anonymous visitor's token
            form = {"csrf": token_in(home), "email": "x@example.org", "password": PASSWORD}
            async with http.post(path, data=form, headers=cookie, allow_redirects=False) as answer:
                assert answer.status in (400, 403), (spec.path, answer.status)
