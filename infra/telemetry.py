"""OpenTelemetry: one trace spans API → workflow → activity → database.

The API's `tracing_middleware` opens a span per request; the Temporal `TracingInterceptor`
(client and worker) carries the context into workflows and activities. Spans are exported over
OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. Without
it the API still creates its spans (trace ids appear in logs and error bodies) but exports
nothing, and a worker process creates none.

While exporting, every asyncpg query is a span too, under the request or activity that ran it:
its SQL text (our named statements), never its parameters, which may hold hashes and tokens.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_EXPORT_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_configured = False


def exporting() -> bool:
    """Whether this process was given somewhere to send its spans."""
    return any(os.environ.get(name) for name in _EXPORT_ENDPOINTS)


def setup_tracing(service_name: str) -> None:
    """Install the global tracer provider once per process (an exporter and database spans
    when `exporting()`)."""
    global _configured
    if _configured:
        return
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if exporting():
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        instrumentor = AsyncPGInstrumentor(capture_parameters=False)  # type: ignore[no-untyped-call]
        instrumentor.instrument(tracer_provider=provider)
    trace.set_tracer_provider(provider)
    _configured = True
