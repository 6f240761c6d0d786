"""The REST contract on the real stack (SPEC 7; STYLE "Errors", "The API"): every error is an
RFC 9457 problem, the OpenAPI 3.1 document matches the routes the app serves (the console's
pages and forms in a document of their own: `api.openapi`), health and readiness, request ids,
the read-only API pool, and per-identity rate limits with their headers (on a second app with
limits enabled, sharing the module's database and Temporal)."""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import asyncpg
import nacl.signing
import pytest
from aiohttp import web

from api import keys
from api.app import create_app
from api.endpoint import ENDPOINTS
from api.openapi import build_openapi
from api.spec import EndpointSpec
from infra.db import create_pool
from infra.devstack import free_port
from workers.admin import issue_bootstrap_voucher

PROBLEM_FIELDS = {"type", "title", "status", "code", "detail"}
PROBES = {"/health", "/health/ready"}
PROBLEM_JSON = "application/problem+json"
# Bodies sent by an external identity provider / OAuth2 server carry fields we do not own.
OPEN_BODY_PATH_PREFIX = "/hooks/"
# A protocol's envelope (A2A's JSON-RPC request): any JSON object at the HTTP layer, judged by
# the protocol's own handler, which answers a bad envelope in-band (tests/integration/
# test_a2a_http_contract.py)
PROTOCOL_ENVELOPE_PATHS = {"/a2a"}
# A peer's export sent as a file in JSON (a Mem0 answer, a Letta Agent File): another project's
# format, read whole by `schemas/imports` and refused record by record (400 import-invalid)
FOREIGN_FILE_BODIES = {("POST", "/diaries/import", "application/json")}


def new_public_key() -> str:
    raw = bytes(nacl.signing.SigningKey.generate().verify_key)
    return "ed25519:" + base64.b64encode(raw).decode()


@pytest.fixture(scope="module")
async def http(stack) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(
        base_url=stack.base_url, cookie_jar=aiohttp.DummyCookieJar()
    ) as session:
        yield session


@pytest.fixture(scope="module")
async def openapi(stack, http) -> dict[str, Any]:
    async with http.get("/openapi.json") as response:
        assert response.status == 200
        return dict(await response.json())


@pytest.fixture(scope="module")
def documents(stack, openapi) -> dict[str, dict[str, Any]]:
    """Each route's document by `EndpointSpec.document`: the served API's, and the console's
    (served nowhere; built as the app builds `/openapi.json`)."""
    return {"api": openapi, "console": build_openapi(stack.base_url, "console")}


def operation_of(documents: dict[str, dict[str, Any]], spec: EndpointSpec) -> dict[str, Any]:
    operation: dict[str, Any] = documents[spec.document]["paths"][spec.path][spec.method.lower()]
    return operation


@pytest.fixture(scope="module")
async def human_session(stack, http) -> str:
    email = f"contract-{uuid.uuid4().hex[:8]}@example.org"
    credentials = {"email": email, "password": "a long enough password"}
    async with http.post("/self-service/registration", json=credentials) as response:
        assert response.status == 201
    async with http.post("/self-service/login", json=credentials) as response:
        assert response.status == 200
        return str((await response.json())["sessionToken"])


# --- errors are problems ------------------------------------------------------------------


@dataclass(frozen=True)
class Failing:
    """A request that must fail: `body` is JSON, raw bytes, or a callable building the JSON."""

    name: str
    method: str
    path: str
    status: int
    operation: str | None  # the OpenAPI path it belongs to; None for no route
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def _unredeemable_registration() -> dict[str, str]:
    return {"public_key": new_public_key(), "voucher_code": "0" * 64}


def _nonsense_challenge() -> dict[str, str]:
    return {
        "challenge": "service:recovery:nonsense",
        "hmac": "0" * 64,
        "signature": "AAAA",
        "publicKey": new_public_key(),
    }


JSON = {"Content-Type": "application/json"}
FAILING = [
    Failing("invalid-body", "POST", "/auth/register", 400, "/auth/register", {"public_key": "x"}),
    Failing(
        "unknown-field",
        "POST",
        "/recovery/challenge",
        400,
        "/recovery/challenge",
        {"publicKey": "ed25519:A", "x": 1},
    ),
    Failing("not-json", "POST", "/auth/register", 400, "/auth/register", b"{", JSON),
    Failing(
        "voucher-rejected",
        "POST",
        "/auth/register",
        403,
        "/auth/register",
        _unredeemable_registration,
    ),
    Failing("no-credential", "GET", "/agents/whoami", 401, "/agents/whoami"),
    Failing(
        "bad-bearer",
        "GET",
        "/vouch/active",
        401,
        "/vouch/active",
        headers={"Authorization": "Bearer x.y.z"},
    ),
    Failing("bad-fingerprint", "GET", "/agents/nope", 400, "/agents/{fingerprint}"),
    Failing("unknown-agent", "GET", "/agents/0000-0000-0000-0000", 404, "/agents/{fingerprint}"),
    Failing(
        "bad-challenge", "POST", "/recovery/verify", 400, "/recovery/verify", _nonsense_challenge
    ),
    Failing(
        "unknown-flow",
        "POST",
        f"/self-service/recovery?flow={uuid.uuid4()}",
        404,
        "/self-service/recovery",
        {"method": "code", "code": "x"},
    ),
    Failing(
        "bad-login",
        "POST",
        "/self-service/login",
        401,
        "/self-service/login",
        {"email": "nobody@example.org", "password": "x"},
    ),
    Failing(
        "wrong-content-type",
        "POST",
        "/auth/register",
        415,
        "/auth/register",
        b"x",
        {"Content-Type": "text/plain"},
    ),
    Failing("unknown-route", "GET", "/no/such/route", 404, None),
    Failing("wrong-method", "DELETE", "/health", 405, None),
]


async def send(http: aiohttp.ClientSession, case: Failing) -> tuple[int, Any, Any]:
    body = case.body() if callable(case.body) else case.body
    kwargs: dict[str, Any] = {"headers": case.headers}
    if isinstance(body, bytes):
        kwargs["data"] = body
    elif body is not None:
        kwargs["json"] = body
    async with http.request(case.method, case.path, **kwargs) as response:
        return response.status, response.headers, await response.json(content_type=None)


@pytest.mark.parametrize("case", FAILING, ids=lambda case: case.name)
async def test_every_error_is_a_problem(stack, http, case: Failing) -> None:
    status, headers, problem = await send(http, case)

    assert status == case.status, problem
    assert headers["Content-Type"].split(";")[0] == PROBLEM_JSON
    assert set(problem) >= PROBLEM_FIELDS, problem
    assert problem["status"] == status
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", problem["code"])
    assert re.match(r"^[a-z][a-z0-9+.-]*:", problem["type"]), "type is an absolute URI"
    assert problem["type"].endswith(problem["code"])
    assert problem["title"] and problem["detail"]
    assert problem["instance"] == case.path.split("?")[0]
    assert headers["X-Request-Id"]


@pytest.mark.parametrize(
    "case",
    [pytest.param(case, id=case.name) for case in FAILING if case.operation is not None],
)
async def test_every_error_status_is_documented_for_its_operation(
    stack, http, openapi, case: Failing
) -> None:
    status, _, _ = await send(http, case)
    assert status == case.status
    assert case.operation is not None
    assert str(status) in openapi["paths"][case.operation][case.method.lower()]["responses"]


async def test_a_human_vouching_gets_a_documented_403(
    stack, http, openapi, human_session: str
) -> None:
    async with http.post("/vouch", headers={"X-Session-Token": human_session}) as response:
        problem = await response.json(content_type=None)
        assert response.content_type == PROBLEM_JSON
        assert str(response.status) in openapi["paths"]["/vouch"]["post"]["responses"]
        assert response.status == 403, problem


async def test_unknown_route_is_a_404_problem(stack, http) -> None:
    async with http.get("/definitely/not/here") as response:
        assert response.status == 404
        assert response.content_type == PROBLEM_JSON
        assert (await response.json(content_type=None))["code"] == "not-found"


async def test_wrong_method_is_a_405_problem(stack, http) -> None:
    async with http.put("/auth/register", json={}) as response:
        assert response.status == 405
        assert response.content_type == PROBLEM_JSON
        problem = await response.json(content_type=None)
    assert problem["code"] == "method-not-allowed"
    assert "PUT" in problem["detail"]


async def test_405_names_the_allowed_methods(stack, http) -> None:
    async with http.put("/auth/register", json={}) as response:
        assert response.status == 405
        assert "POST" in response.headers.get("Allow", "")


# --- the OpenAPI document -----------------------------------------------------------------


def served_operations(app: web.Application) -> set[tuple[str, str]]:
    """Every method and path the app answers; a CORS preflight (`OPTIONS` beside the codec's
    POSTs) is the browser's question about an operation, not one of its own."""
    return {
        (route.method.lower(), route.resource.canonical)
        for route in app.router.routes()
        if route.method not in ("HEAD", "OPTIONS") and route.resource is not None
    }


def documented_operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method, path) for path, ops in document["paths"].items() for method in ops}


def operations(documents: dict[str, dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every operation of the documents, as (method, path, operation)."""
    return [
        (method, path, operation)
        for document in documents.values()
        for path, ops in document["paths"].items()
        for method, operation in ops.items()
    ]


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    name = ref.removeprefix("#/components/schemas/")
    return dict(document["components"]["schemas"][name])


async def test_openapi_is_3_1_and_lists_exactly_the_served_routes(
    stack, openapi, documents
) -> None:
    """The API's document and the console's, together, are every route the app serves; the
    console's pages (HTML, under `/console/`) are none of the API's (issue 34 §6)."""
    assert openapi["openapi"].startswith("3.1")
    assert openapi["servers"] == [{"url": stack.base_url}]
    app = create_app(stack.settings)
    api, console = (documented_operations(documents[name]) for name in ("api", "console"))
    assert api | console == served_operations(app)
    assert api & console == set()
    assert {path for _, path in console} == {
        path for _, path in served_operations(app) if path.startswith("/console/")
    }
    assert len(console) >= 50


async def test_every_operation_has_a_unique_id_and_its_success_responses(stack, documents) -> None:
    """One success status per operation, plus the others it declares (`also`: a founding team's
    202, an existing relation's or pack's 200)."""
    declared = {
        (spec.method.lower(), spec.path): [
            str(status) for status in (spec.status, *(s for s, _ in spec.also)) if status < 300
        ]
        for spec in ENDPOINTS
    }
    ids = []
    for method, path, operation in operations(documents):
        ids.append(operation["operationId"])
        successes = [s for s in operation["responses"] if s.startswith("2")]
        assert successes == declared[(method, path)], (method, path)
    assert len(ids) == len(set(ids))
    openapi = documents["api"]
    assert openapi["paths"]["/teams"]["post"]["responses"].keys() >= {"201", "202"}
    relations = openapi["paths"]["/entries/{entryId}/relations"]["post"]["responses"]
    assert relations.keys() >= {"200", "201"}
    assert relations["200"]["content"] == relations["201"]["content"]


async def test_every_error_response_carries_the_problem_schema(stack, documents) -> None:
    problem_ref = {"$ref": "#/components/schemas/Problem"}
    for document in documents.values():
        assert set(document["components"]["schemas"]["Problem"]["required"]) >= {
            "type",
            "title",
            "status",
            "code",
        }
    for method, path, operation in operations(documents):
        errors = {s: r for s, r in operation["responses"].items() if int(s) >= 400}
        assert "500" in errors, (method, path)
        # every route but the probes is rate limited (DECISIONS "Operations")
        assert ("429" in errors) == (path not in PROBES), (method, path)
        for status, response in errors.items():
            content = dict(response["content"])
            if path == "/oauth2/token" and status in ("400", "401"):
                # RFC 6749 errors: plain JSON (test_oauth.py checks the schema)
                assert content.pop("application/json"), status
                if not content:
                    continue
            if path == "/health/ready" and status == "503":
                # a degraded readiness answers its own body (and a problem when it cannot)
                assert content.pop("application/json") == {
                    "schema": {"$ref": "#/components/schemas/Readiness"}
                }
            responses = operation["responses"].values()
            page = any("text/html" in r.get("content", {}) for r in responses)
            if page and status not in ("414", "431"):
                # a console page's refusal is a page with the problem's title and detail
                # (tests/integration/test_console_http.py); what the server refuses before
                # routing (414, 431) is a problem document
                assert content == {"text/html": {"schema": {"type": "string"}}}, path
                continue
            assert content == {PROBLEM_JSON: {"schema": problem_ref}}, (method, path, status)
            assert response["description"]


async def test_a_declared_header_is_typed_and_its_400_documented(stack, documents) -> None:
    """Found by schemathesis: a malformed team header was an undocumented 400 (`GET /diaries`
    declares nothing else that can be invalid)."""
    for spec in ENDPOINTS:
        if not spec.headers:
            continue
        operation = operation_of(documents, spec)
        assert "400" in operation["responses"], (spec.method, spec.path)
        for parameter in operation["parameters"]:
            if parameter["name"] == "x-service-team-id":
                assert parameter["schema"] == {"type": "string", "format": "uuid"}


async def test_the_hooks_document_their_401(stack, openapi) -> None:
    """Found by schemathesis: a missing or wrong hook secret is 401, undocumented before."""
    hooks = [path for path in openapi["paths"] if path.startswith("/hooks/")]
    assert hooks
    for path in hooks:
        assert "401" in openapi["paths"][path]["post"]["responses"], path


async def test_declared_errors_and_auth_appear_in_the_responses(stack, documents) -> None:
    for spec in ENDPOINTS:
        responses = operation_of(documents, spec)["responses"]
        for error in spec.errors:
            assert str(error.status) in responses, (spec.path, error.__name__)
        if spec.auth == "required":
            assert "401" in responses, spec.path
        if spec.scopes:
            assert "403" in responses, spec.path
        if spec.body is not None and not spec.manual_body:
            assert "400" in responses, spec.path


async def test_every_request_body_is_closed(stack, documents) -> None:
    """The API's bodies and the console's forms alike."""
    bodies = 0
    for spec in ENDPOINTS:
        document, operation = documents[spec.document], operation_of(documents, spec)
        path = spec.path
        for media, content in operation.get("requestBody", {"content": {}})["content"].items():
            schema = resolve(document, content["schema"])
            bodies += 1
            if path.startswith(OPEN_BODY_PATH_PREFIX) or path in PROTOCOL_ENVELOPE_PATHS:
                continue
            if schema.get("format") == "binary":  # a file (a diary archive), not an object
                continue
            if (spec.method, path, media) in FOREIGN_FILE_BODIES:
                continue
            assert schema.get("additionalProperties") is False, (spec.method, path, media)
    assert bodies >= 8


async def test_register_body_is_the_spec_fields(stack, openapi) -> None:
    operation = openapi["paths"]["/auth/register"]["post"]
    schema = resolve(openapi, operation["requestBody"]["content"]["application/json"]["schema"])
    assert set(schema["properties"]) == {"public_key", "voucher_code"}
    assert set(schema["required"]) == {"public_key", "voucher_code"}
    response = resolve(
        openapi, operation["responses"]["200"]["content"]["application/json"]["schema"]
    )
    assert set(response["properties"]) == {
        "identityId",
        "fingerprint",
        "publicKey",
        "clientId",
        "clientSecret",
    }


# --- health, readiness, request ids -------------------------------------------------------


async def test_health(stack, http) -> None:
    async with http.get("/health") as response:
        assert response.status == 200
        assert (await response.json())["status"] == "ok"


async def test_readiness_checks_every_dependency(stack, http) -> None:
    async with http.get("/health/ready") as response:
        body = await response.json()
        assert response.status == 200, body
    assert body == {"status": "ok", "checks": {"postgres": "ok", "temporal": "ok", "s3": "ok"}}


@pytest.mark.parametrize(
    "method,path,kwargs",
    [
        ("GET", "/health", {}),
        ("GET", "/openapi.json", {}),
        ("GET", "/agents/whoami", {}),
        ("GET", "/nowhere", {}),
        ("DELETE", "/health", {}),
        ("POST", "/oauth2/token", {"data": {"grant_type": "password"}}),
        ("POST", "/auth/register", {"data": b"x", "headers": {"Content-Type": "text/plain"}}),
    ],
    ids=["ok", "openapi", "401", "404", "405", "oauth-error", "415"],
)
async def test_every_response_carries_a_request_id(
    stack, http, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    async with http.request(method, path, **kwargs) as response:
        generated = response.headers.get("X-Request-Id")
    assert generated and re.fullmatch(r"[0-9a-f]{32}", generated)
    headers = {**kwargs.get("headers", {}), "X-Request-Id": "client-chosen-id-42"}
    async with http.request(method, path, **{**kwargs, "headers": headers}) as response:
        assert response.headers["X-Request-Id"] == "client-chosen-id-42"


async def test_a_long_request_id_is_bounded(stack, http) -> None:
    async with http.get("/health", headers={"X-Request-Id": "r" * 500}) as response:
        assert response.headers["X-Request-Id"] == "r" * 64


async def test_oversized_body_is_a_413_problem(stack, http) -> None:
    async with http.post(
        "/auth/register",
        data=b"{" + b" " * (2 * 1024 * 1024) + b"}",
        headers={"Content-Type": "application/json"},
    ) as response:
        assert response.status == 413
        assert response.content_type == PROBLEM_JSON
        body = await response.json(content_type=None)
    assert "Traceback" not in str(body)


# --- the read-only API pool ---------------------------------------------------------------


async def test_a_read_only_pool_refuses_writes(stack, database_url: str) -> None:
    pool = await create_pool(database_url, read_only=True, min_size=1, max_size=1)
    try:
        assert await pool.fetchval("SHOW default_transaction_read_only") == "on"
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
            await pool.execute(
                "INSERT INTO used_recovery_nonces (nonce, expires_at) VALUES ($1, now())",
                uuid.uuid4().hex,
            )
    finally:
        await pool.close()


# --- a second app with rate limits on -------------------------------------------------------


@pytest.fixture(scope="module")
async def limited(stack) -> AsyncIterator[tuple[str, web.Application]]:
    port = free_port()
    settings = stack.settings.model_copy(
        update={
            "rate_limit_enabled": True,
            "api_port": port,
            "base_url": f"http://127.0.0.1:{port}",
        }
    )
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield settings.base_url, app
    finally:
        await runner.cleanup()


async def test_the_running_apps_pool_is_read_only(stack, limited) -> None:
    _, app = limited
    with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
        await app[keys.READ_POOL].execute(
            "INSERT INTO used_recovery_nonces (nonce, expires_at) VALUES ($1, now())",
            uuid.uuid4().hex,
        )


async def test_recovery_challenge_is_rate_limited(stack, limited) -> None:
    base_url, _ = limited
    public_key = new_public_key()
    async with aiohttp.ClientSession(base_url=base_url) as session:
        for expected_remaining in (4, 3, 2, 1, 0):
            async with session.post(
                "/recovery/challenge", json={"publicKey": public_key}
            ) as response:
                assert response.status == 200
                assert response.headers["x-ratelimit-limit"] == "5"
                assert response.headers["x-ratelimit-remaining"] == str(expected_remaining)
                assert 0 < int(response.headers["x-ratelimit-reset"]) <= 60

        async with session.post("/recovery/challenge", json={"publicKey": public_key}) as response:
            assert response.status == 429
            assert response.content_type == PROBLEM_JSON
            problem = await response.json(content_type=None)
            retry_after = response.headers["Retry-After"]
        assert problem["code"] == "rate-limit-exceeded"
        assert problem["status"] == 429
        assert 0 < int(retry_after) <= 60
        assert problem["retryAfter"] == int(retry_after)

        # the same bucket covers every /recovery/* route
        async with session.post("/recovery/verify", json={}) as response:
            assert response.status == 429
        # other buckets are untouched
        async with session.get("/health") as response:
            assert response.status == 200


async def test_the_429_carries_the_rate_limit_headers(stack, limited) -> None:
    base_url, _ = limited
    async with aiohttp.ClientSession(base_url=base_url) as session:
        for _ in range(6):
            async with session.post(
                "/recovery/challenge", json={"publicKey": new_public_key()}
            ) as response:
                status, headers = response.status, response.headers
    assert status == 429
    assert headers["x-ratelimit-limit"] == "5"
    assert headers["x-ratelimit-remaining"] == "0"
    assert "x-ratelimit-reset" in headers


async def test_registration_is_limited_separately(stack, limited) -> None:
    base_url, _ = limited
    voucher = await issue_bootstrap_voucher(stack.temporal, stack.settings)
    async with (
        aiohttp.ClientSession(base_url=base_url) as session,
        session.post(
            "/auth/register", json={"public_key": new_public_key(), "voucher_code": voucher.code}
        ) as response,
    ):
        assert response.status == 200, await response.text()
        assert int(response.headers["x-ratelimit-limit"]) == 5
