"""How routes run workflows: start and await the result, mapping duplicate ids to problems.

With an `Idempotency-Key` (the route minted its `RunKey` with `api.idempotency.run_key` and
passes it here as `key`), the run carries the request's fingerprint in its memo, and a second
start under the same id is a retry: answered from that run (its result, once it ends) when the
fingerprint matches, else 409 `idempotency-key-reused`. A run that failed wrote nothing, so a
retry may start it afresh.

Every wait of a request on a workflow (its result, an Update's outcome) runs inside
`waiting_on_workflow`: bounded by `SERVICE_REQUEST_WAIT_S`, past which the answer is 503 with
Retry-After (no worker took the work in time: a worker outage, a deploy). The run itself is left
to finish; the same request sent again with its Idempotency-Key is answered from it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
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
from api.idempotency import FINGERPRINT_MEMO, RunKey, key_reused
from schemas.errors import DomainError, ServiceUnavailable
from schemas.priorities import WorkKind
from workflows.common import work_priority

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")


@contextlib.asynccontextmanager
async def waiting_on_workflow(request: web.Request) -> AsyncIterator[None]:
    """Bound what the block waits on a workflow by `SERVICE_REQUEST_WAIT_S`: past it, 503
    `service-unavailable` (the problem middleware adds Retry-After). The one place the bound is
    applied: every route that waits on a run does it in here."""
    seconds = request.app[keys.SETTINGS].request_wait_s
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise ServiceUnavailable(
            f"No worker finished this request within {seconds:g} s. The work is kept and runs "
            "when a worker is back: send the same request with the same Idempotency-Key to get "
            "its one result."
        ) from None


async def execute(
    request: web.Request,
    run: Callable[[Any, ArgT], Awaitable[ResultT]],
    arg: ArgT,
    *,
    workflow_id: str,
    on_duplicate: DomainError,
    key: RunKey | None = None,
    reuse: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    search: list[SearchAttributePair[Any]] | None = None,
    task_queue: str | None = None,
    team: UUID | None = None,
) -> ResultT:
    """Start `run(arg)` under `workflow_id` and wait for its result.

    A workflow already running (or, with REJECT_DUPLICATE, already run) under the same id is
    `on_duplicate`, unless the request's `key` named it (see the module); a DomainError raised
    inside comes back through the problem middleware. `task_queue` is the service's queue
    unless told (the entry workflows run where the model is). The run goes before sweeps, and
    `team` (the owning team, when the route knows it) is its fairness key.
    """
    async with waiting_on_workflow(request):
        app = request.app
        client: Client = app[keys.TEMPORAL]
        try:
            return await client.execute_workflow(
                run,
                arg,
                id=workflow_id,
                task_queue=task_queue or app[keys.SETTINGS].temporal_task_queue,
                id_reuse_policy=reuse if key is None else _keyed_reuse(reuse),
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                search_attributes=TypedSearchAttributes(search or []),
                memo=_memo(key),
                priority=work_priority(WorkKind.REQUEST, team),
            )
        except WorkflowAlreadyStartedError:
            if key is None:
                raise on_duplicate from None
        handle = client.get_workflow_handle_for(run, workflow_id)
        await replayed(client, workflow_id, key)
        return await handle.result()


async def start_with_update(
    request: web.Request,
    run: Callable[[Any, ArgT], Awaitable[Any]],
    arg: ArgT,
    *,
    workflow_id: str,
    update: str,
    result_type: type[ResultT],
    on_duplicate: DomainError,
    search: list[SearchAttributePair[Any]],
    key: RunKey | None = None,
    team: UUID | None = None,
) -> ResultT | None:
    """Start `run(arg)` together with the Update named `update` and return its result (a
    create that answers before its run ends), keyed and prioritised like `execute`.

    A keyed retry whose run still runs gets that Update's answer again; None means the keyed
    run has ended, and the route answers from the rows it wrote.
    """
    async with waiting_on_workflow(request):
        client: Client = request.app[keys.TEMPORAL]
        start = WithStartWorkflowOperation(
            run,
            arg,
            id=workflow_id,
            task_queue=request.app[keys.SETTINGS].temporal_task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE
            if key is None
            else _keyed_reuse(WorkflowIDReusePolicy.ALLOW_DUPLICATE),
            memo=_memo(key),
            search_attributes=TypedSearchAttributes(search),
            priority=work_priority(WorkKind.REQUEST, team),
        )
        try:
            result: ResultT = await client.execute_update_with_start_workflow(
                update, start_workflow_operation=start, result_type=result_type
            )
            return result
        except WorkflowAlreadyStartedError:
            # the SDK sets the refusal on the start's own future too: read it (else "never
            # retrieved")
            with contextlib.suppress(WorkflowAlreadyStartedError):
                await start.workflow_handle()
            if key is None:
                raise on_duplicate from None
        await replayed(client, workflow_id, key)
        try:
            again: ResultT = await client.get_workflow_handle(workflow_id).execute_update(
                update, result_type=result_type
            )
            return again
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            return None  # the run has ended: its rows hold what it did


async def replayed(client: Client, workflow_id: str, key: RunKey) -> None:
    """The run under `workflow_id` was started by this request's key: 409 unless by the same
    request (its fingerprint in the memo)."""
    description = await client.get_workflow_handle(workflow_id).describe()
    if await description.memo_value(FINGERPRINT_MEMO, None) != key.fingerprint:
        raise key_reused()


def _memo(key: RunKey | None) -> dict[str, str] | None:
    return None if key is None else {FINGERPRINT_MEMO: key.fingerprint}


def _keyed_reuse(reuse: WorkflowIDReusePolicy) -> WorkflowIDReusePolicy:
    """A keyed id is used by one request only: a run that completed answers every retry (a
    second run would be a second write); one that failed wrote nothing and may run again."""
    if reuse == WorkflowIDReusePolicy.REJECT_DUPLICATE:
        return reuse
    return WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
