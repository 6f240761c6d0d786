"""The request guards hold for every model the API parses: text every store can hold (no NUL,
no lone surrogate; 400 naming the JSON pointer), integers bounded where they are declared, and
array query parameters that take the repeated key and the comma form."""

from __future__ import annotations

import types
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Any, Union, get_args, get_origin

import annotated_types
import pytest
from multidict import MultiDict
from pydantic import AwareDatetime, BaseModel, NaiveDatetime
from pydantic.fields import FieldInfo

import api.app  # noqa: F401  (registers every route)
from api.endpoint import ENDPOINTS, array_parameters, query_values, validate_model
from api.openapi import build_openapi
from schemas.base import DATE_TIME_TEXT, RequestBody
from schemas.errors import ValidationFailed
from schemas.memory import EntryCreateRequest, EntryListQuery
from schemas.packs import PackCreateRequest
from schemas.task_api import TaskListQuery

REQUEST_MODELS = {
    model
    for spec in ENDPOINTS
    for model in (spec.body, spec.query, spec.path_params)
    if model is not None
}
QUERY_MODELS = {spec.query for spec in ENDPOINTS if spec.query is not None}


def test_every_body_query_and_path_model_is_a_request_body() -> None:
    """The text guard lives in RequestBody: a model outside it would go unguarded."""
    assert sorted(m.__name__ for m in REQUEST_MODELS if not issubclass(m, RequestBody)) == []


# --- text -----------------------------------------------------------------------------------


def _problem(model: type[BaseModel], data: Any, where: str = "body") -> ValidationFailed:
    with pytest.raises(ValidationFailed) as caught:
        validate_model(model, data, where)
    return caught.value


@pytest.mark.parametrize("bad", ["a\x00b", "\ud800", "x\udfffy"])
def test_unstorable_text_in_a_list_is_named_by_its_pointer(bad: str) -> None:
    problem = _problem(EntryCreateRequest, {"content": "fine", "tags": ["a", "b", "c", bad]})
    assert [e.pointer for e in problem.errors or []] == ["/tags/3"]
    assert "/tags/3" in problem.detail


def test_unstorable_text_in_a_free_form_object_key_or_value_is_named() -> None:
    body = {"entries": [{"entryId": "0" * 32, "rank": 1}], "params": {"k": {"a/b~": "\x00"}}}
    assert [e.pointer for e in _problem(PackCreateRequest, body).errors or []] == [
        "/params/k/a~1b~0"
    ]
    body["params"] = {"x\ud800": 1}
    assert [e.pointer for e in _problem(PackCreateRequest, body).errors or []] == [
        "/params/x\\ud800"
    ]


def test_unstorable_text_in_a_query_value_is_named_under_query() -> None:
    problem = _problem(TaskListQuery, {"cursor": "abc\x00"}, "query")
    assert [e.pointer for e in problem.errors or []] == ["/query/cursor"]


def test_storable_text_passes_unchanged() -> None:
    text = "naïve ☃ \U0001f600 \t\n"
    assert validate_model(EntryCreateRequest, {"content": text}, "body").content == text


# --- date-times -----------------------------------------------------------------------------


def _date_time_fields(
    model: type[BaseModel], seen: set[type[BaseModel]]
) -> Iterator[tuple[str, bool]]:
    """(field, guarded by DATE_TIME_TEXT) for every date-time reachable from the model."""
    if model in seen:
        return
    seen.add(model)
    for name, field in model.model_fields.items():
        where = f"{model.__name__}.{name}"
        yield from _date_times(field.annotation, list(field.metadata), where, seen)


def _date_times(
    annotation: Any, metadata: list[Any], where: str, seen: set[type[BaseModel]]
) -> Iterator[tuple[str, bool]]:
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *extra = get_args(annotation)
        yield from _date_times(inner, [*metadata, *extra], where, seen)
    elif origin is not None:
        for arg in get_args(annotation):
            yield from _date_times(arg, metadata if origin in (Union, types.UnionType) else [],
                                   where, seen)  # fmt: skip
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield from _date_time_fields(annotation, seen)
    elif annotation in (datetime, AwareDatetime, NaiveDatetime):
        yield where, DATE_TIME_TEXT in metadata


def test_every_request_date_time_is_read_as_rfc_3339_text() -> None:
    """Lax pydantic reads a number, or a numeric string like `0.5`, as Unix time: every date-time
    a request carries goes through the one guard (schemas.base DATE_TIME_TEXT) instead."""
    seen: set[type[BaseModel]] = set()
    fields = [found for model in REQUEST_MODELS for found in _date_time_fields(model, seen)]
    assert len(fields) >= 9  # asOf (3), createdBefore/After, expiresAt (2), daemon state (2)
    assert sorted(where for where, guarded in fields if not guarded) == []


@pytest.mark.parametrize("value", ["0.5", "1732700000", "2026-11-27", "yesterday"])
def test_an_as_of_that_is_no_rfc_3339_date_time_is_a_400_naming_it(value: str) -> None:
    problem = _problem(EntryListQuery, {"asOf": value}, "query")
    assert [e.pointer for e in problem.errors or []] == ["/query/asOf"]


def test_an_rfc_3339_as_of_passes() -> None:
    query = validate_model(EntryListQuery, {"asOf": "2026-01-02T03:04:05.123+01:00"}, "query")
    assert query.asOf == datetime(2026, 1, 2, 2, 4, 5, 123000, tzinfo=UTC)


# --- integers -------------------------------------------------------------------------------


def _int_fields(model: type[BaseModel], seen: set[type[BaseModel]]) -> Iterator[tuple[str, bool]]:
    """(field, has an upper bound) for every int reachable from the model's fields."""
    if model in seen:
        return
    seen.add(model)
    for name, field in model.model_fields.items():
        yield from _ints(field.annotation, list(field.metadata), f"{model.__name__}.{name}", seen)


def _ints(
    annotation: Any, metadata: list[Any], where: str, seen: set[type[BaseModel]]
) -> Iterator[tuple[str, bool]]:
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *extra = get_args(annotation)
        yield from _ints(inner, [*metadata, *extra], where, seen)
    elif origin in (Union, types.UnionType):
        for option in get_args(annotation):
            yield from _ints(option, metadata, where, seen)
    elif origin is not None:  # list[...], dict[...]: the items carry their own bounds
        for arg in get_args(annotation):
            yield from _ints(arg, [], f"{where}[]", seen)
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield from _int_fields(annotation, seen)
    elif annotation is int:
        flat = [m for item in metadata for m in _constraints(item)]
        yield where, any(isinstance(m, (annotated_types.Le, annotated_types.Lt)) for m in flat)


def _constraints(item: Any) -> list[Any]:
    return list(item.metadata) if isinstance(item, FieldInfo) else [item]


def test_every_request_integer_has_an_upper_bound() -> None:
    seen: set[type[BaseModel]] = set()
    fields = [found for model in REQUEST_MODELS for found in _int_fields(model, seen)]
    assert len(fields) > 30  # the walk reaches nested models (PackSelection.rank, Usage...)
    assert sorted(where for where, bounded in fields if not bounded) == []


def test_a_pack_rank_beyond_a_postgres_integer_is_a_400_naming_it() -> None:
    body = {"entries": [{"entryId": "0" * 32, "rank": 121660867788975}]}
    assert [e.pointer for e in _problem(PackCreateRequest, body).errors or []] == [
        "/entries/0/rank"
    ]


# --- array query parameters -----------------------------------------------------------------


def test_task_filters_take_the_repeated_key_the_comma_form_and_both() -> None:
    for query in (
        MultiDict([("taskTypes", "freeform"), ("taskTypes", "pr_review")]),
        MultiDict([("taskTypes", "freeform,pr_review")]),
        MultiDict([("taskTypes", "freeform"), ("taskTypes", " pr_review,")]),
    ):
        parsed = validate_model(TaskListQuery, query_values(TaskListQuery, query), "query")
        assert parsed.type_filter() == ["freeform", "pr_review"]


@pytest.mark.parametrize("model", sorted(QUERY_MODELS, key=lambda m: m.__name__), ids=str)
def test_every_array_query_parameter_gathers_repeats_and_commas(model: type[BaseModel]) -> None:
    for name in array_parameters(model):
        repeated = query_values(model, MultiDict([(name, "a"), (name, "b"), (name, "c")]))
        comma = query_values(model, MultiDict([(name, "a,b"), (name, "c")]))
        assert repeated == comma == {name: ["a", "b", "c"]}
    scalars = set(model.model_fields) - array_parameters(model)
    for name in scalars:  # one value: its commas are its own, and a second one is refused
        assert query_values(model, MultiDict([(name, "x,y")])) == {name: "x,y"}
        with pytest.raises(ValidationFailed) as refused:
            query_values(model, MultiDict([(name, "x"), (name, "z")]))
        assert refused.value.errors is not None
        assert refused.value.errors[0].pointer == f"/query/{name}"


def test_openapi_documents_array_query_parameters_as_repeatable() -> None:
    operation = build_openapi("http://test")["paths"]["/tasks"]["get"]
    params = {p["name"]: p for p in operation["parameters"]}
    for name in ("taskTypes", "statuses"):
        assert (params[name]["style"], params[name]["explode"]) == ("form", True)
        assert "comma" in params[name]["description"]
