"""Logs an SRE can join: one JSON object a line, carrying the trace and the request.

Every line has `time` (UTC, RFC 3339 with milliseconds), `level`, `logger` and `message`; while
a span is current, its `trace_id` and `span_id` (the ids a problem body's `traceId` and the
trace backend show); inside an API request, its `request_id` (the `X-Request-Id` answered) and,
once authenticated, `principal_kind` and `principal_id`. An exception adds `exception`. A few
known extras (`path`, `method`, `route`, `status`, `duration_ms`) are copied when a call
passes them; anything else passed as `extra` is left out, so a careless call cannot put a
secret or an entry's text on a line.

`SERVICE_LOG_FORMAT=text` keeps the plain `LEVEL logger message` lines for a terminal.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from opentelemetry import trace

LogFormat = Literal["json", "text"]
TEXT_FORMAT: Final = "%(levelname)s %(name)s %(message)s"
# extras a call may pass that land on the line (ids, shapes and numbers, never content)
FIELDS: Final = ("request_id", "trace_id", "method", "route", "path", "status", "duration_ms")


@dataclass
class RequestContext:
    """What a line logged while serving a request says about it; filled as it becomes known."""

    request_id: str = ""
    principal_kind: str = ""
    principal_id: str = ""


_request: ContextVar[RequestContext | None] = ContextVar("cairn_log_request", default=None)


def begin_request() -> RequestContext:
    """A fresh context for the request this task serves (aiohttp runs each in its own task)."""
    context = RequestContext()
    _request.set(context)
    return context


def current_request() -> RequestContext | None:
    return _request.get()


class JsonFormatter(logging.Formatter):
    """A record as one JSON object (no newline inside: a message's newlines are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(_span_ids())
        context = _request.get()
        if context is not None:
            line.update(_request_fields(context))
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is not None and value != "":
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def _span_ids() -> dict[str, str]:
    span = trace.get_current_span().get_span_context()
    if not span.is_valid:
        return {}
    return {"trace_id": f"{span.trace_id:032x}", "span_id": f"{span.span_id:016x}"}


def _request_fields(context: RequestContext) -> dict[str, str]:
    fields = {
        "request_id": context.request_id,
        "principal_kind": context.principal_kind,
        "principal_id": context.principal_id,
    }
    return {name: value for name, value in fields.items() if value}


def setup_logging(log_format: LogFormat, level: str = "INFO") -> None:
    """Route every logger of the process to stderr in `log_format` (replaces any handler)."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
