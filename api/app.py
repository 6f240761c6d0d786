"""The aiohttp application: `create_app(settings, deps=None)`.

Every shared resource (read-only Postgres pool, Temporal client, token service, permission
engine, S3 probe) is opened in a cleanup context; tests may inject any of them through `deps`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import asyncpg
from aiohttp import web
from opentelemetry import metrics
from opentelemetry.metrics import MeterProvider
from temporalio.client import Client

from api import keys
from api.console import agent_keys as console_agent_keys
from api.console import diaries as console_diaries
from api.console import packs as console_packs
from api.console import pages as console
from api.console import sharing as console_sharing
from api.console import tasks as console_tasks
from api.console import teams as console_teams
from api.genai import MemoryTelemetry
from api.hygiene import Hygiene
from api.map_cache import MapCache
from api.metrics import request_metrics
from api.middleware import access_log_middleware, problem_middleware, tracing_middleware
from api.ratelimit import Clock, RateLimiter
from api.routes import (
    a2a,
    agent_keys,
    apps,
    codec,
    connector,
    crypto,
    diaries,
    entries,
    groups,
    humans,
    identity,
    oauth,
    packs,
    projects,
    public,
    runtime_profiles,
    search,
    system,
    task_artifacts,
    task_attempts,
    tasks,
    team_invites,
    team_members,
    teams,
    transfers,
)
from infra.db import create_pool, pool_options
from infra.embeddings import OnnxEmbedder
from infra.oauth import OAuthServer, SigningKeyStore
from infra.payload_codec import PayloadEncryption
from infra.permissions import PostgresPermissionEngine
from infra.s3 import BlobStore
from infra.settings import Settings
from infra.task_changes import PolledTaskChanges, TaskChanges
from infra.telemetry import setup_metrics, setup_tracing
from infra.temporal import connect
from schemas import limits

MAX_BODY_BYTES = 1024 * 1024


@dataclass
class Deps:
    """Resources a caller (a test, a benchmark) opens itself instead of the app."""

    read_pool: asyncpg.Pool | None = None
    temporal: Client | None = None
    embedder: OnnxEmbedder | None = None  # the search query embedder (loaded when absent)
    rate_clock: Clock = time.time  # the rate limiter's clock (a test moves it)
    meter_provider: MeterProvider | None = None  # where request metrics go (default: global)


def create_app(settings: Settings, *, deps: Deps | None = None) -> web.Application:
    setup_tracing(settings.otel_service_name)
    setup_metrics(
        settings.otel_service_name,
        scrape_port=settings.metrics_port,
        scrape_host=settings.metrics_host,
    )
    deps = deps or Deps()
    meter = (deps.meter_provider or metrics.get_meter_provider()).get_meter("cairn.api")
    app = web.Application(
        middlewares=[
            request_metrics(meter),
            tracing_middleware,
            access_log_middleware,
            problem_middleware,
        ],
        client_max_size=MAX_BODY_BYTES,
    )
    app[keys.SETTINGS] = settings
    app[keys.PAYLOAD_CODEC] = PayloadEncryption(settings.payload_keyring)
    app[keys.CODEC_DECODES] = meter.create_counter(
        codec.DECODES, unit="{request}", description="Codec endpoint decode calls, by outcome."
    )
    app.on_response_prepare.append(codec.allow_the_ui)
    app[keys.MEMORY] = MemoryTelemetry.on(
        meter, capture_query_text=settings.otel_capture_query_text
    )
    app[keys.MAP_CACHE] = MapCache(limits.ENTRY_MAP_CACHED_DIARIES)
    app[keys.DRAINING] = asyncio.Event()
    app.cleanup_ctx.append(_resources(settings, deps))
    for module in (
        system,
        codec,
        oauth,
        connector,
        identity,
        humans,
        crypto,
        teams,
        team_members,
        team_invites,  # its literal /teams/join is tried before /teams/{id} in any order
        groups,
        projects,
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
        runtime_profiles,
        apps,
        console,
        console_teams,
        console_diaries,
        console_sharing,
        console_tasks,
        console_packs,
        console_agent_keys,
        a2a,
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
            **pool_options(settings),
        )
        app[keys.READ_POOL] = pool
        # LISTEN needs a session: behind a transaction pooler the watch polls instead
        app[keys.TASK_CHANGES] = (
            PolledTaskChanges() if settings.database_transaction_pooler else TaskChanges(pool)
        )
        app[keys.REPLICA_POOL] = replica = await _replica_pool(settings)
        app[keys.TEMPORAL] = deps.temporal or await connect(settings)
        store = SigningKeyStore(pool, settings.secret_ring)
        app[keys.TOKENS] = OAuthServer(
            pool,
            store,
            issuer=settings.issuer,
            ring=settings.secret_ring,
            token_ttl_sec=settings.access_token_ttl_sec,
        )
        app[keys.PERMISSIONS] = PostgresPermissionEngine(pool)
        app[keys.EMBEDDER] = deps.embedder or await search.load_query_embedder()
        # append-only task messages: the one write the API makes itself, on its own small pool
        app[keys.MESSAGE_WRITER] = writer = await create_pool(
            settings.database_url,
            read_only=False,
            min_size=1,
            max_size=settings.database_message_pool_max,
            **pool_options(settings),
        )
        rate_pool = await _rate_pool(settings)
        app[keys.RATE_LIMITER] = limiter = RateLimiter(
            rate_pool, settings.rate_limits, clock=deps.rate_clock
        )
        app[keys.HYGIENE] = hygiene = Hygiene(
            app[keys.TEMPORAL], settings.temporal_task_queue, settings.hygiene_flush_sec
        )
        flusher = asyncio.create_task(hygiene.flush_forever())
        sweeper = asyncio.create_task(limiter.sweep_forever())
        returner = asyncio.create_task(limiter.return_lapsed_forever())
        blobs = BlobStore.from_settings(settings)
        app[keys.S3_PROBE] = blobs.probe
        app[keys.BLOBS] = blobs
        try:
            yield
        finally:
            blobs.close()
            for task in (sweeper, returner, flusher):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await hygiene.close()
            if rate_pool is not None:
                await limiter.return_lapsed(every_lease=True)  # what this process holds
                await rate_pool.close()
            await writer.close()
            if replica is not None:
                await replica.close()
            if deps.read_pool is None:
                await pool.close()

    return open_resources


async def _rate_pool(settings: Settings) -> asyncpg.Pool | None:
    """The rate limiter's own writable pool (None when limits are off). Its commits do not wait
    for the disk: the table is UNLOGGED, a counter lost in a crash is only forgotten."""
    if not settings.rate_limit_enabled:
        return None
    return await create_pool(
        settings.database_url,
        read_only=False,
        min_size=1,
        max_size=settings.database_rate_pool_max,
        application_name="cairn-api-ratelimit",
        session={"synchronous_commit": "off"},
        **pool_options(settings),
    )


async def _replica_pool(settings: Settings) -> asyncpg.Pool | None:
    """The read-only pool on the streaming replica (`SERVICE_DATABASE_READ_URL`), None when
    none is set; `api.reads.reader` says which requests read there."""
    if not settings.database_read_url:
        return None
    return await create_pool(
        settings.database_read_url,
        read_only=True,
        min_size=min(settings.database_pool_min, settings.database_read_pool_max),
        max_size=settings.database_read_pool_max,
        application_name="cairn-api-replica",
        **pool_options(settings),
    )
