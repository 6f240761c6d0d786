"""OpenTelemetry: one trace spans API → workflow → activity → database; metrics beside it.

The API's `tracing_middleware` opens a span per request; the Temporal `TracingInterceptor`
(client and worker) carries the context into workflows and activities. Spans are exported over
OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. Without
it the API still creates its spans (trace ids appear in logs and error bodies) but exports
nothing, and a worker process creates none.

While exporting, every asyncpg query is a span too, under the request or activity that ran it:
its SQL text (our named statements), never its parameters, which may hold hashes and tokens.

Metrics go to the same collector over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`) is set and `OTEL_METRICS_EXPORTER` is not `none`, every
`OTEL_METRIC_EXPORT_INTERVAL` milliseconds (default 60 s): Cairn's own instruments through the
SDK's `MeterProvider`, and the Temporal SDK's (workflow task, activity and poll latencies,
schedule-to-start, slots) through the Temporal core's own exporter, which `setup_metrics` makes
the default `Runtime` so every client and worker created afterwards reports through it.
Without an endpoint every instrument is the API's no-op one and costs nothing.

`SERVICE_METRICS_PORT` (off by default) adds a Prometheus scrape endpoint to the process
(`GET /metrics` on that port, `SERVICE_METRICS_HOST`): a second reader on the same meter
provider, so it serves exactly the instruments the OTLP push carries from the OpenTelemetry SDK.
The Temporal SDK's own metrics leave through the Temporal core's exporter, which has one
destination: they stay on the OTLP push.
"""

from __future__ import annotations

import os
import uuid
from datetime import timedelta

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.util.re import parse_env_headers
from temporalio.runtime import OpenTelemetryConfig, Runtime, TelemetryConfig

_EXPORT_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
_DEFAULT_EXPORT_INTERVAL_MS = 60_000
# Each process reports cumulative series of its own: without an instance id, N API processes
# (or worker replicas) would send the collector N conflicting values of one series.
_INSTANCE_ID = uuid.uuid4().hex
_configured = False
_metrics_configured = False


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


def exporting_metrics() -> bool:
    """Whether this process was given somewhere to send its metrics."""
    if os.environ.get("OTEL_METRICS_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return bool(os.environ.get(_METRICS_ENDPOINT) or os.environ.get(_EXPORT_ENDPOINTS[0]))


def metrics_endpoint() -> str:
    """The OTLP/HTTP metrics URL, resolved as the SDK's exporter resolves it."""
    explicit = os.environ.get(_METRICS_ENDPOINT)
    if explicit:
        return explicit
    return os.environ[_EXPORT_ENDPOINTS[0]].rstrip("/") + "/v1/metrics"


def export_interval() -> timedelta:
    raw = os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "")
    millis = int(raw) if raw.strip().isdigit() else _DEFAULT_EXPORT_INTERVAL_MS
    return timedelta(milliseconds=max(1, millis))


def _export_headers() -> dict[str, str]:
    raw = os.environ.get("OTEL_EXPORTER_OTLP_METRICS_HEADERS") or os.environ.get(
        "OTEL_EXPORTER_OTLP_HEADERS", ""
    )
    return dict(parse_env_headers(raw, liberal=True))


def _metrics_resource(service_name: str) -> dict[str, str]:
    return {"service.name": service_name, "service.instance.id": _INSTANCE_ID}


def temporal_runtime(service_name: str) -> Runtime:
    """A Temporal runtime whose core exports the SDK's metrics to the OTLP collector (seconds,
    like `http.server.request.duration`), tagged with this process's service name."""
    exporter = OpenTelemetryConfig(
        url=metrics_endpoint(),
        headers=_export_headers(),
        metric_periodicity=export_interval(),
        durations_as_seconds=True,
        http=True,
    )
    resource = _metrics_resource(service_name)
    return Runtime(telemetry=TelemetryConfig(metrics=exporter, global_tags=resource))


def setup_metrics(service_name: str, *, scrape_port: int = 0, scrape_host: str = "") -> None:
    """Install the global meter provider once per process, with an OTLP reader when
    `exporting_metrics()` (and the Temporal runtime exporting beside it) and a Prometheus scrape
    endpoint when `scrape_port` is set; call it before connecting to Temporal."""
    global _metrics_configured
    if _metrics_configured:
        return
    readers: list[MetricReader] = []
    if exporting_metrics():
        readers.append(_otlp_reader())
    if scrape_port:
        readers.append(_scrape_reader(scrape_host or "0.0.0.0", scrape_port))
    if not readers:
        return
    resource = Resource.create(_metrics_resource(service_name))
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
    if exporting_metrics():
        Runtime.set_default(temporal_runtime(service_name), error_if_already_set=False)
    _metrics_configured = True


def metering() -> bool:
    """Whether this process records metrics (a push or a scrape endpoint is set up)."""
    return _metrics_configured


def _otlp_reader() -> MetricReader:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=metrics_endpoint()),
        export_interval_millis=export_interval().total_seconds() * 1000,
    )


def _scrape_reader(host: str, port: int) -> MetricReader:
    """A reader that collects on each scrape, served on its own registry (so the endpoint has
    the provider's instruments only) by prometheus_client's server thread."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(registry=registry)
    start_http_server(port, addr=host, registry=registry)
    return reader
