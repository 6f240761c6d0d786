"""Rotating the server secret in the middle of a running stack (`SERVICE_SECRET_KEYS`).

One stack (API and worker, in this process) is restarted three times on the same database,
Temporal and port: under the old key, under `new,old`, then under `new` alone. A human logged in
and an agent holding client credentials, a token and an agent key keep working throughout,
because what they present under `new,old` moves to the new key; a second session and a second
agent that nobody used in between stop working once the old key is dropped.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import pytest
from actors import Actor, Actors, agent_key_secret, holding_key, personal_team
from waiting import wait_until

from infra.devstack import free_port
from infra.oauth import open_seed
from schemas.agent_keys import agent_key_id
from schemas.kernel.crypto import hash_secret
from schemas.kernel.keyring import SecretKeyring

OLD = "rotation-old-secret-0123456789abcdef-xyz"
NEW = "rotation-new-secret-0123456789abcdef-xyz"


@dataclass
class RunningStack:
    settings: Any
    base_url: str
    temporal: Any
    http: aiohttp.ClientSession  # on its API, sending no cookies


@pytest.fixture(scope="module")
def restartable(database_url: str, temporal_address: str, s3: Any) -> Any:
    """Start the stack under a given `SERVICE_SECRET_KEYS`, always on the same port and queue
    (the token issuer is the base URL, so tokens outlive a restart as they would in a deploy)."""
    port = free_port()
    queue = f"cairn-rotation-{uuid.uuid4().hex[:8]}"

    @asynccontextmanager
    async def running(secret_keys: str) -> AsyncIterator[RunningStack]:
        from aiohttp import web

        from api.app import create_app
        from api.server import ApiRunner
        from infra.settings import Settings
        from infra.temporal import connect
        from workers.main import running_worker

        settings = Settings(
            base_url=f"http://127.0.0.1:{port}",
            api_port=port,
            database_url=database_url,
            temporal_address=temporal_address,
            temporal_task_queue=queue,
            s3_endpoint=s3.endpoint,
            s3_bucket=s3.bucket,
            s3_access_key=s3.access_key,
            s3_secret_key=s3.secret_key,
            secret_keys=secret_keys,  # type: ignore[arg-type]
            rate_limit_enabled=False,
        )
        client = await connect(settings)
        async with running_worker(settings, client):
            runner = ApiRunner(create_app(settings))
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            jar = aiohttp.DummyCookieJar()
            try:
                async with aiohttp.ClientSession(
                    base_url=settings.base_url, cookie_jar=jar
                ) as http:
                    yield RunningStack(settings, settings.base_url, client, http)
            finally:
                await runner.cleanup()

    return running


async def _status(actor: Actor) -> int:
    status, _ = await actor.call("GET", "/agents/whoami")
    return status


async def _token_status(http: aiohttp.ClientSession, agent: Actor) -> int:
    form = {
        "grant_type": "client_credentials",
        "client_id": agent.client_id,
        "client_secret": agent.client_secret,
    }
    async with http.post("/oauth2/token", data=form) as response:
        return response.status


async def _stored(db: Any, agent: Actor, human: Actor, key_secret: str) -> dict[str, str]:
    session = human.auth["X-Session-Token"]
    return {
        "client": await db.fetchval(
            "SELECT secret_hash FROM oauth_clients WHERE client_id = $1", agent.client_id
        ),
        "session": str(
            await db.fetchval(
                "SELECT count(*) FROM human_sessions WHERE token_hash = $1",
                hash_secret(session, NEW.encode()),
            )
        ),
        "key": await db.fetchval(
            "SELECT secret_hash FROM agent_keys WHERE id = $1",
            agent_key_id(key_secret),
        ),
    }


async def test_a_rotation_logs_nobody_out_and_voids_only_what_was_never_used(
    restartable: Any, db_pool: Any
) -> None:
    # --- under the old key: a human with two sessions, two agents, an agent key
    async with restartable(OLD) as stack:
        actors = Actors(stack, stack.http)
        human, idle_human = await actors.human(), await actors.human()
        agent, idle_agent = await actors.agent(), await actors.agent()
        team = await personal_team(agent)
        key_secret = await agent_key_secret(agent, "team", team)
        old_token = agent.auth
        assert await _status(human) == 200

    # --- new key in front, old one still accepted: what is used moves over
    async with restartable(f"{NEW},{OLD}") as stack:
        human, agent = _on(human, stack.http), _on(agent, stack.http)
        keyed = _on(holding_key(agent, key_secret), stack.http)
        assert await _status(human) == 200  # the session, not logged out
        assert await _status(agent) == 200  # the token, signed by a key sealed under OLD
        assert await _token_status(stack.http, agent) == 200  # the client secret
        status, _ = await keyed.call("GET", "/agents/whoami", team=team)
        assert status == 200  # the agent key

        async def moved() -> bool:
            stored = await _stored(db_pool, agent, human, key_secret)
            return (
                stored["client"] == hash_secret(agent.client_secret, NEW.encode())
                and stored["session"] == "1"
                and stored["key"] == hash_secret(key_secret, NEW.encode())
            )

        await wait_until(moved, what="the used credentials re-hashed under the new key")
        seals = await db_pool.fetch("SELECT sealed_seed FROM jwt_signing_keys")
        # the worker re-sealed the signing keys under the new key when it started
        new_only = SecretKeyring((NEW.encode(),))
        assert seals and all(open_seed(new_only, bytes(row["sealed_seed"])) for row in seals)

    # --- the old key dropped: what was used works, what was never used is void
    async with restartable(NEW) as stack:
        human, agent = _on(human, stack.http), _on(agent, stack.http)
        keyed = _on(holding_key(agent, key_secret), stack.http)
        assert await _status(human) == 200
        assert await _status(_on(agent, stack.http, auth=old_token)) == 200
        assert await _token_status(stack.http, agent) == 200
        status, _ = await keyed.call("GET", "/agents/whoami", team=team)
        assert status == 200

        assert await _status(_on(idle_human, stack.http)) == 401
        assert await _token_status(stack.http, _on(idle_agent, stack.http)) == 401


def _on(actor: Actor, http: aiohttp.ClientSession, auth: dict[str, str] | None = None) -> Actor:
    """The actor calling through another HTTP session (the restarted stack's)."""
    return replace(actor, http=http, auth=auth if auth is not None else actor.auth)
