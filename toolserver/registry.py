"""How a tool is declared: typed snake_case arguments, the REST model its result mirrors, the
hints a host shows, and one async handler that calls the REST API through `client/`.

`@tool(...)` records a `ToolDef` in `CATALOGUE`; `sdk_tool` turns it into the SDK's `Tool`.
A handler returns the REST model (structured content = the REST JSON, camelCase as the API
renders it); `ApiError` becomes an `isError` result carrying the problem's status, code and
detail, and so does a check the server makes itself before calling REST: it raises the problem
catalogue's `DomainError` (`schemas.errors`), so a code has one status in REST and MCP alike.
Argument models are closed: an unknown argument is refused like a wrong type.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, ValidationError

from client.rest import ApiError, CairnClient
from schemas.base import error_location
from schemas.errors import ApiUnreachable, DomainError, InvalidArguments
from toolserver.backend import Backend, Credential

CREDENTIAL_KEY = "cairn.credential"  # where the auth gate leaves the caller's credential
TEAM_KEY = "cairn.team"  # ... and the request's X-Service-Team-Id (a uuid string), if sent
# The text rendering repeats the JSON for hosts that ignore structured content, up to this
# size; beyond it (an artifact's base64, a long page) the text is the summary alone.
TEXT_JSON_LIMIT = 16_000


class Arguments(ArgModelBase):
    """A tool's arguments: snake_case names, unknown names refused."""

    model_config = ConfigDict(extra="forbid")


class NoArguments(Arguments):
    pass


@dataclass(frozen=True)
class Call:
    """What a handler gets: the REST client acting as the caller, the shared backend, and the
    request's state (what the auth gate found; the toolset discovery tool writes to it)."""

    api: CairnClient
    backend: Backend
    state: dict[str, Any] = field(default_factory=dict)


Reply = BaseModel | dict[str, Any]
Handler = Callable[[Call, Any], Awaitable[Reply]]
Render = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    arguments: type[Arguments]
    output: type[BaseModel]
    handler: Handler
    read_only: bool
    destructive: bool
    idempotent: bool
    toolset: str
    render: Render | None = None
    meta: dict[str, Any] | None = None


CATALOGUE: list[ToolDef] = []
# the toolset of each catalogue module (toolserver.toolsets); the apps' tools name their own
MODULE_TOOLSETS = {
    "diaries": "memory",
    "entries": "memory",
    "packs": "packs",
    "tasks": "tasks",
    "teams": "teams",
    "identity": "identity",
    "crypto": "crypto",
}


def tool(
    *,
    output: type[BaseModel],
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    render: Render | None = None,
    name: str | None = None,
    meta: dict[str, Any] | None = None,
    toolset: str | None = None,
) -> Callable[[Handler], Handler]:
    """Declare a tool; its name is the handler's, its description the handler's docstring,
    its arguments the annotation of the handler's second parameter."""

    def register(handler: Handler) -> Handler:
        parameters = list(inspect.signature(handler, eval_str=True).parameters.values())
        arguments = parameters[1].annotation
        CATALOGUE.append(
            ToolDef(
                name=name or handler.__name__,
                description=inspect.cleandoc(handler.__doc__ or ""),
                arguments=arguments,
                output=output,
                handler=handler,
                read_only=read_only,
                destructive=destructive,
                idempotent=read_only or idempotent,
                toolset=toolset or MODULE_TOOLSETS[handler.__module__.rsplit(".", 1)[-1]],
                render=render,
                meta=meta,
            )
        )
        return handler

    return register


# --- results ---------------------------------------------------------------------------------


def ok(name: str, structured: dict[str, Any], render: Render | None) -> CallToolResult:
    summary = render(structured) if render else f"{name}: done"
    body = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    if len(body) <= TEXT_JSON_LIMIT:
        text = summary + "\n" + body
    else:
        text = summary + f"\n(the full result, {len(body)} characters, is the structured content)"
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


def problem(status: int, code: str | None, detail: str, **extra: Any) -> CallToolResult:
    """A REST problem as a tool result the model can read and correct."""
    structured = {"status": status, "code": code or "error", "detail": detail, **extra}
    text = f"Error {status} {code or ''}: {detail}".strip()
    if extra:
        text += "\n" + json.dumps(extra, ensure_ascii=False, default=str)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured, is_error=True
    )


def dump(reply: Reply) -> dict[str, Any]:
    if isinstance(reply, BaseModel):
        return reply.model_dump(mode="json", by_alias=True, exclude_none=True)
    return reply


async def invoke(
    definition: ToolDef, backend: Backend, ctx: Context, values: dict[str, Any]
) -> CallToolResult:
    state = ctx.request_context.request.scope["state"]  # type: ignore[union-attr]
    credential: Credential = state[CREDENTIAL_KEY]
    team: str | None = state.get(TEAM_KEY)
    arguments = definition.arguments.model_construct(**values)
    call = Call(api=backend.client(credential, team=team), backend=backend, state=state)
    try:
        reply = await definition.handler(call, arguments)
    except ApiError as error:
        if error.status == 401:
            backend.forget(credential)
        return rest_problem(error)
    except DomainError as refusal:
        return refused(refusal)
    except ValidationError as invalid:
        # arguments that pass their own schema but not the REST body's rules
        fields = [
            {"field": ".".join(map(str, error_location(e))), "detail": e["msg"]}
            for e in invalid.errors()
        ]
        message = "The arguments do not form a valid request"
        return refused(InvalidArguments(message, extensions={"errors": fields}))
    except aiohttp.ClientError:
        return refused(ApiUnreachable("The REST API did not answer; try again later."))
    return ok(definition.name, dump(reply), definition.render)


def rest_problem(error: ApiError) -> CallToolResult:
    """A REST problem as the API answered it: its code and status (the catalogue's)."""
    extra = {"errors": error.body["errors"]} if "errors" in error.body else {}
    return problem(error.status, error.code, error.detail, **extra)


def refused(error: DomainError) -> CallToolResult:
    """A check of the server's own, reported exactly like the REST problem of its code."""
    return problem(error.status, error.instance_code, error.detail, **error.extensions)


# --- schemas ---------------------------------------------------------------------------------


def input_schema(arguments: type[Arguments]) -> dict[str, Any]:
    """What a model is shown of a tool's arguments: pydantic's schema without what it does not
    need to call correctly (titles, `null` alternatives of optional arguments, defaults that
    mean "not given", the closedness flag, a `string` type its enum or format implies, limits
    of short texts), a nested model used once written in place, and a subschema used twice
    stated once in `$defs`. The arguments model still judges every call (closed, nulls
    accepted, every limit)."""
    raw = _untitled(arguments.model_json_schema(by_alias=True))
    schema: dict[str, Any] = _shared(_inlined(_compact(raw)))
    return schema


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """A nested model pydantic put under `$defs` but used once is written where it is used."""
    defs: dict[str, Any] = schema.get("$defs", {})
    text = json.dumps(schema)
    once = {
        name
        for name in defs
        if text.count(f'"#/$defs/{name}"') == 1
        and f'"#/$defs/{name}"' not in json.dumps(defs[name])
    }
    if not once:
        return schema

    def expand(node: Any) -> Any:
        if isinstance(node, list):
            return [expand(value) for value in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.removeprefix("#/$defs/") in once:
            rest = {key: value for key, value in node.items() if key != "$ref"}
            return {**expand(defs[ref.removeprefix("#/$defs/")]), **rest}
        return {key: expand(value) for key, value in node.items() if key != "$defs"}

    result: dict[str, Any] = expand(schema)
    kept = {name: expand(sub) for name, sub in defs.items() if name not in once}
    if kept:
        result["$defs"] = kept
    return result


def _says_nothing(default: Any) -> bool:
    """A default that says no more than leaving the argument out (none, off, empty, 0)."""
    return default is None or default is False or default == 0 or default in ([], {})


SHORT_TEXT_CHARS = 1000


def _compact(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_compact(value) for value in schema]
    if not isinstance(schema, dict):
        return schema
    node = dict(schema)
    options = node.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        # optional: omitting the argument is how a caller says "none"
        (kept,) = [option for option in options if option != {"type": "null"}]
        del node["anyOf"]
        node = {**kept, **node}
    if isinstance(node.get("additionalProperties"), bool):
        del node["additionalProperties"]
    if node.get("type") == "string":
        # a name, title, tag or query is short by nature; a long text keeps its limit
        if node.get("minLength") == 1:
            del node["minLength"]
        if node.get("maxLength", SHORT_TEXT_CHARS + 1) <= SHORT_TEXT_CHARS:
            del node["maxLength"]
        if "enum" in node or node.get("format") in ("uuid", "date-time"):
            # the values, or the format, say it is a string
            del node["type"]
    if node.get("type") in ("integer", "number") and node.get("minimum") in (0, 1):
        del node["minimum"]  # a count, page size, rank or score is not negative
    if "default" in node and _says_nothing(node["default"]):
        del node["default"]
    return {
        key: value if key in ("enum", "required", "default") else _compact(value)
        for key, value in node.items()
    }


def _shared(schema: dict[str, Any]) -> dict[str, Any]:
    """A property subschema written out more than once (e.g. `tags` and `exclude_tags`) is
    stated once under `$defs`, named after its first property, and referenced."""
    counts: dict[str, int] = {}
    names: dict[str, str] = {}
    for name, sub in _properties(schema):
        key = json.dumps(_without_notes(sub), sort_keys=True)
        if len(key) > SHARED_MIN_CHARS:
            counts[key] = counts.get(key, 0) + 1
            names.setdefault(key, name)
    shared = {key: names[key] for key, count in counts.items() if count > 1}
    if not shared:
        return schema
    defs = dict(schema.get("$defs", {}))
    for key, name in shared.items():
        defs.setdefault(name, json.loads(key))

    def replace(node: Any) -> Any:
        if isinstance(node, list):
            return [replace(value) for value in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                out[key] = {name: _referenced(sub, shared) for name, sub in value.items()}
                out[key] = {name: replace(sub) for name, sub in out[key].items()}
            elif key != "$defs":
                out[key] = replace(value)
        return out

    result: dict[str, Any] = replace(schema)
    result["$defs"] = {name: replace(sub) for name, sub in defs.items()}
    return result


SHARED_MIN_CHARS = 64
_NOTE_KEYS = ("description", "default")


def _without_notes(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    return {key: value for key, value in schema.items() if key not in _NOTE_KEYS}


def _referenced(schema: Any, shared: dict[str, str]) -> Any:
    if not isinstance(schema, dict):
        return schema
    name = shared.get(json.dumps(_without_notes(schema), sort_keys=True))
    if name is None:
        return schema
    notes = {key: schema[key] for key in _NOTE_KEYS if key in schema}
    return {"$ref": f"#/$defs/{name}", **notes}


def _properties(schema: Any) -> list[tuple[str, Any]]:
    """Every (name, subschema) of every `properties` in a schema, `$defs` included."""
    found: list[tuple[str, Any]] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    found.append((name, sub))
                    found += _properties(sub)
            else:
                found += _properties(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _properties(value)
    return found


def _untitled(schema: Any) -> Any:
    """Without pydantic's generated titles ("Diary Id"): they repeat the names, and a host
    re-reads every byte of `tools/list`. (A property named `title` is a schema, not a string,
    and stays.)"""
    if isinstance(schema, dict):
        return {
            key: _untitled(value)
            for key, value in schema.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(schema, list):
        return [_untitled(value) for value in schema]
    return schema


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The REST model's JSON as the API renders it (aliases, `None` fields left out): a field
    that may be null may also be absent, so it is not required."""
    schema = model.model_json_schema(mode="serialization", by_alias=True)
    for part in [schema, *schema.get("$defs", {}).values()]:
        _optional_nullables(part)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = {**schema["$defs"][ref.removeprefix("#/$defs/")], **schema}
        del schema["$ref"]
    untitled: dict[str, Any] = _untitled(schema)
    return untitled


def _optional_nullables(schema: dict[str, Any]) -> None:
    properties = schema.get("properties", {})
    required = schema.get("required")
    if not required:
        return
    kept = [name for name in required if not _nullable(properties.get(name, {}))]
    if kept:
        schema["required"] = kept
    else:
        del schema["required"]


def _nullable(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "null":
        return True
    return any(_nullable(option) for option in schema.get("anyOf", []) + schema.get("oneOf", []))


def sdk_tool(definition: ToolDef, backend: Backend) -> Tool:
    async def run(ctx: Context, **values: Any) -> CallToolResult:
        return await invoke(definition, backend, ctx, values)

    return Tool(
        fn=run,
        name=definition.name,
        title=None,
        description=definition.description,
        parameters=input_schema(definition.arguments),
        fn_metadata=FuncMetadata(
            arg_model=definition.arguments, output_schema=output_schema(definition.output)
        ),
        is_async=True,
        context_kwarg="ctx",
        annotations=ToolAnnotations(
            read_only_hint=definition.read_only,
            destructive_hint=definition.destructive,
            idempotent_hint=definition.idempotent,
            open_world_hint=False,
        ),
        meta=definition.meta,
    )
