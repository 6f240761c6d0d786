"""The GenAI memory span and duration of one operation (api.genai), on the SDK's own in-memory
exporter and reader: the names and attributes the conventions give, the query text only when
asked for."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from api.genai import (
    DURATION,
    ERROR_TYPE,
    OPERATION,
    QUERY_TEXT,
    RECORD_ID,
    STORE_ID,
    MemoryTelemetry,
    memory_operation,
)
from schemas.errors import EntryNotFound


def _telemetry(capture: bool) -> tuple[MemoryTelemetry, InMemorySpanExporter, InMemoryMetricReader]:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    telemetry = MemoryTelemetry.on(
        meter, capture_query_text=capture, tracer=tracer_provider.get_tracer("test")
    )
    return telemetry, spans, reader


def _search(diary: uuid.UUID) -> Any:
    return SimpleNamespace(path=None, body=SimpleNamespace(diaryId=diary, query="secret plans"))


@pytest.mark.parametrize("capture", [False, True])
def test_a_search_is_a_search_memory_span_with_its_query_only_when_asked(capture: bool) -> None:
    telemetry, spans, reader = _telemetry(capture)
    diary = uuid.uuid4()
    with memory_operation(telemetry, "search_memory", _search(diary)) as call:
        call.answered(SimpleNamespace(results=[]), "search_memory")
    (span,) = spans.get_finished_spans()
    assert span.name == "search_memory"
    assert span.attributes is not None
    assert span.attributes[OPERATION] == "search_memory"
    assert span.attributes[STORE_ID] == str(diary)
    assert (QUERY_TEXT in span.attributes) is capture
    metrics = reader.get_metrics_data()
    assert metrics is not None
    (histogram,) = [
        metric
        for resource in metrics.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == DURATION
    ]
    (point,) = histogram.data.data_points
    assert point.count == 1 and dict(point.attributes or {}) == {OPERATION: "search_memory"}


def test_a_write_records_the_new_entry_and_a_failure_its_problem_code() -> None:
    telemetry, spans, _ = _telemetry(False)
    diary, entry = uuid.uuid4(), uuid.uuid4()
    parsed = SimpleNamespace(path=SimpleNamespace(diaryId=diary), body=SimpleNamespace())
    with memory_operation(telemetry, "update_memory", parsed) as call:
        call.answered(SimpleNamespace(id=entry, diaryId=diary), "update_memory")
    with (
        pytest.raises(EntryNotFound),
        memory_operation(telemetry, "delete_memory", SimpleNamespace(path=None, body=None)),
    ):
        raise EntryNotFound("No such entry")
    written, failed = spans.get_finished_spans()
    assert written.attributes is not None and failed.attributes is not None
    assert written.attributes[RECORD_ID] == str(entry)
    assert failed.attributes[ERROR_TYPE] == EntryNotFound.code
