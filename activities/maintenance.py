"""Side effects of the maintenance workflows (SPEC 6): purges of expired rows, and the stale-task
reconciler's two steps (find tasks whose workflow no longer runs, settle one). One repository
call per activity; each is idempotent under retry."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.heartbeats import heartbeating
from schemas.maintenance import (
    Purge,
    PurgeCount,
    SettledTask,
    StaleTask,
    StaleTaskPage,
    StaleTaskScan,
)

if TYPE_CHECKING:
    from infra.repos.maintenance import MaintenanceRepo

NOT_FOUND: str = "not_found"


class MaintenanceActivities:
    def __init__(self, repo: MaintenanceRepo) -> None:
        self._repo = repo

    @activity.defn(name="maintenance.purge_signing_requests")
    async def purge_signing_requests(self, inp: Purge) -> PurgeCount:
        async with heartbeating():
            deleted = await self._repo.purge_signing_requests(inp.before, inp.limit)
        return PurgeCount(deleted=deleted)

    @activity.defn(name="maintenance.purge_recovery_nonces")
    async def purge_recovery_nonces(self, inp: Purge) -> PurgeCount:
        async with heartbeating():
            deleted = await self._repo.purge_recovery_nonces(inp.before, inp.limit)
        return PurgeCount(deleted=deleted)

    @activity.defn(name="maintenance.purge_vouchers")
    async def purge_vouchers(self, inp: Purge) -> PurgeCount:
        async with heartbeating():
            deleted = await self._repo.purge_vouchers(inp.before, inp.limit)
        return PurgeCount(deleted=deleted)

    @activity.defn(name="maintenance.purge_connector_codes")
    async def purge_connector_codes(self, inp: Purge) -> PurgeCount:
        async with heartbeating():
            deleted = await self._repo.purge_connector_codes(inp.before, inp.limit)
        return PurgeCount(deleted=deleted)

    @activity.defn(name="maintenance.purge_connector_grants")
    async def purge_connector_grants(self, inp: Purge) -> PurgeCount:
        async with heartbeating():
            deleted = await self._repo.purge_connector_grants(inp.before, inp.limit)
        return PurgeCount(deleted=deleted)

    @activity.defn(name="maintenance.find_stale_tasks")
    async def find_stale_tasks(self, inp: StaleTaskPage) -> StaleTaskScan:
        """One page of non-terminal task rows, and those whose workflow does not run (asked of
        Temporal by workflow id: its latest run, so a run continued as new counts as running)."""
        async with heartbeating():
            rows = await self._repo.nonterminal_tasks(inp)
            statuses = await asyncio.gather(*(_workflow_status(wf_id) for _, wf_id in rows))
        stale = [
            StaleTask(task_id=task_id, workflow_id=wf_id, workflow_status=status)
            for (task_id, wf_id), status in zip(rows, statuses, strict=True)
            if status != WorkflowExecutionStatus.RUNNING.name.lower()
        ]
        return StaleTaskScan(checked=len(rows), last_id=rows[-1][0] if rows else None, stale=stale)

    @activity.defn(name="maintenance.settle_stale_task")
    async def settle_stale_task(self, inp: StaleTask) -> SettledTask:
        status = await self._repo.settle_task(inp.task_id, inp.workflow_status)
        if status is not None:  # the report an operator sees in the worker's log
            activity.logger.warning(
                "settled task %s as %s: its workflow %s is %s",
                inp.task_id,
                status,
                inp.workflow_id,
                inp.workflow_status,
            )
        return SettledTask(task_id=inp.task_id, status=status)


async def _workflow_status(workflow_id: str) -> str:
    """`running`, `terminated`, `failed`, ... of the workflow's latest run, or `not_found`."""
    try:
        described = await activity.client().get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return NOT_FOUND
        raise
    status = described.status
    return NOT_FOUND if status is None else status.name.lower()
