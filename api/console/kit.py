"""What every console route is made of: `console_route` (an `@endpoint` that is a page or a
form), `ConsoleForm` (a form's fields as a person's browser sends them), `act` (run a REST
route for a form) and `Outcome` (what became of a form, shown next to it).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, NoReturn, TypeVar, overload
from urllib.parse import quote, urlencode

from aiohttp import web
from pydantic import ConfigDict, Field, model_validator

from api import keys
from api.console.render import NOTICES, page
from api.console.session import ConsoleUser, check_form_token, keep_binding, know_visitor
from api.endpoint import Handler, Parsed, invoke, part_of
from api.headers import IDEMPOTENCY_HEADER, TEAM_HEADER
from api.spec import HTML
from schemas import limits
from schemas.base import RequestBody
from schemas.errors import (
    AuthenticationRequired,
    Conflict,
    CsrfRefused,
    DomainError,
    FieldError,
    Forbidden,
    NotFound,
    Unauthorized,
)

TAG = "console"

B = TypeVar("B")
Q = TypeVar("Q")
P = TypeVar("P")
R = TypeVar("R")


class ConsoleForm(RequestBody):
    """A console form: text fields read leniently (`"5"` is 5, as every HTML form sends it; an
    empty field is an absent one), its CSRF token, and the idempotency key the page minted, so a
    form sent twice (a double click, a resend after a dropped connection) is done once."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)

    csrf: Annotated[str, Field(max_length=128)]
    idempotencyKey: Annotated[
        str | None, Field(default=None, min_length=1, max_length=limits.IDEMPOTENCY_KEY_MAX_CHARS)
    ]

    @model_validator(mode="before")
    @classmethod
    def _empty_is_absent(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v != "" and v != []}
        return data


class PageQuery(RequestBody):
    """A console page's query. `done` is the code of what a form just did (`see_other`),
    announced by `page`: every page a form can lead to accepts it, so each query model of a
    page derives from this one (`console_route` holds it)."""

    done: Annotated[
        str | None,
        Field(default=None, min_length=1, max_length=64, description="what a form just did"),
    ]


def console_route(
    routes: web.RouteTableDef, method: str, path: str, *, login: bool = True, **options: Any
) -> Callable[[Handler], Handler]:
    """A console page (GET) or form (POST): `@endpoint` as a person's browser asks for it.

    The visitor is resolved first (`know_visitor`); `login` pages send a visitor to the login
    page and back (a form answers 401: its fields cannot travel a redirect); a form's CSRF
    token is checked before anything runs. Refusals render as pages (api/middleware.py)."""

    query = options.get("query")
    assert query is None or issubclass(query, PageQuery), f"{path}: derive its query from PageQuery"

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def run(request: web.Request, parsed: Any) -> web.StreamResponse:
            request[keys.PAGE_STARTED] = time.perf_counter()
            user = await know_visitor(request)
            if login and user is None:
                if method == "GET":
                    to_login(request)
                raise AuthenticationRequired("Log in to the console first")
            if method == "POST":
                check_form_token(request, parsed.body.csrf)
            response: web.StreamResponse = await handler(request, parsed)
            keep_binding(request, response)
            return response

        return _endpoint(routes, method, path, options)(run)

    return decorate


def _endpoint(
    routes: web.RouteTableDef, method: str, path: str, options: dict[str, Any]
) -> Callable[[Handler], Handler]:
    from api.endpoint import endpoint

    # a page answers the refusals of the routes it runs (a diary it may not read is its 404);
    # a form's refusal is shown beside it with its status (a 409 conflict, say)
    errors = (*options.pop("errors", ()), NotFound, Forbidden)
    form: dict[str, Any] = {}
    if method == "POST":
        errors += (Conflict, CsrfRefused, Unauthorized)
        form = {"body_form": True, "door": True}
    return endpoint(
        routes,
        method,
        path,
        tag=TAG,
        document="console",
        auth="browser",
        raw_response=HTML,
        errors=errors,
        **form,
        **options,
    )


def to_login(request: web.Request) -> NoReturn:
    raise web.HTTPSeeOther(f"/console/?next={quote(request.path_qs, safe='/')}")


def see_other(location: str, done: str | None = None) -> NoReturn:
    """After a form succeeded: on to `location` (Post/Redirect/Get); `done` is the code of the
    sentence the next page announces (one of `render.NOTICES`)."""
    assert done is None or done in NOTICES, f"add {done!r} to render.NOTICES"
    separator = "&" if "?" in location else "?"
    raise web.HTTPSeeOther(location + (f"{separator}{urlencode({'done': done})}" if done else ""))


def user_of(request: web.Request) -> ConsoleUser:
    user = request.get(keys.CONSOLE_USER)
    assert isinstance(user, ConsoleUser), "a login page runs only for a logged-in human"
    return user


@overload
async def act(
    request: web.Request,
    handler: Callable[[web.Request, Parsed[B, Q, P]], Awaitable[web.StreamResponse]],
    form: ConsoleForm | None = None,
    *,
    body: B | None = None,
    query: Q | None = None,
    path: P | None = None,
    team: object | None = None,
    answer_headers: MutableMapping[str, str] | None = None,
) -> Any: ...


@overload
async def act(
    request: web.Request,
    handler: Callable[[web.Request, Parsed[B, Q, P]], Awaitable[R]],
    form: ConsoleForm | None = None,
    *,
    body: B | None = None,
    query: Q | None = None,
    path: P | None = None,
    team: object | None = None,
    answer_headers: MutableMapping[str, str] | None = None,
) -> R: ...


async def act(
    request: web.Request,
    handler: Callable[[web.Request, Parsed[B, Q, P]], Awaitable[Any]],
    form: ConsoleForm | None = None,
    *,
    body: B | None = None,
    query: Q | None = None,
    path: P | None = None,
    team: object | None = None,
    answer_headers: MutableMapping[str, str] | None = None,
) -> Any:
    """Run a REST route for a form, as the logged-in human: `body`, `query` and `path` are the
    route's own models (mypy holds them to its `Parsed`); the form's idempotency key and the
    team (for routes that read the team header) travel as the headers an API client sends.

    A route that answers a response it rendered itself (a 201 with its headers) is read back as
    its response model, which its handler's type does not name: that overload answers `Any`."""
    headers: dict[str, str] = {}
    if form is not None and form.idempotencyKey is not None:
        headers[IDEMPOTENCY_HEADER] = form.idempotencyKey
    if team is not None:
        headers[TEAM_HEADER] = str(team)
    return await invoke(
        request,
        handler,
        body=body,
        query=query,
        path=path,
        headers=headers,
        answer_headers=answer_headers,
    )


@dataclass(frozen=True)
class Refusal:
    """A form the API refused: re-shown with what the person typed and the problem beside it
    (`form` names which form of the page)."""

    form: str
    title: str
    detail: str
    status: int
    values: dict[str, Any] = field(default_factory=dict)
    errors: list[FieldError] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    """What became of a form's action: its result, or the refusal to show beside the form."""

    result: Any = None
    refusal: Refusal | None = None


# Refusals that are not a form's but the page's: the session ended, a rate limit
PAGE_PROBLEMS = frozenset({401, 429})


async def attempt(
    form_name: str,
    sent: ConsoleForm,
    action: Awaitable[Any],
    *,
    page_problems: frozenset[int] = PAGE_PROBLEMS,
) -> Outcome:
    """Run a form's action (usually `act(...)`; a body `part_of` makes of the form's values is
    made inside it, so a value the route's model refuses is shown beside the form too). A
    refusal that is the form's (400, 403, 404, 409, ...) comes back to be shown beside it; one
    that is not (`page_problems`, or a dependency down) is the page's own problem. (A login
    form's 401 is the form's.)"""
    try:
        return Outcome(result=await action)
    except DomainError as error:
        if error.status in page_problems or error.status >= 500:
            raise
        values = sent.model_dump(exclude={"csrf", "idempotencyKey"}, mode="json")
        refusal = Refusal(form_name, error.title, error.detail, error.status, values)
        return Outcome(refusal=replace(refusal, errors=error.errors or []))


__all__ = [
    "TAG",
    "ConsoleForm",
    "ConsoleUser",
    "Outcome",
    "PageQuery",
    "Refusal",
    "act",
    "attempt",
    "console_route",
    "page",
    "part_of",
    "see_other",
    "to_login",
    "user_of",
]
