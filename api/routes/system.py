"""Liveness, readiness (Postgres, Temporal, S3) and the OpenAPI document."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from api import keys
from api.endpoint import Parsed, endpoint
from api.openapi import build_openapi
from schemas.base import ResponseBody
from schemas.errors import ServiceUnavailable

routes = web.RouteTableDef()
TAG = "system"
CHECK_TIMEOUT_SEC = 2.0


class Health(ResponseBody):
    """The service answers."""

    status: str


class Readiness(ResponseBody):
    """Each dependency's state."""

    status: str
    checks: dict[str, str]


# The probes are never rate limited: the kubelets of one node probe every pod on it from one
# address, and a throttled readiness probe would take healthy pods out of service.
@endpoint(routes, "GET", "/health", tag=TAG, response=Health, auth="none", rate_limited=False)
async def health(request: web.Request, parsed: Parsed) -> Health:
    """Liveness: the process serves requests."""
    return Health(status="ok")


async def _check(name: str, probe: Any) -> tuple[str, str]:
    try:
        await asyncio.wait_for(probe, CHECK_TIMEOUT_SEC)
    except Exception as exc:
        return name, f"error: {type(exc).__name__}"
    return name, "ok"


@endpoint(
    routes,
    "GET",
    "/health/ready",
    tag=TAG,
    response=Readiness,
    also=((503, "Degraded: a check failed (`checks` names it)"),),
    auth="none",
    rate_limited=False,
    errors=(ServiceUnavailable,),
)
async def ready(request: web.Request, parsed: Parsed) -> web.Response:
    """Readiness: Postgres, Temporal and S3 all answer."""
    app = request.app
    probes = [
        _check("postgres", app[keys.READ_POOL].fetchval("SELECT 1")),
        _check("temporal", app[keys.TEMPORAL].service_client.check_health()),
        _check("s3", app[keys.S3_PROBE]()),
    ]
    checks = dict(await asyncio.gather(*probes))
    healthy = all(state == "ok" for state in checks.values())
    body = Readiness(status="ok" if healthy else "degraded", checks=checks)
    return web.json_response(body.model_dump(), status=200 if healthy else 503)


@endpoint(routes, "GET", "/openapi.json", tag=TAG, auth="none")
async def openapi(request: web.Request, parsed: Parsed) -> dict[str, Any]:
    """This document: OpenAPI 3.1, generated from the route declarations."""
    return build_openapi(request.app[keys.SETTINGS].base_url)
