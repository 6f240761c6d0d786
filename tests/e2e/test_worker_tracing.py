"""`cairn worker` as its own process exports the workflow, activity and database spans of a
trace begun elsewhere to an OTLP collector (here a small one that keeps what it is sent)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry import trace
from otlp_collector import Collector, running_collector
from processes import service_env, start_cairn, stop_cairn, wait_until

from infra.devstack import free_port
from workers.admin import issue_bootstrap_voucher


@pytest.fixture
async def collector() -> AsyncIterator[Collector]:
    async with running_collector() as found:
        yield found


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
    process = await start_cairn("worker", env)
    try:
        yield queue
    finally:
        await stop_cairn(process)


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
