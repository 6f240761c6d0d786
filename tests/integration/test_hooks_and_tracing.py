"""Inbound identity-provider hooks, and one trace spanning API → workflow → activity."""

from __future__ import annotations

import base64

import aiohttp
import nacl.signing
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from workers.admin import issue_bootstrap_voucher

HOOK = {"X-Hook-Secret": "test-hook-secret"}


def public_key() -> str:
    raw = bytes(nacl.signing.SigningKey.generate().verify_key)
    return "ed25519:" + base64.b64encode(raw).decode()


async def post(stack, path: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    async with (
        aiohttp.ClientSession() as session,
        session.post(stack.base_url + path, json=body, headers=headers or {}) as response,
    ):
        return response.status, await response.json(content_type=None)


async def test_after_registration_accepts_an_open_voucher(stack) -> None:  # type: ignore[no-untyped-def]
    voucher = await issue_bootstrap_voucher(stack.temporal, stack.settings)
    identity = {
        "schema_id": "agent",
        "traits": {"public_key": public_key(), "voucher_code": voucher.code},
    }
    status, body = await post(
        stack, "/hooks/kratos/after-registration", {"identity": identity}, HOOK
    )
    assert (status, body) == (200, {"accepted": True})


async def test_after_registration_rejects_unknown_voucher_and_bad_key(stack) -> None:  # type: ignore[no-untyped-def]
    unknown = {"traits": {"public_key": public_key(), "voucher_code": "a" * 64}}
    status, body = await post(
        stack, "/hooks/kratos/after-registration", {"identity": unknown}, HOOK
    )
    assert status == 403 and body["code"] == "voucher-rejected"
    short = {"traits": {"public_key": "ed25519:AAAA", "voucher_code": "a" * 64}}
    status, body = await post(stack, "/hooks/kratos/after-registration", {"identity": short}, HOOK)
    assert status == 400


async def test_hooks_need_the_shared_secret(stack) -> None:  # type: ignore[no-untyped-def]
    identity = {"traits": {}}
    for headers in ({}, {"X-Hook-Secret": "wrong"}):
        status, body = await post(
            stack, "/hooks/kratos/after-settings", {"identity": identity}, headers
        )
        assert status == 401 and body["code"] == "hook-secret-invalid"


async def test_after_settings_refuses_a_new_public_key(stack) -> None:  # type: ignore[no-untyped-def]
    voucher = await issue_bootstrap_voucher(stack.temporal, stack.settings)
    key = public_key()
    status, registered = await post(
        stack, "/auth/register", {"public_key": key, "voucher_code": voucher.code}
    )
    assert status == 200
    same = {"id": registered["identityId"], "traits": {"public_key": key}}
    status, _ = await post(stack, "/hooks/kratos/after-settings", {"identity": same}, HOOK)
    assert status == 200
    changed = {"id": registered["identityId"], "traits": {"public_key": public_key()}}
    status, body = await post(stack, "/hooks/kratos/after-settings", {"identity": changed}, HOOK)
    assert status == 403 and body["code"] == "public-key-immutable"


async def test_one_trace_spans_api_workflow_and_activities(stack) -> None:  # type: ignore[no-untyped-def]
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    voucher = await issue_bootstrap_voucher(stack.temporal, stack.settings)
    exporter.clear()
    status, _ = await post(
        stack, "/auth/register", {"public_key": public_key(), "voucher_code": voucher.code}
    )
    assert status == 200
    spans = exporter.get_finished_spans()
    server = [s for s in spans if s.kind == trace.SpanKind.SERVER]
    assert server, [s.name for s in spans]
    trace_id = server[0].context.trace_id
    same_trace = {s.name for s in spans if s.context.trace_id == trace_id}
    assert "StartWorkflow:Registration" in same_trace
    assert "RunWorkflow:Registration" in same_trace
    assert "RunActivity:identity.bind_agent" in same_trace
    assert "RunActivity:identity.create_oauth_client" in same_trace
    # one tracing interceptor in the worker (the client's), not one per place it is named
    names = [s.name for s in spans if s.context.trace_id == trace_id]
    assert names.count("RunWorkflow:Registration") == 1, names
    assert names.count("RunActivity:identity.bind_agent") == 1, names


def in_memory_spans() -> InMemorySpanExporter:
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


async def test_the_server_span_continues_the_callers_traceparent(stack) -> None:  # type: ignore[no-untyped-def]
    exporter = in_memory_spans()
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    headers = {"traceparent": f"00-{trace_id}-{parent_id}-01"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{stack.base_url}/diaries/{'0' * 8}", headers=headers) as response,
    ):
        assert response.status in (400, 401)
    server = [s for s in exporter.get_finished_spans() if s.kind == trace.SpanKind.SERVER]
    assert len(server) == 1, [s.name for s in exporter.get_finished_spans()]
    span = server[0]
    assert f"{span.context.trace_id:032x}" == trace_id
    assert span.parent is not None and f"{span.parent.span_id:016x}" == parent_id
    assert span.name == "GET /diaries/{diaryId}"
    assert span.attributes is not None
    assert span.attributes["http.route"] == "/diaries/{diaryId}"
    assert span.attributes["http.response.status_code"] == response.status
