"""One declaration per route: method, path, models, auth, scopes, errors.

`@endpoint` wires a handler into a `RouteTableDef` and records an `EndpointSpec`; the same spec
drives request parsing (closed bodies, 400 with a pointer per field), authentication, scope
checks, rate-limit buckets and the OpenAPI document, so the document cannot drift from the code.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, get_args, get_type_hints

from aiohttp import web
from pydantic import BaseModel, ValidationError
from typing_extensions import TypeVar

from api import keys
from api.auth import authorize, give_back_rate, settle_rate
from api.idempotency import idempotency_key
from api.spec import EndpointSpec
from schemas.errors import FieldError, UnsupportedMediaType, ValidationFailed

Handler = Callable[..., Awaitable[Any]]

ENDPOINTS: list[EndpointSpec] = []


# A part the endpoint does not declare is None (the PEP 696 default), so a handler names only
# what it reads: `Parsed[CreateTaskRequest]`, `Parsed[None, TaskListQuery]`,
# `Parsed[None, None, TaskPath]`, `Parsed[GrantRequest, None, GrantPath]`.
BodyT = TypeVar("BodyT", default=None)
QueryT = TypeVar("QueryT", default=None)
PathT = TypeVar("PathT", default=None)


@dataclass(frozen=True)
class Parsed(Generic[BodyT, QueryT, PathT]):
    """The request's body, query and path parameters, validated by the models `@endpoint`
    declares; the handler's annotation types them (a test holds the two in step)."""

    body: BodyT
    query: QueryT
    path: PathT


def endpoint(
    routes: web.RouteTableDef, method: str, path: str, **options: Any
) -> Callable[[Handler], Handler]:
    """Register `handler(request, parsed)` for `method path` with the options of EndpointSpec."""

    def decorate(handler: Handler) -> Handler:
        spec = EndpointSpec(
            method=method,
            path=path,
            operation_id=options.pop("operation_id", handler.__name__),
            summary=options.pop("summary", (handler.__doc__ or "").strip().split("\n")[0]),
            **options,
        )
        _check_declaration(handler, spec)
        ENDPOINTS.append(spec)

        async def run(request: web.Request) -> web.StreamResponse:
            request[keys.ENDPOINT] = spec

            try:
                await authorize(request, spec)
                parsed: Parsed[Any, Any, Any] = Parsed(
                    body=await _parse_body(request, spec),
                    query=_parse_mapping(spec.query, dict(request.query), "query"),
                    path=_parse_mapping(spec.path_params, dict(request.match_info), "path"),
                )
                request[keys.PARSED] = parsed
                if spec.idempotent:
                    idempotency_key(request)  # a malformed key is a 400 on every such route
                result = await handler(request, parsed)
                await settle_rate(request)
            except Exception:
                await settle_rate(request)  # a refusal answers before any other error
                await give_back_rate(request, spec)
                raise
            return render(result, spec.status)

        run.__name__ = handler.__name__
        routes.route(method, path)(run)
        return handler

    return decorate


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
        return validate_model(spec.body, {k: str(v) for k, v in form.items()}, "body")
    if request.content_type not in ("application/json", "") and not request.content_type.endswith(
        "+json"
    ):
        raise UnsupportedMediaType(f"Send the body as application/json, not {request.content_type}")
    raw = await request.read()
    try:
        data = json.loads(raw) if raw else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValidationFailed(
            f"The body is not valid JSON: {exc}", errors=[FieldError(pointer="", message=str(exc))]
        ) from None
    return validate_model(spec.body, data, "body")


def _parse_mapping(model: type[BaseModel] | None, values: dict[str, str], where: str) -> Any:
    if model is None:
        return None
    return validate_model(model, values, where)


def validate_model(model: type[BaseModel], data: Any, where: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_problem(exc, where) from None


def validation_problem(exc: ValidationError, where: str) -> ValidationFailed:
    errors = [
        FieldError(pointer=_pointer(where, err["loc"]), message=_message(err))
        for err in exc.errors(include_url=False)
    ]
    summary = "; ".join(f"{e.pointer}: {e.message}" for e in errors[:5])
    return ValidationFailed(f"Invalid {where}: {summary}", errors=errors)


def _pointer(where: str, loc: tuple[Any, ...]) -> str:
    prefix = "" if where == "body" else f"/{where}"
    return prefix + "".join(f"/{part}" for part in loc)


def _message(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "Unknown field"
    return str(err["msg"])
