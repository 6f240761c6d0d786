"""A whole service of its own for a fault test: the API on a free port and a worker, on
components the test may stop, restart or kill without disturbing other test modules."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from infra.devstack import free_port

SECRET_KEY = "test-server-secret-0123456789abcdef-xyz"


@dataclass
class FaultStack:
    settings: Any
    base_url: str
    temporal: Any


def fault_settings(database_url: str, temporal_address: str, s3: Any) -> Any:
    from infra.settings import Settings

    port = free_port()
    return Settings(
        base_url=f"http://127.0.0.1:{port}",
        api_port=port,
        database_url=database_url,
        temporal_address=temporal_address,
        temporal_task_queue=f"faults-{uuid.uuid4().hex[:8]}",
        s3_endpoint=s3.endpoint,
        s3_bucket=s3.bucket,
        s3_access_key=s3.access_key,
        s3_secret_key=s3.secret_key,
        secret_key=SECRET_KEY,
        hook_secret="test-hook-secret",
        rate_limit_enabled=False,
    )


@contextlib.asynccontextmanager
async def serving_api(settings: Any, temporal: Any) -> AsyncIterator[None]:
    from aiohttp import web

    from api.app import create_app
    from api.server import ApiRunner

    runner = ApiRunner(create_app(settings))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", settings.api_port).start()
    try:
        yield
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def fault_stack(settings: Any, *, with_worker: bool = True) -> AsyncIterator[FaultStack]:
    """API (and, unless the test runs its own, a worker) in this event loop."""
    from infra.temporal import connect
    from workers.main import running_worker

    client = await connect(settings)
    async with contextlib.AsyncExitStack() as stack:
        if with_worker:
            await stack.enter_async_context(running_worker(settings, client))
        await stack.enter_async_context(serving_api(settings, client))
        yield FaultStack(settings=settings, base_url=settings.base_url, temporal=client)


@contextlib.asynccontextmanager
async def http_session(base_url: str) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(
        base_url=base_url, cookie_jar=aiohttp.DummyCookieJar()
    ) as session:
        yield session
