"""The catalogue a model is shown (toolserver.toolsets, toolserver.registry.input_schema): its
size budgets, that trimming kept what a call needs, and how a connection's selection is read."""

from __future__ import annotations

from typing import Any

import pytest

from toolserver.contract import _canonical, breaking_changes, current
from toolserver.registry import CATALOGUE, ToolDef, input_schema
from toolserver.toolsets import (
    EVERYTHING,
    TOOLSETS,
    BadSelection,
    Selection,
    app_only,
    model_bytes,
    parse_read_only,
    parse_toolsets,
    select,
    toolset_bytes,
    usable,
)

# issue 25: 41.6 KB and 11.8 KB of compact JSON on main d6ab204; issue 33 §2 adds one memory
# tool, `diaries_import` (0.3 KB: its name, three arguments and a one-line description)
CATALOGUE_BUDGET = 20_300
# The issue asked for 5 KB; the memory tools' names, argument names, required lists, enums and
# formats alone come to about 5.3 KB, so the budget is what is left once nothing a call needs
# is dropped (see the report of issue 25); plus `diaries_import` (issue 33 §2).
MEMORY_BUDGET = 6_300


def test_the_catalogue_a_model_reads_fits_its_budget() -> None:
    assert model_bytes(CATALOGUE) <= CATALOGUE_BUDGET
    assert toolset_bytes()["memory"] <= MEMORY_BUDGET


def test_every_model_visible_tool_belongs_to_one_known_toolset() -> None:
    for definition in CATALOGUE:
        assert definition.toolset in TOOLSETS, definition.name
    sizes = toolset_bytes()
    assert set(sizes) == set(TOOLSETS)
    assert sum(sizes.values()) == model_bytes(CATALOGUE)


def _facts(schema: Any, at: str = "") -> set[tuple[str, str, str]]:
    """What a caller must know of a schema: argument paths, their required-ness, enums, formats,
    and types (an enum's or format's type is implied by it)."""
    found: set[tuple[str, str, str]] = set()
    if not isinstance(schema, dict):
        return found
    for name in schema.get("required", []):
        found.add((f"{at}{name}", "required", ""))
    for name, sub in schema.get("properties", {}).items():
        path = f"{at}{name}"
        found.add((path, "argument", ""))
        found |= _leaf(sub, path)
        found |= _facts(sub, path + ".")
        if isinstance(sub, dict) and isinstance(sub.get("items"), dict):
            found |= _leaf(sub["items"], path + "[]")
            found |= _facts(sub["items"], path + "[].")
    return found


def _leaf(schema: Any, path: str) -> set[tuple[str, str, str]]:
    if not isinstance(schema, dict):
        return set()
    found = set()
    if "enum" in schema:
        found.add((path, "enum", repr(sorted(map(str, schema["enum"])))))
    if "format" in schema:
        found.add((path, "format", schema["format"]))
    if "type" in schema and "enum" not in schema and "format" not in schema:
        found.add((path, "type", str(schema["type"])))
    return found


@pytest.mark.parametrize("definition", CATALOGUE, ids=lambda d: d.name)
def test_trimming_keeps_every_argument_requirement_enum_and_format(definition: ToolDef) -> None:
    full = definition.arguments.model_json_schema(by_alias=True)
    shown = input_schema(definition.arguments)
    assert _facts(_canonical(shown, shown)) == _facts(_canonical(full, full))
    assert shown["type"] == "object"


def test_the_compact_schemas_are_compatible_with_the_full_ones() -> None:
    """The contract checker sees pydantic's full schema and the compact one as the same
    promise to callers (null folded in, `$ref`s written out, notes set aside)."""
    full = {
        "version": "0.2.0",
        "tools": {
            d.name: {
                "inputSchema": d.arguments.model_json_schema(by_alias=True),
                "replacedBy": None,
            }
            for d in CATALOGUE
        },
    }
    assert breaking_changes(full, current()) == []


def test_a_narrowing_inside_a_nested_array_item_is_still_a_break() -> None:
    old = current()
    old["version"] = "1.0.0"
    new = current()
    new["version"] = "1.1.0"
    references = new["tools"]["tasks_create"]["inputSchema"]["properties"]["references"]
    references["items"]["properties"]["role"]["enum"] = ["context"]
    assert breaking_changes(old, new) == [
        "tasks_create: argument references[].role changed its schema"
    ]


def test_toolsets_parse_and_unknown_names_are_refused() -> None:
    assert parse_toolsets(None) is None
    assert parse_toolsets("memory, tasks") == frozenset({"memory", "tasks"})
    assert parse_toolsets("") == frozenset()
    with pytest.raises(BadSelection, match="everything"):
        parse_toolsets("memory,everything")
    assert parse_read_only("true") and parse_read_only("1") and not parse_read_only(None)
    with pytest.raises(BadSelection):
        parse_read_only("maybe")


def test_scopes_narrow_the_toolsets() -> None:
    assert usable(None) == frozenset(TOOLSETS)
    assert usable(["task:read", "task:claim"]) == frozenset({"tasks", "teams", "identity"})
    assert usable(["diary:read", "crypto:sign"]) == frozenset(
        {"memory", "crypto", "teams", "identity"}
    )
    chosen = select({"toolsets": "tasks,packs"}, {}, ["pack:read"])
    assert chosen == Selection(frozenset({"packs"}))
    by_header = select({}, {"x-service-toolsets": "memory", "x-service-read-only": "1"}, None)
    assert by_header == Selection(frozenset({"memory"}), read_only=True)
    # the query wins over the header
    assert select({"toolsets": "crypto"}, {"x-service-toolsets": "tasks"}, None).toolsets == {
        "crypto"
    }


def test_read_only_shows_read_only_tools_and_the_apps_own_tools() -> None:
    read_only = Selection(frozenset(TOOLSETS), read_only=True)
    shown = {d.name for d in CATALOGUE if read_only.shows(d)}
    assert shown == {d.name for d in CATALOGUE if d.read_only or app_only(d)}
    nothing = Selection(frozenset())
    assert {d.name for d in CATALOGUE if nothing.shows(d)} == {
        d.name for d in CATALOGUE if app_only(d)
    }
    assert all(EVERYTHING.shows(d) for d in CATALOGUE)
