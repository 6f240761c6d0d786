"""Human self-service on the real stack (DECISIONS "Identity and authentication"): email +
password registration, login with a session token and an HttpOnly SameSite=Lax cookie, whoami
as a human through either, and logout ending the session."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from http.cookies import SimpleCookie
from typing import Any

import aiohttp
import pytest

from api.auth import SESSION_COOKIE

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
async def http(stack) -> AsyncIterator[aiohttp.ClientSession]:
    # A dummy jar: no cookie is sent unless a test sets the header itself.
    async with aiohttp.ClientSession(
        base_url=stack.base_url, cookie_jar=aiohttp.DummyCookieJar()
    ) as session:
        yield session


def new_email() -> str:
    return f"human-{uuid.uuid4().hex[:12]}@example.org"


async def post(
    http: aiohttp.ClientSession, path: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, Any, Any]:
    async with http.post(path, json=body, headers=headers) as response:
        return response.status, response.headers, await response.json(content_type=None)


async def whoami(http: aiohttp.ClientSession, headers: dict[str, str]) -> tuple[int, Any]:
    async with http.get("/agents/whoami", headers=headers) as response:
        return response.status, await response.json(content_type=None)


async def register(http: aiohttp.ClientSession, email: str, password: str = PASSWORD) -> Any:
    status, _, body = await post(
        http, "/self-service/registration", {"email": email, "password": password}
    )
    assert status == 201, body
    return body


async def login(
    http: aiohttp.ClientSession, email: str, password: str = PASSWORD
) -> tuple[Any, Any]:
    status, headers, body = await post(
        http, "/self-service/login", {"email": email, "password": password}
    )
    assert status == 200, body
    return body, headers


# --- registration -------------------------------------------------------------------------


async def test_register_is_201_with_an_active_identity(stack, http, db_pool) -> None:
    email = new_email()
    body = await register(http, email)
    assert body["email"] == email
    assert body["state"] == "active"
    row = await db_pool.fetchrow(
        "SELECT schema_id, email, password_hash FROM identities WHERE id = $1",
        uuid.UUID(body["identityId"]),
    )
    assert row["schema_id"] == "human"
    assert row["email"] == email
    assert row["password_hash"].startswith("$argon2id$")
    assert PASSWORD not in row["password_hash"]


async def test_email_is_case_insensitive_and_trimmed(stack, http) -> None:
    email = new_email()
    body = await register(http, f"  {email.upper()} ")
    assert body["email"] == email
    await login(http, email)


async def test_duplicate_email_is_409(stack, http) -> None:
    email = new_email()
    await register(http, email)
    status, _, problem = await post(
        http, "/self-service/registration", {"email": email, "password": PASSWORD + "!"}
    )
    assert (status, problem["code"]) == (409, "identity-exists"), problem
    assert problem["status"] == 409


async def test_duplicate_email_in_other_case_is_409(stack, http) -> None:
    email = new_email()
    await register(http, email)
    status, _, problem = await post(
        http, "/self-service/registration", {"email": email.upper(), "password": PASSWORD}
    )
    assert (status, problem["code"]) == (409, "identity-exists"), problem


@pytest.mark.parametrize(
    "body,pointer",
    [
        ({"email": "x@example.org", "password": "short"}, "/password"),
        ({"email": "x@example.org", "password": "a" * 11}, "/password"),
        ({"email": "not-an-email", "password": PASSWORD}, "/email"),
        ({"email": "x@example.org", "password": PASSWORD, "admin": True}, "/admin"),
        # found by schemathesis: a NUL reached Postgres and made a 500
        ({"email": "x\u0000y@example.org", "password": PASSWORD}, "/email"),
        ({"email": "x@exa\u001fmple.org", "password": PASSWORD}, "/email"),
    ],
    ids=["short-password", "eleven-chars", "bad-email", "unknown-field", "nul", "control"],
)
async def test_invalid_registration_is_400(stack, http, body: dict[str, Any], pointer: str) -> None:
    status, headers, problem = await post(http, "/self-service/registration", body)
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert headers["Content-Type"].startswith("application/problem+json")
    assert [e["pointer"] for e in problem["errors"]] == [pointer]


# --- login --------------------------------------------------------------------------------


async def test_login_with_a_wrong_password_is_401(stack, http) -> None:
    email = new_email()
    await register(http, email)
    status, headers, problem = await post(
        http, "/self-service/login", {"email": email, "password": PASSWORD + "x"}
    )
    assert (status, problem["code"]) == (401, "login-failed"), problem
    assert headers["Content-Type"].startswith("application/problem+json")
    assert "Set-Cookie" not in headers


async def test_login_with_an_unknown_email_is_the_same_401(stack, http) -> None:
    email = new_email()
    await register(http, email)
    wrong_password = await post(
        http, "/self-service/login", {"email": email, "password": "wrong password!"}
    )
    unknown_email = await post(
        http, "/self-service/login", {"email": new_email(), "password": "wrong password!"}
    )
    assert wrong_password[0] == unknown_email[0] == 401
    assert wrong_password[2]["code"] == unknown_email[2]["code"]
    assert wrong_password[2]["detail"] == unknown_email[2]["detail"]


async def test_login_returns_a_token_and_an_httponly_lax_cookie(stack, http, db_pool) -> None:
    email = new_email()
    registered = await register(http, email)

    body, headers = await login(http, email)

    assert body["identityId"] == registered["identityId"]
    assert body["sessionToken"]
    uuid.UUID(body["humanId"])
    cookies = SimpleCookie()
    for header in headers.getall("Set-Cookie"):
        cookies.load(header)
    morsel = cookies[SESSION_COOKIE]
    assert morsel.value == body["sessionToken"]
    assert morsel["httponly"]
    assert morsel["samesite"].lower() == "lax"
    assert morsel["path"] == "/"
    assert int(morsel["max-age"]) > 0
    # the token is stored as a keyed hash, never in clear
    hashes = await db_pool.fetch(
        "SELECT token_hash FROM human_sessions WHERE identity_id = $1",
        uuid.UUID(body["identityId"]),
    )
    assert hashes and all(row["token_hash"] != body["sessionToken"] for row in hashes)
    # first login onboards the humans row
    assert await db_pool.fetchval(
        "SELECT id FROM humans WHERE identity_id = $1", uuid.UUID(body["identityId"])
    ) == uuid.UUID(body["humanId"])


async def test_second_login_keeps_the_same_human(stack, http) -> None:
    email = new_email()
    await register(http, email)
    first, _ = await login(http, email)
    second, _ = await login(http, email)
    assert first["humanId"] == second["humanId"]
    assert first["sessionToken"] != second["sessionToken"]


# --- whoami and logout --------------------------------------------------------------------


async def test_whoami_with_the_session_header_is_the_human(stack, http) -> None:
    email = new_email()
    registered = await register(http, email)
    session, _ = await login(http, email)

    status, me = await whoami(http, {"X-Session-Token": session["sessionToken"]})

    assert status == 200, me
    assert me["subjectType"] == "human"
    assert me["identityId"] == registered["identityId"]
    assert me["humanId"] == session["humanId"]
    assert "agentId" not in me and "clientId" not in me


async def test_whoami_with_the_cookie_alone_works(stack, http) -> None:
    email = new_email()
    await register(http, email)
    session, _ = await login(http, email)

    status, me = await whoami(http, {"Cookie": f"{SESSION_COOKIE}={session['sessionToken']}"})

    assert status == 200, me
    assert me["subjectType"] == "human"
    assert me["humanId"] == session["humanId"]


@pytest.mark.parametrize(
    "headers",
    [{"X-Session-Token": "service_hs_forged"}, {"Cookie": f"{SESSION_COOKIE}=service_hs_forged"}],
    ids=["header", "cookie"],
)
async def test_unknown_session_is_401(stack, http, headers: dict[str, str]) -> None:
    status, problem = await whoami(http, headers)
    assert (status, problem["code"]) == (401, "session-invalid"), problem


async def test_logout_ends_the_session(stack, http) -> None:
    email = new_email()
    await register(http, email)
    session, _ = await login(http, email)
    other, _ = await login(http, email)
    token = {"X-Session-Token": session["sessionToken"]}

    status, headers, body = await post(http, "/self-service/logout", None, headers=token)

    assert status == 200, body
    cookies = SimpleCookie()
    for header in headers.getall("Set-Cookie", []):
        cookies.load(header)
    assert cookies[SESSION_COOKIE].value == ""  # the cookie is cleared
    assert (await whoami(http, token))[0] == 401
    assert (await whoami(http, {"Cookie": f"{SESSION_COOKIE}={session['sessionToken']}"}))[0] == 401
    # another session of the same human lives on
    assert (await whoami(http, {"X-Session-Token": other["sessionToken"]}))[0] == 200


async def test_logout_with_the_cookie(stack, http) -> None:
    email = new_email()
    await register(http, email)
    session, _ = await login(http, email)
    cookie = {"Cookie": f"{SESSION_COOKIE}={session['sessionToken']}"}

    status, _, body = await post(http, "/self-service/logout", None, headers=cookie)

    assert status == 200, body
    assert (await whoami(http, cookie))[0] == 401


async def test_logout_without_a_session_is_401(stack, http) -> None:
    status, _, problem = await post(http, "/self-service/logout", None)
    assert (status, problem["code"]) == (401, "unauthorized"), problem


async def test_expired_session_is_401(stack, http, db_pool) -> None:
    email = new_email()
    await register(http, email)
    session, _ = await login(http, email)
    await db_pool.execute(
        "UPDATE human_sessions SET expires_at = now() - interval '1 second' WHERE human_id = $1",
        uuid.UUID(session["humanId"]),
    )
    assert (await whoami(http, {"X-Session-Token": session["sessionToken"]}))[0] == 401
