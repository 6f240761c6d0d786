"""What every workflow shares: retry policies and turning a DomainError into a failure that the
API reads back as the same problem."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ApplicationError

from cairn.schemas.errors import DomainError
from cairn.schemas.queues import embedding_queue_for

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")

# Synchronous request workflows: a transient fault is retried briefly, then surfaces as an error
# (and the workflow compensates) instead of holding the caller forever.
REQUEST_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=100),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=2),
    maximum_attempts=3,
)
SHORT_TIMEOUT = timedelta(seconds=10)


def domain_failure(error: DomainError) -> ApplicationError:
    return ApplicationError(
        error.detail,
        error.to_problem().model_dump(mode="json", exclude_none=True),
        type=error.instance_code,
        non_retryable=True,
    )


async def run_step(
    activity: Callable[[Any, ArgT], Awaitable[ResultT]],
    arg: ArgT,
    *,
    start_to_close: timedelta = SHORT_TIMEOUT,
    retry: RetryPolicy = REQUEST_RETRY,
) -> ResultT:
    """One activity step of a request workflow, with the shared timeout and retry policy."""
    return await workflow.execute_activity_method(
        activity, arg, start_to_close_timeout=start_to_close, retry_policy=retry
    )


async def run_local_step(
    activity: Callable[[Any, ArgT], Awaitable[ResultT]],
    arg: ArgT,
    *,
    start_to_close: timedelta = SHORT_TIMEOUT,
    retry: RetryPolicy = REQUEST_RETRY,
) -> ResultT:
    """A step run as a local activity: in the worker that runs the workflow, recorded in the
    same workflow task. For short database writes on a latency-sensitive path it saves the two
    server round trips of a regular activity; it must stay short (well under the task timeout)."""
    return await workflow.execute_local_activity_method(
        activity, arg, start_to_close_timeout=start_to_close, retry_policy=retry
    )


# Custom search attributes an operator filters by in the Temporal UI (registered by `cairn dev`).
TEAM_ID = SearchAttributeKey.for_keyword("TeamId")
TASK_TYPE = SearchAttributeKey.for_keyword("TaskType")
DIARY_ID = SearchAttributeKey.for_keyword("DiaryId")
AGENT_ID = SearchAttributeKey.for_keyword("AgentId")


def embedding_task_queue() -> str:
    """Where this workflow's embedding activities run (the worker polls the paired queue)."""
    return embedding_queue_for(workflow.info().task_queue)
