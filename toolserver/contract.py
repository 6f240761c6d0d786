"""The tool contract of spec 9: tool names and input schemas, committed in `contract.json`.

Patch: no schema change. Minor: new tools, new optional arguments, wider arguments. A change
that can break a caller (a tool gone, an argument gone, newly required or narrowed) needs a
new major version, or, for a removed tool, a replacement that exists and a `deprecated` marker
in the old tool's description naming it ("Deprecated: use <tool> instead"), kept at least one
minor release. `breaking_changes(old, new)` finds them; tests/unit/test_mcp_contract.py holds
the line. Regenerate the file after an allowed change with
`python -m toolserver.contract --write`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from schemas.version import VERSION
from toolserver import tools as _catalogue  # noqa: F401  (registers every tool)
from toolserver.registry import CATALOGUE, input_schema

SNAPSHOT = Path(__file__).with_name("contract.json")
DEPRECATED = re.compile(r"deprecated\b.*?\buse (?P<replacement>[a-z][a-z0-9_]*)", re.I | re.S)
# keys that document a schema without constraining what a caller may send
NOTES = frozenset({"description", "title", "default", "examples"})


def current() -> dict[str, Any]:
    tools: dict[str, Any] = {}
    for definition in sorted(CATALOGUE, key=lambda d: d.name):
        marker = DEPRECATED.search(definition.description)
        tools[definition.name] = {
            "inputSchema": input_schema(definition.arguments),
            "replacedBy": marker["replacement"] if marker else None,
        }
    return {"version": VERSION, "tools": tools}


def committed() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    return loaded


def major(version: str) -> int:
    return int(version.split(".", 1)[0])


def breaking_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What would break a caller of `old` talking to `new`, unless the major version grew."""
    if major(new["version"]) > major(old["version"]):
        return []
    problems: list[str] = []
    for name, before in old["tools"].items():
        after = new["tools"].get(name)
        if after is None:
            replacement = before.get("replacedBy")
            if not replacement or replacement not in new["tools"]:
                problems.append(
                    f"{name}: removed without a deprecated release naming a replacement"
                )
            continue
        old_schema = _canonical(before["inputSchema"], before["inputSchema"])
        new_schema = _canonical(after["inputSchema"], after["inputSchema"])
        problems += [f"{name}: {p}" for p in _schema_breaks(old_schema, new_schema)]
    return problems


def _canonical(schema: Any, root: dict[str, Any]) -> Any:
    """A schema as a caller's arguments meet it: `$ref`s written out, notes and the closedness
    flag left aside (the server refuses unknown arguments either way), and an optional
    argument's `null` alternative folded in (the server takes null as not given)."""
    if isinstance(schema, list):
        return [_canonical(value, root) for value in schema]
    if not isinstance(schema, dict):
        return schema
    node = dict(schema)
    options = node.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        del node["anyOf"]
        (kept,) = [option for option in options if option != {"type": "null"}]
        node = {**kept, **node}
    ref = node.pop("$ref", None)
    if isinstance(ref, str):
        found = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
        return _canonical({**found, **node}, root)
    return {
        key: value if key in ("enum", "required") else _canonical(value, root)
        for key, value in node.items()
        if key not in NOTES and key not in ("additionalProperties", "$defs")
    }


def _schema_breaks(old: dict[str, Any], new: dict[str, Any], at: str = "") -> list[str]:
    problems: list[str] = []
    old_props, new_props = old.get("properties", {}), new.get("properties", {})
    for name in old_props:
        if name not in new_props:
            problems.append(f"argument {at}{name} removed")
        elif not _widened(old_props[name], new_props[name], f"{at}{name}", problems):
            problems.append(f"argument {at}{name} changed its schema")
    newly_required = set(new.get("required", [])) - set(old.get("required", []))
    problems += [f"argument {at}{name} became required" for name in sorted(newly_required)]
    return problems


UPPER = ("maximum", "maxLength", "maxItems")
LOWER = ("minimum", "minLength", "minItems")
# constraints whose absence accepts more
DROPPABLE = ("type", "format", "pattern", "enum")


def _widened(old: Any, new: Any, at: str, problems: list[str]) -> bool:
    """Whether every value `old` accepts, `new` accepts too (nested objects report their own
    problems into `problems`)."""
    if old == new:
        return True
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return False
    if "properties" in old and "properties" in new:
        problems += _schema_breaks(old, new, at + ".")
        rest_old = {k: v for k, v in old.items() if k not in ("properties", "required")}
        rest_new = {k: v for k, v in new.items() if k not in ("properties", "required")}
        return _widened(rest_old, rest_new, at, problems)
    for key in set(old) | set(new):
        a, b = old.get(key), new.get(key)
        if a == b or (b is None and key in UPPER + LOWER + DROPPABLE):
            continue
        if a is None:
            return False  # a constraint that was not there
        if (key in UPPER and b >= a) or (key in LOWER and b <= a):
            continue
        if key == "enum" and b is not None and set(a) <= set(b):
            continue
        if key == "items" and _widened(a, b, at + "[]", problems):
            continue
        return False
    return True


def main(argv: list[str]) -> None:
    text = json.dumps(current(), indent=2, sort_keys=True) + "\n"
    if "--write" in argv:
        SNAPSHOT.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
