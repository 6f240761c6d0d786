"""What every workflow shares: retry policies and turning a DomainError into a failure that the
API reads back as the same problem."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar
from uuid import UUID

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy, SearchAttributeKey, VersioningBehavior
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

from schemas import limits
from schemas.errors import DomainError
from schemas.priorities import PRIORITY_KEYS, WorkKind, fairness_key
from schemas.queues import embedding_queue_for

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

# Workers are versioned (workers/versioning.py) and pin a run to the build it started on, which
# suits a request that ends in seconds. A workflow that can outlive a deploy (waits on people or
# timers, loops over pages, continues as new) declares this instead: it moves to the current
# build at its next workflow task, so its code changes keep to `workflow.patched()`.
LONG_LIVED = VersioningBehavior.AUTO_UPGRADE
# A long activity (`activities.heartbeats`) reports at least this often: a killed worker's
# attempt is retried elsewhere this long after its last report, not at `start_to_close`.
LONG_STEP_HEARTBEAT = timedelta(seconds=limits.ACTIVITY_HEARTBEAT_TIMEOUT_SEC)


def domain_failure(error: DomainError) -> ApplicationError:
    return ApplicationError(
        error.detail,
        error.to_problem().model_dump(mode="json", exclude_none=True),
        type=error.instance_code,
        non_retryable=True,
    )


# Runs that started before this patch recorded their steps as regular activities and replay them
# so; runs after it record local ones (see `run_step`).
LOCAL_STEPS_PATCH = "local-steps"
# What a failed step raises: a regular activity's failure arrives wrapped in ActivityError, a
# local activity's as the ApplicationError (or Temporal TimeoutError) itself.
STEP_FAILURES = (ActivityError, ApplicationError, TemporalTimeoutError)


def step_refused(failure: BaseException) -> bool:
    """True when a failed step was refused (a non-retryable ApplicationError: a DomainError),
    not merely unlucky; the same for a regular activity's wrapped failure and a local one's."""
    cause = failure.cause if isinstance(failure, ActivityError) else failure
    return isinstance(cause, ApplicationError) and cause.non_retryable


async def run_step(
    activity: Callable[[Any, ArgT], Awaitable[ResultT]],
    arg: ArgT,
    *,
    start_to_close: timedelta = SHORT_TIMEOUT,
    retry: RetryPolicy = REQUEST_RETRY,
) -> ResultT:
    """One step of a request workflow: a short database write its caller waits on, with the
    shared timeout and retry policy. It runs as a local activity (measured on registration's
    six steps: one workflow task instead of eleven server round trips, 145 ms to ~100 ms);
    runs started before `LOCAL_STEPS_PATCH` replay the regular activities they recorded."""
    if workflow.patched(LOCAL_STEPS_PATCH):
        return await run_local_step(activity, arg, start_to_close=start_to_close, retry=retry)
    return await run_activity(activity, arg, start_to_close=start_to_close, retry=retry)


async def run_activity(
    activity: Callable[[Any, ArgT], Awaitable[ResultT]],
    arg: ArgT,
    *,
    start_to_close: timedelta = SHORT_TIMEOUT,
    retry: RetryPolicy = REQUEST_RETRY,
    heartbeat: timedelta | None = None,
) -> ResultT:
    """A step as a regular activity: for work too long or heavy for a local one (S3 sweeps).
    A step that heartbeats passes `heartbeat=LONG_STEP_HEARTBEAT`."""
    return await workflow.execute_activity_method(
        activity,
        arg,
        start_to_close_timeout=start_to_close,
        retry_policy=retry,
        heartbeat_timeout=heartbeat,
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


def work_priority(kind: WorkKind, team_id: UUID | None = None) -> Priority:
    """The Temporal priority of a run of `kind` owned by `team_id` (`schemas.priorities`); its
    activities and child runs inherit it."""
    return Priority(priority_key=PRIORITY_KEYS[kind], fairness_key=fairness_key(team_id))


# Custom search attributes an operator filters by in the Temporal UI (registered by `cairn dev`).
TEAM_ID = SearchAttributeKey.for_keyword("TeamId")
TASK_TYPE = SearchAttributeKey.for_keyword("TaskType")
DIARY_ID = SearchAttributeKey.for_keyword("DiaryId")
AGENT_ID = SearchAttributeKey.for_keyword("AgentId")


def embedding_task_queue() -> str:
    """Where this workflow's embedding activities run (the worker polls the paired queue)."""
    return embedding_queue_for(workflow.info().task_queue)
