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
        problems += [
            f"{name}: {p}" for p in _schema_breaks(before["inputSchema"], after["inputSchema"])
        ]
    return problems


def _schema_breaks(old: dict[str, Any], new: dict[str, Any], at: str = "") -> list[str]:
    problems: list[str] = []
    old_props, new_props = old.get("properties", {}), new.get("properties", {})
    for name in old_props:
        if name not in new_props:
            problems.append(f"argument {at}{name} removed")
        else:
            problems += _narrowed(old_props[name], new_props[name], f"{at}{name}", old, new)
    newly_required = set(new.get("required", [])) - set(old.get("required", []))
    problems += [f"argument {at}{name} became required" for name in sorted(newly_required)]
    return problems


def _narrowed(
    old: Any, new: Any, at: str, old_root: dict[str, Any], new_root: dict[str, Any]
) -> list[str]:
    old, new = _resolve(old, old_root), _resolve(new, new_root)
    if _strip(old) == _strip(new):
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        if "properties" in old and "properties" in new:
            return _schema_breaks(old, new, at + ".")
        if "enum" in old and "enum" in new and set(old["enum"]) <= set(new["enum"]):
            rest = {k: v for k, v in _strip(old).items() if k != "enum"}
            if rest == {k: v for k, v in _strip(new).items() if k != "enum"}:
                return []
        if _only_bounds_widened(_strip(old), _strip(new)):
            return []
    return [f"argument {at} changed its schema"]


def _only_bounds_widened(old: dict[str, Any], new: dict[str, Any]) -> bool:
    upper = ("maximum", "maxLength", "maxItems")
    lower = ("minimum", "minLength", "minItems")
    for key in set(old) | set(new):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if key in upper and (b is None or (a is not None and b >= a)):
            continue
        if key in lower and (b is None or (a is not None and b <= a)):
            continue
        return False
    return True


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        return root.get("$defs", {}).get(schema["$ref"].removeprefix("#/$defs/"), schema)
    return schema


def _strip(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip(v) for k, v in schema.items() if k not in NOTES}
    if isinstance(schema, list):
        return [_strip(v) for v in schema]
    return schema


def main(argv: list[str]) -> None:
    text = json.dumps(current(), indent=2, sort_keys=True) + "\n"
    if "--write" in argv:
        SNAPSHOT.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
