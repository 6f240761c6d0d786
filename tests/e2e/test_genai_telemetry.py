"""Memory operations in the GenAI memory conventions, and one trace across every process.

`cairn api`, `cairn worker` and `cairn mcp` run as processes of their own on a task queue of
their own, exporting spans and metrics to a real OTLP/HTTP receiver in this process. A REST
write and a task claim, and a write and a search over MCP begun under a host's span, arrive
with the conventions' span names and attributes; the MCP calls' trace runs host → MCP → API →
workflow → activity → SQL.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from actors import Actor, Actors, join_team
from mcp_support import client_headers, mcp_session, structured
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_collector import Collector, ExportedSpan, running_collector
from processes import service_env, start_cairn, stop_cairn, wait_until

from api.genai import DURATION, OPERATION, QUERY_TEXT, RECORD_ID, STORE_ID
from infra.devstack import free_port

QUERY = "which pooler keeps prepared statements"


@dataclass(frozen=True)
class Traced:
    """The processes' addresses and the receiver they export to."""

    api: str
    mcp: str
    collector: Collector


async def _answers(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as http, http.get(url) as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


@pytest.fixture(scope="module")
async def traced(stack: Any) -> AsyncIterator[Traced]:
    api_port, mcp_port = free_port(), free_port()
    api = f"http://127.0.0.1:{api_port}"
    async with AsyncExitStack() as cleanup:
        collector = await cleanup.enter_async_context(running_collector())
        env = service_env(stack.settings, api_port) | {
            "SERVICE_TEMPORAL_TASK_QUEUE": f"traced-{uuid.uuid4().hex[:8]}",
            "SERVICE_OTEL_CAPTURE_QUERY_TEXT": "true",
            "SERVICE_MCP_PORT": str(mcp_port),
            "SERVICE_MCP_API_URL": api,
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # milliseconds between span exports
            "OTEL_METRIC_EXPORT_INTERVAL": "200",
        }
        for command in ("worker", "api", "mcp"):
            process = await start_cairn(command, env)
            cleanup.push_async_callback(stop_cairn, process)
        await wait_until(lambda: _answers(f"{api}/health"), limit_s=240, what="cairn api")
        mcp_health = f"http://127.0.0.1:{mcp_port}/healthz"
        await wait_until(lambda: _answers(mcp_health), limit_s=240, what="cairn mcp")
        yield Traced(api, f"http://127.0.0.1:{mcp_port}/mcp", collector)


@pytest.fixture(scope="module")
async def agent(stack: Any, traced: Traced) -> AsyncIterator[Actor]:
    async with aiohttp.ClientSession(traced.api) as http:
        yield await Actors(stack, http).agent()


def _named(spans: list[ExportedSpan], name: str) -> list[ExportedSpan]:
    return [span for span in spans if span.name == name]


@pytest.fixture
def host_spans() -> Iterator[InMemorySpanExporter]:
    """The spans this process (the MCP host) ends, kept in memory."""
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)  # the stack's API installed the SDK's
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()  # a processor cannot be removed: a shut exporter drops what follows


def _host_chain(exporter: InMemorySpanExporter, span_id: str) -> list[str]:
    """The ids from a host span up to its root, through the spans the host ended."""
    parents = {
        f"{span.context.span_id:016x}": f"{span.parent.span_id:016x}" if span.parent else ""
        for span in exporter.get_finished_spans()
        if span.context is not None
    }
    chain = [span_id]
    while parents.get(chain[-1]):
        chain.append(parents[chain[-1]])
    return chain


def _ancestors(spans: list[ExportedSpan], child: ExportedSpan) -> list[ExportedSpan]:
    """The exported spans above `child`, nearest first."""
    by_id = {span.span_id: span for span in spans}
    found = []
    while child.parent_span_id in by_id:
        child = by_id[child.parent_span_id]
        found.append(child)
    return found


def _timed(seen: Collector, operation: str) -> bool:
    """Whether the operation's duration histogram has arrived."""
    return seen.latest(DURATION, **{OPERATION: operation}) is not None


def _parent(spans: list[ExportedSpan], child: ExportedSpan) -> ExportedSpan:
    (parent,) = [span for span in spans if span.span_id == child.parent_span_id]
    return parent


async def test_a_rest_write_and_a_task_claim_arrive_in_the_conventions(
    stack: Any, traced: Traced, agent: Actor
) -> None:
    seen = traced.collector
    status, team = await agent.call("POST", "/teams", json={"name": "traced"})
    assert status == 201, team
    status, diary = await agent.call(
        "POST", "/diaries", json={"name": "notes", "visibility": "private"}, team=team["id"]
    )
    assert status == 201, diary
    content = {"content": "pgbouncer in transaction mode"}
    status, entry = await agent.call("POST", f"/diaries/{diary['id']}/entries", json=content)
    assert status == 201, entry

    def written() -> list[ExportedSpan]:
        spans = _named(seen.spans, "update_memory")
        return [span for span in spans if span.text(RECORD_ID) == entry["id"]]

    await wait_until(lambda: bool(written()), what="the update_memory span")
    (update,) = written()
    assert update.text(OPERATION) == "update_memory" and update.text(STORE_ID) == diary["id"]
    request = _parent(seen.of_trace(update.trace_id), update)
    assert request.name == "POST /diaries/{diaryId}/entries"
    (created,) = _named(seen.spans, "create_memory_store")
    assert created.text(STORE_ID) == diary["id"] and QUERY_TEXT not in created.attributes
    await wait_until(
        lambda: _timed(seen, "create_memory_store") and _timed(seen, "update_memory"),
        what="the durations of both operations",
    )

    # a task operation keeps its own spans: the claim's request and the workflow's update
    async with aiohttp.ClientSession(traced.api) as http:
        executor = await Actors(stack, http).agent()
        await join_team(agent, team["id"], executor, "executor")
        task = {"taskType": "freeform", "teamId": team["id"], "diaryId": diary["id"]}
        task["input"] = {"brief": "x"}
        status, created_task = await agent.call("POST", "/tasks", json=task, team=team["id"])
        assert status == 201, created_task
        status, claim = await executor.call(
            "POST", f"/tasks/{created_task['id']}/claim", json={}, team=team["id"]
        )
        assert status == 200, claim

    def claim_trace() -> set[str]:
        requests = _named(seen.spans, "POST /tasks/{id}/claim")
        return {s.name for s in seen.of_trace(requests[0].trace_id)} if requests else set()

    # the request sends the update in its own trace; the worker handles it in the workflow's
    # (the SDK links it to the request's span rather than parenting it)
    await wait_until(
        lambda: (
            {"StartWorkflowUpdate:claim"} <= claim_trace()
            and bool(_named(seen.spans, "HandleUpdate:claim"))
        ),
        what="the claim's request, its update and the worker's handling of it",
    )


async def test_one_trace_runs_from_the_host_through_mcp_api_workflow_activity_and_sql(
    traced: Traced, agent: Actor, host_spans: InMemorySpanExporter
) -> None:
    seen = traced.collector
    with trace.get_tracer("mcp-host").start_as_current_span("host turn") as host:
        headers = client_headers(agent)
        propagate.inject(headers)  # the host's traceparent on every MCP request
        async with mcp_session(traced.mcp, headers) as session:
            teams = structured(await session.call_tool("teams_list", {}))
            team = next(t["id"] for t in teams["items"] if t["personal"])
            diary = structured(
                await session.call_tool("diaries_create", {"team_id": team, "name": "mcp"})
            )
            entry = structured(
                await session.call_tool(
                    "entries_create", {"diary_id": diary["id"], "content": QUERY + "? pgcat"}
                )
            )
            structured(
                await session.call_tool("entries_search", {"query": QUERY, "diary_id": diary["id"]})
            )
    trace_id = f"{host.get_span_context().trace_id:032x}"

    def names() -> set[str]:
        return {span.name for span in seen.of_trace(trace_id)}

    wanted = {"POST /mcp", "POST /diaries/{diaryId}/entries", "update_memory", "search_memory"}
    await wait_until(
        lambda: (
            wanted <= names()
            and any(n.startswith("RunActivity:") for n in names())
            and any(s.attributes.get("db.system") for s in seen.of_trace(trace_id))
        ),
        what="the host's trace through MCP, the API, the workflow, its activity and SQL",
    )
    spans = seen.of_trace(trace_id)
    (write,) = _named(spans, "POST /diaries/{diaryId}/entries")
    # the API continues the MCP server's tool span, which continues the host's MCP client span
    # (sent in the request's `_meta`), under the host's turn
    host_span = f"{host.get_span_context().span_id:016x}"
    (tool,) = _ancestors(spans, write)
    assert tool.name == "tools/call entries_create"
    assert _host_chain(host_spans, tool.parent_span_id)[-1] == host_span
    # and the MCP server's HTTP requests continue the host's `traceparent` header
    assert {span.parent_span_id for span in _named(spans, "POST /mcp")} == {host_span}
    (search,) = _named(spans, "search_memory")
    assert search.text(QUERY_TEXT) == QUERY and search.text(STORE_ID) == diary["id"]
    (update,) = _named(spans, "update_memory")
    assert update.text(RECORD_ID) == entry["id"]
    assert any(n.startswith("RunWorkflow:EntryCreate") for n in names())
    await wait_until(lambda: _timed(seen, "search_memory"), what="the search_memory duration")
