"""The browser OAuth connector (spec 5.5) and the human console (spec 5.6) together, in a real
browser: a human who is not logged in connects an MCP host to Cairn as the host makes them.

The host is the official MCP client's OAuth support (`OAuthClientProvider`): its redirect
handler opens the authorization URL in Debian's headless Chromium (driven with Playwright),
where the person lands on the console's login, types their email and password, arrives at the
consent page, reads who is asking and where the answer goes, and clicks Approve (or Deny). The
browser then goes to the host's redirect URI, a small HTTP server of this test, whose query
string the client's callback handler returns. Screenshots are kept in `oauth/` of
`browser_support.ARTIFACTS`, outside the repository."""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx2
import pytest
from aiohttp import web
from browser_support import ARTIFACTS as BROWSER_ARTIFACTS
from browser_support import chromium, log_in
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from mcp_support import ALL_TOOLSETS, MemoryStorage, connector_mcp, structured
from playwright.async_api import Browser, Page, expect

from infra.devstack import free_port
from schemas.connector import CONSENT_PATH

ARTIFACTS = BROWSER_ARTIFACTS / "oauth"
HOST_NAME = "Browser test MCP host"
# a state this long makes the signed authorization request longer than 2 KiB
LONG_STATE_BYTES = 1500


@pytest.fixture(scope="module")
async def mcp(stack: Any) -> AsyncIterator[Any]:
    async with connector_mcp(stack) as server:
        yield server


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium(ARTIFACTS) as launched:
        yield launched


class Callback:
    """The MCP host's redirect URI: a local HTTP server that hands each query string it
    receives to whoever waits for it, and shows the person a closing page."""

    def __init__(self) -> None:
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}/callback"
        self.answers: asyncio.Queue[dict[str, str]] = asyncio.Queue()

    async def _receive(self, request: web.Request) -> web.Response:
        answer = dict(request.query)
        await self.answers.put(answer)
        outcome = "Connected" if "code" in answer else f"Not connected: {answer.get('error')}"
        return web.Response(text=f"<h1 id='outcome'>{outcome}</h1>", content_type="text/html")

    async def next_answer(self) -> dict[str, str]:
        return await asyncio.wait_for(self.answers.get(), timeout=60)


@pytest.fixture
async def callback() -> AsyncIterator[Callback]:
    server = Callback()
    app = web.Application()
    app.router.add_get("/callback", server._receive)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", server.port).start()
    try:
        yield server
    finally:
        await runner.cleanup()


def _path(url: str) -> str:
    return urlsplit(url).path


async def sees_the_consent(page: Page, shot: str, callback: Callback) -> None:
    """The consent page names the client and the host the answer returns to."""
    await page.wait_for_url(lambda url: _path(url) == CONSENT_PATH)
    await expect(page.locator("h1")).to_have_text(f"Connect {HOST_NAME}?")
    await expect(page.locator("body")).to_contain_text(f"returning to 127.0.0.1:{callback.port}")
    await page.screenshot(path=ARTIFACTS / shot, full_page=True)


async def test_a_human_not_logged_in_connects_an_mcp_host_in_the_browser(
    stack: Any, mcp: Any, actors: Any, browser: Browser, callback: Callback
) -> None:
    human = await actors.human()
    status, team = await human.call("POST", "/teams", json={"name": f"t-{uuid.uuid4().hex[:6]}"})
    assert status == 201, team
    context = await browser.new_context(viewport={"width": 900, "height": 700})
    page = await context.new_page()

    async def redirect_handler(authorization_url: str) -> None:
        """The host opens the authorization URL in the person's browser; they log in first."""
        await page.goto(authorization_url)
        await page.wait_for_url(lambda url: _path(url) == "/console/")
        assert page.url.startswith(f"{stack.base_url}/console/?next=")
        await page.screenshot(path=ARTIFACTS / "login.png", full_page=True)
        await log_in(page, human.extra["email"])
        await sees_the_consent(page, "consent.png", callback)
        await page.get_by_role("button", name="Approve").click()
        await page.wait_for_url(lambda url: url.startswith(callback.uri))
        await expect(page.locator("#outcome")).to_have_text("Connected")
        await page.screenshot(path=ARTIFACTS / "approved.png", full_page=True)

    async def callback_handler() -> AuthorizationCodeResult:
        answer = await callback.next_answer()
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"))

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=mcp.url,
        client_metadata=OAuthClientMetadata(
            client_name=HOST_NAME,
            redirect_uris=[callback.uri],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with (
        httpx2.AsyncClient(auth=provider, headers=ALL_TOOLSETS, timeout=60) as http,
        streamable_http_client(mcp.url, http_client=http, terminate_on_close=False) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        me = structured(await session.call_tool("service_whoami", {}))
        teams = structured(await session.call_tool("teams_list", {}))
    await context.close()

    assert me["subjectType"] == "human"
    assert me["subjectId"] == str(human.subject_id)
    assert storage.client is not None and me["clientId"] == storage.client.client_id
    assert [item["id"] for item in teams["items"]] == [team["id"]]


async def test_a_human_who_denies_sends_access_denied_to_the_redirect_uri(
    stack: Any, mcp: Any, actors: Any, browser: Browser, callback: Callback
) -> None:
    """A host with a long state (the login's `next` then carries a long query string): the
    person logs in, denies, and the host hears `error=access_denied` with its state intact,
    and no code."""
    human = await actors.human()
    base = f"{urlsplit(mcp.url).scheme}://{urlsplit(mcp.url).netloc}"
    async with httpx2.AsyncClient(timeout=60) as http:
        metadata = {
            "client_name": HOST_NAME,
            "redirect_uris": [callback.uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }
        registered = await http.post(f"{base}/register", json=metadata)
    assert registered.status_code == 201, registered.text
    state = "s&t=a/t?e " + secrets.token_urlsafe(LONG_STATE_BYTES)
    params = {
        "response_type": "code",
        "client_id": registered.json()["client_id"],
        "redirect_uri": callback.uri,
        "state": state,
        "code_challenge": secrets.token_urlsafe(32),
        "code_challenge_method": "S256",
        "resource": mcp.url,
    }
    context = await browser.new_context(viewport={"width": 900, "height": 700})
    page = await context.new_page()
    await page.goto(f"{base}/authorize?{urlencode(params)}")
    await page.wait_for_url(lambda url: _path(url) == "/console/")
    await log_in(page, human.extra["email"])
    await sees_the_consent(page, "consent-deny.png", callback)
    await page.get_by_role("button", name="Deny").click()
    answer = await callback.next_answer()
    await expect(page.locator("#outcome")).to_have_text("Not connected: access_denied")
    await page.screenshot(path=ARTIFACTS / "denied.png", full_page=True)
    await context.close()
    assert answer["error"] == "access_denied"
    assert answer["state"] == state
    assert "code" not in answer
