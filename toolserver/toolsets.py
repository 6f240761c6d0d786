"""Which tools a connection sees: a small default set, toolsets chosen per connection or
enabled during it, narrowed by the credential's scopes, and the read-only mode (DECISIONS.md,
"Trust at the edges"; docs/mcp.md, "Toolsets").

- No `toolsets` chosen: the default view, at most ten tools an agent needs in a conversation
  (`DEFAULT_TOOLS`: who am I, list my diaries, remember, recall, read an entry; the task
  queue's list and read where the credential may claim) plus the discovery tool
  `toolsets_enable`, which names the other toolsets in one line each and enables one for the
  connection. Hosts cap or warn about big catalogues (Antigravity: 50 tools over all servers;
  Cursor and VS Code: about 40), so the full catalogue (64 tools, about 20 KB) is asked for, never
  given by default.
- `?toolsets=memory,tasks` on the MCP URL, or `X-Service-Toolsets: memory,tasks` (the query
  wins): those toolsets, as before; `all`: every toolset. An unknown name is a 400 at the gate.
- `?readonly=true` or `X-Service-Read-Only: true`: only tools annotated read-only.
- A toolset whose scopes the credential holds none of is not shown (a key without task scopes
  sees no task tools), and cannot be enabled. Teams and identity need no scope; when the scopes
  cannot be learned (whoami refused), every toolset stays and the REST API judges each call.
- App-only tools (`_meta.ui.visibility: ["app"]`, the apps' own reads) follow their toolset,
  the scopes and the read-only mode like every other tool: listed (hosts keep them from the
  model) and callable exactly when their toolset is.

Where the enabled toolsets live. The server is stateless: the SDK's streamable-HTTP sessions
(`Mcp-Session-Id`) are kept in one process's memory, so they are not used; any replica
answers any request, and the 2026-07-28 protocol has no sessions at all. The enabled set is
therefore carried by the client: the answer to `toolsets_enable` sets the cookie
`cairn-toolsets` (the enabled toolset names; HttpOnly, SameSite=Strict, path = the MCP path,
gone when the client's HTTP session ends), and every replica reads it from the request. It is
neither signed nor stored because it grants nothing: it only widens what is *listed* inside
what the URL's choice and the credential's scopes allow (the same as `?toolsets=`), and the
REST API still judges every call. A client that keeps no cookies sees the default view again
on its next request; it asks for what it needs with `?toolsets=` instead (the README's host
snippets show how). The enabling answer also carries `notifications/tools/list_changed`
before the result (as a two-event SSE body when the client accepts `text/event-stream`:
the server otherwise answers in JSON, where the SDK drops notifications), so the host lists
the tools again.

`CatalogueView` applies the choice: `tools/list` lists the visible tools in a stable order
(by name), and a call to a hidden tool fails exactly as an unknown tool does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Any, Final, Literal

from mcp.server.context import ServerRequestContext
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field
from starlette.types import Message, Send

from schemas.errors import MissingScope
from toolserver import tools as _catalogue  # noqa: F401  (registers every tool)
from toolserver.registry import CATALOGUE, Arguments, Call, ToolDef, input_schema

Toolset = Literal["memory", "packs", "tasks", "teams", "identity", "crypto"]
TOOLSETS: Final[tuple[Toolset, ...]] = ("memory", "packs", "tasks", "teams", "identity", "crypto")
ALL = "all"  # `?toolsets=all`: every toolset, the full catalogue
# a toolset is usable with any one of these scopes; an empty tuple: with none at all
TOOLSET_SCOPES: Final[Mapping[Toolset, tuple[str, ...]]] = {
    "memory": ("diary:read", "diary:write", "diary:delete", "diary:share"),
    "packs": ("pack:read", "pack:write"),
    "tasks": ("task:read", "task:write", "task:claim", "task:execute", "task:manage"),
    "teams": (),
    "identity": (),
    "crypto": ("crypto:sign",),
}
# the discovery tool's line for each toolset
TOOLSET_LINES: Final[Mapping[Toolset, str]] = {
    "memory": "diaries, entries, relations, grants, tags, the diary map",
    "packs": "context packs: preview, create, render, diff, provenance",
    "tasks": "the task queue: create, continue, cancel, attempts, messages, artifacts",
    "teams": "teams, members, invites",
    "identity": "who you are, an agent by fingerprint",
    "crypto": "sign and verify with your own key",
}
# The default view: what an agent does in a conversation. The task tools only where the
# credential may claim (the loop is: list what is claimable, read one).
DEFAULT_TOOLS: Final = (
    "service_whoami",
    "diaries_list",
    "entries_create",
    "entries_search",
    "entries_get",
)
DEFAULT_TASK_TOOLS: Final = ("tasks_list", "tasks_get")
CLAIM_SCOPE = "task:claim"
DISCOVERY_NAME = "toolsets_enable"
TOOLSETS_HEADER = "x-service-toolsets"
READ_ONLY_HEADER = "x-service-read-only"
SELECTION_KEY = "cairn.selection"  # where the auth gate leaves the connection's Selection
ENABLED_KEY = "cairn.enabled"  # where toolsets_enable leaves the connection's new enabled set
COOKIE = "cairn-toolsets"
_TRUE = ("1", "true", "yes")
_FALSE = ("", "0", "false", "no")


class BadSelection(ValueError):
    """A toolset name or read-only flag the server does not know (the gate answers 400)."""


@dataclass(frozen=True)
class Selection:
    """Whole toolsets shown, single tools shown beside them (the default view), the read-only
    mode, and the toolsets the credential may enable (the discovery tool's choices)."""

    toolsets: frozenset[Toolset]
    read_only: bool = False
    tools: frozenset[str] = frozenset()
    usable: frozenset[Toolset] = frozenset(TOOLSETS)

    def shows(self, definition: ToolDef) -> bool:
        if definition.toolset not in self.toolsets and definition.name not in self.tools:
            return False
        return definition.read_only or not self.read_only


EVERYTHING: Final = Selection(frozenset(TOOLSETS))


def app_only(definition: ToolDef) -> bool:
    ui = (definition.meta or {}).get("ui", {})
    return bool(ui.get("visibility") == ["app"])


def parse_toolsets(raw: str | None) -> frozenset[Toolset] | None:
    """`memory,tasks` (commas and/or spaces) → the named toolsets; `all` → every one; None when
    not given."""
    if raw is None:
        return None
    names = [name for name in raw.replace(",", " ").split() if name]
    if ALL in names:
        return frozenset(TOOLSETS)
    unknown = sorted(set(names) - set(TOOLSETS))
    if unknown:
        raise BadSelection(
            f"Unknown toolset {', '.join(unknown)}; the toolsets are "
            f"{', '.join(TOOLSETS)} (or {ALL})"
        )
    return frozenset(name for name in TOOLSETS if name in names)


def parse_read_only(raw: str | None) -> bool:
    value = (raw or "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise BadSelection("readonly must be true or false")


def usable(scopes: Iterable[str] | None) -> frozenset[Toolset]:
    """The toolsets a credential with these scopes can use; all of them when unknown."""
    if scopes is None:
        return frozenset(TOOLSETS)
    held = set(scopes)
    return frozenset(
        name for name, needs in TOOLSET_SCOPES.items() if not needs or held.intersection(needs)
    )


def default_tools(scopes: Iterable[str] | None) -> frozenset[str]:
    """The default view's single tools for a credential: those of toolsets it can use (the
    task loop's only where it may claim), and the discovery tool."""
    allowed = usable(scopes)
    may_claim = scopes is None or CLAIM_SCOPE in set(scopes)
    names = DEFAULT_TOOLS + (DEFAULT_TASK_TOOLS if may_claim else ())
    toolset_of = {d.name: d.toolset for d in CATALOGUE}
    return frozenset(n for n in names if toolset_of[n] in allowed) | {DISCOVERY_NAME}


def select(
    query: Mapping[str, str],
    headers: Mapping[str, str],
    scopes: Iterable[str] | None,
    enabled: frozenset[Toolset] = frozenset(),
) -> Selection:
    """The connection's view: the query string wins over the headers; without a choice, the
    default tools plus the toolsets enabled during the connection; the scopes narrow."""
    chosen = parse_toolsets(query.get("toolsets", headers.get(TOOLSETS_HEADER)))
    read_only = parse_read_only(query.get("readonly", headers.get(READ_ONLY_HEADER)))
    allowed = usable(scopes)
    if chosen is not None:
        return Selection(toolsets=chosen & allowed, read_only=read_only, usable=allowed)
    return Selection(
        toolsets=enabled & allowed,
        read_only=read_only,
        tools=default_tools(scopes),
        usable=allowed,
    )


# --- the enabled toolsets of a connection: a cookie the client carries ----------------------


def enabled_toolsets(headers: Mapping[str, str]) -> frozenset[Toolset]:
    """The toolsets the request's cookie names (unknown names, from another version, are
    ignored: the cookie only ever widens what is listed)."""
    cookie: SimpleCookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except CookieError:
        return frozenset()
    found = cookie.get(COOKIE)
    names = found.value.split(".") if found is not None else []
    return frozenset(name for name in TOOLSETS if name in names)


def set_cookie(enabled: frozenset[Toolset], path: str) -> bytes:
    value = ".".join(name for name in TOOLSETS if name in enabled)
    return f"{COOKIE}={value}; Path={path}; HttpOnly; SameSite=Strict".encode()


def answering(send: Send, state: Mapping[str, Any], path: str, accepts_sse: bool) -> Send:
    """`send` for an MCP request: once `toolsets_enable` has changed the enabled set
    (`state[ENABLED_KEY]`), its answer sets the cookie and, for a client that accepts SSE,
    becomes a two-event stream: `notifications/tools/list_changed`, then the JSON response."""
    start: list[Message] = []
    body = bytearray()

    async def wrapped(message: Message) -> None:
        enabled = state.get(ENABLED_KEY)
        if enabled is None:
            await send(message)
            return
        if message["type"] == "http.response.start":
            start.append(message)
            return
        if message["type"] != "http.response.body" or not start:
            await send(message)
            return
        body.extend(message.get("body", b""))
        if message.get("more_body", False):
            return
        await _send_enabling(send, start[0], bytes(body), set_cookie(enabled, path), accepts_sse)

    return wrapped


LIST_CHANGED: Final = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'


async def _send_enabling(
    send: Send, start: Message, body: bytes, cookie: bytes, accepts_sse: bool
) -> None:
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
    json_body = any(k.lower() == b"content-type" and b"json" in v for k, v in headers)
    if accepts_sse and json_body and start["status"] == 200:
        # one JSON-RPC message per line of an SSE `data:` field: compact JSON has no newline
        headers = [(k, v) for k, v in headers if k.lower() != b"content-type"]
        headers.append((b"content-type", b"text/event-stream"))
        response = b"".join(body.splitlines())
        body = b"".join(
            b"event: message\r\ndata: " + m + b"\r\n\r\n" for m in (LIST_CHANGED, response)
        )
    headers += [(b"content-length", str(len(body)).encode()), (b"set-cookie", cookie)]
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# --- the discovery tool ----------------------------------------------------------------------


class ToolsetsEnable(Arguments):
    toolset: Toolset | None = Field(default=None, description="Leave out to list the toolsets")


class ToolsetState(BaseModel):
    name: Toolset
    about: str
    tools: int
    enabled: bool


class ToolsetsEnabled(BaseModel):
    toolsets: list[ToolsetState]
    enabled: Toolset | None = None


def _lines() -> str:
    return "\n".join(f"{name}: {line}" for name, line in TOOLSET_LINES.items())


async def toolsets_enable(call: Call, args: ToolsetsEnable) -> ToolsetsEnabled:
    selection: Selection = call.state.get(SELECTION_KEY, EVERYTHING)
    shown = selection.toolsets
    if args.toolset is not None:
        if args.toolset not in selection.usable:
            raise MissingScope(
                f"This credential has none of the scopes of the {args.toolset} toolset "
                f"({', '.join(TOOLSET_SCOPES[args.toolset])})"
            )
        shown = shown | {args.toolset}
        call.state[ENABLED_KEY] = shown
    return ToolsetsEnabled(
        toolsets=[
            ToolsetState(
                name=name,
                about=TOOLSET_LINES[name],
                tools=sum(1 for d in CATALOGUE if d.toolset == name and not app_only(d)),
                enabled=name in shown,
            )
            for name in TOOLSETS
            if name in selection.usable
        ],
        enabled=args.toolset,
    )


def _enabled_text(result: dict[str, Any]) -> str:
    on = [t["name"] for t in result["toolsets"] if t["enabled"]]
    if result.get("enabled"):
        return f"Enabled {result['enabled']}; the tool list now has it (enabled: {', '.join(on)})."
    return f"Toolsets enabled: {', '.join(on) or 'none'}."


DISCOVERY: Final = ToolDef(
    name=DISCOVERY_NAME,
    description="Enable a toolset for this connection; the tool list then includes it.\n"
    + _lines(),
    arguments=ToolsetsEnable,
    output=ToolsetsEnabled,
    handler=toolsets_enable,
    read_only=True,  # it changes what the connection lists, nothing in the service
    destructive=False,
    idempotent=True,
    toolset="discovery",  # in no toolset: shown by name, in the default view only
    render=_enabled_text,
)


def default_view(scopes: Iterable[str] | None = None) -> list[ToolDef]:
    """The tools of the default view for a credential with these scopes (None: unknown)."""
    selection = select({}, {}, scopes)
    return [d for d in (*CATALOGUE, DISCOVERY) if selection.shows(d)]


# --- what a model is shown -------------------------------------------------------------------


def model_view(definition: ToolDef) -> dict[str, Any]:
    """What a model reads of a tool: its name, description and input schema."""
    return {
        "name": definition.name,
        "description": definition.description,
        "inputSchema": input_schema(definition.arguments),
    }


def model_bytes(definitions: Iterable[ToolDef]) -> int:
    """The catalogue's cost in a model's context: the compact JSON of each tool's view (app-only
    tools are kept from the model by the host and are not counted)."""
    return sum(
        len(json.dumps(model_view(d), separators=(",", ":"), ensure_ascii=False).encode())
        for d in definitions
        if not app_only(d)
    )


def toolset_bytes() -> dict[str, int]:
    return {name: model_bytes(d for d in CATALOGUE if d.toolset == name) for name in TOOLSETS}


# --- the server middleware -------------------------------------------------------------------


def unknown_tool(name: str) -> CallToolResult:
    """The SDK's own answer to a tool it does not have (tool_manager.call_tool)."""
    return CallToolResult(
        content=[TextContent(type="text", text=f"Unknown tool: {name}")], is_error=True
    )


class CatalogueView:
    """Server middleware: `tools/list` narrowed to the connection's selection and sorted by
    name; `tools/call` of a hidden tool refused as unknown. The catalogue is fixed at start-up,
    so each (protocol version, selection) listing is built once and answered from its wire
    form (building and checking the whole listing again was most of its time)."""

    def __init__(self) -> None:
        self._by_name = {d.name: d for d in (*CATALOGUE, DISCOVERY)}
        self._wire: dict[tuple[str, Selection], Any] = {}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        if ctx.method == "tools/list":
            return await self._list(ctx, call_next)
        if ctx.method == "tools/call":
            name = str((ctx.params or {}).get("name", ""))
            found = self._by_name.get(name)
            if found is not None and not selection_of(ctx).shows(found):
                return unknown_tool(name)
        return await call_next(ctx)

    async def _list(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        if (ctx.params or {}).get("cursor"):
            return await call_next(ctx)
        key = (ctx.protocol_version, selection_of(ctx))
        if key not in self._wire:
            self._wire[key] = self._narrowed(await call_next(ctx), key[1])
        return self._wire[key]

    def _narrowed(self, listed: Any, selection: Selection) -> Any:
        def shown(tool: Any) -> bool:
            name = tool.name if hasattr(tool, "name") else tool["name"]
            found = self._by_name.get(name)
            return found is None or selection.shows(found)

        def name_of(tool: Any) -> str:
            return str(tool.name if hasattr(tool, "name") else tool["name"])

        if isinstance(listed, dict):
            tools = sorted(filter(shown, listed["tools"]), key=name_of)
            return {**listed, "tools": tools}
        tools = sorted(filter(shown, listed.tools), key=name_of)
        return listed.model_copy(update={"tools": tools})


def selection_of(ctx: ServerRequestContext[Any, Any]) -> Selection:
    request = ctx.request
    state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
    found = state.get(SELECTION_KEY)
    return found if isinstance(found, Selection) else EVERYTHING
