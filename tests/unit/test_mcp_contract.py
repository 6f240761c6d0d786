"""Spec 9 for the MCP server: the committed `tools/list` contract (names and input schemas)
changes only compatibly unless the major version changes or a deprecated replacement exists."""

from __future__ import annotations

import copy
from typing import Any

from toolserver.contract import breaking_changes, committed, current


def test_the_catalogue_has_no_breaking_change_against_the_committed_contract() -> None:
    assert breaking_changes(committed(), current()) == []


def test_the_committed_contract_is_current() -> None:
    """Run `python -m toolserver.contract --write` after an allowed change, and commit it."""
    assert committed()["tools"] == current()["tools"]


def _bumped(contract: dict[str, Any], version: str) -> dict[str, Any]:
    changed = copy.deepcopy(contract)
    changed["version"] = version
    return changed


def test_the_check_fails_on_each_kind_of_breaking_change() -> None:
    old = current()
    old["version"] = "1.4.0"

    removed = _bumped(old, "1.5.0")
    del removed["tools"]["entries_get"]
    assert breaking_changes(old, removed) == [
        "entries_get: removed without a deprecated release naming a replacement"
    ]

    required = _bumped(old, "1.5.0")
    required["tools"]["entries_list"]["inputSchema"]["required"].append("limit")
    assert breaking_changes(old, required) == ["entries_list: argument limit became required"]

    dropped = _bumped(old, "1.5.0")
    del dropped["tools"]["entries_list"]["inputSchema"]["properties"]["offset"]
    assert breaking_changes(old, dropped) == ["entries_list: argument offset removed"]

    narrowed = _bumped(old, "1.5.0")
    narrowed["tools"]["entries_list"]["inputSchema"]["properties"]["limit"]["maximum"] = 10
    assert breaking_changes(old, narrowed) == ["entries_list: argument limit changed its schema"]

    retyped = _bumped(old, "1.5.0")
    retyped["tools"]["tasks_cancel"]["inputSchema"]["properties"]["reason"] = {"type": "integer"}
    assert breaking_changes(old, retyped) == ["tasks_cancel: argument reason changed its schema"]


def test_compatible_changes_and_allowed_breaks_pass() -> None:
    old = current()
    old["version"] = "1.4.0"

    additive = _bumped(old, "1.5.0")
    additive["tools"]["entries_new"] = {"inputSchema": {"type": "object"}, "replacedBy": None}
    schema = additive["tools"]["entries_list"]["inputSchema"]
    schema["properties"]["cursor"] = {"type": "string"}  # a new optional argument
    schema["properties"]["limit"]["maximum"] = 500  # a wider one
    schema["properties"]["limit"]["description"] = "reworded"
    assert breaking_changes(old, additive) == []

    major = _bumped(old, "2.0.0")
    del major["tools"]["entries_get"]
    assert breaking_changes(old, major) == []

    # removing a tool is fine once a release marked it deprecated, naming a replacement
    deprecated = copy.deepcopy(old)
    deprecated["tools"]["entries_get"]["replacedBy"] = "entries_read"
    later = _bumped(deprecated, "1.6.0")
    del later["tools"]["entries_get"]
    assert breaking_changes(deprecated, later) == [
        "entries_get: removed without a deprecated release naming a replacement"
    ]
    later["tools"]["entries_read"] = copy.deepcopy(old["tools"]["entries_get"])
    assert breaking_changes(deprecated, later) == []
