"""`cairn worker` as its own process exports the workflow, activity and database spans of a
trace begun elsewhere to an OTLP collector (here a small one that keeps what it is sent)."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from processes import cairn_worker, service_env, wait_until

from infra.devstack import free_port
from workers.admin import issue_bootstrap_voucher


@dataclass(frozen=True)
class ExportedSpan:
    name: str
    trace_id: str
    service: str
    attributes: dict[str, Any]


@dataclass
class Collector:
    """An OTLP/HTTP trace receiver: `POST /v1/traces` with a protobuf body."""

    port: int
    spans: list[ExportedSpan] = field(default_factory=list)

    async def receive(self, request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await request.read())
        for resource_spans in export.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        ExportedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            service=resource.get("service.name", ""),
                            attributes={a.key: a.value for a in span.attributes},
                        )
                    )
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    def of_trace(self, trace_id: str) -> list[ExportedSpan]:
        return [span for span in self.spans if span.trace_id == trace_id]


@pytest.fixture
async def collector() -> AsyncIterator[Collector]:
    found = Collector(port=free_port())
    app = web.Application()
    app.router.add_post("/v1/traces", found.receive)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", found.port).start()
    try:
        yield found
    finally:
        await runner.cleanup()


@pytest.fixture
async def worker_queue(stack: Any, collector: Collector) -> AsyncIterator[str]:
    """A `cairn worker` process on a task queue of its own, exporting to the collector."""
    queue = f"traced-{uuid.uuid4().hex[:8]}"
    env = service_env(stack.settings, free_port())
    env.update(
        SERVICE_TEMPORAL_TASK_QUEUE=queue,
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector.port}",
        OTEL_BSP_SCHEDULE_DELAY="100",  # milliseconds between exports
    )
    process = await cairn_worker(env)
    try:
        yield queue
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.kill()
                await process.wait()


async def test_a_worker_process_exports_the_workflow_activity_and_database_spans(
    stack: Any, collector: Collector, worker_queue: str
) -> None:
    settings = stack.settings.model_copy(update={"temporal_task_queue": worker_queue})
    with trace.get_tracer(__name__).start_as_current_span("operator") as parent:
        voucher = await asyncio.wait_for(issue_bootstrap_voucher(stack.temporal, settings), 60)
    trace_id = f"{parent.get_span_context().trace_id:032x}"

    def names() -> set[str]:
        return {span.name for span in collector.of_trace(trace_id)}

    await wait_until(
        lambda: (
            {"RunWorkflow:VoucherIssue", "RunActivity:identity.issue_voucher"} <= names()
            and any(span.attributes.get("db.system") for span in collector.of_trace(trace_id))
        ),
        limit_s=30,
    )
    spans = collector.of_trace(trace_id)
    assert {span.service for span in spans} == {stack.settings.otel_service_name}
    queries = [span for span in spans if span.attributes.get("db.system")]
    assert any("vouchers" in span.attributes["db.statement"].string_value for span in queries)
    # the SQL text only: a parameter (here the voucher's code) never leaves the process
    for span in queries:
        assert "db.statement.parameters" not in span.attributes
        assert voucher.code not in str(span.attributes)
