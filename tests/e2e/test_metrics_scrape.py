"""`SERVICE_METRICS_PORT`: each process serves a Prometheus scrape endpoint, read here with
`curl` as a scraper would, carrying the instruments the OTLP push carries (the Temporal SDK's
included)."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from actors import Actors, personal_team
from processes import service_env, start_cairn, stop_cairn, wait_until

from infra.devstack import free_port
from workers.admin import issue_bootstrap_voucher


async def curl(url: str) -> str:
    """The body `curl` gets (empty while nothing answers)."""
    done = await asyncio.to_thread(
        subprocess.run, ["curl", "-sf", url], capture_output=True, text=True, check=False
    )
    return done.stdout if done.returncode == 0 else ""


@pytest.fixture
async def scraped_api(stack: Any) -> AsyncIterator[tuple[str, str]]:
    """`cairn api` with a scrape endpoint and no OTLP endpoint: (API URL, metrics URL)."""
    api_port, metrics_port = free_port(), free_port()
    env = service_env(stack.settings, api_port) | {"SERVICE_METRICS_PORT": str(metrics_port)}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    process = await start_cairn("api", env)
    try:
        yield f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{metrics_port}/metrics"
    finally:
        await stop_cairn(process)


async def test_an_api_process_serves_its_request_and_memory_metrics(
    stack: Any, scraped_api: tuple[str, str]
) -> None:
    api, metrics_url = scraped_api
    await wait_until(lambda: curl(f"{api}/health"), limit_s=240, what="cairn api")
    async with aiohttp.ClientSession(api) as http:
        agent = await Actors(stack, http).agent()
        body = {"name": "scraped", "visibility": "private"}
        status, diary = await agent.call(
            "POST", "/diaries", json=body, team=await personal_team(agent)
        )
        assert status == 201, diary

    text = await curl(metrics_url)
    lines = text.splitlines()
    assert any(
        line.startswith("http_server_request_duration_seconds_count{")
        and 'http_route="/diaries"' in line
        and 'http_response_status_code="201"' in line
        for line in lines
    ), text
    assert any(
        line.startswith("gen_ai_server_request_duration_seconds_bucket{")
        and 'gen_ai_operation_name="create_memory_store"' in line
        for line in lines
    ), text


async def test_a_worker_process_serves_the_queue_depth_and_the_sdk_metrics(stack: Any) -> None:
    metrics_port, queue = free_port(), f"scraped-{uuid.uuid4().hex[:8]}"
    env = service_env(stack.settings, free_port()) | {
        "SERVICE_METRICS_PORT": str(metrics_port),
        "SERVICE_TEMPORAL_TASK_QUEUE": queue,
        "SERVICE_WORKER_QUEUES": "service",
        "OTEL_METRIC_EXPORT_INTERVAL": "200",  # the depth is counted every interval
    }
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    process = await start_cairn("worker", env)
    try:
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        await wait_until(
            lambda: _has_depth(url), limit_s=240, what="the worker's scrape with the queue depth"
        )
        # a workflow on the worker's queue: the Temporal SDK's metrics are on the scrape too
        settings = stack.settings.model_copy(update={"temporal_task_queue": queue})
        await asyncio.wait_for(issue_bootstrap_voucher(stack.temporal, settings), 60)
        await wait_until(
            lambda: _has_workflow_task_latency(url, queue),
            limit_s=30,
            what="the worker's scrape with the SDK's workflow task latency",
        )
    finally:
        await stop_cairn(process)


async def _has_depth(url: str) -> bool:
    text = await curl(url)
    return any(
        line.startswith("cairn_task_queue_depth")
        and 'cairn_task_status="queued"' in line
        and 'cairn_task_type="freeform"' in line
        for line in text.splitlines()
    )


async def _has_workflow_task_latency(url: str, queue: str) -> bool:
    text = await curl(url)
    return any(
        line.startswith("temporal_workflow_task_execution_latency")
        and f'task_queue="{queue}"' in line
        and 'workflow_type="VoucherIssue"' in line
        for line in text.splitlines()
    )
