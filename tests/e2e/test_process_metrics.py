"""`cairn worker` and `cairn api` as processes of their own export metrics to an OTLP collector
(a small one that keeps what it is sent): the Temporal SDK's own, the task queue's depth and the
request durations, all through the OpenTelemetry SDK's meter provider, under the service's name
and an instance id per process."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from actors import new_diary, personal_team
from otlp_collector import Collector, Point, running_collector
from processes import service_env, start_cairn, stop_cairn, wait_until

from api.metrics import DURATION
from infra.devstack import free_port, port_open
from infra.telemetry import SDK_METER
from workers.admin import issue_bootstrap_voucher
from workers.telemetry import QUEUE_DEPTH


@pytest.fixture
async def collector() -> AsyncIterator[Collector]:
    async with running_collector() as found:
        yield found


@pytest.fixture
async def worker_queue(stack: Any, collector: Collector) -> AsyncIterator[str]:
    """A `cairn worker` process (service queue only) on a task queue of its own, exporting its
    metrics to the collector every 200 ms."""
    queue = f"metered-{uuid.uuid4().hex[:8]}"
    env = service_env(stack.settings, free_port())
    env.update(
        SERVICE_TEMPORAL_TASK_QUEUE=queue,
        SERVICE_WORKER_QUEUES="service",
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=f"http://127.0.0.1:{collector.port}/v1/metrics",
        OTEL_METRIC_EXPORT_INTERVAL="200",
    )
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    process = await start_cairn("worker", env)
    try:
        yield queue
    finally:
        await stop_cairn(process)


async def test_a_worker_process_exports_the_sdk_metrics_and_the_queue_depth(
    stack: Any, collector: Collector, worker_queue: str, actors: Any
) -> None:
    settings = stack.settings.model_copy(update={"temporal_task_queue": worker_queue})
    await asyncio.wait_for(issue_bootstrap_voucher(stack.temporal, settings), 60)

    def sdk_latencies() -> tuple[Point | None, Point | None]:
        on_queue = {"task_queue": worker_queue}
        return (
            collector.latest(
                "temporal_workflow_endtoend_latency", workflow_type="VoucherIssue", **on_queue
            ),
            collector.latest(  # the voucher's one step is a local activity
                "temporal_local_activity_execution_latency",
                activity_type="identity.issue_voucher",
                **on_queue,
            ),
        )

    await wait_until(lambda: all(sdk_latencies()), limit_s=30)
    workflow_latency, activity_latency = sdk_latencies()
    assert workflow_latency is not None and workflow_latency.value >= 1
    assert activity_latency is not None and activity_latency.value >= 1
    assert workflow_latency.service == stack.settings.otel_service_name
    # through the OpenTelemetry SDK's meter provider (so the scrape endpoint has them too)
    assert workflow_latency.scope == activity_latency.scope == SDK_METER
    # cumulative: one more run, one more in the count
    await asyncio.wait_for(issue_bootstrap_voucher(stack.temporal, settings), 60)
    runs = workflow_latency.value

    def more_runs() -> bool:
        latest = sdk_latencies()[0]
        return latest is not None and latest.value == runs + 1

    await wait_until(more_runs, limit_s=30)
    assert collector.latest(
        "temporal_workflow_task_schedule_to_start_latency", task_queue=worker_queue
    )

    # the depth moves with the queue: two more queued tasks (made through the module's API)
    queued = {"cairn.task.type": "freeform", "cairn.task.status": "queued"}
    await wait_until(lambda: collector.latest(QUEUE_DEPTH, **queued) is not None, limit_s=30)
    start = collector.latest(QUEUE_DEPTH, **queued)
    assert start is not None and start.service == stack.settings.otel_service_name
    # one process, one instance: the SDK's metrics and Cairn's carry the same id
    assert start.instance and start.instance == workflow_latency.instance
    owner = await actors.agent()
    team, diary = await personal_team(owner), await new_diary(owner)
    body = {"taskType": "freeform", "teamId": team, "diaryId": diary["id"], "input": {"brief": "x"}}
    for _ in range(2):
        status, task = await owner.call("POST", "/tasks", json=body, team=team)
        assert status == 201, task

    def depth() -> float:
        point = collector.latest(QUEUE_DEPTH, **queued)
        return point.value if point else -1

    await wait_until(lambda: depth() == start.value + 2, limit_s=30)


@pytest.fixture
async def metered_api(stack: Any, collector: Collector) -> AsyncIterator[str]:
    """`cairn api --processes 2` exporting its metrics to the collector every 200 ms."""
    port = free_port()
    env = service_env(stack.settings, port)
    env.update(
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=f"http://127.0.0.1:{collector.port}/v1/metrics",
        OTEL_METRIC_EXPORT_INTERVAL="200",
    )
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "cairn", "api", "--processes", "2"],
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_until(lambda: port_open(port), limit_s=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()


async def test_api_processes_export_request_durations_each_as_its_own_instance(
    stack: Any, collector: Collector, metered_api: str
) -> None:
    requests = 12
    # a new connection per request, so the kernel spreads them over both processes
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        for _ in range(requests):
            async with http.get(f"{metered_api}/diaries/{uuid.uuid4()}") as response:
                assert response.status == 404

    route = {"http.route": "/diaries/{diaryId}", "http.request.method": "GET"}

    def counted() -> float:
        """The requests the collector saw: the latest cumulative count of each instance."""
        latest: dict[str, float] = {}
        for point in collector.points:
            if point.metric == DURATION and route.items() <= point.attributes.items():
                latest[point.instance] = point.value
        return sum(latest.values())

    await wait_until(lambda: counted() == requests, limit_s=30)
    point = collector.latest(DURATION, **route)
    assert point is not None and point.service == stack.settings.otel_service_name
    assert point.attributes["http.response.status_code"] == "404"
    # the API's Temporal client reports through the same meter provider
    request = collector.latest("temporal_request", operation="GetSystemInfo")
    assert request is not None and request.scope == SDK_METER
