"""Pools as production runs them (DECISIONS "Production beyond one machine", docs/deployment.md):
every acquire is bounded (a route answers 503 with Retry-After, never hangs), and behind
pgbouncer in transaction mode read-only and `synchronous_commit` hold in every transaction
without leaking to the next client of the server connection, and migrations apply once each.

The pgbouncer here is the module's own with one server connection, so every client shares it
and a setting that leaked would be seen. (The smoke modules run the stack behind the session's
pgbouncer: tests/conftest.py.)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import asyncpg
import pytest
from actors import Actors, new_diary
from aiohttp import web

from api import keys
from api.app import Deps, create_app
from infra.db import PoolExhausted, create_pool, migrate, migration_files
from infra.devstack import (
    PgBouncer,
    Postgres,
    ServerAddress,
    database_of,
    free_port,
    run_as,
)
from schemas import limits

HANG_GUARD_S = 30  # bounds a hang only: the 503 comes after the acquire timeout


@asynccontextmanager
async def serving(stack: Any, **settings: Any) -> AsyncIterator[tuple[web.Application, str]]:
    """An app of the stack with other settings, on a port of its own."""
    port = free_port()
    app = create_app(
        stack.settings.model_copy(update={"api_port": port, **settings}),
        deps=Deps(temporal=stack.temporal),
    )
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield app, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_an_acquire_waits_no_longer_than_the_timeout(database_url: str) -> None:
    pool = await create_pool(
        database_url, read_only=True, min_size=1, max_size=1, acquire_timeout_s=0.1
    )
    try:
        async with pool.acquire():
            with pytest.raises(PoolExhausted):
                await asyncio.wait_for(pool.fetchval("SELECT 1"), HANG_GUARD_S)
            with pytest.raises(PoolExhausted):
                async with pool.acquire():
                    pass
        assert await pool.fetchval("SELECT 1") == 1  # the connection came back: served again
    finally:
        await pool.close()


async def test_a_route_answers_503_with_retry_after_while_every_connection_is_busy(
    stack: Any, actors: Actors
) -> None:
    agent = await actors.agent()
    diary = await new_diary(agent)
    tiny = {"database_pool_min": 1, "database_pool_max": 1, "database_acquire_timeout_s": 0.2}
    async with serving(stack, **tiny) as (app, base_url), aiohttp.ClientSession(base_url) as http:
        path = f"/diaries/{diary['id']}"

        async def read() -> tuple[int, dict[str, str], Any]:
            async with http.get(path, headers=agent.auth) as response:
                return response.status, dict(response.headers), await response.json()

        status, _, body = await read()
        assert status == 200, body
        async with app[keys.READ_POOL].acquire():  # another request holds the one connection
            status, headers, body = await asyncio.wait_for(read(), HANG_GUARD_S)
        assert status == 503, body
        assert headers["Content-Type"].startswith("application/problem+json")
        assert headers["Retry-After"] == str(limits.UNAVAILABLE_RETRY_AFTER_SEC)
        assert body["code"] == "service-unavailable"
        assert body["detail"] == "Every database connection is busy"
        status, _, body = await read()
        assert status == 200, body


# --- behind pgbouncer in transaction mode ---------------------------------------------------


@pytest.fixture(scope="module")
def one_server_connection(
    postgres: Postgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PgBouncer]:
    root = tmp_path_factory.mktemp("bouncer")
    root.chmod(0o755)  # pgbouncer drops root for the server's own user
    address = ServerAddress.of(postgres.dsn())
    bouncer = PgBouncer(address, root / "b", free_port(), pool_size=1, user_id=run_as(postgres))
    bouncer.start()
    yield bouncer
    bouncer.stop()


@pytest.fixture(scope="module")
def bounced_url(one_server_connection: PgBouncer, database_url: str) -> str:
    return one_server_connection.dsn(database_of(database_url))


async def test_session_settings_at_startup_are_refused_by_pgbouncer(bounced_url: str) -> None:
    """Why the pooler mode exists: the direct mode's read-only startup setting cannot pass."""
    with pytest.raises(asyncpg.PostgresError, match="unsupported startup parameter"):
        await create_pool(bounced_url, read_only=True, min_size=1, max_size=1)


async def test_the_read_only_pool_refuses_writes_in_every_transaction(bounced_url: str) -> None:
    pool = await create_pool(
        bounced_url, read_only=True, min_size=1, max_size=2, transaction_pooler=True
    )
    try:
        assert await pool.fetchval("SELECT current_setting('transaction_read_only')") == "on"
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
            await pool.execute("CREATE TABLE written_by_accident (id int)")
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):  # with arguments too
            await pool.execute("DELETE FROM schema_migrations WHERE version = $1", -1)
        async with pool.acquire() as conn:
            with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
                async with conn.transaction():
                    await conn.execute("CREATE TABLE written_by_accident (id int)")
            # the reads' own transactions keep their isolation, read-only too
            async with conn.transaction(isolation="repeatable_read"):
                assert await conn.fetchval("SHOW transaction_isolation") == "repeatable read"
                assert await conn.fetchval("SHOW transaction_read_only") == "on"
    finally:
        await pool.close()


async def test_synchronous_commit_is_set_per_transaction_and_leaks_to_no_other_client(
    bounced_url: str,
) -> None:
    rate = await create_pool(
        bounced_url,
        read_only=False,
        min_size=1,
        max_size=1,
        transaction_pooler=True,
        session={"synchronous_commit": "off"},
    )
    other = await create_pool(
        bounced_url, read_only=False, min_size=1, max_size=1, transaction_pooler=True
    )
    try:
        pid = await rate.fetchval("SELECT pg_backend_pid()")
        assert await other.fetchval("SELECT pg_backend_pid()") == pid  # one server connection
        assert await rate.fetchval("SELECT current_setting('synchronous_commit')") == "off"
        async with rate.acquire() as conn, conn.transaction():
            assert await conn.fetchval("SELECT current_setting('synchronous_commit')") == "off"
        assert await other.fetchval("SELECT current_setting('synchronous_commit')") == "on"
        assert await other.fetchval("SELECT current_setting('transaction_read_only')") == "off"
    finally:
        await rate.close()
        await other.close()


async def test_concurrent_migrations_through_pgbouncer_apply_each_once(
    postgres: Postgres, one_server_connection: PgBouncer
) -> None:
    """Two `cairn migrate` at once, both through the one server connection: a session lock
    would be shared by both (the same backend) and each would apply every migration."""
    name = f"migrate_{uuid.uuid4().hex[:8]}"
    postgres.ensure_database(name)
    try:
        dsn = one_server_connection.dsn(name)
        first, second = await asyncio.gather(migrate(dsn), migrate(dsn))
        every = [f"{version:04d}_{label}" for version, label, _ in migration_files()]
        assert sorted(first + second) == every
        assert await migrate(dsn) == []
    finally:
        postgres.drop_database(name)
