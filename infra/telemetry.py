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
`OTEL_METRIC_EXPORT_INTERVAL` milliseconds (default 60 s). `SERVICE_METRICS_PORT` (off by
default) adds a Prometheus scrape endpoint to the process (`GET /metrics` on that port,
`SERVICE_METRICS_HOST`). Both are readers of one `MeterProvider`, so they carry the same
instruments: Cairn's own, and the Temporal SDK's (workflow task, activity and poll latencies,
schedule-to-start, slots). The Temporal core hands those over through a `MetricBuffer` on the
default `Runtime` (which `setup_metrics` installs, so every client and worker created
afterwards reports into it); a daemon thread drains it into OpenTelemetry instruments every
second. Without either reader every instrument is the API's no-op one and costs nothing.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import TypeAlias

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Counter, Histogram, Meter, Observation
from opentelemetry.metrics import _Gauge as Gauge  # public as `Meter.create_gauge`'s result
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from temporalio.runtime import (
    BUFFERED_METRIC_KIND_COUNTER,
    BUFFERED_METRIC_KIND_HISTOGRAM,
    BufferedMetric,
    BufferedMetricUpdate,
    MetricBuffer,
    MetricBufferDurationFormat,
    Runtime,
    TelemetryConfig,
)

_EXPORT_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
_DEFAULT_EXPORT_INTERVAL_MS = 60_000
# The core drops updates (and logs an error) once its buffer is full. Drained every second, this
# holds a burst of 100k updates a second (a workflow task makes about ten) before any is lost.
_SDK_BUFFER_SIZE = 100_000
_SDK_DRAIN_PERIOD_S = 1.0
# Boundaries for the SDK's latencies (seconds): from a fast local activity to a long poll.
_SDK_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# the meter the Temporal SDK's metrics are recorded on (their instrumentation scope)
SDK_METER = "temporalio"
log = logging.getLogger(__name__)
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


def _metrics_resource(service_name: str) -> dict[str, str]:
    return {"service.name": service_name, "service.instance.id": _INSTANCE_ID}


SdkInstrument: TypeAlias = Counter | Histogram | Gauge


class TemporalMetrics:
    """The Temporal SDK's metrics, moved from the core's buffer into OpenTelemetry instruments
    (one per metric, made on its first update) so every reader of the meter provider has them.

    The buffer is drained before each collection, by the callback of an observable instrument
    that observes nothing (the provider calls every callback before it reads its instruments,
    for the OTLP push and a scrape alike), so a reader always has every update so far. A daemon
    thread drains it every `_SDK_DRAIN_PERIOD_S` too, whatever the process does and whether or
    not an event loop runs: between two collections (a minute apart by default) the core's
    buffer would otherwise fill up and drop updates.
    """

    def __init__(self, meter: Meter) -> None:
        self._meter = meter
        self._instruments: dict[str, SdkInstrument] = {}
        self._lock = threading.Lock()  # the thread and the exit hook may drain at once
        self.buffer = MetricBuffer(_SDK_BUFFER_SIZE, MetricBufferDurationFormat.SECONDS)

    def _drain_before_collection(self) -> None:
        self._meter.create_observable_gauge(
            "cairn.temporal_sdk.drain",
            callbacks=[self._drain_for_collection],
            description="Moves the Temporal SDK's buffered metrics in; observes nothing.",
        )

    def _drain_for_collection(self, options: CallbackOptions) -> Iterable[Observation]:
        self.drain()
        return ()

    def drain(self) -> None:
        with self._lock:
            for update in self.buffer.retrieve_updates():
                self._record(update)

    def _record(self, update: BufferedMetricUpdate) -> None:
        instrument = self._instrument(update.metric)
        attributes = update.attributes  # one object per attribute set, read and never kept
        if isinstance(instrument, Counter):
            instrument.add(update.value, attributes)  # a counter's update is a delta
        elif isinstance(instrument, Histogram):
            instrument.record(update.value, attributes)
        else:
            instrument.set(update.value, attributes)

    def _instrument(self, metric: BufferedMetric) -> SdkInstrument:
        found = self._instruments.get(metric.name)
        if found is None:
            found = self._instruments[metric.name] = self._create(metric)
        return found

    def _create(self, metric: BufferedMetric) -> SdkInstrument:
        name, unit, description = metric.name, metric.unit or "", metric.description or ""
        if metric.kind == BUFFERED_METRIC_KIND_COUNTER:
            return self._meter.create_counter(name, unit, description)
        if metric.kind == BUFFERED_METRIC_KIND_HISTOGRAM:
            buckets = _SDK_DURATION_BUCKETS if unit == "s" else None
            return self._meter.create_histogram(
                name, unit, description, explicit_bucket_boundaries_advisory=buckets
            )
        return self._meter.create_gauge(name, unit, description)

    def start(self) -> None:
        """Drain before each collection and every period from now on, and once more at exit
        (registered after the meter provider's own exit hook, so it runs first and the final
        export has the last updates)."""
        self._drain_before_collection()
        threading.Thread(target=self._run, name="temporal-metrics", daemon=True).start()
        atexit.register(self.drain)

    def _run(self) -> None:
        while True:
            time.sleep(_SDK_DRAIN_PERIOD_S)
            try:
                self.drain()
            except Exception:  # a bad update must not end the SDK's metrics for the process
                log.exception("could not record the Temporal SDK's metrics")


def temporal_runtime(sdk_metrics: TemporalMetrics) -> Runtime:
    """A Temporal runtime whose core buffers the SDK's metrics for `sdk_metrics` (durations in
    seconds, like `http.server.request.duration`); the meter provider's resource names the
    service and instance, so the core adds no tags of its own."""
    return Runtime(telemetry=TelemetryConfig(metrics=sdk_metrics.buffer))


def setup_metrics(service_name: str, *, scrape_port: int = 0, scrape_host: str = "") -> None:
    """Install the global meter provider once per process, with an OTLP reader when
    `exporting_metrics()` and a Prometheus scrape endpoint when `scrape_port` is set, and the
    default Temporal runtime reporting the SDK's metrics to it; call it before connecting to
    Temporal."""
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
    provider = MeterProvider(resource=resource, metric_readers=readers)
    metrics.set_meter_provider(provider)
    sdk_metrics = TemporalMetrics(provider.get_meter(SDK_METER))
    Runtime.set_default(temporal_runtime(sdk_metrics), error_if_already_set=False)
    sdk_metrics.start()
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
