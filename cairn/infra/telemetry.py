"""OpenTelemetry: one trace spans API → workflow → activity.

The API's `tracing_middleware` opens a span per request; the Temporal `TracingInterceptor`
(client and worker) carries the context into workflows and activities. Spans are exported over
OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; without it they are still created (trace ids
appear in logs and error bodies) but not exported.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_configured = False


def setup_tracing(service_name: str) -> None:
    """Install the global tracer provider once per process."""
    global _configured
    if _configured:
        return
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _configured = True
