"""One declaration per route: method, path, models, auth, scopes, errors.

`@endpoint` wires a handler into a `RouteTableDef` and records an `EndpointSpec`; the same spec
drives request parsing (closed bodies, 400 with a pointer per field), authentication, scope
checks, rate-limit buckets and the OpenAPI document, so the document cannot drift from the code.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Generic, Union, get_args, get_origin, get_type_hints

from aiohttp import web
from multidict import CIMultiDict, MultiMapping
from pydantic import BaseModel, ValidationError
from typing_extensions import TypeVar

from api import keys
from api.auth import authorize, give_back_rate, settle_rate
from api.genai import memory_operation
from api.idempotency import idempotency_key
from api.spec import EndpointSpec
from infra.temporal import problem_from_failure
from schemas.base import error_location
from schemas.errors import (
    FieldError,
    RequestInvalid,
    UnsupportedMediaType,
    ValidationFailed,
)
from schemas.text import printable

Handler = Callable[..., Awaitable[Any]]
# a decorated handler keeps its own type, so a door's call of it (`act`, `invoke`) is checked
AnyHandler = TypeVar("AnyHandler", bound=Handler)

ENDPOINTS: list[EndpointSpec] = []
_SPECS: dict[Handler, EndpointSpec] = {}


# A part the endpoint does not declare is None (the PEP 696 default), so a handler names only
# what it reads: `Parsed[CreateTaskRequest]`, `Parsed[None, TaskListQuery]`,
# `Parsed[None, None, TaskPath]`, `Parsed[GrantRequest, None, GrantPath]`.
BodyT = TypeVar("BodyT", default=None)
QueryT = TypeVar("QueryT", default=None)
PathT = TypeVar("PathT", default=None)
PartT = TypeVar("PartT", bound=BaseModel)


@dataclass(frozen=True)
class Parsed(Generic[BodyT, QueryT, PathT]):
    """The request's body, query and path parameters, validated by the models `@endpoint`
    declares; the handler's annotation types them (a test holds the two in step)."""

    body: BodyT
    query: QueryT
    path: PathT


def endpoint(
    routes: web.RouteTableDef, method: str, path: str, **options: Any
) -> Callable[[AnyHandler], AnyHandler]:
    """Register `handler(request, parsed)` for `method path` with the options of EndpointSpec."""

    def decorate(handler: AnyHandler) -> AnyHandler:
        spec = EndpointSpec(
            method=method,
            path=path,
            operation_id=options.pop("operation_id", handler.__name__),
            summary=options.pop("summary", (handler.__doc__ or "").strip().split("\n")[0]),
            **options,
        )
        _check_declaration(handler, spec)
        ENDPOINTS.append(spec)
        _SPECS[handler] = spec

        async def run(request: web.Request) -> web.StreamResponse:
            if spec.path_params is not None:
                _refuse_a_literal_path(request)
            request[keys.REPLICA_READS] = spec.writes_nothing  # kept by the routes it invokes

            async def parts() -> Parsed[Any, Any, Any]:
                if spec.door:
                    request[keys.UNREAD] = request.clone()
                return Parsed(
                    body=await _parse_body(request, spec),
                    query=_parse_query(spec.query, request),
                    path=_parse_mapping(spec.path_params, dict(request.match_info), "path"),
                )

            return render(await _lifecycle(request, spec, handler, parts), spec.status)

        run.__name__ = handler.__name__
        routes.route(method, path)(run)
        return handler

    return decorate


async def invoke(
    request: web.Request,
    handler: Callable[[web.Request, Parsed[BodyT, QueryT, PathT]], Awaitable[Any]],
    *,
    body: BodyT | None = None,
    query: QueryT | None = None,
    path: PathT | None = None,
    headers: Mapping[str, str] | None = None,
    answer_headers: MutableMapping[str, str] | None = None,
) -> Any:
    """Run a declared route's handler for a call that came through another door (A2A, the
    console): the same authentication, scopes, rate-limit buckets, models and idempotency as
    the route itself.

    `body`, `query` and `path` are instances of the route's own models, taken as they are
    (mypy holds them to the handler's `Parsed`; a part left out is the model's defaults);
    `headers` are added to the request's (a team header, an `Idempotency-Key`). Answers the
    handler's result, a rendered response read back as its model (its headers, such as
    `Cairn-Duplicate-Of`, copied into `answer_headers` when given).
    """
    spec = _SPECS[handler]
    merged = CIMultiDict(request.headers)
    merged.update(headers or {})
    sub = request.get(keys.UNREAD, request).clone(method=spec.method, headers=merged)

    async def parts() -> Parsed[Any, Any, Any]:
        return Parsed(
            body=_validated(spec.body, body, "body"),
            query=_validated(spec.query, query, "query"),
            path=_validated(spec.path_params, path, "path"),
        )

    try:
        # the door's own count was the global one
        result = await _lifecycle(sub, spec, handler, parts, counted=True)
    except Exception as failure:
        # a refusal raised inside the route's workflow (the last owner, a used-up invite) is
        # the route's problem, as the middleware would answer it: the door gets it unwrapped
        carried = problem_from_failure(failure)
        if carried is not None and carried is not failure:
            raise carried from None
        raise
    if isinstance(result, web.Response) and spec.response is not None:
        assert isinstance(result.body, bytes)
        if answer_headers is not None:
            answer_headers.update(result.headers)
        return spec.response.model_validate_json(result.body)
    return result


async def _lifecycle(
    request: web.Request,
    spec: EndpointSpec,
    handler: Handler,
    parts: Callable[[], Awaitable[Parsed[Any, Any, Any]]],
    *,
    counted: bool = False,
) -> Any:
    """The one life of a call of a route, whichever door it came through (HTTP, the console,
    A2A): authenticate and check scopes and rate, read its parts (`parts`: parsed from the
    HTTP request, or validated from the door's values), check the `Idempotency-Key`, run the
    handler, settle the rate-limit count (given back when the call fails)."""
    request[keys.ENDPOINT] = spec
    try:
        await authorize(request, spec, counted=counted)
        parsed = await parts()
        request[keys.PARSED] = parsed
        if spec.idempotent:
            idempotency_key(request)  # a malformed key is a 400 on every such route
        result = await _handled(request, spec, handler, parsed)
        await settle_rate(request)
    except Exception:
        await settle_rate(request)  # a refusal answers before any other error
        await give_back_rate(request, spec)
        raise
    return result


async def _handled(
    request: web.Request, spec: EndpointSpec, handler: Handler, parsed: Parsed[Any, Any, Any]
) -> Any:
    """The handler's answer; a memory operation's inside its GenAI span (api.genai)."""
    if spec.memory is None:
        return await handler(request, parsed)
    with memory_operation(request.app[keys.MEMORY], spec.memory, parsed) as call:
        result = await handler(request, parsed)
        call.answered(result, spec.memory)
        return result


def _validated(model: type[BaseModel] | None, data: Any, where: str) -> Any:
    if model is None:
        return None
    if isinstance(data, model):
        return data  # the door's instance of the route's own model, validated when it was made
    return validate_model(model, data or {}, where)


def _refuse_a_literal_path(request: web.Request) -> None:
    """`GET /teams/join` is the literal route `/teams/join` asked with a method it lacks (405),
    not `/teams/{id}` with a malformed id: aiohttp falls through to any pattern that matches."""
    allowed = _literal_methods().get(request.path)
    if allowed is not None and request.method not in allowed:
        raise web.HTTPMethodNotAllowed(request.method, allowed)


@functools.cache
def _literal_methods() -> dict[str, frozenset[str]]:
    """The methods of each path without parameters (read once every route is declared)."""
    methods: dict[str, set[str]] = {}
    for spec in ENDPOINTS:
        if "{" not in spec.path:
            methods.setdefault(spec.path, set()).add(spec.method)
    # aiohttp answers HEAD wherever it answers GET
    return {
        path: frozenset(found | ({"HEAD"} if "GET" in found else set()))
        for path, found in methods.items()
    }


def _check_declaration(handler: Handler, spec: EndpointSpec) -> None:
    """The handler's `parsed: Parsed[Body, Query, Path]` names the models the spec parses with
    (a part the spec does not parse is None), so the types a handler reads are the ones it gets.
    Checked once, when the route is declared."""
    declared = get_args(get_type_hints(handler).get("parsed", Parsed))
    body = None if spec.manual_body else spec.body
    expected = (body, spec.query, spec.path_params)
    found = tuple(None if part in (None, type(None)) else part for part in declared or (None,) * 3)
    if found != expected:
        raise TypeError(
            f"{handler.__name__} declares Parsed{list(found)} but its endpoint parses "
            f"{list(expected)} (body, query, path)"
        )


def render(result: Any, status: int = 200) -> web.StreamResponse:
    if isinstance(result, web.StreamResponse):
        return result
    if isinstance(result, BaseModel):
        payload = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return web.json_response(payload, status=status, dumps=_dumps)
    return web.json_response(result, status=status, dumps=_dumps)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


async def _parse_body(request: web.Request, spec: EndpointSpec) -> Any:
    if spec.body is None or spec.manual_body:
        return None
    if spec.body_form and request.content_type == "application/x-www-form-urlencoded":
        form = await request.post()
        lists = _list_fields(spec.body)
        fields = {k: [str(v) for v in form.getall(k)] if k in lists else str(form[k]) for k in form}
        return validate_model(spec.body, fields, "body")
    if request.content_type not in ("application/json", "") and not request.content_type.endswith(
        "+json"
    ):
        raise UnsupportedMediaType(f"Send the body as application/json, not {request.content_type}")
    return validate_json(spec.body, await request.read() or b"{}")


def _list_fields(model: type[BaseModel]) -> frozenset[str]:
    """A form's fields that repeat (checkboxes of one name): each is a list of its values."""
    return frozenset(
        name
        for name, field in model.model_fields.items()
        if list in (get_origin(field.annotation), *map(get_origin, get_args(field.annotation)))
    )


def validate_json(model: type[BaseModel], raw: bytes) -> Any:
    """A JSON body, by JSON's own types (strict: `"5"` is no integer, `0` no boolean, `1.5` no
    integer), so the body the document describes is the only one accepted."""
    try:
        return model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        if all(err["type"] != "json_invalid" for err in exc.errors()):
            raise validation_problem(exc, "body") from None
        syntax = str(exc.errors()[0]["ctx"]["error"])
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        syntax = str(exc)
    else:
        # JSON that only the strict parser refuses: a lone surrogate escape, which the text
        # guard names by its pointer (or NaN / Infinity, which is no JSON at all)
        validate_model(model, data, "body")
    raise RequestInvalid(
        f"The body is not valid JSON: {syntax}", errors=[FieldError(pointer="", message=syntax)]
    )


def _parse_query(model: type[BaseModel] | None, request: web.Request) -> Any:
    return _parse_mapping(model, query_values(model, request.query), "query")


def query_values(model: type[BaseModel] | None, query: MultiMapping[str]) -> dict[str, Any]:
    """The query as its model reads it: an array parameter gathers every repeat of its key and
    the comma-separated values of each (`?taskTypes=a&taskTypes=b`, `?taskTypes=a,b`, or both
    mixed); any other parameter takes one value, and given twice is a 400 (which one was
    meant cannot be told)."""
    arrays = array_parameters(model) if model is not None else frozenset()
    values: dict[str, Any] = {}
    for name in query:
        if name in values:
            continue
        if name in arrays:
            values[name] = [
                part.strip()
                for raw in query.getall(name)
                for part in raw.split(",")
                if part.strip()
            ]
        elif len(query.getall(name)) > 1:
            pointer = _pointer("query", (name,))
            message = "given more than once; this parameter takes one value"
            raise RequestInvalid(
                f"Invalid query: {pointer}: {message}",
                errors=[FieldError(pointer=pointer, message=message)],
            )
        else:
            values[name] = query[name]
    return values


@functools.cache
def array_parameters(model: type[BaseModel]) -> frozenset[str]:
    """The names of the model's fields that hold a list (optional or not)."""
    return frozenset(
        field.alias or name
        for name, field in model.model_fields.items()
        if any(_is_array(option) for option in _options(field.annotation))
    )


def _options(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) is Annotated:
        return _options(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        return tuple(option for arg in get_args(annotation) for option in _options(arg))
    return (annotation,)


def _is_array(annotation: Any) -> bool:
    return get_origin(annotation) in (list, tuple, set, frozenset)


def _parse_mapping(model: type[BaseModel] | None, values: dict[str, str], where: str) -> Any:
    if model is None:
        return None
    return validate_model(model, values, where)


def part_of(model: type[PartT], where: str = "body", /, **values: Any) -> PartT:
    """A route's body (or `where`: its path, its query) made by a door (the console, A2A) of
    values it was sent: one the model refuses (an emptied content, a malformed fingerprint) is
    the route's own 400, as the API answers the same request."""
    part: PartT = validate_model(model, values, where)
    return part


def validate_model(model: type[BaseModel], data: Any, where: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_problem(exc, where) from None


def validation_problem(exc: ValidationError, where: str) -> ValidationFailed:
    errors = [
        FieldError(pointer=_pointer(where, error_location(err)), message=_message(err))
        for err in exc.errors(include_url=False)
    ]
    summary = "; ".join(f"{e.pointer}: {e.message}" for e in errors[:5])
    return RequestInvalid(f"Invalid {where}: {summary}", errors=errors)


def _pointer(where: str, loc: tuple[Any, ...]) -> str:
    """An RFC 6901 JSON pointer; a query or path parameter sits under `/query` or `/path`."""
    prefix = "" if where == "body" else f"/{where}"
    return prefix + "".join(f"/{_escaped(part)}" for part in loc)


def _escaped(part: Any) -> str:
    # the offending key itself may hold the unstorable character: keep the pointer printable
    return printable(str(part)).replace("~", "~0").replace("/", "~1")


def _message(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "Unknown field"
    return printable(str(err["msg"]))  # a validator may quote the unstorable input
