"""Typed application keys: every shared resource of the app, opened in a cleanup context."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import asyncpg
from aiohttp import web
from temporalio.client import Client

from cairn.api.ratelimit import RateLimiter
from cairn.infra.oauth import TokenService
from cairn.infra.permissions import PermissionEngine
from cairn.infra.settings import Settings

SETTINGS = web.AppKey("settings", Settings)
READ_POOL = web.AppKey("read_pool", asyncpg.Pool)
TEMPORAL = web.AppKey("temporal", Client)
TOKENS: web.AppKey[TokenService] = web.AppKey("tokens")
PERMISSIONS: web.AppKey[PermissionEngine] = web.AppKey("permissions")
RATE_LIMITER = web.AppKey("rate_limiter", RateLimiter)
S3_PROBE: web.AppKey[Callable[[], Awaitable[None]]] = web.AppKey("s3_probe")

# Per-request state set by the middlewares and the endpoint wrapper.
REQUEST_ID = web.RequestKey("request_id", str)
ENDPOINT = web.RequestKey("endpoint", object)
PRINCIPAL = web.RequestKey("principal", object)
RATE_QUOTA = web.RequestKey("rate_quota", object)
