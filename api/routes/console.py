"""The human console (spec 5.6; DECISIONS "Tool-protocol server"): the two interactive apps
of spec 4.7 for a person logged in with the self-service session, without an MCP host.

`/console/` is the login page for an anonymous visitor (it honours `next`, a path on this
origin only) and otherwise links to the human's teams and diaries; the two app pages host the
very HTML the MCP server serves as `ui://` resources (schemas/apps/), in a sandboxed frame
with an opaque origin. The host page speaks the MCP Apps protocol to the frame and answers
its tool calls with REST calls made as the logged-in human, so the app gets its data exactly
as it does in an MCP host, and the session cookie never reaches the app's own code.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any, NoReturn
from urllib.parse import quote

from aiohttp import web

from api import keys
from api.auth import authenticate
from api.endpoint import Parsed, endpoint
from schemas.apps import (
    ConsoleAppPath,
    ConsoleQuery,
    ConsoleTeamPath,
    app_html,
)
from schemas.errors import Unauthorized, ValidationFailed
from schemas.memory import DiaryPath
from schemas.principals import Principal
from schemas.version import VERSION

routes = web.RouteTableDef()
TAG = "console"
HTML = "text/html"
# The console's own pages: inline script and style, REST on this origin, the app in a frame.
PAGE_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; frame-src 'self'; img-src 'self' data: blob:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
# An app page: nothing but its own inline code; its data arrives only through the host.
APP_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; base-uri 'none'; frame-ancestors 'self'"
)


@cache
def _page(name: str) -> str:
    return resources.files("api").joinpath(f"console/{name}.html").read_text(encoding="utf-8")


def _html(name: str, config: dict[str, Any]) -> web.Response:
    """A console page with its configuration as inline JSON (`<` escaped, so no value can
    close the script element)."""
    data = json.dumps(config, separators=(",", ":")).replace("<", "\\u003c")
    body = _page(name).replace("{{config}}", data)
    return web.Response(
        text=body,
        content_type=HTML,
        headers={
            "Content-Security-Policy": PAGE_POLICY,
            "Cache-Control": "no-store",
            "Referrer-Policy": "same-origin",
        },
    )


async def _human(request: web.Request) -> Principal | None:
    """The logged-in human, None for anyone else (a stale cookie is just not logged in)."""
    try:
        principal = await authenticate(request)
    except Unauthorized:
        return None
    if principal is None or principal.subject_type != "human":
        return None
    return principal


def _to_login(request: web.Request) -> NoReturn:
    raise web.HTTPSeeOther(f"/console/?next={quote(request.path_qs, safe='/')}")


@endpoint(
    routes,
    "GET",
    "/console/",
    tag=TAG,
    query=ConsoleQuery,
    auth="none",
    raw_response=HTML,
    errors=(ValidationFailed,),
)
async def console_home(request: web.Request, parsed: Parsed[None, ConsoleQuery]) -> web.Response:
    """The console: a login form for an anonymous visitor (then on to `next`, a path on this
    site), else links to the human's teams and diaries (or straight on to `next`)."""
    target = parsed.query.next
    if await _human(request) is None:
        return _html("login", {"next": target or "/console/", "version": VERSION})
    if target is not None:
        raise web.HTTPSeeOther(target)
    return _html("home", {"version": VERSION})


@endpoint(
    routes,
    "GET",
    "/console/teams/{teamId}/tasks",
    tag=TAG,
    path_params=ConsoleTeamPath,
    auth="none",
    raw_response=HTML,
)
async def console_tasks(
    request: web.Request, parsed: Parsed[None, None, ConsoleTeamPath]
) -> web.Response:
    """The task queue view of a team, for the logged-in human (else the login page first)."""
    if await _human(request) is None:
        _to_login(request)
    settings = request.app[keys.SETTINGS]
    return _html(
        "host",
        {
            "app": "tasks",
            "title": "Task queue",
            "appUrl": "/console/apps/tasks",
            "toolName": "tasks_app_open",
            "toolInput": {"team_id": str(parsed.path.teamId)},
            "temporalUiUrl": settings.temporal_ui_url.rstrip("/"),
            "temporalNamespace": settings.temporal_namespace,
            "version": VERSION,
        },
    )


@endpoint(
    routes,
    "GET",
    "/console/diaries/{diaryId}/map",
    tag=TAG,
    path_params=DiaryPath,
    auth="none",
    raw_response=HTML,
)
async def console_map(request: web.Request, parsed: Parsed[None, None, DiaryPath]) -> web.Response:
    """A diary's map and hygiene report, for the logged-in human (else the login page first)."""
    if await _human(request) is None:
        _to_login(request)
    return _html(
        "host",
        {
            "app": "entries-map",
            "title": "Diary map",
            "appUrl": "/console/apps/entries-map",
            "toolName": "entries_map_open",
            "toolInput": {"diary_id": str(parsed.path.diaryId)},
            "prefetch": {
                "name": "entries_map_points",
                "arguments": {"diary_id": str(parsed.path.diaryId)},
            },
            "hygieneDiaryId": str(parsed.path.diaryId),
            "version": VERSION,
        },
    )


@endpoint(
    routes,
    "GET",
    "/console/apps/{name}",
    tag=TAG,
    path_params=ConsoleAppPath,
    auth="none",
    raw_response=HTML,
)
async def console_app(
    request: web.Request, parsed: Parsed[None, None, ConsoleAppPath]
) -> web.Response:
    """An app's page, the same bytes the MCP server serves as its `ui://` resource."""
    return web.Response(
        text=app_html(parsed.path.name),
        content_type=HTML,
        headers={"Content-Security-Policy": APP_POLICY, "Cache-Control": "no-cache"},
    )
