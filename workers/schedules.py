"""The Temporal Schedules a worker makes at start-up: the maintenance purge and stale-task
reconcile, the artifact and pack sweeps, and the consolidation sweep. Each is created when
missing, else brought to this code's action, spec and policy while keeping its state (an
operator's pause and notes); all are visible, pausable and triggerable in the Temporal UI or
with `temporal schedule trigger`.

Schedules are client I/O, so they live here, beside the process that makes them, and never in
`workflows/` (which holds orchestration only; `tests/test_architecture.py` holds the line).
A run still going when the next is due skips it (overlap SKIP)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)

from schemas import limits
from schemas.artifacts import ArtifactSweepInput
from schemas.hygiene import ConsolidationSweepInput
from schemas.maintenance import PurgeInput, StaleTaskInput
from schemas.packs import PackSweepInput
from schemas.priorities import WorkKind
from workflows import artifacts, consolidation, maintenance, packs
from workflows.common import work_priority


async def ensure_schedule(client: Client, schedule_id: str, schedule: Schedule) -> str:
    """Create the schedule, or bring an existing one to this action, spec and policy while
    keeping its state (an operator's pause and notes). Returns its id."""
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:

        def keep_state(current: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(
                Schedule(
                    action=schedule.action,
                    spec=schedule.spec,
                    policy=schedule.policy,
                    state=current.description.schedule.state,
                )
            )

        await client.get_schedule_handle(schedule_id).update(keep_state)
    return schedule_id


def every(run: Any, arg: Any, workflow_id: str, task_queue: str, interval: timedelta) -> Schedule:
    """Start `run(arg)` as `workflow_id` every `interval`, skipping a run while one still goes;
    each run is a sweep, dispatched after every request waiting in the queue."""
    return Schedule(
        action=ScheduleActionStartWorkflow(
            run,
            arg,
            id=workflow_id,
            task_queue=task_queue,
            priority=work_priority(WorkKind.SWEEP),
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=interval)]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )


_ARTIFACT_SWEEP_INTERVAL_SEC = timedelta(seconds=limits.ARTIFACT_SWEEP_INTERVAL_SEC)
_PACK_SWEEP_INTERVAL_SEC = timedelta(seconds=limits.PACK_SWEEP_INTERVAL_SEC)
_MAINTENANCE_PURGE_INTERVAL_SEC = timedelta(seconds=limits.MAINTENANCE_PURGE_INTERVAL_SEC)
_STALE_TASK_SCAN_INTERVAL_SEC = timedelta(seconds=limits.STALE_TASK_SCAN_INTERVAL_SEC)
_CONSOLIDATION_INTERVAL_SEC = timedelta(seconds=limits.CONSOLIDATION_INTERVAL_SEC)


def artifact_sweep_schedule(
    task_queue: str,
    grace_sec: int,
    interval: timedelta = _ARTIFACT_SWEEP_INTERVAL_SEC,
) -> Schedule:
    return every(
        artifacts.ArtifactSweepWorkflow.run,
        ArtifactSweepInput(grace_sec=grace_sec),
        artifacts.SWEEP_WORKFLOW_ID,
        task_queue,
        interval,
    )


def pack_sweep_schedule(
    task_queue: str, interval: timedelta = _PACK_SWEEP_INTERVAL_SEC
) -> Schedule:
    return every(
        packs.PackSweepWorkflow.run, PackSweepInput(), packs.SWEEP_WORKFLOW_ID, task_queue, interval
    )


def purge_schedule(
    task_queue: str, interval: timedelta = _MAINTENANCE_PURGE_INTERVAL_SEC
) -> Schedule:
    return every(
        maintenance.ExpiredRowsPurgeWorkflow.run,
        PurgeInput(),
        maintenance.PURGE_WORKFLOW_ID,
        task_queue,
        interval,
    )


def stale_tasks_schedule(
    task_queue: str, interval: timedelta = _STALE_TASK_SCAN_INTERVAL_SEC
) -> Schedule:
    return every(
        maintenance.StaleTaskReconcileWorkflow.run,
        StaleTaskInput(),
        maintenance.STALE_TASKS_WORKFLOW_ID,
        task_queue,
        interval,
    )


def consolidation_schedule(
    task_queue: str, interval: timedelta = _CONSOLIDATION_INTERVAL_SEC
) -> Schedule:
    """The daily near-duplicate sweep over every diary (`ConsolidationSweep`)."""
    return every(
        consolidation.ConsolidationSweepWorkflow.run,
        ConsolidationSweepInput(),
        consolidation.SWEEP_WORKFLOW_ID,
        task_queue,
        interval,
    )


async def ensure_maintenance_schedules(client: Client, task_queue: str) -> list[str]:
    """The maintenance schedules of this deployment (SPEC 6), made or updated at worker start."""
    return [
        await ensure_schedule(
            client, maintenance.purge_schedule_id(task_queue), purge_schedule(task_queue)
        ),
        await ensure_schedule(
            client,
            maintenance.stale_tasks_schedule_id(task_queue),
            stale_tasks_schedule(task_queue),
        ),
        await ensure_schedule(
            client,
            consolidation.consolidation_schedule_id(task_queue),
            consolidation_schedule(task_queue),
        ),
    ]


async def ensure_schedules(client: Client, task_queue: str, artifact_grace_sec: int) -> list[str]:
    """Every schedule of this deployment; a changed `TASK_ARTIFACT_ORPHAN_GRACE_SEC` takes
    effect at the next worker start."""
    return [
        await ensure_schedule(
            client,
            artifacts.sweep_schedule_id(task_queue),
            artifact_sweep_schedule(task_queue, artifact_grace_sec),
        ),
        *await ensure_maintenance_schedules(client, task_queue),
        await ensure_schedule(
            client, packs.sweep_schedule_id(task_queue), pack_sweep_schedule(task_queue)
        ),
    ]
