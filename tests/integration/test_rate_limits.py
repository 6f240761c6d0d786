"""Rate limits on the real stack (DECISIONS "Operations"): per identity in shared Postgres state,
one setting per bucket, 429 with `Retry-After` past a limit, and a signing bucket that counts the
signing requests created so that a signed diary's writer keeps 30 entries a minute.

Each app here runs with limits on and a clock the test moves, so a minute passes at once. Agents
are registered on the stack's own app (limits off) and call the limited app with their token.
(Two API processes sharing one limit: tests/e2e/test_api_processes.py.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from actors import Actor, new_diary
from aiohttp import web

from api.app import Deps, create_app
from api.ratelimit import Quota, RateLimiter, emission_us
from infra.devstack import free_port
from infra.settings import Rate
from schemas.connector import CONNECTOR_HEADER, connector_secret
from schemas.kernel.cids import entry_cid
from schemas.limits import (
    RATE_LEASE_MIN_LIMIT,
    RATE_LEASE_RETURN_EVERY_SEC,
    RATE_LEASE_TTL_SEC,
    RATE_LIMITS_PER_MINUTE,
)

PROBLEM_JSON = "application/problem+json"
SIGNING = RATE_LIMITS_PER_MINUTE["signing"]


class Clock:
    """The limiters' clock: seconds since the epoch, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@asynccontextmanager
async def limited_app(stack: Any, clock: Clock, **settings: Any) -> AsyncIterator[str]:
    """An app of the stack with limits on (and any rate settings), on a port of its own."""
    port = free_port()
    update = {"rate_limit_enabled": True, "api_port": port, **settings}
    app = create_app(stack.settings.model_copy(update=update), deps=Deps(rate_clock=clock))
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture(scope="module")
async def defaults(stack: Any, clock: Clock) -> AsyncIterator[aiohttp.ClientSession]:
    """A session on an app with the default rates."""
    async with (
        limited_app(stack, clock) as base_url,
        aiohttp.ClientSession(base_url=base_url) as http,
    ):
        yield http


@pytest.fixture(scope="module")
async def tuned(stack: Any, clock: Clock) -> AsyncIterator[aiohttp.ClientSession]:
    """A session on an app whose settings narrow two buckets."""
    overrides = {"rate_limit_signing": "2/minute", "rate_limit_global_read": "3/30s"}
    async with (
        limited_app(stack, clock, **overrides) as base_url,
        aiohttp.ClientSession(base_url=base_url) as http,
    ):
        yield http


async def agent_on(actors: Any, http: aiohttp.ClientSession) -> Actor:
    """A fresh agent (its own limits) that calls the app behind `http`."""
    agent: Actor = await actors.agent()
    return dataclasses.replace(agent, http=http)


async def call(actor: Actor, method: str, path: str, **kwargs: Any) -> tuple[int, Any, Any]:
    """(status, body, headers) of one call of the actor."""
    async with actor.http.request(method, path, headers=actor.auth, **kwargs) as response:
        return response.status, await response.json(content_type=None), response.headers


async def create_signing_request(actor: Actor, message: str) -> tuple[int, Any, Any]:
    return await call(actor, "POST", "/crypto/signing-requests", json={"message": message})


async def sign(actor: Actor, request: dict[str, Any]) -> tuple[int, Any, Any]:
    signature = actor.sign(request["signing_payload"])
    path = f"/crypto/signing-requests/{request['request_id']}/sign"
    return await call(actor, "POST", path, json={"signature": signature})


def assert_refused(status: int, problem: Any, headers: Any, retry_after: int, limit: int) -> None:
    assert status == 429, problem
    assert headers["Content-Type"].startswith(PROBLEM_JSON)
    assert problem["code"] == "rate-limit-exceeded" and problem["status"] == 429
    assert problem["retryAfter"] == retry_after == int(headers["Retry-After"])
    assert problem["limit"] == limit == int(headers["x-ratelimit-limit"])
    assert headers["x-ratelimit-remaining"] == "0"


# --- both ways, per bucket from the settings ---------------------------------------------------


async def test_a_bucket_set_by_its_setting_admits_its_limit_then_429_until_a_place_frees(
    actors, tuned, clock
) -> None:
    agent = await agent_on(actors, tuned)
    for remaining in (1, 0):
        status, body, headers = await create_signing_request(agent, "under the limit")
        assert status == 201, body
        # the tightest bucket speaks: signing (2 a minute), not global_auth (100)
        assert headers["x-ratelimit-limit"] == "2"
        assert headers["x-ratelimit-remaining"] == str(remaining)

    status, problem, headers = await create_signing_request(agent, "over the limit")
    # 2 a minute frees a place every 30 s
    assert_refused(status, problem, headers, retry_after=30, limit=2)
    clock.advance(29)
    status, problem, headers = await create_signing_request(agent, "still over")
    assert_refused(status, problem, headers, retry_after=1, limit=2)
    clock.advance(1)
    status, body, headers = await create_signing_request(agent, "a place freed")
    assert status == 201, body
    assert headers["x-ratelimit-remaining"] == "0"


async def test_a_period_other_than_a_minute_and_limits_per_identity(actors, tuned, clock) -> None:
    agent, other = await agent_on(actors, tuned), await agent_on(actors, tuned)
    for remaining in (2, 1, 0):
        status, _, headers = await call(agent, "GET", "/agents/whoami")
        assert status == 200
        assert (headers["x-ratelimit-limit"], headers["x-ratelimit-remaining"]) == (
            "3",
            str(remaining),
        )
    status, problem, headers = await call(agent, "GET", "/agents/whoami")
    assert_refused(status, problem, headers, retry_after=10, limit=3)
    # another identity has its own buckets
    status, _, _ = await call(other, "GET", "/agents/whoami")
    assert status == 200
    clock.advance(10)
    status, _, headers = await call(agent, "GET", "/agents/whoami")
    assert status == 200 and headers["x-ratelimit-remaining"] == "0"


async def test_the_state_is_in_postgres_shared_by_every_app(stack, actors, tuned, clock) -> None:
    """Two apps on one database (as two API processes are) count in the same buckets."""
    agent = await agent_on(actors, tuned)
    overrides = {"rate_limit_signing": "2/minute", "rate_limit_global_read": "3/30s"}
    async with (
        limited_app(stack, clock, **overrides) as other_url,
        aiohttp.ClientSession(base_url=other_url) as other_http,
    ):
        elsewhere = dataclasses.replace(agent, http=other_http)
        status, _, headers = await call(agent, "GET", "/agents/whoami")
        assert status == 200 and headers["x-ratelimit-remaining"] == "2"
        status, _, headers = await call(elsewhere, "GET", "/agents/whoami")
        assert status == 200 and headers["x-ratelimit-remaining"] == "1"
        status, _, _ = await call(agent, "GET", "/agents/whoami")
        assert status == 200
        status, problem, headers = await call(elsewhere, "GET", "/agents/whoami")
        assert_refused(status, problem, headers, retry_after=10, limit=3)


async def test_a_read_over_the_limit_is_429_whatever_it_would_have_answered(actors, tuned) -> None:
    """A GET is counted beside its handler's reads; past the limit its answer (here a 404) is
    dropped for the 429, the first time and while the caller stays refused."""
    agent = await agent_on(actors, tuned)
    for _ in range(3):
        status, problem, _ = await call(agent, "GET", f"/diaries/{uuid.uuid4()}")
        assert (status, problem["code"]) == (404, "diary-not-found"), problem
    for retry_after in (10, 10):
        status, problem, headers = await call(agent, "GET", f"/diaries/{uuid.uuid4()}")
        assert_refused(status, problem, headers, retry_after=retry_after, limit=3)


# --- the signing bucket counts signing requests created ------------------------------------------


async def test_signatures_are_not_counted_in_the_signing_bucket(actors, tuned) -> None:
    agent = await agent_on(actors, tuned)
    requests = []
    for _ in range(2):
        status, request, _ = await create_signing_request(agent, "sign me")
        assert status == 201, request
        requests.append(request)
    for request in requests:
        status, outcome, headers = await sign(agent, request)
        assert status == 200 and outcome["valid"] is True, outcome
        # the quota shown is global_auth's: signing is not counted here
        assert headers["x-ratelimit-limit"] == str(RATE_LIMITS_PER_MINUTE["global_auth"])
    # a signature sent again is refused for what it is (409), not for the rate
    status, problem, _ = await sign(agent, requests[0])
    assert (status, problem["code"]) == (409, "signing-request-already-completed"), problem
    status, problem, headers = await create_signing_request(agent, "a third")
    assert_refused(status, problem, headers, retry_after=30, limit=2)


async def test_a_request_that_creates_nothing_takes_no_place(actors, tuned) -> None:
    agent = await agent_on(actors, tuned)
    for _ in range(4):
        status, problem, _ = await create_signing_request(agent, "")  # 400: message too short
        assert status == 400 and problem["code"] == "validation-failed", problem
    status, problem, _ = await call(agent, "POST", "/crypto/signing-requests", json={"x": 1})
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    for remaining in (1, 0):
        status, body, headers = await create_signing_request(agent, "created")
        assert status == 201, body
        assert headers["x-ratelimit-remaining"] == str(remaining)
    status, problem, headers = await create_signing_request(agent, "")
    # a refused request is refused before its body is read
    assert_refused(status, problem, headers, retry_after=30, limit=2)


async def test_a_signed_diary_writer_keeps_30_entries_a_minute_with_the_defaults(
    actors, api_http, defaults, clock
) -> None:
    """Thirty signed entries at one instant (the burst a minute allows), the 31st signing
    request refused for 2 s (30 a minute frees one every 2 s), then written 2 s later: a writer
    at 30 a minute, however its entries bunch, is never refused."""
    writer = await agent_on(actors, defaults)
    diary = await new_diary(dataclasses.replace(writer, http=api_http), signed=True)
    previous = ""

    async def write(n: int) -> str:
        cid = entry_cid(f"entry {n}", None, [], "semantic", previous)
        status, request, _ = await create_signing_request(writer, cid)
        assert status == 201, (n, request)
        status, outcome, _ = await sign(writer, request)
        assert status == 200 and outcome["valid"] is True, (n, outcome)
        body = {"content": f"entry {n}", "signingRequestId": request["request_id"]}
        status, entry, _ = await call(writer, "POST", f"/diaries/{diary['id']}/entries", json=body)
        assert status == 201, (n, entry)
        assert entry["cid"] == cid
        return cid

    for n in range(SIGNING):
        previous = await write(n)
    status, problem, headers = await create_signing_request(writer, "one too many")
    assert_refused(status, problem, headers, retry_after=60 // SIGNING, limit=SIGNING)

    clock.advance(60 / SIGNING)
    previous = await write(SIGNING)
    status, listed, _ = await call(writer, "GET", f"/diaries/{diary['id']}/entries")
    assert status == 200 and listed["total"] == SIGNING + 1


async def test_the_connector_back_channel_counts_in_its_own_bucket(stack, defaults) -> None:
    """One MCP server speaks for all its humans: its calls count in the `connector` bucket under
    one key, not in an anonymous address's 30 a minute."""
    right = {CONNECTOR_HEADER: connector_secret(stack.settings.secret_bytes)}
    body = {"token": "x", "resource": "http://127.0.0.1:1/mcp"}
    remaining = []
    for _ in range(2):
        async with defaults.post("/oauth/connector/exchange", json=body, headers=right) as answer:
            assert answer.status == 401
            assert answer.headers["x-ratelimit-limit"] == str(RATE_LIMITS_PER_MINUTE["connector"])
            remaining.append(int(answer.headers["x-ratelimit-remaining"]))
    assert remaining[1] == remaining[0] - 1


# --- the probes -----------------------------------------------------------------------------------

ANON_LIMIT = RATE_LIMITS_PER_MINUTE["global_anon"]


async def test_the_probes_are_never_rate_limited(defaults) -> None:
    """Kubelets probing several pods from one node share an address: /health and /health/ready
    answer every call, far past every anonymous limit, and count in no bucket."""
    for path in ("/health", "/health/ready"):
        for _ in range(2 * ANON_LIMIT + 1):
            async with defaults.get(path) as response:
                assert response.status == 200, await response.text()
                assert "x-ratelimit-limit" not in response.headers
    # the same address is limited on any other route: the limits are on
    statuses = []
    for _ in range(ANON_LIMIT + 1):
        async with defaults.get("/agents/0000-0000-0000-0000") as response:
            statuses.append(response.status)
    assert statuses[-1] == 429 and set(statuses[:-1]) <= {404, 429}


async def test_a_logged_in_humans_console_pages_count_in_their_own_buckets(
    actors, defaults
) -> None:
    """A person browsing the console is counted as themself (authenticated reads, 150 a
    minute), not as their address's anonymous 30."""
    human: Actor = await actors.human()
    cookie = {"Cookie": f"cairn_session={human.auth['X-Session-Token']}"}
    read_limit = str(RATE_LIMITS_PER_MINUTE["global_read"])
    for _ in range(ANON_LIMIT + 5):
        async with defaults.get("/console/", headers=cookie, allow_redirects=False) as response:
            assert response.status == 200, await response.text()
            assert response.headers["x-ratelimit-limit"] == read_limit
    # a visitor without the session is the address's: limited as anonymous
    statuses = []
    for _ in range(ANON_LIMIT + 1):
        async with defaults.get("/console/", allow_redirects=False) as response:
            statuses.append(response.status)
    assert statuses[-1] == 429


# --- leases: large buckets are counted in batches, small ones on every request --------------------

LEASED = f"{RATE_LEASE_MIN_LIMIT}/hour"  # a batched bucket: one place a minute, leases of 6
STRICT = f"{RATE_LEASE_MIN_LIMIT - 1}/hour"


@asynccontextmanager
async def two_apps(stack: Any, clock: Clock, read_rate: str) -> AsyncIterator[list[Any]]:
    """Two apps on one database (as two API processes are) with this global_read rate."""
    async with (
        limited_app(stack, clock, rate_limit_global_read=read_rate) as one_url,
        limited_app(stack, clock, rate_limit_global_read=read_rate) as two_url,
        aiohttp.ClientSession(base_url=one_url) as one,
        aiohttp.ClientSession(base_url=two_url) as two,
    ):
        yield [one, two]


async def whoami_status(agent: Actor, http: aiohttp.ClientSession) -> int:
    async with http.get("/agents/whoami", headers=agent.auth) as response:
        await response.read()
        return response.status


async def admitted_until_refused(agent: Actor, http: aiohttp.ClientSession) -> int:
    """How many reads the app admits before its first 429."""
    admitted = 0
    while (status := await whoami_status(agent, http)) == 200:
        admitted += 1
    assert status == 429
    return admitted


async def test_two_apps_leasing_a_bucket_never_admit_more_than_its_limit_together(
    stack, actors, clock
) -> None:
    """Concurrent bursts on both apps, then each app until it refuses: the bucket's limit
    exactly, however the places were leased between them."""
    agent = await actors.agent()
    async with two_apps(stack, clock, LEASED) as apps:
        burst = [whoami_status(agent, http) for _ in range(40) for http in apps]
        statuses = await asyncio.gather(*burst)
        assert set(statuses) <= {200, 429}
        admitted = statuses.count(200)
        for _ in range(2):  # a place one app held when the other refused is used by the first
            for http in apps:
                admitted += await admitted_until_refused(agent, http)
        assert admitted == RATE_LEASE_MIN_LIMIT
        clock.advance(60)  # one emission later: one place more, in all
        statuses = [await whoami_status(agent, http) for http in apps for _ in range(3)]
        assert statuses.count(200) == 1, statuses


async def test_the_unused_places_of_a_lapsed_lease_come_back_to_the_other_apps(
    stack, actors, clock
) -> None:
    agent = await actors.agent()
    async with two_apps(stack, clock, LEASED) as (one, two):
        # leases of 1, then 2, then 4 places: 4 reads admitted, 3 places held by the first app
        for _ in range(4):
            assert await whoami_status(agent, one) == 200
        assert await admitted_until_refused(agent, two) == RATE_LEASE_MIN_LIMIT - 7
        clock.advance(RATE_LEASE_TTL_SEC)  # the lease lapses (no place frees in a second)
        returned, deadline = 0, time.monotonic() + 10
        while returned < 3 and time.monotonic() < deadline:
            if await whoami_status(agent, two) == 200:
                returned += 1
            else:
                await asyncio.sleep(RATE_LEASE_RETURN_EVERY_SEC)
        assert returned == 3
        assert await whoami_status(agent, two) == 429
        assert await whoami_status(agent, one) == 429


async def test_a_small_bucket_is_counted_exactly_on_every_request_across_apps(
    stack, actors, clock
) -> None:
    agent = await actors.agent()
    async with two_apps(stack, clock, STRICT) as apps:
        remaining = []
        for n in range(6):
            async with apps[n % 2].get("/agents/whoami", headers=agent.auth) as response:
                assert response.status == 200
                remaining.append(int(response.headers["x-ratelimit-remaining"]))
        limit = RATE_LEASE_MIN_LIMIT - 1
        assert remaining == [limit - n for n in range(1, 7)]


async def test_one_lease_at_a_time_per_key_and_bucket_in_a_process(db_pool, clock) -> None:
    """Twenty requests of one key at once in one process: the first asks a lease and the others
    wait for it, then one of them asks the next (twice as large), and so on: leases of 1, 2, 4,
    8 and 16 places (31 taken from the shared bucket, 11 held), not twenty leases of one."""
    rate = Rate(limit=600, period_sec=60)
    limiter = RateLimiter(db_pool, {"global_read": rate}, clock=clock)
    key = f"agent:{uuid.uuid4()}"
    outcomes = await asyncio.gather(*(limiter.take(key, ["global_read"]) for _ in range(20)))
    assert all(isinstance(outcome, Quota) for outcome in outcomes)
    now_us = int(clock.now * 1_000_000)
    query = "SELECT tat_us FROM rate_limits WHERE key = $1 AND bucket = 'global_read'"
    assert await db_pool.fetchval(query, key) == now_us + 31 * emission_us(rate)
    # the 11 places held come back once the lease lapses
    clock.advance(RATE_LEASE_TTL_SEC)
    assert await limiter.return_lapsed() == 11
    assert await db_pool.fetchval(query, key) == now_us + 20 * emission_us(rate)
