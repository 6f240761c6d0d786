"""The request-step declaration (`workflows.steps`): what Temporal is told about a declared
step, and the declarations it refuses (runs: tests/workflow_runs/test_request_step_runs.py)."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from temporalio import workflow

from workers.registry import REQUEST_STEPS
from workflows.common import run_activity
from workflows.diaries import DiaryCreateWorkflow
from workflows.steps import RequestStep, request_step
from workflows.vouchers import VoucherIssueWorkflow


def declared_models(cls: type[RequestStep[Any, Any]]) -> tuple[Any, Any]:
    [base] = [base for base in cls.__orig_bases__ if typing.get_origin(base) is RequestStep]  # type: ignore[attr-defined]
    input_model, result_model = typing.get_args(base)
    return input_model, result_model


@pytest.mark.parametrize("cls", REQUEST_STEPS, ids=lambda cls: cls.__qualname__)
def test_temporal_reads_the_declared_name_and_models(cls: type[RequestStep[Any, Any]]) -> None:
    """The payload converter decodes the input and the result as the declared models (and the
    API reads its result type from the same run method)."""
    definition = workflow._Definition.must_from_class(cls)
    input_model, result_model = declared_models(cls)
    assert definition.name == cls.declared.name
    assert definition.arg_types == [input_model]
    assert definition.ret_type is result_model
    assert workflow._Definition.must_from_run_fn(cls.run) is definition


@pytest.mark.parametrize("cls", REQUEST_STEPS, ids=lambda cls: cls.__qualname__)
def test_the_activity_takes_the_prepared_input_and_gives_the_result(
    cls: type[RequestStep[Any, Any]],
) -> None:
    input_model, result_model = declared_models(cls)
    prepared = typing.get_type_hints(cls.declared.prepare)["return"]
    if isinstance(prepared, typing.TypeVar):  # no `prepare`: the input as it came
        prepared = input_model
    activity = typing.get_type_hints(cls.declared.activity)
    assert list(activity.values()) == [prepared, result_model]


def test_a_step_is_refused_unless_it_runs_as_a_local_activity() -> None:
    # a regular activity is a task of its own: the run could outlive a deploy, and its exemption
    # from replay histories would be wrong
    with pytest.raises(ValueError, match="local activity"):
        request_step("Refused", DiaryCreateWorkflow.declared.activity, runner=run_activity)


def test_a_step_is_refused_without_its_models() -> None:
    declare = request_step("Refused", VoucherIssueWorkflow.declared.activity)
    with pytest.raises(TypeError, match="RequestStep"):

        @declare
        class Unmodelled(RequestStep):  # type: ignore[type-arg]
            pass
