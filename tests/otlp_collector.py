"""A real OTLP/HTTP receiver in the test process: `POST /v1/traces` and `POST /v1/metrics` with
protobuf bodies, decoded and kept so a test can ask what the service's processes exported."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from infra.devstack import free_port


@dataclass(frozen=True)
class ExportedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    service: str
    attributes: dict[str, Any]  # the protobuf AnyValues; `text()` reads one

    def text(self, key: str) -> str:
        return text(self.attributes[key]) if key in self.attributes else ""


@dataclass(frozen=True)
class Point:
    metric: str
    scope: str  # the name of the meter that recorded it
    service: str
    instance: str
    attributes: dict[str, str]
    value: float  # a sum or gauge's value, a histogram's count


def text(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    return str(getattr(value, kind)) if kind else ""


def exported_points(export: ExportMetricsServiceRequest) -> Iterator[Point]:
    """Each data point of an export, with its resource's service name and instance."""
    for resource_metrics in export.resource_metrics:
        resource = {a.key: text(a.value) for a in resource_metrics.resource.attributes}
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                for point in getattr(metric, kind).data_points:
                    value = point.count if kind == "histogram" else point.as_double or point.as_int
                    yield Point(
                        metric=metric.name,
                        scope=scope_metrics.scope.name,
                        service=resource.get("service.name", ""),
                        instance=resource.get("service.instance.id", ""),
                        attributes={a.key: text(a.value) for a in point.attributes},
                        value=float(value),
                    )


def exported_spans(export: ExportTraceServiceRequest) -> Iterator[ExportedSpan]:
    for resource_spans in export.resource_spans:
        resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield ExportedSpan(
                    name=span.name,
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    service=resource.get("service.name", ""),
                    attributes={a.key: a.value for a in span.attributes},
                )


@dataclass
class Collector:
    """What the processes sent: spans and metric points, in arrival order."""

    port: int
    spans: list[ExportedSpan] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def receive_traces(self, request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await request.read())
        self.spans.extend(exported_spans(export))
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    async def receive_metrics(self, request: web.Request) -> web.Response:
        export = ExportMetricsServiceRequest.FromString(await request.read())
        self.points.extend(exported_points(export))
        body = ExportMetricsServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    def of_trace(self, trace_id: str) -> list[ExportedSpan]:
        return [span for span in self.spans if span.trace_id == trace_id]

    def latest(self, metric: str, **attributes: str) -> Point | None:
        """The last point of `metric` whose attributes include `attributes`."""
        for point in reversed(self.points):
            if point.metric == metric and attributes.items() <= point.attributes.items():
                return point
        return None


@asynccontextmanager
async def running_collector() -> AsyncIterator[Collector]:
    found = Collector(port=free_port())
    app = web.Application()
    app.router.add_post("/v1/traces", found.receive_traces)
    app.router.add_post("/v1/metrics", found.receive_metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", found.port).start()
    try:
        yield found
    finally:
        await runner.cleanup()
