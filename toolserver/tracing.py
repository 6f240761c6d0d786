"""The MCP server's spans: one SERVER span per HTTP request, continuing the host's W3C
`traceparent`, so the REST calls the tools make (the client SDK injects the current context)
join the host's trace: host → MCP → API → workflow → activity → SQL.

`cairn mcp` installs the tracer provider (an exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` is
set); without one these spans are the API's no-op spans. The span name is the method and the
MCP endpoint's path, or `other` for any other path (OAuth routes, probes, strays), so a
scanner's paths do not become span names.
"""

from __future__ import annotations

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_tracer = trace.get_tracer("cairn.mcp")


class TracedApp:
    """ASGI middleware: the request's span is current while the app (and its tools) run."""

    def __init__(self, app: ASGIApp, mcp_path: str) -> None:
        self._app = app
        self._mcp_path = mcp_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        method = str(scope["method"])
        route = self._mcp_path if scope["path"] == self._mcp_path else "other"
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        with _tracer.start_as_current_span(
            f"{method} {route}",
            context=propagate.extract(carrier),
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "http.route": route},
        ) as span:
            await self._app(scope, receive, sending)
            span.set_attribute("http.response.status_code", status)
            if status >= 500:
                span.set_status(StatusCode.ERROR)
