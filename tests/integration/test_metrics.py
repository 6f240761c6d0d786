"""Metrics in-process, read with the SDK's in-memory reader: the API's request duration per route
template, the embedding micro-batcher's batch size and the task queue's depth.

The API is a second app on the module's stack (its database, Temporal and worker) whose request
metrics go to a meter provider of the test's own (`Deps.meter_provider`)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from actors import Actor, new_diary, personal_team
from aiohttp import web
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)

from activities.embedding import BATCH_SIZE, MicroBatcher
from api.app import Deps, create_app
from api.metrics import DURATION
from infra.db import create_pool
from infra.devstack import free_port
from infra.embeddings import OnnxEmbedder
from workers.telemetry import QUEUE_DEPTH, TaskQueueDepth


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    """The data points of one metric as the reader collects them now."""
    data = reader.get_metrics_data()
    found: list[Any] = []
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found.extend(metric.data.data_points)
    return found


def by_route(reader: InMemoryMetricReader) -> dict[tuple[str, str, int], HistogramDataPoint]:
    found = {}
    for point in points(reader, DURATION):
        attributes = point.attributes
        key = (
            attributes["http.request.method"],
            attributes["http.route"],
            attributes["http.response.status_code"],
        )
        found[key] = point
    return found


@pytest.fixture(scope="module")
def embedder() -> OnnxEmbedder:
    return OnnxEmbedder.load()


@dataclasses.dataclass
class MeteredApi:
    reader: InMemoryMetricReader
    http: aiohttp.ClientSession


@pytest.fixture(scope="module")
async def metered(stack: Any, embedder: OnnxEmbedder) -> AsyncIterator[MeteredApi]:
    reader = InMemoryMetricReader()
    pool = await create_pool(stack.settings.database_url, read_only=True)
    deps = Deps(
        read_pool=pool,
        temporal=stack.temporal,
        embedder=embedder,
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    port = free_port()
    runner = web.AppRunner(create_app(stack.settings, deps=deps))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{port}") as http:
            yield MeteredApi(reader, http)
    finally:
        await runner.cleanup()
        await pool.close()


async def test_request_durations_are_recorded_per_route_template(
    metered: MeteredApi, actors: Any
) -> None:
    agent: Actor = dataclasses.replace(await actors.agent(), http=metered.http)
    before = by_route(metered.reader)
    for _ in range(2):  # two different ids: one route, one series
        async with metered.http.get(f"/diaries/{uuid.uuid4()}") as response:
            assert response.status == 404  # no such diary (a matched route all the same)
    async with metered.http.get("/no/such/route") as response:
        assert response.status == 404
    async with metered.http.request("PROPFIND", "/health") as response:
        assert response.status == 405
    diary = await new_diary(agent)
    status, _ = await agent.call("GET", f"/diaries/{diary['id']}")
    assert status == 200

    after = by_route(metered.reader)
    grew = {key: after[key].count - (before[key].count if key in before else 0) for key in after}
    assert grew[("GET", "/diaries/{diaryId}", 404)] == 2
    assert grew[("GET", "/diaries/{diaryId}", 200)] == 1
    assert grew[("POST", "/diaries", 201)] == 1
    assert grew[("GET", "unmatched", 404)] == 1
    assert grew[("_OTHER", "unmatched", 405)] == 1  # a method of its own is no new series
    assert after[("GET", "/diaries/{diaryId}", 200)].sum > 0
    # templates only: no id ever becomes a series of its own
    routes = {route for _, route, _ in after}
    assert not any(diary["id"] in route for route in routes), routes
    assert all(route.startswith("/") or route == "unmatched" for route in routes), routes


async def test_the_embedding_batcher_records_its_batch_sizes(embedder: OnnxEmbedder) -> None:
    reader = InMemoryMetricReader()
    batcher = MicroBatcher(embedder, meter=MeterProvider(metric_readers=[reader]).get_meter("t"))
    try:
        await batcher.embed(["one text alone"])
        await asyncio.gather(*(batcher.embed([f"text {i}", f"more {i}"]) for i in range(6)))
    finally:
        await batcher.aclose()
    [point] = points(reader, BATCH_SIZE)
    assert point.count == batcher.stats.runs
    assert point.sum == 13  # every text counted once, in whichever run it went
    assert point.max == batcher.stats.largest_run_texts
    assert point.max > 2  # concurrent calls were batched


async def test_the_queue_depth_counts_unfinished_tasks_by_type_and_status(
    stack: Any, db_pool: Any, actors: Any
) -> None:
    reader = InMemoryMetricReader()
    depth = TaskQueueDepth(db_pool, MeterProvider(metric_readers=[reader]).get_meter("t"))

    def queued_freeform() -> int:
        found: list[NumberDataPoint] = [
            point
            for point in points(reader, QUEUE_DEPTH)
            if point.attributes["cairn.task.type"] == "freeform"
            and point.attributes["cairn.task.status"] == "queued"
        ]
        assert len(found) == 1
        return int(found[0].value)

    await depth.refresh()
    statuses = {p.attributes["cairn.task.status"] for p in points(reader, QUEUE_DEPTH)}
    assert statuses == {"queued", "dispatched", "running"}  # zeros included
    start = queued_freeform()

    owner = await actors.agent()
    team, diary = await personal_team(owner), await new_diary(owner)
    body = {"taskType": "freeform", "teamId": team, "diaryId": diary["id"], "input": {"brief": "x"}}
    for _ in range(2):
        status, task = await owner.call("POST", "/tasks", json=body, team=team)
        assert status == 201, task
    await depth.refresh()
    assert queued_freeform() == start + 2
