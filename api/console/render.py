"""The console's pages: Jinja2 templates, autoescaped, with the headers every page carries.

A page is rendered on the server from the models the REST routes answer (the console runs
them with `api.endpoint.invoke`); its only script and style are the console's own static
files, so the Content-Security-Policy allows nothing inline and nothing from elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import quote

import jinja2
from aiohttp import web

from api import keys
from api.spec import HTML
from schemas.errors import DomainError, Problem
from schemas.version import VERSION

# Pages: the console's own script and style, REST reads and the message stream on this origin.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
STATIC_TYPES = {"css": "text/css", "js": "text/javascript", "svg": "image/svg+xml"}
# What a page announces after a form succeeded (`?done=<code>`, see kit.see_other): a known
# code's sentence only, so no link can make a page say something of its own. Each console
# module adds its own.
NOTICES: dict[str, str] = {}


def _static_text(name: str) -> bytes:
    return resources.files("api").joinpath(f"console/static/{name}").read_bytes()


@cache
def static_names() -> frozenset[str]:
    """The files of `console/static/` (the only names its route serves)."""
    folder = resources.files("api").joinpath("console/static")
    return frozenset(item.name for item in folder.iterdir() if item.name.endswith((".css", ".js")))


@cache
def static_file(name: str) -> tuple[bytes, str, str]:
    """A static file's bytes, media type and content hash (its URL's version)."""
    body = _static_text(name)
    return body, STATIC_TYPES[name.rsplit(".", 1)[1]], hashlib.sha256(body).hexdigest()[:16]


def static_url(name: str) -> str:
    return f"/console/static/{name}?v={static_file(name)[2]}"


def _when(value: datetime | None) -> str:
    """A time as a person reads it (UTC, to the minute); the full instant is in `title`."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _short(value: Any, length: int = 8) -> str:
    """The head of an id or a CID, for a column; the whole value stays in a `title`."""
    text = str(value)
    return text if len(text) <= length + 1 else text[:length] + "…"


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("api", "console/templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals |= {"static": static_url, "version": VERSION}
    env.filters |= {"when": _when, "short": _short, "urlquote": lambda v: quote(str(v), safe="")}
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False)
    return env


def page(
    request: web.Request,
    template: str,
    *,
    status: int | None = None,
    policy: str = PAGE_POLICY,
    **context: Any,
) -> web.Response:
    """A page of the console, with the logged-in human (if any), their form token, and what
    a form that just succeeded announces. A page re-shown for a refused form (`outcome`, a
    `kit.Refusal`) answers with the refusal's status unless `status` says otherwise."""
    if status is None:
        status = getattr(context.get("outcome"), "status", 200)
    context.setdefault("notice", NOTICES.get(request.query.get("done", "")))
    body = (
        environment()
        .get_template(template)
        .render(
            me=request.get(keys.CONSOLE_USER),
            csrf=request.get(keys.CSRF_TOKEN, ""),
            path=request.path_qs,
            **context,
        )
    )
    headers = {**page_headers(request), "Content-Security-Policy": policy}
    return web.Response(text=body, status=status, content_type=HTML, headers=headers)


def page_headers(request: web.Request) -> dict[str, str]:
    headers = {
        "Content-Security-Policy": PAGE_POLICY,
        "Cache-Control": "no-store",
        "Referrer-Policy": "same-origin",
        "X-Content-Type-Options": "nosniff",
    }
    started = request.get(keys.PAGE_STARTED)
    if started is not None:
        headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
    return headers


def problem_page(request: web.Request, error: DomainError, problem: Problem) -> web.Response:
    """A refusal on a page: the problem's title and detail, never a blank page or a trace."""
    return page(request, "problem.html", status=problem.status, problem=problem, error=error)
