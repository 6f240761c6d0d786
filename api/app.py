"""The aiohttp application: `create_app(settings, deps=None)`.

Every shared resource (read-only Postgres pool, Temporal client, token service, permission
engine, S3 probe) is opened in a cleanup context; tests may inject any of them through `deps`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import asyncpg
from aiohttp import web
from opentelemetry import metrics
from opentelemetry.metrics import MeterProvider
from temporalio.client import Client

from api import keys
from api.metrics import request_metrics
from api.middleware import problem_middleware, tracing_middleware
from api.ratelimit import RateLimiter
from api.routes import (
    agent_keys,
    crypto,
    diaries,
    entries,
    humans,
    identity,
    oauth,
    packs,
    public,
    search,
    system,
    task_artifacts,
    task_attempts,
    tasks,
    teams,
    transfers,
)
from infra.db import create_pool
from infra.embeddings import OnnxEmbedder
from infra.oauth import OAuthServer, SigningKeyStore
from infra.permissions import PostgresPermissionEngine
from infra.s3 import BlobStore
from infra.settings import Settings
from infra.telemetry import setup_metrics, setup_tracing
from infra.temporal import connect

MAX_BODY_BYTES = 1024 * 1024
MESSAGE_WRITER_POOL_MAX = 4  # appends are short single transactions


@dataclass
class Deps:
    """Resources a caller (a test, a benchmark) opens itself instead of the app."""

    read_pool: asyncpg.Pool | None = None
    temporal: Client | None = None
    embedder: OnnxEmbedder | None = None  # the search query embedder (loaded when absent)
    meter_provider: MeterProvider | None = None  # where request metrics go (default: global)


def create_app(settings: Settings, *, deps: Deps | None = None) -> web.Application:
    setup_tracing(settings.otel_service_name)
    setup_metrics(settings.otel_service_name)
    deps = deps or Deps()
    meter = (deps.meter_provider or metrics.get_meter_provider()).get_meter("cairn.api")
    app = web.Application(
        middlewares=[request_metrics(meter), tracing_middleware, problem_middleware],
        client_max_size=MAX_BODY_BYTES,
    )
    app[keys.SETTINGS] = settings
    app[keys.RATE_LIMITER] = RateLimiter(enabled=settings.rate_limit_enabled)
    app.cleanup_ctx.append(_resources(settings, deps))
    for module in (
        system,
        oauth,
        identity,
        humans,
        crypto,
        teams,
        diaries,
        entries,
        packs,
        search,
        transfers,
        public,
        tasks,
        task_attempts,
        task_artifacts,
        agent_keys,
    ):
        app.router.add_routes(module.routes)
    return app


def _resources(settings: Settings, deps: Deps) -> Callable[[web.Application], AsyncIterator[None]]:
    async def open_resources(app: web.Application) -> AsyncIterator[None]:
        pool = deps.read_pool or await create_pool(
            settings.database_url,
            read_only=True,
            min_size=settings.database_pool_min,
            max_size=settings.database_pool_max,
        )
        app[keys.READ_POOL] = pool
        app[keys.TEMPORAL] = deps.temporal or await connect(settings)
        store = SigningKeyStore(pool, settings.secret_bytes)
        app[keys.TOKENS] = OAuthServer(
            pool,
            store,
            issuer=settings.issuer,
            server_secret=settings.secret_bytes,
            token_ttl_sec=settings.access_token_ttl_sec,
        )
        app[keys.PERMISSIONS] = PostgresPermissionEngine(pool)
        app[keys.EMBEDDER] = deps.embedder or await search.load_query_embedder()
        # append-only task messages: the one write the API makes itself, on its own small pool
        app[keys.MESSAGE_WRITER] = writer = await create_pool(
            settings.database_url, read_only=False, min_size=1, max_size=MESSAGE_WRITER_POOL_MAX
        )
        blobs = BlobStore.from_settings(settings)
        app[keys.S3_PROBE] = blobs.probe
        app[keys.BLOBS] = blobs
        try:
            yield
        finally:
            blobs.close()
            await writer.close()
            if deps.read_pool is None:
                await pool.close()

    return open_resources
