"""Request steps: the workflows that are one short database write the API waits on, declared
instead of written (docs/contributing-workflows.md).

A declaration names the workflow type, the activity, the input and the result:

    @request_step("DiaryCreate", MemoryActivities.create_diary)
    class DiaryCreateWorkflow(RequestStep[DiaryCreateInput, None]): ...

and the run method is made from it: the step runs as a local activity with the request
timeout and retry policy (`workflows.common`), so the whole run is one workflow task and cannot
outlive a deploy. That is why a request step is pinned to its build (the worker's default) and
needs no replay history. The worker registers every request step it finds under workflows/
(`workers.registry`); the replay test exempts them all by the same reasoning.

What a declaration may change: `prepare`, a pure function from the workflow's input to the
activity's (it runs in the workflow, so it may mint an id with `workflow.uuid4()` or read
`workflow.info()`); `runner`, `run_local_step` for the steps written after `LOCAL_STEPS_PATCH`
(they record no patch marker; a step's runner is part of its history and never changes);
`start_to_close`, for a step longer than a row write.
"""

from __future__ import annotations

import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Generic, Protocol, TypeGuard, TypeVar, overload

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy

from workflows.common import SHORT_TIMEOUT, run_local_step, run_step

InT = TypeVar("InT")
ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")
ModelT = TypeVar("ModelT", bound=BaseModel)


class StepRunner(Protocol):
    """How a step runs: `run_step` or `run_local_step`."""

    def __call__(
        self,
        activity: Callable[[Any, ArgT], Awaitable[ResultT]],
        arg: ArgT,
        *,
        start_to_close: timedelta = ...,
        retry: RetryPolicy = ...,
    ) -> Awaitable[ResultT]: ...


# Both run the step as a local activity, in the workflow task that starts the run.
LOCAL_RUNNERS: tuple[StepRunner, ...] = (run_step, run_local_step)


@dataclass(frozen=True)
class StepDeclaration(Generic[InT, ArgT, ResultT]):
    """What `request_step` was told: the workflow type's name and its one step."""

    name: str
    activity: Callable[[Any, ArgT], Awaitable[ResultT]]
    prepare: Callable[[InT], ArgT]
    runner: StepRunner
    start_to_close: timedelta

    async def __call__(self, inp: InT) -> ResultT:
        arg = self.prepare(inp)
        return await self.runner(self.activity, arg, start_to_close=self.start_to_close)


class RequestStep(Generic[InT, ResultT]):
    """The base of a declared request step: `RequestStep[input model, result model]`."""

    declared: ClassVar[StepDeclaration[Any, Any, Any]]

    async def run(self, inp: InT) -> ResultT:
        result: ResultT = await self.declared(inp)
        return result


def _unchanged(inp: ArgT) -> ArgT:
    return inp


@overload
def request_step(
    name: str,
    activity: Callable[[Any, InT], Awaitable[ResultT]],
    *,
    runner: StepRunner = run_step,
    start_to_close: timedelta = SHORT_TIMEOUT,
) -> Callable[[type[RequestStep[InT, ResultT]]], type[RequestStep[InT, ResultT]]]: ...


@overload
def request_step(
    name: str,
    activity: Callable[[Any, ArgT], Awaitable[ResultT]],
    *,
    prepare: Callable[[InT], ArgT],
    runner: StepRunner = run_step,
    start_to_close: timedelta = SHORT_TIMEOUT,
) -> Callable[[type[RequestStep[InT, ResultT]]], type[RequestStep[InT, ResultT]]]: ...


def request_step(
    name: str,
    activity: Callable[[Any, Any], Awaitable[Any]],
    *,
    prepare: Callable[[Any], Any] = _unchanged,
    runner: StepRunner = run_step,
    start_to_close: timedelta = SHORT_TIMEOUT,
) -> Callable[[type[RequestStep[Any, Any]]], type[RequestStep[Any, Any]]]:
    """Declare the decorated `RequestStep` subclass as the workflow type `name` whose run is
    `activity(prepare(input))`, one local step (see the module)."""
    if runner not in LOCAL_RUNNERS:
        raise ValueError(f"{name}: a request step runs as a local activity (run_step)")
    declared = StepDeclaration(name, activity, prepare, runner, start_to_close)

    def declare(cls: type[RequestStep[Any, Any]]) -> type[RequestStep[Any, Any]]:
        run = _run_method(cls)
        # mypy refuses a method assigned to a class; Temporal wants the run method on the class
        setattr(cls, "run", run)  # noqa: B010
        cls.declared = declared
        return workflow.defn(name=name)(cls)

    return declare


def _run_method(cls: type[RequestStep[Any, Any]]) -> Callable[..., Awaitable[Any]]:
    """The class's own run method: Temporal finds it by its qualified name on the class and
    reads the payload types from its annotations (the class's `RequestStep[...]` arguments)."""
    input_type, result_type = _step_types(cls)

    async def run(self: RequestStep[Any, Any], inp: Any) -> Any:
        return await RequestStep.run(self, inp)

    run.__annotations__ = {"inp": input_type, "return": result_type}
    run.__qualname__ = f"{cls.__qualname__}.run"
    run.__module__ = cls.__module__
    return workflow.run(run)


def _step_types(cls: type) -> tuple[Any, Any]:
    for base in getattr(cls, "__orig_bases__", ()):
        if typing.get_origin(base) is RequestStep:
            input_type, result_type = typing.get_args(base)
            return input_type, result_type
    raise TypeError(f"{cls.__qualname__} must subclass RequestStep[input model, result model]")


def is_request_step(value: object) -> TypeGuard[type[RequestStep[Any, Any]]]:
    """True for a class declared with `request_step` (not for one merely deriving from one)."""
    return isinstance(value, type) and "declared" in vars(value)


def with_minted_id(field: str) -> Callable[[ModelT], ModelT]:
    """A `prepare` for a create whose new row's id the run mints when the API sent none: the
    run's `workflow.uuid4()` is the same in every replay of the run and every retry of its
    step."""

    def prepare(inp: ModelT) -> ModelT:
        if getattr(inp, field) is not None:
            return inp
        return inp.model_copy(update={field: workflow.uuid4()})

    return prepare
