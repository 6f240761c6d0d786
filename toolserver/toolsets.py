"""Which tools a connection sees: toolsets chosen per connection, narrowed by the credential's
scopes, and the read-only mode (DECISIONS.md, "Trust at the edges").

- `?toolsets=memory,tasks` on the MCP URL, or `X-Service-Toolsets: memory,tasks` (the query
  wins); default: every toolset the credential can use. An unknown name is a 400 at the gate.
- `?readonly=true` or `X-Service-Read-Only: true`: only tools annotated read-only.
- A toolset whose scopes the credential holds none of is not shown (a key without task scopes
  sees no task tools). Teams and identity need no scope; when the scopes cannot be learned
  (whoami refused), every toolset stays and the REST API judges each call as always.

`CatalogueView` applies the choice: `tools/list` lists the visible tools in a stable order
(by name), and a call to a hidden tool fails exactly as an unknown tool does. App-only tools
(`_meta.ui.visibility: ["app"]`) are never shown to a model and stay callable for the apps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from mcp.server.context import ServerRequestContext
from mcp_types import CallToolResult, TextContent

from toolserver import tools as _catalogue  # noqa: F401  (registers every tool)
from toolserver.registry import CATALOGUE, ToolDef, input_schema

Toolset = Literal["memory", "packs", "tasks", "teams", "identity", "crypto"]
TOOLSETS: Final[tuple[Toolset, ...]] = ("memory", "packs", "tasks", "teams", "identity", "crypto")
# a toolset is usable with any one of these scopes; an empty tuple: with none at all
TOOLSET_SCOPES: Final[Mapping[Toolset, tuple[str, ...]]] = {
    "memory": ("diary:read", "diary:write", "diary:delete", "diary:share"),
    "packs": ("pack:read", "pack:write"),
    "tasks": ("task:read", "task:write", "task:claim", "task:execute", "task:manage"),
    "teams": (),
    "identity": (),
    "crypto": ("crypto:sign",),
}
TOOLSETS_HEADER = "x-service-toolsets"
READ_ONLY_HEADER = "x-service-read-only"
SELECTION_KEY = "cairn.selection"  # where the auth gate leaves the connection's Selection
_TRUE = ("1", "true", "yes")
_FALSE = ("", "0", "false", "no")


class BadSelection(ValueError):
    """A toolset name or read-only flag the server does not know (the gate answers 400)."""


@dataclass(frozen=True)
class Selection:
    toolsets: frozenset[Toolset]
    read_only: bool = False

    def shows(self, definition: ToolDef) -> bool:
        if app_only(definition):
            return True
        if definition.toolset not in self.toolsets:
            return False
        return definition.read_only or not self.read_only


EVERYTHING: Final = Selection(frozenset(TOOLSETS))


def app_only(definition: ToolDef) -> bool:
    ui = (definition.meta or {}).get("ui", {})
    return bool(ui.get("visibility") == ["app"])


def parse_toolsets(raw: str | None) -> frozenset[Toolset] | None:
    """`memory,tasks` (commas and/or spaces) → the named toolsets; None when not given."""
    if raw is None:
        return None
    names = [name for name in raw.replace(",", " ").split() if name]
    unknown = sorted(set(names) - set(TOOLSETS))
    if unknown:
        raise BadSelection(
            f"Unknown toolset {', '.join(unknown)}; the toolsets are {', '.join(TOOLSETS)}"
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


def select(
    query: Mapping[str, str], headers: Mapping[str, str], scopes: Iterable[str] | None
) -> Selection:
    """The connection's view: the query string wins over the headers; the scopes narrow."""
    chosen = parse_toolsets(query.get("toolsets", headers.get(TOOLSETS_HEADER)))
    read_only = parse_read_only(query.get("readonly", headers.get(READ_ONLY_HEADER)))
    allowed = usable(scopes)
    return Selection(toolsets=allowed if chosen is None else chosen & allowed, read_only=read_only)


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
        self._by_name = {d.name: d for d in CATALOGUE}
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
