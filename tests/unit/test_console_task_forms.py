"""A task type's input schema as form controls, and typed values back as the input
(api/console/task_forms.py): each JSON Schema shape gets its control and HTML constraints;
values that do not convert are passed on as typed, for the route's 400 to name."""

from __future__ import annotations

from api.console.task_forms import InputField, input_fields, input_of
from schemas.kernel.task_types import TASK_TYPES, input_schema

SCHEMA = {
    "type": "object",
    "properties": {
        "brief": {"type": "string", "minLength": 1},
        "label": {"type": "string", "minLength": 1, "maxLength": 80},
        "slug": {"type": "string", "pattern": "^[a-z]+$"},
        "taskId": {"type": "string", "format": "uuid"},
        "mode": {"type": "string", "enum": ["vitro", "vivo"]},
        "attemptN": {"type": "integer", "minimum": 1},
        "weight": {"type": "number", "minimum": 0, "maximum": 1},
        "dryRun": {"type": "boolean"},
        "files": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "kinds": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "execution": {"type": "object"},
        "bindings": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["brief", "mode", "dryRun"],
}


def by_name() -> dict[str, InputField]:
    return {f.name: f for f in input_fields(SCHEMA)}


def test_each_shape_gets_its_control_and_constraints() -> None:
    fields = by_name()
    assert list(fields) == list(SCHEMA["properties"])  # the schema's order
    assert (fields["brief"].control, fields["brief"].attrs) == ("textarea", {"minlength": 1})
    assert fields["brief"].required and not fields["label"].required
    assert (fields["label"].control, fields["label"].attrs["maxlength"]) == ("text", 80)
    assert fields["slug"].attrs == {"pattern": "^[a-z]+$"} and fields["slug"].control == "text"
    assert fields["taskId"].control == "text"
    assert (fields["mode"].control, fields["mode"].options) == ("select", ("vitro", "vivo"))
    assert fields["attemptN"].attrs == {"step": 1, "min": 1}
    assert fields["weight"].attrs == {"step": "any", "min": 0, "max": 1}
    assert fields["dryRun"].control == "checkbox"
    assert fields["files"].control == "lines" and "One per line" in (fields["files"].hint or "")
    assert fields["kinds"].control == "lines" and "each one of: a, b" in (
        fields["kinds"].hint or ""
    )
    assert fields["execution"].control == "json" and fields["bindings"].control == "json"
    assert fields["brief"].form_name == "input.brief"


def test_typed_values_become_the_input() -> None:
    typed = {
        "brief": "Chart it",
        "mode": "vivo",
        "attemptN": "2",
        "weight": "0.5",
        "files": "a.txt\n\n  b.txt \n",
        "execution": '{"mode": "vitro"}',
    }
    assert input_of(input_fields(SCHEMA), typed) == {
        "brief": "Chart it",
        "mode": "vivo",
        "attemptN": 2,
        "weight": 0.5,
        "dryRun": False,  # a required box left unticked is an answer
        "files": ["a.txt", "b.txt"],
        "execution": {"mode": "vitro"},
    }
    assert input_of(input_fields(SCHEMA), {"dryRun": "true"})["dryRun"] is True


def test_values_that_do_not_convert_are_sent_as_typed() -> None:
    typed = {"attemptN": "two", "execution": "{not json"}
    assert input_of(input_fields(SCHEMA), typed) == {
        "attemptN": "two",
        "execution": "{not json",
        "dryRun": False,
    }


def test_every_registered_type_has_a_form() -> None:
    for task_type in TASK_TYPES:
        schema = input_schema(task_type)
        fields = input_fields(schema)
        assert [f.name for f in fields] == list(schema["properties"]), task_type.name
        assert {f.name for f in fields if f.required} == set(schema.get("required", ()))
