"""A task type's input schema as an HTML form, and the form's fields back as the task's input.

The form is generated on the server from the schema `GET /tasks/schemas` answers, one control
per top-level property, carrying the schema's constraints as HTML attributes (`required`,
`minlength`, `maxlength`, `pattern`, `min`, `max`) so the browser checks them before sending.
The REST route validates the input again (its 400 names each field by pointer): this module
only converts what a person typed into JSON values, and a value it cannot convert (a number
that is not one, JSON that does not parse) is sent as typed, for the route to refuse with its
pointer, so there is one validator of a task's input, the route's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Control = Literal["text", "textarea", "select", "number", "checkbox", "lines", "json"]
Attrs = dict[str, str | int | float]  # HTML constraint attributes of a control
Shape = tuple[Control, Attrs, tuple[str, ...]]  # a control, its attributes, a select's options
# a string with a bound at most this long is a one-line input; longer or unbounded: a textarea
ONE_LINE_MAX_CHARS: Final = 200
# what the page's form names each input field: `input.<property>`
INPUT_PREFIX: Final = "input."


@dataclass(frozen=True)
class InputField:
    """One property of a type's input as a form control."""

    name: str
    control: Control
    required: bool
    attrs: Attrs = field(default_factory=dict)
    options: tuple[str, ...] = ()
    hint: str | None = None

    @property
    def form_name(self) -> str:
        return INPUT_PREFIX + self.name

    @property
    def dom_id(self) -> str:
        return f"input-{self.name}"


def input_fields(schema: Mapping[str, Any]) -> list[InputField]:
    """The controls of an input schema's top-level properties, in the schema's order."""
    required = set(schema.get("required", ()))
    properties: Mapping[str, Any] = schema.get("properties", {})
    return [_field(name, prop, name in required) for name, prop in properties.items()]


def _field(name: str, prop: Mapping[str, Any], required: bool) -> InputField:
    control, attrs, options = _control(prop)
    hint = prop.get("description")
    if control == "lines":
        allowed = prop["items"].get("enum")
        hint = _joined(
            hint,
            f"One per line, each one of: {', '.join(allowed)}." if allowed else "One per line.",
        )
    elif control == "json":
        hint = _joined(hint, "JSON.")
    return InputField(name, control, required, attrs, options, hint)


def _joined(first: str | None, second: str) -> str:
    return second if not first else f"{first}. {second}"


def _control(prop: Mapping[str, Any]) -> Shape:
    kind = prop.get("type")
    enum = prop.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        return "select", {}, tuple(enum)
    if kind == "string":
        return _string(prop)
    if kind in ("integer", "number"):
        attrs: Attrs = {"step": 1 if kind == "integer" else "any"}
        for keyword, attr in (("minimum", "min"), ("maximum", "max")):
            if isinstance(prop.get(keyword), int | float):
                attrs[attr] = prop[keyword]
        return "number", attrs, ()
    if kind == "boolean":
        return "checkbox", {}, ()
    items = prop.get("items")
    if kind == "array" and isinstance(items, Mapping) and items.get("type") == "string":
        return "lines", {}, ()
    return "json", {}, ()


def _string(prop: Mapping[str, Any]) -> Shape:
    attrs: Attrs = {}
    if isinstance(prop.get("minLength"), int):
        attrs["minlength"] = prop["minLength"]
    if isinstance(prop.get("maxLength"), int):
        attrs["maxlength"] = prop["maxLength"]
    longest = prop.get("maxLength")
    # a pattern or a format (uuid, uri, ...) shapes one value; a short bound, one line of text
    one_line = (
        "pattern" in prop
        or "format" in prop
        or (isinstance(longest, int) and longest <= ONE_LINE_MAX_CHARS)
    )
    if not one_line:
        return "textarea", attrs, ()
    if "pattern" in prop:
        attrs["pattern"] = prop["pattern"]
    return "text", attrs, ()


def input_of(fields: list[InputField], typed: Mapping[str, str]) -> dict[str, Any]:
    """The task's `input` from what was typed (`typed` by property name; empty is absent)."""
    task_input: dict[str, Any] = {}
    for spec in fields:
        raw = typed.get(spec.name)
        if raw is None:
            if spec.control == "checkbox" and spec.required:
                task_input[spec.name] = False  # an unticked box is an answer: no
            continue
        task_input[spec.name] = _value(spec, raw)
    return task_input


def _value(spec: InputField, raw: str) -> Any:
    if spec.control == "checkbox":
        return True
    if spec.control == "number":
        return _number(raw, integer=spec.attrs.get("step") == 1)
    if spec.control == "lines":
        return [line.strip() for line in raw.splitlines() if line.strip()]
    if spec.control == "json":
        return parsed_json(raw)
    return raw


def _number(raw: str, *, integer: bool) -> Any:
    try:
        return int(raw) if integer else float(raw)
    except ValueError:
        return raw  # the route's 400 names the field


def parsed_json(raw: str) -> Any:
    """JSON text as its value; text that is no JSON stays text (the route's 400 names it)."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw
