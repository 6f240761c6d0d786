"""The OpenAPI 3.1 documents, generated from the endpoint registry and its pydantic models.

`/openapi.json` is the API's document: every route but the console's. The console's pages and
forms (`EndpointSpec.document == "console"`) are a person's browser's, answering HTML: in the
API's document every generated client and every contract test would take them for operations
(issue 34). They have a document of their own, built the same way from the same declarations
and served nowhere: the console's tests hold each page to it (its declared refusals, closed form
bodies) and fuzz the pages with it, as the API's tests do the API with `/openapi.json`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from api.auth import AUTHENTICATION_REFUSALS, SAFE_METHODS
from api.endpoint import ENDPOINTS, array_parameters
from api.headers import IDEMPOTENCY_HEADER, TEAM_HEADER
from api.spec import HTML, Document, EndpointSpec
from schemas import limits
from schemas.errors import (
    CrossOriginRefused,
    DomainError,
    HeaderFieldsTooLarge,
    IdempotencyKeyReused,
    InternalError,
    InvalidIdempotencyKey,
    MissingScope,
    PayloadTooLarge,
    Problem,
    RateLimited,
    RequestInvalid,
    ServiceUnavailable,
    UnsupportedMediaType,
    UriTooLong,
)
from schemas.version import VERSION

REF = "#/components/schemas/{model}"
# answered by api/server.py before a route is known
BEFORE_ROUTING: tuple[type[DomainError], ...] = (UriTooLong, HeaderFieldsTooLarge)
ARRAY_QUERY_NOTE = "Repeat the key (`?x=a&x=b`) or separate values by commas (`?x=a,b`)."


def _models(specs: list[EndpointSpec]) -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    seen: dict[tuple[type[BaseModel], str], None] = {(Problem, "serialization"): None}
    for spec in specs:
        if spec.body is not None:
            seen[(spec.body, "validation")] = None
        if spec.response is not None:
            seen[(spec.response, "serialization")] = None
        if spec.error_body is not None:
            seen[(spec.error_body, "serialization")] = None
    return [(model, mode) for model, mode in seen]  # type: ignore[misc]


def _parameters(model: type[BaseModel] | None, where: Literal["query", "path"]) -> list[Any]:
    if model is None:
        return []
    schema = model.model_json_schema(ref_template=REF)
    required = set(schema.get("required", []))
    arrays = array_parameters(model) if where == "query" else frozenset()
    parameters = []
    for name, prop in schema.get("properties", {}).items():
        parameter = {"name": name, "in": where, "required": where == "path" or name in required}
        parameter["schema"] = prop
        description = prop.get("description")
        if name in arrays:
            # the query parser (api.endpoint.query_values) also splits each value on commas
            parameter |= {"style": "form", "explode": True}
            description = " ".join(filter(None, [description, ARRAY_QUERY_NOTE]))
        if description:
            parameter["description"] = description
        parameters.append(parameter)
    return parameters


def _raw(spec: EndpointSpec) -> dict[str, Any]:
    """A body the route reads itself, by media type: a file, or any JSON object (a protocol's
    envelope, judged by the protocol's own handler and refused in its own terms, e.g. JSON-RPC's
    errors; a file in JSON)."""
    media_types = (spec.raw_body,) if isinstance(spec.raw_body, str) else spec.raw_body or ()
    return {
        media_type: {"schema": {"type": "object"}}
        if media_type == "application/json"
        else {"schema": {"type": "string", "format": "binary"}}
        for media_type in media_types
    }


def _errors(spec: EndpointSpec) -> list[type[DomainError]]:
    # the server answers these itself, before routing (api/server.py)
    implied: list[type[DomainError]] = [InternalError, UriTooLong, HeaderFieldsTooLarge]
    if spec.rate_limited:
        implied.append(RateLimited)
    # a malformed declared header (the team header must be a uuid) is a 400 too
    if spec.body or spec.query or spec.path_params or _headers(spec):
        implied.append(RequestInvalid)
    if spec.body is not None and not spec.manual_body:
        implied += [UnsupportedMediaType, PayloadTooLarge]
    if spec.idempotent:
        implied += [IdempotencyKeyReused, InvalidIdempotencyKey]
    if spec.auth != "none":
        implied += AUTHENTICATION_REFUSALS
        implied.append(ServiceUnavailable)
    if spec.auth in ("required", "optional", "browser") and spec.method not in SAFE_METHODS:
        implied.append(CrossOriginRefused)  # a session cookie sent by another origin's page
    if spec.scopes:
        implied.append(MissingScope)
    return list(dict.fromkeys([*implied, *spec.errors]))


def _responses(spec: EndpointSpec, refs: dict[Any, Any]) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    if spec.raw_response is not None:
        # a JSON document the handler builds itself (the A2A Agent Card, JSON-RPC responses)
        raw = {"type": "object"} if spec.raw_response.endswith("json") else {"type": "string"}
        content = {spec.raw_response: {"schema": raw}}
        responses[str(spec.status)] = {"description": "OK", "content": content}
    elif spec.response is not None:
        schema = refs[(spec.response, "serialization")]
        responses[str(spec.status)] = {
            "description": spec.response.__doc__ or "OK",
            "content": {"application/json": {"schema": schema}},
        }
    else:
        responses[str(spec.status)] = {"description": "OK"}
    for status, when in spec.also:
        responses[str(status)] = {**responses[str(spec.status)], "description": when}
    problem = {"application/problem+json": {"schema": refs[(Problem, "serialization")]}}
    by_status: dict[int, list[str]] = {}
    content_of: dict[int, dict[str, Any]] = {}
    for error in _errors(spec):
        # a family declared (any of its conflicts) has no code of its own: its title says it
        line = error.title if error.family else f"`{error.code}`: {error.title}"
        by_status.setdefault(error.status, []).append(line)
        content_of.setdefault(error.status, {}).update(_problem_content(spec, error, problem))
    for status, lines in sorted(by_status.items()):
        # a status the handler also answers with its own body (readiness' 503) keeps both
        own = responses.get(str(status), {"description": "", "content": {}})
        responses[str(status)] = {
            "description": "; ".join(d for d in dict.fromkeys([own["description"], *lines]) if d),
            "content": {**own["content"], **content_of[status]},
        }
    if spec.error_body is not None:
        body = {"application/json": {"schema": refs[(spec.error_body, "serialization")]}}
        title = (spec.error_body.__doc__ or "Error").strip().split("\n")[0]
        for status in spec.error_statuses:
            known = responses.get(str(status), {"description": title, "content": {}})
            content = {**known["content"], **body}
            responses[str(status)] = {"description": known["description"], "content": content}
    return responses


def _problem_content(
    spec: EndpointSpec, error: type[DomainError], problem: dict[str, Any]
) -> dict[str, Any]:
    """A refusal's media type: a page's refusal is a page too (api/console/render.py), but
    what the server refuses before it routes (a request line or headers too long) is a
    problem document whatever was asked for."""
    if spec.raw_response == HTML and error not in BEFORE_ROUTING:
        return {HTML: {"schema": {"type": "string"}}}
    return problem


def _header_schema(name: str) -> dict[str, Any]:
    if name.lower() == TEAM_HEADER:
        return {"type": "string", "format": "uuid"}
    if name == IDEMPOTENCY_HEADER:
        return {"type": "string", "minLength": 1, "maxLength": limits.IDEMPOTENCY_KEY_MAX_CHARS}
    return {"type": "string"}


def _headers(spec: EndpointSpec) -> tuple[str, ...]:
    idempotency = (IDEMPOTENCY_HEADER,) if spec.idempotent else ()
    return tuple(dict.fromkeys(spec.headers + idempotency))


def _operation(spec: EndpointSpec, refs: dict[Any, Any]) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": spec.operation_id,
        "summary": spec.summary,
        "tags": [spec.tag],
        "responses": _responses(spec, refs),
    }
    parameters = _parameters(spec.path_params, "path") + _parameters(spec.query, "query")
    parameters += [
        {"name": name, "in": "header", "required": False, "schema": _header_schema(name)}
        for name in _headers(spec)
    ]
    if parameters:
        operation["parameters"] = parameters
    if spec.body is not None:
        content = {"application/json": {"schema": refs[(spec.body, "validation")]}}
        if spec.body_form:
            content["application/x-www-form-urlencoded"] = content["application/json"]
        operation["requestBody"] = {"required": True, "content": content}
    elif spec.raw_body is not None:
        operation["requestBody"] = {"required": True, "content": _raw(spec)}
    if spec.auth == "required":
        operation["security"] = [{"bearer": list(spec.scopes)}, {"session": []}]
    elif spec.auth == "optional":
        operation["security"] = [{}, {"bearer": list(spec.scopes)}, {"session": []}]
    elif spec.auth == "browser":
        operation["security"] = [{}, {"session": []}]
    elif spec.auth == "connector":
        operation["security"] = [{"connector": []}]
    else:
        operation["security"] = []
    if spec.scopes:
        operation["x-required-scopes"] = list(spec.scopes)
    return operation


INFO: dict[Document, dict[str, str]] = {
    "api": {
        "title": "Cairn",
        "description": "Agent memory and task coordination. Errors are RFC 9457 problems.",
    },
    "console": {
        "title": "Cairn console",
        "description": "The human console's pages and forms (HTML, for a person's browser); "
        "not the API, which is /openapi.json.",
    },
}


def build_openapi(base_url: str, document: Document = "api") -> dict[str, Any]:
    """The API's document (`/openapi.json`), or the console's (`document="console"`)."""
    specs = [spec for spec in ENDPOINTS if spec.document == document]
    refs, definitions = models_json_schema(_models(specs), ref_template=REF)
    paths: dict[str, dict[str, Any]] = {}
    for spec in sorted(specs, key=lambda s: (s.path, s.method)):
        paths.setdefault(spec.path, {})[spec.method.lower()] = _operation(spec, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": INFO[document]["title"],
            "version": VERSION,
            "description": INFO[document]["description"],
        },
        "servers": [{"url": base_url}],
        "paths": paths,
        "components": {
            "schemas": definitions.get("$defs", {}),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "OAuth2 client-credentials access token from /oauth2/token",
                },
                "session": {"type": "apiKey", "in": "header", "name": "X-Session-Token"},
                "connector": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Connector-Secret",
                    "description": "The MCP server's back channel (browser OAuth connector)",
                },
            },
        },
    }
