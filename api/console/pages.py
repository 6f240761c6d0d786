"""The console's front door: home, login, sign-up, logout, the app hosts and static files.

`/console/` is the login page for a visitor (it honours `next`, a path on this origin only) and
the human's teams and diaries otherwise. The two app pages host the very HTML the MCP server
serves as `ui://` resources (schemas/apps/), in a sandboxed frame with an opaque origin: the
host page speaks the MCP Apps protocol to the frame and answers its tool calls with REST calls
made as the logged-in human, so the session cookie never reaches the app's own code.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from aiohttp import web
from pydantic import Field, field_validator

from api import keys
from api.auth import SESSION_COOKIE, set_session_cookie
from api.console import teams as team_pages
from api.console.kit import (
    ConsoleForm,
    Outcome,
    PageQuery,
    act,
    attempt,
    console_route,
    part_of,
    see_other,
)
from api.console.render import NOTICES, PAGE_POLICY, page, static_file, static_names
from api.console.tasks import TASK_PAGE
from api.endpoint import Parsed, endpoint
from api.routes import diaries, humans, teams
from api.spec import HTML
from schemas.apps import ConsoleAppPath, ConsoleTeamPath, NextPath, app_html
from schemas.base import RequestBody
from schemas.errors import RequestInvalid
from schemas.identity import (
    HumanIdentity,
    HumanLoginRequest,
    HumanProfile,
    HumanRegisterRequest,
    HumanSession,
    ProfileUpdateRequest,
)
from schemas.memory import Diary, DiaryList, DiaryPath
from schemas.teams import Team, TeamList, TeamPath
from schemas.version import VERSION

routes = web.RouteTableDef()
TAG = "console"
# An app host page: a page that frames the app's page of this origin.
HOST_POLICY = f"{PAGE_POLICY}; frame-src 'self'"
# An app page: nothing but its own inline code; its data arrives only through the host.
APP_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; base-uri 'none'; frame-ancestors 'self'"
)


# a login's 401 is the form's (wrong email or password); a rate limit is the page's
LOGIN_PROBLEMS = frozenset({429})


class HomeQuery(PageQuery):
    next: NextPath | None = Field(default=None, description="where to go after login")


class LoginForm(ConsoleForm):
    email: Annotated[str, Field(max_length=320)]
    password: Annotated[str, Field(max_length=256)]
    next: NextPath = "/console/"


class RegisterForm(LoginForm):
    displayName: Annotated[str | None, Field(default=None, max_length=100)]


class LogoutForm(ConsoleForm):
    pass


class StaticPath(RequestBody):
    name: Annotated[str, Field(max_length=64, pattern=r"^[a-z0-9_-]+\.(css|js)$")]

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in static_names():
            raise ValueError("no such file of the console")
        return name


@console_route(routes, "GET", "/console/", query=HomeQuery, login=False)
async def console_home(request: web.Request, parsed: Parsed[None, HomeQuery]) -> web.Response:
    """The console: the login page for a visitor (then on to `next`, a path on this site), else
    the human's teams and diaries (or straight on to `next`)."""
    target = parsed.query.next
    if request.get(keys.CONSOLE_USER) is None:
        return _login_page(request, target or "/console/")
    if target is not None:
        see_other(target)
    team_list: TeamList = await act(request, teams.list_teams)
    diary_list: DiaryList = await act(request, diaries.list_diaries)
    names = {team.id: team.name for team in team_list.items}
    return page(
        request,
        "home.html",
        teams=team_list.items,
        diaries=diary_list.items,
        team_names=names,
        **team_pages.home_parts(team_list),
    )


def _login_page(request: web.Request, target: str, outcome: Outcome | None = None) -> web.Response:
    refusal = outcome.refusal if outcome else None
    return page(request, "login.html", next=target, outcome=refusal, notice=None)


@console_route(routes, "POST", "/console/login", body=LoginForm, login=False)
async def console_login(request: web.Request, parsed: Parsed[LoginForm]) -> web.Response:
    """Log in with the form: on to `next` with the session cookie (HttpOnly, SameSite=Lax)."""
    form = parsed.body
    logging_in = _log_in(request, form.email, form.password)
    outcome = await attempt("login", form, logging_in, page_problems=LOGIN_PROBLEMS)
    if outcome.refusal is not None:
        return _login_page(request, form.next, outcome)
    return _logged_in(request, outcome.result, form.next)


async def _log_in(request: web.Request, email: str, password: str) -> HumanSession:
    body = part_of(HumanLoginRequest, email=email, password=password)
    opened: HumanSession = await act(request, humans.login, body=body)
    return opened


def _logged_in(request: web.Request, session: HumanSession, target: str) -> web.Response:
    response = web.HTTPSeeOther(target)
    set_session_cookie(response, session.sessionToken, request)
    return response


@console_route(routes, "POST", "/console/register", body=RegisterForm, login=False)
async def console_register(request: web.Request, parsed: Parsed[RegisterForm]) -> web.Response:
    """Create a human account with the form, then log in with it."""
    form = parsed.body
    registered = await attempt("register", form, _register(request, form))
    if registered.refusal is not None:
        return _login_page(request, form.next, registered)
    logging_in = _log_in(request, form.email, form.password)
    opened = await attempt("register", form, logging_in, page_problems=LOGIN_PROBLEMS)
    if opened.refusal is not None:
        return _login_page(request, form.next, opened)
    return _logged_in(request, opened.result, form.next)


async def _register(request: web.Request, form: RegisterForm) -> HumanIdentity:
    fields = form.model_dump(include={"email", "password", "displayName"}, exclude_none=True)
    body = part_of(HumanRegisterRequest, **fields)
    registered: HumanIdentity = await act(request, humans.register_human, form, body=body)
    return registered


@console_route(routes, "POST", "/console/logout", body=LogoutForm)
async def console_logout(request: web.Request, parsed: Parsed[LogoutForm]) -> web.Response:
    """End the session and forget its cookie."""
    await act(request, humans.logout)
    response = web.HTTPSeeOther("/console/")
    response.del_cookie(SESSION_COOKIE, path="/")
    return response


@console_route(routes, "GET", "/console/teams/{teamId}/tasks", path_params=ConsoleTeamPath)
async def console_tasks(
    request: web.Request, parsed: Parsed[None, None, ConsoleTeamPath]
) -> web.Response:
    """The task queue view of a team, for the logged-in human (else the login page first)."""
    settings = request.app[keys.SETTINGS]
    team: Team = await act(request, teams.get_team, path=TeamPath(id=parsed.path.teamId))
    config = {
        "app": "tasks",
        "appUrl": "/console/apps/tasks",
        "toolName": "tasks_app_open",
        "toolInput": {"team_id": str(team.id)},
        # a row of the queue opens the task's own page (schemas/apps/tasks.html)
        "taskPage": TASK_PAGE.replace("{teamId}", str(team.id)),
        "temporalUiUrl": settings.temporal_ui_url.rstrip("/"),
        "temporalNamespace": settings.temporal_namespace,
        "version": VERSION,
    }
    trail = [(team.name, f"/console/teams/{team.id}"), ("Task queue", "")]
    return _host(request, config, title=f"Task queue · {team.name}", crumbs=trail, team_id=team.id)


@console_route(routes, "GET", "/console/diaries/{diaryId}/map", path_params=DiaryPath)
async def console_map(request: web.Request, parsed: Parsed[None, None, DiaryPath]) -> web.Response:
    """A diary's map and hygiene report, for the logged-in human (else the login page first)."""
    diary: Diary = await act(
        request, diaries.get_diary, path=DiaryPath(diaryId=parsed.path.diaryId)
    )
    arguments = {"diary_id": str(diary.id)}
    config = {
        "app": "entries-map",
        "appUrl": "/console/apps/entries-map",
        "toolName": "entries_map_open",
        "toolInput": arguments,
        "prefetch": {"name": "entries_map_points", "arguments": arguments},
        "hygieneDiaryId": str(diary.id),
        "version": VERSION,
    }
    trail = [(diary.name, f"/console/diaries/{diary.id}"), ("Map", "")]
    return _host(request, config, title=f"Map · {diary.name}", crumbs=trail, diary_id=diary.id)


def _host(request: web.Request, config: dict[str, Any], **context: Any) -> web.Response:
    """An app's host page: its configuration as inline JSON data (`<` escaped, so no value can
    close the element; it is data, not script, under the page's policy) and host.js."""
    data = json.dumps(config, separators=(",", ":")).replace("<", "\\u003c")
    context.setdefault("team_id", None)
    context.setdefault("diary_id", None)
    return page(request, "host.html", policy=HOST_POLICY, config_json=data, **context)


@endpoint(
    routes,
    "GET",
    "/console/apps/{name}",
    tag=TAG,
    document="console",
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


@endpoint(
    routes,
    "GET",
    "/console/static/{name}",
    tag=TAG,
    document="console",
    path_params=StaticPath,
    # counted as the page that asks for them (a person's own bucket once logged in); cached
    # for a year by URL (the content hash), so a browser asks once
    auth="browser",
    raw_response="text/plain",
    errors=(RequestInvalid,),
)
async def console_static(
    request: web.Request, parsed: Parsed[None, None, StaticPath]
) -> web.Response:
    """The console's stylesheet and script (their URLs carry their content hash)."""
    body, media_type, _ = static_file(parsed.path.name)
    return web.Response(
        body=body,
        content_type=media_type,
        headers={
            "Cache-Control": "public, max-age=31536000, immutable",
            "X-Content-Type-Options": "nosniff",
        },
    )


class ProfileForm(ConsoleForm):
    displayName: Annotated[str | None, Field(default=None, max_length=100)]


NOTICES.update({"profile-saved": "Your display name is saved."})


@console_route(routes, "GET", "/console/profile")
async def console_profile(request: web.Request, parsed: Parsed) -> web.Response:
    """The human's profile: their email, and the display name others see."""
    return await _profile_page(request)


async def _profile_page(request: web.Request, outcome: Outcome | None = None) -> web.Response:
    profile: HumanProfile = await act(request, humans.get_profile)
    refusal = outcome.refusal if outcome else None
    return page(request, "profile.html", profile=profile, outcome=refusal)


@console_route(routes, "POST", "/console/profile", body=ProfileForm)
async def console_profile_save(request: web.Request, parsed: Parsed[ProfileForm]) -> web.Response:
    """Change (or, left empty, clear) the display name."""
    form = parsed.body
    outcome = await attempt("profile", form, _save_profile(request, form))
    if outcome.refusal is not None:
        return await _profile_page(request, outcome)
    see_other("/console/profile", done="profile-saved")


async def _save_profile(request: web.Request, form: ProfileForm) -> HumanProfile:
    # the name is always sent: an emptied field clears it
    body = part_of(ProfileUpdateRequest, displayName=form.displayName)
    saved: HumanProfile = await act(request, humans.update_profile, form, body=body)
    return saved
