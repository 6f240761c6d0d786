"""How routes run workflows: start and await the result, mapping duplicate ids to problems."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError

from api import keys
from schemas.errors import DomainError

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")


async def execute(
    request: web.Request,
    run: Callable[[Any, ArgT], Awaitable[ResultT]],
    arg: ArgT,
    *,
    workflow_id: str,
    on_duplicate: DomainError,
    reuse: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    search: list[SearchAttributePair[Any]] | None = None,
    task_queue: str | None = None,
) -> ResultT:
    """Start `run(arg)` under `workflow_id` and wait for its result.

    A workflow already running (or, with REJECT_DUPLICATE, already run) under the same id is
    `on_duplicate`; a DomainError raised inside comes back through the problem middleware.
    `task_queue` is the service's queue unless told (the entry workflows run where the model is).
    """
    app = request.app
    try:
        return await app[keys.TEMPORAL].execute_workflow(
            run,
            arg,
            id=workflow_id,
            task_queue=task_queue or app[keys.SETTINGS].temporal_task_queue,
            id_reuse_policy=reuse,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            search_attributes=TypedSearchAttributes(search or []),
        )
    except WorkflowAlreadyStartedError:
        raise on_duplicate from None
