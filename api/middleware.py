"""Middlewares: tracing, request ids, RFC 9457 problem responses, rate-limit headers.

`tracing_middleware` opens one SERVER span per request, continuing the caller's W3C
`traceparent`; the Temporal client's `TracingInterceptor` carries it on into workflows and
activities. It replaces the contrib aiohttp instrumentation, which also records semantic-
convention metrics and cost a third of a small request's CPU (measured on `GET /health`).

Every error leaves as `application/problem+json`. A DomainError (raised in the API, or carried
back from a workflow, an update validator or an activity) keeps its status and code; an
unreachable dependency (Temporal, a lost or refused Postgres connection, S3) or a database pool
with no connection free within the acquire timeout is 503, and every 503 carries `Retry-After`:
an outage is something to wait out, not a bug; anything else is a 500 that shows no internals
and is logged once with the request id and trace id.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable

import asyncpg
from aiohttp import web
from botocore.exceptions import ConnectionError as S3ConnectionError
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, StatusCode
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from api import keys
from api.console.render import problem_page
from api.forwarded import client_address
from api.headers import refuse_unstorable_headers
from api.metrics import route_template
from api.spec import HTML, EndpointSpec
from infra.db import PoolExhausted
from infra.logs import begin_request, current_request
from infra.temporal import problem_from_failure
from schemas import limits
from schemas.errors import (
    DomainError,
    InternalError,
    MethodNotAllowed,
    PayloadTooLarge,
    Problem,
    RequestInvalid,
    RouteNotFound,
    ServiceUnavailable,
)
from schemas.text import is_unstorable

log = logging.getLogger("api")
access_log = logging.getLogger("cairn.access")
CLIENT_CLOSED = 499  # nginx's status for a request whose client closed the connection
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PROBLEM_JSON = "application/problem+json"
REQUEST_ID_HEADER = "X-Request-Id"
_tracer = trace.get_tracer("api")


@web.middleware
async def access_log_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """One `cairn.access` line per request, inside its span (so it carries the trace and span
    ids) and after the problem middleware (so it has the status the client gets). The path
    goes without its query string: cursors and search terms stay out of the logs."""
    begin_request()
    started = time.perf_counter()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:  # a redirect the problem middleware lets through
        status = exc.status
        raise
    except asyncio.CancelledError:
        status = CLIENT_CLOSED  # the client went away before the answer
        raise
    finally:
        route = route_template(request)
        access_log.info(
            "%s %s %s",
            request.method,
            route,
            status,
            extra={
                "method": request.method,
                "route": route,
                "path": request.path,
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            },
        )


@web.middleware
async def tracing_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    with _tracer.start_as_current_span(
        f"{request.method} {route}",
        context=propagate.extract(request.headers),
        kind=SpanKind.SERVER,
        attributes={
            "http.request.method": request.method,
            "http.route": route,
            "client.address": client_address(request),
        },
    ) as span:
        response = await handler(request)
        span.set_attribute("http.response.status_code", response.status)
        if response.status >= 500:
            span.set_status(StatusCode.ERROR)
        return response


def problem_response(error: DomainError, request: web.Request) -> web.Response:
    # the type URI resolves: GET {base_url}/problems/{code} describes it
    problem = error.to_problem(request.app[keys.SETTINGS].base_url)
    problem.instance = request.path
    body = problem.model_dump(mode="json", exclude_none=True)
    spec = request.get(keys.ENDPOINT)
    if isinstance(spec, EndpointSpec) and spec.raw_response == HTML:
        response = problem_page(request, error, problem)  # a page's refusal is a page
    else:
        response = web.Response(
            text=json.dumps(body, ensure_ascii=False),
            status=problem.status,
            content_type=PROBLEM_JSON,
        )
    retry_after = body.get("retryAfter")
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    elif problem.status == 503:
        response.headers["Retry-After"] = str(limits.UNAVAILABLE_RETRY_AFTER_SEC)
    if problem.status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="cairn"'
    return response


def _from_http_exception(exc: web.HTTPException) -> DomainError:
    if exc.status == 404:
        return RouteNotFound("No such route")
    if exc.status == 405:
        return MethodNotAllowed(f"{request_method(exc)} is not allowed here")
    if exc.status == 413:
        return PayloadTooLarge("The request body is too large")
    return RequestInvalid(exc.text or exc.reason)


async def _allowed_methods(request: web.Request, joined: str) -> str:
    """The methods of the route the path names: its literal path first, else the first pattern
    it matches. aiohttp's `Allow` joins those of every route the path could match (`/teams/join`
    would list `/teams/{id}`'s GET and DELETE)."""
    matched: list[tuple[str, set[str]]] = []
    for resource in request.app.router.resources():
        _, allowed = await resource.resolve(request)
        if allowed:
            matched.append((resource.canonical, set(allowed)))
    if not matched:
        return joined
    literal = [canonical for canonical, _ in matched if canonical == request.path]
    route = literal[0] if literal else matched[0][0]
    # one path's methods may sit on several resources (routes declared apart)
    return ",".join(sorted(set().union(*(m for canonical, m in matched if canonical == route))))


def request_method(exc: web.HTTPException) -> str:
    method = getattr(exc, "method", None)
    return str(method) if method else "This method"


def _from_dependency(exc: BaseException) -> DomainError | None:
    carried = problem_from_failure(exc)
    if carried is not None:
        return carried
    if isinstance(exc, RPCError) and exc.status in _ENGINE_TRANSIENT:
        return ServiceUnavailable("The workflow engine is unavailable")
    if isinstance(exc, _POSTGRES_DOWN):
        return ServiceUnavailable("The database is unavailable")
    if isinstance(exc, PoolExhausted):
        return ServiceUnavailable("Every database connection is busy")
    if isinstance(exc, S3ConnectionError):
        return ServiceUnavailable("The blob store is unavailable")
    if isinstance(exc, (OSError, TimeoutError)) and not isinstance(exc, web.HTTPException):
        return ServiceUnavailable("A dependency is unavailable")
    return None


# What the workflow engine answers while it cannot decide now; the same request may be resent.
# FAILED_PRECONDITION is Temporal's WorkflowNotReady: an Update whose workflow task failed under
# it (a worker killed mid-task, say) is aborted with it, and the retried task will take it again.
_ENGINE_TRANSIENT = (
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.FAILED_PRECONDITION,
)
# A connection lost, refused while Postgres starts or stops, or closed under a pooled query.
_POSTGRES_DOWN = (
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
)
_DEPENDENCY_ERRORS = (
    WorkflowFailureError,
    WorkflowUpdateFailedError,
    RPCError,
    OSError,
    *_POSTGRES_DOWN,
    S3ConnectionError,
)


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    # a correlator, not a secret: the cheap generator (no system call per request)
    request_id = request.headers.get(REQUEST_ID_HEADER, "")[:64]
    if not request_id or is_unstorable(request_id):
        request_id = f"{random.getrandbits(128):032x}"
    request[keys.REQUEST_ID] = request_id
    context = current_request()
    if context is not None:
        context.request_id = request_id
    try:
        refuse_unstorable_headers(request)
        response = await handler(request)
    except DomainError as error:
        response = problem_response(error, request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = problem_response(_from_http_exception(exc), request)
        if "Allow" in exc.headers:
            response.headers["Allow"] = await _allowed_methods(request, exc.headers["Allow"])
    except _DEPENDENCY_ERRORS as exc:
        mapped = _from_dependency(exc)
        response = _internal(request, exc) if mapped is None else problem_response(mapped, request)
    except Exception as exc:
        response = _internal(request, exc)
    response.headers[REQUEST_ID_HEADER] = request[keys.REQUEST_ID]
    quota = request.get(keys.RATE_QUOTA)
    if quota is not None:
        response.headers["x-ratelimit-limit"] = str(quota.limit)
        response.headers["x-ratelimit-remaining"] = str(quota.remaining)
        response.headers["x-ratelimit-reset"] = str(quota.reset_sec)
    return response


def _internal(request: web.Request, exc: BaseException) -> web.Response:
    span = trace.get_current_span().get_span_context()
    trace_id = f"{span.trace_id:032x}" if span.is_valid else None
    log.exception(
        "unhandled error",
        exc_info=exc,
        extra={
            "request_id": request[keys.REQUEST_ID],
            "trace_id": trace_id,
            "path": request.path,
            "client_address": client_address(request),
        },
    )
    error = InternalError(
        "Something went wrong on our side",
        extensions={"requestId": request[keys.REQUEST_ID], "traceId": trace_id},
    )
    return problem_response(error, request)


__all__ = [
    "Problem",
    "access_log_middleware",
    "problem_middleware",
    "problem_response",
    "tracing_middleware",
]
