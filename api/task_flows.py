"""How the API drives a task's attempt workflow (`Task`, id `task/<taskId>`).

`start_task` starts the workflow with Update-with-Start on `created`, so `POST /tasks` answers
as soon as the row exists rather than when the task ends. The routes of the attempt lifecycle
send Updates through `task_update`; a workflow that has already finished takes none, and
`TaskClosed` tells the route to answer from the rows (the workflow wrote its last state there).
`task_signal` sends what needs no answer from the workflow (a running attempt's liveness).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TypeVar
from uuid import UUID

from aiohttp import web
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from api import keys
from api.flows import waiting_on_workflow
from schemas.base import Payload
from schemas.priorities import WorkKind
from schemas.task_attempts import CREATED_UPDATE, TaskCreated, task_workflow_id
from schemas.tasks import TaskStart
from workflows.common import DIARY_ID, TASK_TYPE, TEAM_ID, work_priority
from workflows.tasks import TaskWorkflow

ResultT = TypeVar("ResultT", bound=Payload)


class TaskClosed(Exception):
    """The task's workflow has finished: its rows hold the final state."""


async def start_task(request: web.Request, start: TaskStart) -> None:
    """Start the task's workflow and return once its row is inserted.

    A workflow already running under the task's id (a retried create: the caller decided it is
    the same task) answers `created` too; one that has finished means the task exists. Either
    way the row is there when this returns.
    """
    app = request.app
    async with waiting_on_workflow(request):
        await start_task_workflow(app[keys.TEMPORAL], app[keys.SETTINGS].temporal_task_queue, start)


async def start_task_workflow(client: Client, task_queue: str, start: TaskStart) -> None:
    """`start_task` without a request (workers' tests, benchmarks)."""
    operation = WithStartWorkflowOperation(
        TaskWorkflow.run,
        args=[start, None],  # always both: the worker decodes by position and type
        id=task_workflow_id(start.task_id),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        search_attributes=TypedSearchAttributes(
            [
                SearchAttributePair(TEAM_ID, str(start.team_id)),
                SearchAttributePair(TASK_TYPE, start.task_type),
                SearchAttributePair(DIARY_ID, str(start.diary_id)),
            ]
        ),
        # every workflow task of the run (its claim, heartbeats, completion) is dispatched with
        # this priority: the owning team's turn, ahead of sweeps
        priority=work_priority(WorkKind.REQUEST, start.team_id),
    )
    try:
        await client.execute_update_with_start_workflow(
            CREATED_UPDATE, start_workflow_operation=operation, result_type=TaskCreated
        )
    except WorkflowAlreadyStartedError:
        return  # finished already: the task was created by an earlier request
    except RPCError as exc:  # how some servers say the same
        if exc.status != RPCStatusCode.ALREADY_EXISTS:
            raise


async def task_update(
    client: Client,
    task_id: UUID,
    update: str,
    command: Payload,
    result_type: type[ResultT],
    update_id: str | None = None,
) -> ResultT:
    """Send one Update (by its name in `schemas.task_attempts`) to the task's workflow;
    `TaskClosed` when it no longer runs. An `update_id` sent again is answered by Temporal from
    the first outcome (`api.idempotency.update_id`)."""
    with _closed_as(task_id):
        handle = client.get_workflow_handle(task_workflow_id(task_id))
        result = await handle.execute_update(update, command, id=update_id, result_type=result_type)
    assert isinstance(result, result_type)
    return result


async def task_signal(client: Client, task_id: UUID, signal: str, command: Payload) -> None:
    """Send one signal to the task's workflow; `TaskClosed` when it no longer runs."""
    with _closed_as(task_id):
        await client.get_workflow_handle(task_workflow_id(task_id)).signal(signal, command)


@contextlib.contextmanager
def _closed_as(task_id: UUID) -> Iterator[None]:
    """A workflow that has finished is not found: that is `TaskClosed`."""
    try:
        yield
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise TaskClosed(str(task_id)) from None
        raise
