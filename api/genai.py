"""Memory operations in OpenTelemetry's GenAI memory semantic conventions.

A route declares the memory operation it is (`@endpoint(..., memory="search_memory")`); the
endpoint wiring runs its handler inside `memory_operation`, which opens an INTERNAL span named
after the operation under the request's span, and records its duration in one histogram per
process, `gen_ai.server.request.duration` (seconds), by `gen_ai.operation.name` (and
`error.type` when it failed). A diary is a memory store, an entry a memory record:

| operation | routes |
|---|---|
| `create_memory_store` | `POST /diaries` |
| `delete_memory_store` | `DELETE /diaries/{diaryId}` |
| `update_memory` | `POST /diaries/{diaryId}/entries`, `PATCH /entries/{entryId}` |
| `delete_memory` | `DELETE /entries/{entryId}` |
| `search_memory` | `POST /diary/search` |

The span carries `gen_ai.operation.name`, `gen_ai.memory.store.id` (the diary, where one is
named or answered) and `gen_ai.memory.record.id` (the entry); the query text of a search only
when `SERVICE_OTEL_CAPTURE_QUERY_TEXT=true` (the conventions' opt-in: it is what the caller
remembers by). Entry content is never recorded. Task operations keep their own spans.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, Literal

from opentelemetry import trace
from opentelemetry.metrics import Histogram, Meter
from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer

MemoryOperation = Literal[
    "create_memory_store", "delete_memory_store", "update_memory", "delete_memory", "search_memory"
]
OPERATION: Final = "gen_ai.operation.name"
STORE_ID: Final = "gen_ai.memory.store.id"
RECORD_ID: Final = "gen_ai.memory.record.id"
QUERY_TEXT: Final = "gen_ai.memory.query.text"
ERROR_TYPE: Final = "error.type"
DURATION: Final = "gen_ai.server.request.duration"
# the conventions' advisory boundaries for GenAI durations, in seconds
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip


@dataclass(frozen=True)
class MemoryTelemetry:
    """Where memory spans and durations go, and whether query text may be recorded."""

    tracer: Tracer
    duration: Histogram
    capture_query_text: bool

    @classmethod
    def on(
        cls, meter: Meter, *, capture_query_text: bool, tracer: Tracer | None = None
    ) -> MemoryTelemetry:
        histogram = meter.create_histogram(
            DURATION,
            unit="s",
            description="Duration of GenAI memory operations.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        return cls(tracer or trace.get_tracer("cairn.memory"), histogram, capture_query_text)


@contextmanager
def memory_operation(
    telemetry: MemoryTelemetry, operation: MemoryOperation, parsed: Any
) -> Iterator[MemoryCall]:
    """The span and the duration of one memory operation; the caller hands the route's answer
    to `MemoryCall.answered` so ids known only then (a new diary, a new entry) are recorded."""
    started = time.perf_counter()
    metric: dict[str, str] = {OPERATION: operation}
    with telemetry.tracer.start_as_current_span(
        operation, kind=SpanKind.INTERNAL, attributes={OPERATION: operation}
    ) as span:
        call = MemoryCall(span)
        call.named(parsed)
        if telemetry.capture_query_text and operation == "search_memory":
            span.set_attribute(QUERY_TEXT, str(getattr(parsed.body, "query", "")))
        try:
            yield call
        except Exception as failure:
            metric[ERROR_TYPE] = getattr(failure, "code", None) or type(failure).__name__
            span.set_status(StatusCode.ERROR)
            span.set_attribute(ERROR_TYPE, metric[ERROR_TYPE])
            raise
        finally:
            telemetry.duration.record(time.perf_counter() - started, metric)


class MemoryCall:
    """The ids of the store and record an operation is about, set on its span as found."""

    def __init__(self, span: Span) -> None:
        self._span = span

    def named(self, parsed: Any) -> None:
        """Ids the request names: the diary and entry of its path, the diary of its body."""
        for source in (parsed.path, parsed.body):
            self._ids(getattr(source, "diaryId", None), getattr(source, "entryId", None))

    def answered(self, result: Any, operation: MemoryOperation) -> None:
        """Ids the answer gives: a created diary's id, an entry's id and diary."""
        if operation == "create_memory_store":
            self._ids(getattr(result, "id", None), None)
        elif operation == "update_memory":
            self._ids(getattr(result, "diaryId", None), getattr(result, "id", None))

    def _ids(self, store_id: Any, record_id: Any) -> None:
        if store_id is not None:
            self._span.set_attribute(STORE_ID, str(store_id))
        if record_id is not None:
            self._span.set_attribute(RECORD_ID, str(record_id))
