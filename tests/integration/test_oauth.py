"""The OAuth2 server on the real stack (SPEC 5; DECISIONS "Identity and authentication"): the
client-credentials grant in each client-authentication form, RFC 6749 errors, scopes, the JWKS
and RFC 8414 metadata, bearer verification (tampered, expired, foreign, wrong scheme) and the
token-exchange hook."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import jwt
import nacl.signing
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from waiting import wait_until

from infra.oauth import OAuthServer, SigningKeyStore, new_sealed_key
from schemas.errors import Unauthorized
from workers.admin import issue_bootstrap_voucher

ALL_AGENT_SCOPES = {
    "diary:read",
    "diary:write",
    "diary:delete",
    "diary:share",
    "agent:profile",
    "agent:directory",
    "crypto:sign",
}


@dataclass(frozen=True)
class Agent:
    identity_id: str
    client_id: str
    client_secret: str
    public_key: str
    fingerprint: str


@pytest.fixture(scope="module")
async def http(stack) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=stack.base_url) as session:
        yield session


@pytest.fixture(scope="module")
async def agent(stack, http) -> Agent:
    voucher = await issue_bootstrap_voucher(stack.temporal, stack.settings)
    raw = bytes(nacl.signing.SigningKey.generate().verify_key)
    public_key = "ed25519:" + base64.b64encode(raw).decode()
    async with http.post(
        "/auth/register", json={"public_key": public_key, "voucher_code": voucher.code}
    ) as response:
        body = await response.json()
        assert response.status == 200, body
    return Agent(
        identity_id=body["identityId"],
        client_id=body["clientId"],
        client_secret=body["clientSecret"],
        public_key=public_key,
        fingerprint=body["fingerprint"],
    )


def basic(client_id: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


async def token_call(
    http: aiohttp.ClientSession,
    *,
    data: dict[str, str] | None = None,
    json_body: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, dict[str, Any]]:
    async with http.post("/oauth2/token", data=data, json=json_body, headers=headers) as response:
        return response.status, response.headers, await response.json(content_type=None)


async def fetch_token(http: aiohttp.ClientSession, agent: Agent, scope: str | None = None) -> str:
    form = {"grant_type": "client_credentials"}
    if scope is not None:
        form["scope"] = scope
    status, _, body = await token_call(
        http, data=form, headers=basic(agent.client_id, agent.client_secret)
    )
    assert status == 200, body
    return str(body["access_token"])


async def whoami(http: aiohttp.ClientSession, headers: dict[str, str]) -> tuple[int, Any, Any]:
    async with http.get("/agents/whoami", headers=headers) as response:
        return response.status, response.headers, await response.json(content_type=None)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_token_response(status: int, headers: Any, body: dict[str, Any]) -> None:
    assert status == 200, body
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert "refresh_token" not in body
    assert headers["Cache-Control"] == "no-store"
    assert jwt.get_unverified_header(body["access_token"])["alg"] == "EdDSA"


# --- the grant ----------------------------------------------------------------------------


async def test_token_with_client_secret_basic(stack, http, agent) -> None:
    status, headers, body = await token_call(
        http,
        data={"grant_type": "client_credentials"},
        headers=basic(agent.client_id, agent.client_secret),
    )
    assert_token_response(status, headers, body)
    assert set(body["scope"].split()) >= ALL_AGENT_SCOPES


async def test_token_with_client_secret_post_form(stack, http, agent) -> None:
    status, headers, body = await token_call(
        http,
        data={
            "grant_type": "client_credentials",
            "client_id": agent.client_id,
            "client_secret": agent.client_secret,
        },
    )
    assert_token_response(status, headers, body)


async def test_token_with_a_json_body(stack, http, agent) -> None:
    status, headers, body = await token_call(
        http,
        json_body={
            "grant_type": "client_credentials",
            "client_id": agent.client_id,
            "client_secret": agent.client_secret,
        },
    )
    assert_token_response(status, headers, body)


async def test_token_works_on_whoami(stack, http, agent) -> None:
    status, _, me = await whoami(http, bearer(await fetch_token(http, agent)))
    assert status == 200, me
    assert me["subjectType"] == "agent"
    assert me["identityId"] == agent.identity_id
    assert me["clientId"] == agent.client_id
    assert me["fingerprint"] == agent.fingerprint
    assert me["publicKey"] == agent.public_key


@pytest.mark.parametrize(
    "how", ["basic", "post"], ids=["client_secret_basic", "client_secret_post"]
)
async def test_wrong_secret_is_401_invalid_client_in_rfc6749_json(
    stack, http, agent, how: str
) -> None:
    wrong = agent.client_secret[:-1] + ("A" if agent.client_secret[-1] != "A" else "B")
    form = {"grant_type": "client_credentials"}
    headers = None
    if how == "basic":
        headers = basic(agent.client_id, wrong)
    else:
        form |= {"client_id": agent.client_id, "client_secret": wrong}

    status, response_headers, body = await token_call(http, data=form, headers=headers)

    assert status == 401
    assert response_headers["Content-Type"].startswith("application/json")
    assert body["error"] == "invalid_client"
    assert set(body) <= {"error", "error_description", "error_uri"}
    assert "WWW-Authenticate" in response_headers


async def test_the_document_gives_the_token_errors_their_rfc6749_body(stack, http) -> None:
    """Found by schemathesis: the token endpoint's 400 and 401 were documented as problems."""
    async with http.get("/openapi.json") as response:
        document = await response.json()
    responses = document["paths"]["/oauth2/token"]["post"]["responses"]
    for status in ("400", "401"):
        schema = responses[status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/OAuthError"}, status
    assert document["components"]["schemas"]["OAuthError"]["required"] == [
        "error",
        "error_description",
    ]


async def test_unknown_client_is_401_invalid_client(stack, http, agent) -> None:
    status, _, body = await token_call(
        http,
        data={"grant_type": "client_credentials"},
        headers=basic(str(uuid.uuid4()), agent.client_secret),
    )
    assert status == 401
    assert body["error"] == "invalid_client"


async def test_no_client_authentication_is_401(stack, http) -> None:
    status, _, body = await token_call(http, data={"grant_type": "client_credentials"})
    assert status == 401
    assert body["error"] == "invalid_client"


@pytest.mark.parametrize("grant", ["password", "authorization_code", "refresh_token"])
async def test_unsupported_grant_is_400(stack, http, agent, grant: str) -> None:
    status, _, body = await token_call(
        http, data={"grant_type": grant}, headers=basic(agent.client_id, agent.client_secret)
    )
    assert status == 400
    assert body["error"] == "unsupported_grant_type"


async def test_missing_grant_type_is_400_invalid_request(stack, http, agent) -> None:
    status, _, body = await token_call(
        http, data={"scope": "diary:read"}, headers=basic(agent.client_id, agent.client_secret)
    )
    assert status == 400
    assert body["error"] == "invalid_request"


async def test_two_client_authentication_methods_are_400(stack, http, agent) -> None:
    status, _, body = await token_call(
        http,
        data={
            "grant_type": "client_credentials",
            "client_id": agent.client_id,
            "client_secret": agent.client_secret,
        },
        headers=basic(agent.client_id, agent.client_secret),
    )
    assert status == 400
    assert body["error"] == "invalid_request"


# --- scopes -------------------------------------------------------------------------------


async def test_scope_subset_narrows_the_token_and_routes_enforce_it(stack, http, agent) -> None:
    status, _, body = await token_call(
        http,
        data={"grant_type": "client_credentials", "scope": "diary:read"},
        headers=basic(agent.client_id, agent.client_secret),
    )
    assert status == 200, body
    assert body["scope"] == "diary:read"
    claims = jwt.decode(body["access_token"], options={"verify_signature": False})
    assert claims["scope"] == "diary:read"

    status, headers, problem = await whoami(http, bearer(body["access_token"]))

    assert status == 403, problem
    assert headers["Content-Type"].startswith("application/problem+json")
    assert problem["code"] == "missing-scope"
    assert "agent:profile" in problem["detail"]


async def test_whoami_reports_exactly_the_granted_scopes(stack, http, agent) -> None:
    token = await fetch_token(http, agent, scope="agent:profile crypto:sign")
    status, _, me = await whoami(http, bearer(token))
    assert status == 200, me
    assert me["scopes"] == ["agent:profile", "crypto:sign"]


@pytest.mark.parametrize("scope", ["admin", "diary:read admin", "openid"])
async def test_scope_outside_the_clients_is_400_invalid_scope(
    stack, http, agent, scope: str
) -> None:
    status, _, body = await token_call(
        http,
        data={"grant_type": "client_credentials", "scope": scope},
        headers=basic(agent.client_id, agent.client_secret),
    )
    assert status == 400
    assert body["error"] == "invalid_scope"


# --- JWKS, metadata, verification with the published key ------------------------------------


async def test_jwks_serves_the_ed25519_key_that_signed_the_token(stack, http, agent) -> None:
    token = await fetch_token(http, agent)
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "EdDSA"
    assert header["typ"] == "at+jwt"

    async with http.get("/.well-known/jwks.json") as response:
        assert response.status == 200
        key_set = await response.json()
    by_kid = {key["kid"]: key for key in key_set["keys"]}
    assert header["kid"] in by_kid
    jwk = by_kid[header["kid"]]
    assert jwk["kty"] == "OKP"
    assert jwk["crv"] == "Ed25519"
    assert "d" not in jwk  # never the private part

    claims = jwt.decode(
        token,
        jwt.PyJWK(jwk).key,
        algorithms=["EdDSA"],
        audience=stack.settings.issuer,
        issuer=stack.settings.issuer,
    )
    assert claims["sub"] == agent.identity_id
    assert claims["client_id"] == agent.client_id
    assert claims["identity_id"] == agent.identity_id
    assert claims["fingerprint"] == agent.fingerprint
    assert claims["public_key"] == agent.public_key
    assert claims["exp"] - claims["iat"] == 3600


async def test_rfc8414_metadata(stack, http) -> None:
    async with http.get("/.well-known/oauth-authorization-server") as response:
        assert response.status == 200
        metadata = await response.json()
    issuer = stack.settings.issuer
    assert metadata["issuer"] == issuer
    assert metadata["token_endpoint"] == f"{issuer}/oauth2/token"
    assert metadata["jwks_uri"] == f"{issuer}/.well-known/jwks.json"
    assert metadata["grant_types_supported"] == ["client_credentials"]
    assert set(metadata["token_endpoint_auth_methods_supported"]) == {
        "client_secret_basic",
        "client_secret_post",
    }
    assert "response_types_supported" in metadata
    assert set(metadata["scopes_supported"]) >= ALL_AGENT_SCOPES


# --- bearer verification ------------------------------------------------------------------


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def tamper_payload(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(_b64url_decode(payload))
    claims["scope"] = claims["scope"] + " key:manage"
    return ".".join([header, _b64url(json.dumps(claims).encode()), signature])


def flip_a_payload_char(token: str) -> str:
    header, payload, signature = token.split(".")
    middle = len(payload) // 2
    flipped = "A" if payload[middle] != "A" else "B"
    return ".".join([header, payload[:middle] + flipped + payload[middle + 1 :], signature])


async def assert_401_problem(
    http: aiohttp.ClientSession, headers: dict[str, str], code: str = "access-token-invalid"
) -> None:
    status, response_headers, problem = await whoami(http, headers)
    assert status == 401, problem
    assert response_headers["Content-Type"].startswith("application/problem+json")
    assert problem["status"] == 401
    assert problem["code"] == code
    assert response_headers["WWW-Authenticate"].startswith("Bearer")


async def test_flipped_payload_char_is_401(stack, http, agent) -> None:
    await assert_401_problem(http, bearer(flip_a_payload_char(await fetch_token(http, agent))))


async def test_widened_scope_claim_is_401(stack, http, agent) -> None:
    await assert_401_problem(http, bearer(tamper_payload(await fetch_token(http, agent))))


def claims_like(token: str, **changes: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, options={"verify_signature": False})
    claims.update(changes)
    return header, claims


async def test_expired_token_signed_by_the_real_key_is_401(stack, http, agent, db_pool) -> None:
    store = SigningKeyStore(db_pool, stack.settings.secret_ring)
    key = await store.signing_key()
    now = int(time.time())
    header, claims = claims_like(
        await fetch_token(http, agent), iat=now - 7200, nbf=now - 7200, exp=now - 3600
    )
    assert header["kid"] == key.kid
    expired = jwt.encode(
        claims, key.private, algorithm="EdDSA", headers={"kid": key.kid, "typ": "at+jwt"}
    )
    # The same claims with a live expiry pass, so only the expiry is what fails.
    live = jwt.encode(
        {**claims, "exp": now + 600},
        key.private,
        algorithm="EdDSA",
        headers={"kid": key.kid, "typ": "at+jwt"},
    )
    assert (await whoami(http, bearer(live)))[0] == 200

    await assert_401_problem(http, bearer(expired))


# --- verified tokens are remembered, within their expiry and their key's life -----------------


def in_process_server(stack: Any, db_pool: Any) -> OAuthServer:
    """An OAuth server like the API's, on this module's database."""
    settings = stack.settings
    return OAuthServer(
        db_pool,
        SigningKeyStore(db_pool, settings.secret_ring),
        issuer=settings.issuer,
        ring=settings.secret_ring,
        token_ttl_sec=settings.access_token_ttl_sec,
    )


async def test_a_remembered_token_still_expires(stack, http, agent, db_pool) -> None:
    server = in_process_server(stack, db_pool)
    key = await server.keys.signing_key()
    now = int(time.time())
    _, claims = claims_like(await fetch_token(http, agent), iat=now, nbf=now, exp=now + 2)
    token = jwt.encode(claims, key.private, algorithm="EdDSA", headers={"kid": key.kid})
    assert (await server.verify(token)).client_id == agent.client_id
    assert (await server.verify(token)).client_id == agent.client_id  # the remembered one

    await wait_until(lambda: time.time() > claims["exp"])  # the token's end, on the clock
    with pytest.raises(Unauthorized, match="expired"):
        await server.verify(token)


async def test_a_remembered_token_dies_with_its_signing_key(stack, http, agent, db_pool) -> None:
    # An extra key, already retired (it verifies for two more hours but never signs), so the
    # API's own signing key is untouched.
    kid, sealed, public = new_sealed_key(stack.settings.secret_ring)
    await db_pool.execute(
        "INSERT INTO jwt_signing_keys (kid, sealed_seed, public_key, retired_at) "
        "VALUES ($1, $2, $3, now() - interval '1 hour')",
        kid,
        sealed,
        public,
    )
    server = in_process_server(stack, db_pool)
    key = await server.keys.verification_key(kid)
    assert key is not None and key.private is not None
    header, claims = claims_like(await fetch_token(http, agent))
    token = jwt.encode(claims, key.private, algorithm="EdDSA", headers={**header, "kid": kid})
    assert (await server.verify(token)).client_id == agent.client_id

    await db_pool.execute(
        "UPDATE jwt_signing_keys SET retired_at = now() - interval '3 hours' WHERE kid = $1", kid
    )
    await server.keys.refresh()
    with pytest.raises(Unauthorized, match="not issued by this server"):
        await server.verify(token)


async def test_a_remembered_token_is_refused_once_the_secret_rotates(
    stack, http, agent, db_pool
) -> None:
    server = in_process_server(stack, db_pool)
    token = await fetch_token(http, agent)
    assert (await server.verify(token)).client_id == agent.client_id
    generation = await db_pool.fetchval(
        "SELECT secret_generation FROM oauth_clients WHERE client_id = $1", agent.client_id
    )
    await db_pool.execute(
        "UPDATE oauth_clients SET secret_generation = $2 WHERE client_id = $1",
        agent.client_id,
        generation + 1,
    )
    try:
        with pytest.raises(Unauthorized, match="rotated"):
            await server.verify(token)
    finally:
        await db_pool.execute(
            "UPDATE oauth_clients SET secret_generation = $2 WHERE client_id = $1",
            agent.client_id,
            generation,
        )


async def test_token_signed_by_a_foreign_key_under_our_kid_is_401(stack, http, agent) -> None:
    header, claims = claims_like(await fetch_token(http, agent))
    forged = jwt.encode(
        claims,
        Ed25519PrivateKey.generate(),
        algorithm="EdDSA",
        headers={"kid": header["kid"], "typ": "at+jwt"},
    )
    await assert_401_problem(http, bearer(forged))


async def test_unsigned_token_is_401(stack, http, agent) -> None:
    header, claims = claims_like(await fetch_token(http, agent))
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": header["kid"]})
    await assert_401_problem(http, bearer(unsigned))


async def test_hs256_token_keyed_with_the_public_key_is_401(stack, http, agent) -> None:
    """Algorithm confusion: an HMAC token keyed with the published public key."""
    token = await fetch_token(http, agent)
    header, claims = claims_like(token)
    async with http.get("/.well-known/jwks.json") as response:
        jwk = {k["kid"]: k for k in (await response.json())["keys"]}[header["kid"]]
    confused = jwt.encode(
        claims, _b64url_decode(jwk["x"]), algorithm="HS256", headers={"kid": header["kid"]}
    )
    await assert_401_problem(http, bearer(confused))


@pytest.mark.parametrize(
    "authorization,code",
    [
        ("Basic {basic}", "authorization-scheme-invalid"),
        ("Bearer", "authorization-scheme-invalid"),
        ("Bearer not-a-jwt", "access-token-invalid"),
        ("Token {token}", "authorization-scheme-invalid"),
        ("{token}", "authorization-scheme-invalid"),
    ],
    ids=["basic", "empty-bearer", "garbage", "other-scheme", "no-scheme"],
)
async def test_wrong_authorization_header_is_401(
    stack, http, agent, authorization: str, code: str
) -> None:
    value = authorization.format(
        basic=base64.b64encode(f"{agent.client_id}:{agent.client_secret}".encode()).decode(),
        token=await fetch_token(http, agent),
    )
    await assert_401_problem(http, {"Authorization": value}, code)


async def test_missing_auth_is_401_problem_with_www_authenticate(stack, http) -> None:
    await assert_401_problem(http, {}, "unauthorized")


# --- the token-exchange hook --------------------------------------------------------------

HOOK_PATH = "/hooks/hydra/token-exchange"


async def hook_call(
    http: aiohttp.ClientSession, body: dict[str, Any], secret: str | None
) -> tuple[int, Any]:
    headers = {} if secret is None else {"X-Hook-Secret": secret}
    async with http.post(HOOK_PATH, json=body, headers=headers) as response:
        return response.status, await response.json(content_type=None)


async def test_token_exchange_hook_returns_the_session_claims(stack, http, agent) -> None:
    secret = stack.settings.hook_secret.get_secret_value()
    status, body = await hook_call(
        http,
        {"session": {}, "request": {"client_id": agent.client_id, "grant_types": []}},
        secret,
    )
    assert status == 200, body
    claims = body["session"]["access_token"]
    assert claims["identity_id"] == agent.identity_id
    assert claims["fingerprint"] == agent.fingerprint
    assert claims["public_key"] == agent.public_key


async def test_token_exchange_hook_accepts_a_top_level_client_id(stack, http, agent) -> None:
    status, body = await hook_call(
        http, {"client_id": agent.client_id}, stack.settings.hook_secret.get_secret_value()
    )
    assert status == 200, body
    assert body["session"]["access_token"]["identity_id"] == agent.identity_id


@pytest.mark.parametrize(
    "secret", [None, "", "wrong-hook-secret"], ids=["absent", "empty", "wrong"]
)
async def test_token_exchange_hook_without_the_secret_is_401(
    stack, http, agent, secret: str | None
) -> None:
    status, problem = await hook_call(http, {"client_id": agent.client_id}, secret)
    assert status == 401, problem
    assert problem["code"] == "hook-secret-invalid"
    assert "identity_id" not in json.dumps(problem)


async def test_token_exchange_hook_for_an_unknown_client_is_403(stack, http) -> None:
    status, problem = await hook_call(
        http, {"client_id": str(uuid.uuid4())}, stack.settings.hook_secret.get_secret_value()
    )
    assert status == 403, problem
    assert problem["code"] == "unknown-client"
