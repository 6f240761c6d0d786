"""The browser OAuth connector for humans (spec 5.5), end to end: the official MCP client's OAuth
support (discovery, RFC 7591 registration, PKCE S256, the consent page after the human's login,
the token, a tool call as the human) against the MCP server and the REST API on the real stack,
and the refusals: a wrong PKCE verifier, a redirect URI not registered, a denial, a replayed or
expired code, a token for another audience, an agent's REST token at the MCP server and a
connector token at the REST API."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import re
import secrets
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from actors import join_team
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from mcp_support import ALL_TOOLSETS, MemoryStorage, connector_mcp, problem_of, structured

from schemas.connector import CONNECTOR_HEADER, connector_secret
from schemas.limits import CONNECTOR_REDIRECT_URIS_MAX, CONNECTOR_REQUEST_MAX_CHARS

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never reached: the test reads the Location


@pytest.fixture(scope="module")
async def mcp(stack: Any) -> AsyncIterator[Any]:
    """The MCP server with the browser connector on, as `cairn mcp` runs it."""
    async with connector_mcp(stack) as server:
        yield server


@pytest.fixture(scope="module")
async def other_mcp(stack: Any) -> AsyncIterator[Any]:
    """A second MCP server: another resource, the same API."""
    async with connector_mcp(stack) as server:
        yield server


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class Browser:
    """The human's browser: carries the session cookie the login set, follows no redirect by
    itself, and answers the consent page."""

    def __init__(self, session_token: str) -> None:
        self.http = httpx2.AsyncClient(cookies={"cairn_session": session_token}, timeout=60)

    async def consent_page(self, authorize_url: str) -> tuple[str, str]:
        """/authorize → the consent page; its (signed request, CSRF token)."""
        answer = await self.http.get(authorize_url)
        assert answer.status_code == 302, answer.text
        consent_url = answer.headers["location"]
        page = await self.http.get(consent_url)
        assert page.status_code == 200, page.text
        assert "text/html" in page.headers["content-type"]
        assert "Connect" in page.text
        request = re.search(r'name="request" value="([^"]+)"', page.text)
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert request and csrf, page.text
        self.consent_url = consent_url.split("?")[0]
        self.page = page.text
        return html.unescape(request.group(1)), html.unescape(csrf.group(1))

    async def decide(self, authorize_url: str, decision: str = "approve") -> dict[str, str]:
        """Open the consent page, decide, return the parameters sent to the redirect URI."""
        request, csrf = await self.consent_page(authorize_url)
        answer = await self.http.post(
            self.consent_url, data={"request": request, "csrf": csrf, "decision": decision}
        )
        assert answer.status_code == 302, answer.text
        location = answer.headers["location"]
        assert location.startswith(REDIRECT_URI + "?"), location
        return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def connector_client(mcp_url: str, browser: Browser, storage: MemoryStorage) -> OAuthClientProvider:
    """The official client's OAuth support; its browser step is our `Browser`."""
    answer: dict[str, str] = {}

    async def redirect_handler(authorization_url: str) -> None:
        answer.update(await browser.decide(authorization_url))

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"))

    return OAuthClientProvider(
        server_url=mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="Test MCP host",
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )


@contextlib.asynccontextmanager
async def session_with(
    url: str, auth: httpx2.Auth | None = None, **headers: str
) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(auth=auth, headers={**ALL_TOOLSETS, **headers}, timeout=60) as http,
        streamable_http_client(url, http_client=http, terminate_on_close=False) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


async def login(actors: Any) -> tuple[Any, Browser]:
    human = await actors.human()
    return human, Browser(human.auth["X-Session-Token"])


# --- a hand-driven flow, for the refusals ---------------------------------------------------


class Flow:
    """Registration, PKCE and consent by hand (the SDK's endpoints on the MCP server)."""

    def __init__(self, mcp_url: str, browser: Browser) -> None:
        self.mcp_url = mcp_url
        self.base = _origin(mcp_url)
        self.browser = browser
        self.verifier = secrets.token_urlsafe(48)
        digest = hashlib.sha256(self.verifier.encode()).digest()
        self.challenge = base64.urlsafe_b64encode(digest).decode().rstrip("=")
        self.state = secrets.token_urlsafe(16)

    async def register(self, **extra: str) -> dict[str, Any]:
        metadata = {
            "client_name": "Hand-driven host",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            **extra,
        }
        answer = await self.browser.http.post(f"{self.base}/register", json=metadata)
        assert answer.status_code == 201, answer.text
        self.client: dict[str, Any] = answer.json()
        return self.client

    def authorize_url(self, **override: str) -> str:
        params = {
            "response_type": "code",
            "client_id": self.client["client_id"],
            "redirect_uri": REDIRECT_URI,
            "state": self.state,
            "code_challenge": self.challenge,
            "code_challenge_method": "S256",
            "resource": self.mcp_url,
            **override,
        }
        return f"{self.base}/authorize?{urlencode(params)}"

    async def code(self) -> str:
        answer = await self.browser.decide(self.authorize_url())
        assert answer["state"] == self.state
        return answer["code"]

    async def token(
        self, code: str, verifier: str | None = None, secret: str | None = None
    ) -> httpx2.Response:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": self.client["client_id"],
            "client_secret": secret or self.client["client_secret"],
            "code_verifier": verifier or self.verifier,
        }
        return await self.browser.http.post(f"{self.base}/token", data=form)

    async def tokens(self) -> dict[str, Any]:
        await self.register()
        answer = await self.token(await self.code())
        assert answer.status_code == 200, answer.text
        return dict(answer.json())


async def mcp_status(url: str, token: str) -> httpx2.Response:
    """An MCP initialize with a bearer, raw: the auth gate answers before the protocol."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
    }
    async with httpx2.AsyncClient(timeout=60) as http:
        return await http.post(url, json=body, headers=headers)


# --- the flow -----------------------------------------------------------------------------


async def test_a_human_connects_with_the_official_client_and_acts_as_themself(
    mcp: Any, actors: Any, db_pool: Any
) -> None:
    human, browser = await login(actors)
    status, team = await human.call("POST", "/teams", json={"name": f"t-{uuid.uuid4().hex[:6]}"})
    assert status == 201, team
    storage = MemoryStorage()
    provider = connector_client(mcp.url, browser, storage)
    async with session_with(mcp.url, provider) as session:
        me = structured(await session.call_tool("service_whoami", {}))
        teams = structured(await session.call_tool("teams_list", {}))
    client = storage.client
    assert client is not None and client.client_secret
    assert me["subjectType"] == "human"
    assert me["subjectId"] == str(human.subject_id)
    assert me["identityId"] == str(human.identity_id)
    assert me["clientId"] == client.client_id
    # the same teams the human sees with their session: it acts as the human
    assert [item["id"] for item in teams["items"]] == [team["id"]]
    # the consent page named the client and the redirect host
    assert "Test MCP host" in browser.page and "127.0.0.1:9" in browser.page
    # registration, code and refresh token are stored only as keyed hashes
    assert storage.tokens is not None and storage.tokens.refresh_token
    row = await db_pool.fetchrow(
        "SELECT secret_hash FROM connector_clients WHERE client_id = $1", client.client_id
    )
    assert row["secret_hash"] and client.client_secret not in row["secret_hash"]
    grant = await db_pool.fetchrow(
        "SELECT refresh_hash, human_id, resource FROM connector_grants WHERE client_id = $1",
        client.client_id,
    )
    assert grant["refresh_hash"] != storage.tokens.refresh_token
    assert grant["human_id"] == human.subject_id
    assert grant["resource"] == mcp.url


async def test_team_roles_apply_to_the_connected_human(mcp: Any, actors: Any) -> None:
    owner = await actors.human()
    status, team = await owner.call("POST", "/teams", json={"name": f"t-{uuid.uuid4().hex[:6]}"})
    assert status == 201, team
    member, browser = await login(actors)
    await join_team(owner, team["id"], member, "member")
    flow = Flow(mcp.url, browser)
    tokens = await flow.tokens()
    async with session_with(mcp.url, None, Authorization=f"Bearer {tokens['access_token']}") as s:
        listed = structured(await s.call_tool("teams_list", {}))
        assert team["id"] in {item["id"] for item in listed["items"]}
        promoted = await s.call_tool(
            "team_member_update_role",
            {"team_id": team["id"], "subject_id": str(member.subject_id), "role": "owner"},
        )
    # a plain member may not change roles, through the connector as through the session
    assert problem_of(promoted)["status"] == 403, promoted


async def test_a_refresh_token_rotates(mcp: Any, actors: Any) -> None:
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    tokens = await flow.tokens()
    form = {
        "grant_type": "refresh_token",
        "refresh_token": tokens["refresh_token"],
        "client_id": flow.client["client_id"],
        "client_secret": flow.client["client_secret"],
    }
    renewed = await browser.http.post(f"{flow.base}/token", data=form)
    assert renewed.status_code == 200, renewed.text
    assert renewed.json()["refresh_token"] != tokens["refresh_token"]
    again = await browser.http.post(f"{flow.base}/token", data=form)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant", again.text
    assert (await mcp_status(mcp.url, renewed.json()["access_token"])).status_code == 200


async def test_a_revoked_token_stops_working(mcp: Any, actors: Any) -> None:
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    tokens = await flow.tokens()
    assert (await mcp_status(mcp.url, tokens["access_token"])).status_code == 200
    form = {
        "token": tokens["access_token"],
        "client_id": flow.client["client_id"],
        "client_secret": flow.client["client_secret"],
    }
    revoked = await browser.http.post(f"{flow.base}/revoke", data=form)
    assert revoked.status_code == 200, revoked.text
    assert (await mcp_status(mcp.url, tokens["access_token"])).status_code == 401


async def test_metadata_is_published(mcp: Any) -> None:
    base = _origin(mcp.url)
    async with httpx2.AsyncClient(timeout=60) as http:
        resource = (await http.get(f"{base}/.well-known/oauth-protected-resource/mcp")).json()
        server = (await http.get(f"{base}/.well-known/oauth-authorization-server")).json()
        anonymous = await http.post(mcp.url, json={})
    assert resource["resource"] == mcp.url
    assert [url.rstrip("/") for url in resource["authorization_servers"]] == [base]
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["registration_endpoint"] == f"{base}/register"
    assert anonymous.status_code == 401
    assert "resource_metadata=" in anonymous.headers["www-authenticate"]


async def test_clients_authenticate_against_the_hashed_secret(mcp: Any, actors: Any) -> None:
    """The secret is stored only as a keyed hash: the right one (post or Basic) passes, a wrong
    one is invalid_client, and a code survives the failed attempt."""
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    await flow.register()
    code = await flow.code()
    wrong = await flow.token(code, secret=secrets.token_hex(32))
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client", wrong.text
    assert (await flow.token(code)).status_code == 200

    basic = Flow(mcp.url, browser)
    await basic.register(token_endpoint_auth_method="client_secret_basic")
    form = {
        "grant_type": "authorization_code",
        "code": await basic.code(),
        "redirect_uri": REDIRECT_URI,
        "client_id": basic.client["client_id"],
        "code_verifier": basic.verifier,
    }
    pair = (basic.client["client_id"], basic.client["client_secret"])
    answer = await browser.http.post(f"{basic.base}/token", data=form, auth=pair)
    assert answer.status_code == 200, answer.text
    # the Basic client's secret in the body instead is not its registered method
    again = {**form, "code": await basic.code(), "client_secret": pair[1]}
    refused = await browser.http.post(f"{basic.base}/token", data=again)
    assert refused.status_code == 401, refused.text


# --- refusals -----------------------------------------------------------------------------


async def test_a_registration_out_of_bounds_is_refused(mcp: Any) -> None:
    base = _origin(mcp.url)
    many = [f"http://127.0.0.1:9/cb{n}" for n in range(CONNECTOR_REDIRECT_URIS_MAX + 1)]
    long_uri = "http://127.0.0.1:9/" + "a" * 3000
    async with httpx2.AsyncClient(timeout=60) as http:
        for uris in (many, [long_uri]):
            body = {"redirect_uris": uris, "grant_types": ["authorization_code"]}
            answer = await http.post(f"{base}/register", json=body)
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata")


async def test_a_wrong_pkce_verifier_is_invalid_grant(mcp: Any, actors: Any) -> None:
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    await flow.register()
    code = await flow.code()
    wrong = await flow.token(code, verifier=secrets.token_urlsafe(48))
    assert wrong.status_code == 400, wrong.text
    assert wrong.json()["error"] == "invalid_grant"
    assert "access_token" not in wrong.json()
    # an unknown or malformed code is invalid_grant too, never a server error
    for bogus in ("service_ac_unknown", "x" * 5000):
        answer = await flow.token(bogus)
        assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant", bogus


async def test_a_redirect_uri_not_registered_is_refused_without_redirect(
    mcp: Any, actors: Any
) -> None:
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    await flow.register()
    answer = await browser.http.get(flow.authorize_url(redirect_uri="https://evil.example/cb"))
    assert answer.status_code == 400, answer.text
    assert "location" not in answer.headers
    assert answer.json()["error"] == "invalid_request"
    unknown = await browser.http.get(flow.authorize_url(client_id=str(uuid.uuid4())))
    assert unknown.status_code == 400 and "location" not in unknown.headers


async def test_a_state_too_long_for_the_consent_page_is_refused_at_authorize(
    mcp: Any, actors: Any
) -> None:
    """The signed request rides in the consent URL and the login's `next`: /authorize refuses
    one longer than they carry, to the client, instead of a 400 page for the human later."""
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    await flow.register()
    state = "x" * CONNECTOR_REQUEST_MAX_CHARS
    answer = await browser.http.get(flow.authorize_url(state=state))
    assert answer.status_code == 302, answer.text
    sent = parse_qs(urlsplit(answer.headers["location"]).query)
    assert sent["error"] == ["invalid_request"] and "code" not in sent


async def test_a_denial_sends_access_denied_to_the_client(mcp: Any, actors: Any) -> None:
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    await flow.register()
    answer = await browser.decide(flow.authorize_url(), decision="deny")
    assert answer["error"] == "access_denied"
    assert answer["state"] == flow.state
    assert "code" not in answer


async def test_a_replayed_code_is_invalid_grant_and_revokes_its_grant(
    mcp: Any, actors: Any
) -> None:
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    await flow.register()
    code = await flow.code()
    first = await flow.token(code)
    assert first.status_code == 200, first.text
    replay = await flow.token(code)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant", replay.text
    # RFC 6749 4.1.2: the tokens of the first redemption die with the replay
    assert (await mcp_status(mcp.url, first.json()["access_token"])).status_code == 401


async def test_an_expired_code_is_invalid_grant(mcp: Any, actors: Any, db_pool: Any) -> None:
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    await flow.register()
    code = await flow.code()
    await db_pool.execute(
        "UPDATE connector_codes SET expires_at = now() - interval '1 second' WHERE client_id = $1",
        flow.client["client_id"],
    )
    answer = await flow.token(code)
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant", answer.text


async def test_a_token_for_another_audience_is_refused(
    mcp: Any, other_mcp: Any, actors: Any
) -> None:
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    tokens = await flow.tokens()
    assert (await mcp_status(mcp.url, tokens["access_token"])).status_code == 200
    refused = await mcp_status(other_mcp.url, tokens["access_token"])
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"] == "invalid_token"
    # nor does this server issue codes for another resource (RFC 8707)
    answer = await browser.http.get(flow.authorize_url(resource=other_mcp.url))
    assert answer.status_code == 302
    assert "error=invalid_target" in answer.headers["location"]


async def test_an_agents_rest_token_is_refused_at_the_mcp_server(mcp: Any, actors: Any) -> None:
    agent = await actors.agent()
    token = agent.auth["Authorization"].removeprefix("Bearer ")
    refused = await mcp_status(mcp.url, token)
    assert refused.status_code == 401, refused.text
    assert "resource_metadata=" in refused.headers["www-authenticate"]
    # the agent's own credentials still work there
    async with session_with(
        mcp.url, None, **{"X-Client-Id": agent.client_id, "X-Client-Secret": agent.client_secret}
    ) as s:
        me = structured(await s.call_tool("service_whoami", {}))
    assert me["subjectType"] == "agent"


async def test_a_connector_token_is_refused_at_the_rest_api(
    mcp: Any, actors: Any, api_http: Any
) -> None:
    _, browser = await login(actors)
    tokens = await Flow(mcp.url, browser).tokens()
    headers = {"Authorization": f"Bearer {tokens['access_token']}"}
    async with api_http.get("/agents/whoami", headers=headers) as answer:
        assert answer.status == 401, await answer.text()


async def test_the_consent_page_sends_anonymous_visitors_to_the_login(
    mcp: Any, actors: Any
) -> None:
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    await flow.register()
    to_consent = await browser.http.get(flow.authorize_url())
    consent_url = to_consent.headers["location"]
    async with httpx2.AsyncClient(timeout=60) as anonymous:
        answer = await anonymous.get(consent_url)
    assert answer.status_code == 302
    target = urlsplit(answer.headers["location"])
    assert target.path == "/console/"
    assert parse_qs(target.query)["next"][0].startswith("/oauth/consent?request=")


async def test_a_consent_without_its_csrf_token_or_signature_is_refused(
    mcp: Any, actors: Any
) -> None:
    _, browser = await login(actors)
    flow = Flow(mcp.url, browser)
    await flow.register()
    request, csrf = await browser.consent_page(flow.authorize_url())
    stale = await browser.http.post(
        browser.consent_url, data={"request": request, "csrf": "0" * 64, "decision": "approve"}
    )
    assert stale.status_code == 401 and "location" not in stale.headers
    forged = request[:-4] + ("AAAA" if not request.endswith("AAAA") else "BBBB")
    answer = await browser.http.post(
        browser.consent_url, data={"request": forged, "csrf": csrf, "decision": "approve"}
    )
    assert answer.status_code == 400 and "location" not in answer.headers
    # another human's session cannot use this human's form
    _, intruder = await login(actors)
    stolen = await intruder.http.post(
        browser.consent_url, data={"request": request, "csrf": csrf, "decision": "approve"}
    )
    assert stolen.status_code == 401 and "location" not in stolen.headers


async def test_the_back_channel_needs_the_connector_secret(stack: Any, api_http: Any) -> None:
    body = {"token": "x", "resource": "http://127.0.0.1:1/mcp"}
    async with api_http.post("/oauth/connector/exchange", json=body) as answer:
        assert answer.status == 401
    wrong = {CONNECTOR_HEADER: "0" * 64}
    async with api_http.post("/oauth/connector/exchange", json=body, headers=wrong) as answer:
        assert answer.status == 401
    right = {CONNECTOR_HEADER: connector_secret(stack.settings.secret_bytes)}
    async with api_http.post("/oauth/connector/exchange", json=body, headers=right) as answer:
        problem = await answer.json()
        assert answer.status == 401 and problem["code"] == "connector-token-invalid"
