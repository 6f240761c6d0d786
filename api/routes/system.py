"""Liveness, readiness (Postgres, Temporal, S3), the OpenAPI document and the problem catalogue.

A problem's `type` is `{base_url}/problems/{code}`: `GET /problems/{code}` describes it from the
catalogue of `schemas/errors.py` (JSON, or a small HTML page for a browser), `GET /problems` lists
every problem the service answers with.
"""

from __future__ import annotations

import asyncio
import html
from typing import Annotated, Any

from aiohttp import web
from pydantic import Field

from api import keys
from api.endpoint import Parsed, endpoint
from api.openapi import build_openapi
from schemas.base import RequestBody, ResponseBody
from schemas.errors import (
    DomainError,
    ProblemTypeNotFound,
    ServiceUnavailable,
    problem_type,
    problem_types,
    type_uri,
)

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
    also=((503, "Degraded (a check failed: `checks` names it), or draining before a shutdown"),),
    auth="none",
    rate_limited=False,
    errors=(ServiceUnavailable,),
)
async def ready(request: web.Request, parsed: Parsed) -> web.Response:
    """Readiness: Postgres, Temporal and S3 all answer, and the process is not shutting down."""
    app = request.app
    if app[keys.DRAINING].is_set():  # a load balancer takes this replica out before it stops
        draining = Readiness(status="draining", checks={})
        return web.json_response(draining.model_dump(), status=503)
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


class ProblemTypeInfo(ResponseBody):
    """One problem type of the catalogue: what a problem with this code means."""

    code: str
    type: str = Field(description="The type URI problems of this code carry")
    title: str
    status: int = Field(description="The HTTP status answered with this code, REST and MCP alike")
    meaning: str = Field(description="What it means and what to do, for a client developer")


class ProblemTypeList(ResponseBody):
    """Every problem type the service answers with, by code."""

    items: list[ProblemTypeInfo]


class ProblemPath(RequestBody):
    code: Annotated[str, Field(max_length=100, description="A problem code")]


def _info(base_url: str, problem: type[DomainError]) -> ProblemTypeInfo:
    return ProblemTypeInfo(
        code=problem.code,
        type=type_uri(base_url, problem.code),
        title=problem.title,
        status=problem.status,
        meaning=problem.meaning(),
    )


@endpoint(routes, "GET", "/problems", tag=TAG, response=ProblemTypeList, auth="none")
async def list_problem_types(request: web.Request, parsed: Parsed) -> ProblemTypeList:
    """The problem catalogue: every code the service answers with, its status and meaning."""
    base_url = request.app[keys.SETTINGS].base_url
    return ProblemTypeList(items=[_info(base_url, problem) for problem in problem_types()])


@endpoint(
    routes,
    "GET",
    "/problems/{code}",
    tag=TAG,
    path_params=ProblemPath,
    response=ProblemTypeInfo,
    auth="none",
    errors=(ProblemTypeNotFound,),
)
async def get_problem_type(
    request: web.Request, parsed: Parsed[None, None, ProblemPath]
) -> ProblemTypeInfo | web.Response:
    """One problem type (where a problem's `type` URI leads): its title, status and meaning."""
    problem = problem_type(parsed.path.code)
    if problem is None:
        raise ProblemTypeNotFound(f"No problem type {parsed.path.code!r}; see GET /problems")
    info = _info(request.app[keys.SETTINGS].base_url, problem)
    if _prefers_html(request):
        return web.Response(text=_page(info), content_type="text/html")
    return info


def _prefers_html(request: web.Request) -> bool:
    """A browser following the type URI asks for text/html before any JSON."""
    accept = request.headers.get("Accept", "")
    first = accept.split(",")[0].split(";")[0].strip().lower()
    return first == "text/html"


def _page(info: ProblemTypeInfo) -> str:
    code, title, meaning = (html.escape(v) for v in (info.code, info.title, info.meaning))
    return (
        f'<!doctype html><html lang="en"><meta charset="utf-8"><title>{code}</title>'
        f"<h1>{title}</h1><p><code>{code}</code> &middot; HTTP {info.status}</p>"
        f'<p>{meaning}</p><p><a href="../problems">All problem types</a></p></html>'
    )
