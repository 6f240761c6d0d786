"""Request metrics: `http.server.request.duration` per route template, method and status.

One histogram in seconds (OpenTelemetry's HTTP semantic conventions); its count is the request
rate. The route is the template aiohttp matched (`/diaries/{diaryId}`), never the raw path, so
the number of series stays bounded by the routes we declare; a request no route matched is
`unmatched`, a method outside HTTP's own `_OTHER`. Outermost of the middlewares, it sees the
status the client gets (a problem response included) and the whole time the request took.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware
from opentelemetry.metrics import Meter

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
DURATION = "http.server.request.duration"
# the semantic conventions' advisory boundaries for this histogram, in seconds
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
# any other method a client sends is `_OTHER` (the conventions' rule): series stay bounded
KNOWN_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"}
)


def route_template(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


def request_metrics(meter: Meter) -> Middleware:
    """The middleware recording each request's duration on `meter` (a no-op meter when the
    process exports no metrics)."""
    duration = meter.create_histogram(
        DURATION,
        unit="s",
        description="Duration of HTTP server requests.",
        explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
    )

    def record(request: web.Request, status: int, started: float) -> None:
        attributes: dict[str, str | int] = {
            "http.request.method": request.method if request.method in KNOWN_METHODS else "_OTHER",
            "http.route": route_template(request),
            "http.response.status_code": status,
        }
        duration.record(time.perf_counter() - started, attributes)

    @web.middleware
    async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # a redirect the problem middleware lets through
            record(request, exc.status, started)
            raise
        except Exception:  # past the problem middleware: the server answers 500
            record(request, 500, started)
            raise
        # (a request cancelled because its client went away got no answer: not recorded)
        record(request, response.status, started)
        return response

    return metrics_middleware
