"""Typed application keys: every shared resource of the app, opened in a cleanup context."""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncpg
from aiohttp import web
from temporalio.client import Client

from cairn.infra.settings import Settings

if TYPE_CHECKING:
    pass

SETTINGS = web.AppKey("settings", Settings)
READ_POOL = web.AppKey("read_pool", asyncpg.Pool)
TEMPORAL = web.AppKey("temporal", Client)
TOKENS = web.AppKey("tokens", "TokenService")
PERMISSIONS = web.AppKey("permissions", "PermissionEngine")
RATE_LIMITER = web.AppKey("rate_limiter", "RateLimiter")
S3_PROBE = web.AppKey("s3_probe", "Callable[[], Awaitable[None]]")

# Per-request state set by the middlewares and the endpoint wrapper.
REQUEST_ID = web.RequestKey("request_id", str)
ENDPOINT = web.RequestKey("endpoint", object)
PRINCIPAL = web.RequestKey("principal", object)
RATE_QUOTA = web.RequestKey("rate_quota", object)
