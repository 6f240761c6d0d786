"""Postgres (the embedded server) restarted under a running API: meanwhile every request answers
503 with `Retry-After` (never a 500), and afterwards the API recovers without a restart of its
own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from actors import Actors, anonymous, new_diary
from faultstack import FaultStack, fault_settings, fault_stack, http_session
from waiting import wait_until

from infra.db import migrate
from infra.devstack import Postgres


@pytest.fixture(scope="module")
def own_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Postgres]:
    """A Postgres of this module's own: the test stops it, which no other module may see."""
    server = Postgres(tmp_path_factory.mktemp("faults-pg") / "pg")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def pg_stack(
    own_postgres: Postgres, temporal_address: str, s3: Any
) -> AsyncIterator[FaultStack]:
    dsn = own_postgres.ensure_database("cairn")
    await migrate(dsn)
    async with fault_stack(fault_settings(dsn, temporal_address, s3)) as stack:
        yield stack


async def test_a_postgres_restart_answers_503_with_retry_after_then_recovers(
    pg_stack: FaultStack, own_postgres: Postgres
) -> None:
    async with http_session(pg_stack.base_url) as http:
        agent = await Actors(pg_stack, http).agent()
        diary = await new_diary(agent)
        reads = [("GET", "/agents/whoami"), ("GET", "/teams"), ("GET", f"/diaries/{diary['id']}")]
        for method, path in reads:
            status, body = await agent.call(method, path)
            assert status == 200, (path, body)

        await asyncio.to_thread(own_postgres.stop)
        for _ in range(2):  # broken pooled connections first, then refused new ones
            for method, path in reads:
                async with http.request(method, path, headers=agent.auth) as response:
                    body = await response.json(content_type=None)
                    assert response.status == 503, (path, body)
                    assert int(response.headers["Retry-After"]) >= 1
                    assert body["code"] == "service-unavailable", body
            status, _ = await anonymous(http, "GET", "/health/ready")
            assert status == 503

        await asyncio.to_thread(own_postgres.start)

        async def answers() -> bool:
            status, _ = await agent.call("GET", "/agents/whoami")
            assert status in (200, 503)
            return status == 200

        await wait_until(answers, limit_s=30)
        for method, path in reads:
            status, body = await agent.call(method, path)
            assert status == 200, (path, body)
        # the worker's pool recovered too: a write goes through
        written = await new_diary(agent)
        assert written["id"] != diary["id"]
