"""Typed application keys: every shared resource of the app, opened in a cleanup context."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import asyncpg
from aiohttp import web
from opentelemetry.metrics import Counter
from temporalio.client import Client

from api.genai import MemoryTelemetry
from api.hygiene import Hygiene
from api.map_cache import MapCache
from api.ratelimit import RateLimiter
from infra.oauth import TokenService
from infra.payload_codec import PayloadEncryption
from infra.permissions import PermissionEngine
from infra.s3 import BlobStore
from infra.settings import Settings
from infra.task_changes import PolledTaskChanges, TaskChanges

if TYPE_CHECKING:  # onnxruntime is imported only where the model is loaded
    from infra.embeddings import OnnxEmbedder

SETTINGS = web.AppKey("settings", Settings)
MEMORY = web.AppKey("memory_telemetry", MemoryTelemetry)
READ_POOL = web.AppKey("read_pool", asyncpg.Pool)
# The streaming replica's pool (SERVICE_DATABASE_READ_URL), None without one: api.reads.reader
REPLICA_POOL: web.AppKey[asyncpg.Pool | None] = web.AppKey("replica_pool")
TEMPORAL = web.AppKey("temporal", Client)
TOKENS: web.AppKey[TokenService] = web.AppKey("tokens")
PERMISSIONS: web.AppKey[PermissionEngine] = web.AppKey("permissions")
RATE_LIMITER = web.AppKey("rate_limiter", RateLimiter)
S3_PROBE: web.AppKey[Callable[[], Awaitable[None]]] = web.AppKey("s3_probe")
# Task-artifact bytes: the API streams uploads to S3 and downloads from it (routes/task_artifacts).
BLOBS = web.AppKey("blobs", BlobStore)
# Embeds search queries in the API process (None: search falls back to full text).
EMBEDDER: web.AppKey[OnnxEmbedder | None] = web.AppKey("embedder")
# The one writable pool of the API: append-only task messages (routes/tasks.py), nothing else.
MESSAGE_WRITER = web.AppKey("message_writer", asyncpg.Pool)
# Wake-ups on a task's changes, for A2A streams (infra/task_changes.py).
TASK_CHANGES: web.AppKey[TaskChanges | PolledTaskChanges] = web.AppKey("task_changes")
# The diary map's projections, per diary version (api/map_cache.py).
MAP_CACHE = web.AppKey("map_cache", MapCache)

# The payload codec of the codec endpoint (api/routes/codec.py) and its count of decodes.
PAYLOAD_CODEC = web.AppKey("payload_codec", PayloadEncryption)
CODEC_DECODES = web.AppKey("codec_decodes", Counter)

# Consolidation starts and batched retrievals, after the response (api/hygiene.py).
HYGIENE = web.AppKey("hygiene", Hygiene)
# Set when the process drains (SIGTERM): readiness answers 503 from then on (cairn.py).
DRAINING = web.AppKey("draining", asyncio.Event)

# Per-request state set by the middlewares and the endpoint wrapper.
REQUEST_ID = web.RequestKey("request_id", str)
# who sent the request, behind trusted proxies or none (api.forwarded.client_address)
CLIENT_ADDRESS = web.RequestKey("client_address", str)
ENDPOINT = web.RequestKey("endpoint", object)
# whether this request's reads may come from the replica (api.reads), set by the route called
REPLICA_READS = web.RequestKey("replica_reads", bool)
PRINCIPAL = web.RequestKey("principal", object)
# An unread clone of a request whose handler runs other routes after its own body was read
# (`EndpointSpec.door`: aiohttp clones only unread requests; api.endpoint.invoke)
UNREAD = web.RequestKey("unread", web.Request)
# The console: who is logged in (api.console.session.ConsoleUser), their form token, and when
# the page began (for its Server-Timing)
CONSOLE_USER = web.RequestKey("console_user", object)
CSRF_TOKEN = web.RequestKey("csrf_token", str)
PAGE_STARTED = web.RequestKey("page_started", float)
# the validated body, query and path (`api.endpoint.Parsed`), for the request's fingerprint
PARSED = web.RequestKey("parsed", object)
# the CID of a raw (file) body, set by a route that reads one: part of its request fingerprint
RAW_BODY_CID = web.RequestKey("raw_body_cid", str)
RATE_QUOTA = web.RequestKey("rate_quota", object)
# the rate-limit key a request is counted under, the count under way, and whether it was admitted
RATE_KEY = web.RequestKey("rate_key", str)
RATE_DECISION: web.RequestKey[asyncio.Future[Any]] = web.RequestKey("rate_decision")
RATE_ADMITTED = web.RequestKey("rate_admitted", bool)
