"""Temporal Schedules as the worker makes them at start-up (maintenance, the artifact and pack
sweeps): created when missing, else brought to this code's action, spec and policy."""

from __future__ import annotations

from temporalio.client import (
    Client,
    Schedule,
    ScheduleAlreadyRunningError,
    ScheduleUpdate,
    ScheduleUpdateInput,
)


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
