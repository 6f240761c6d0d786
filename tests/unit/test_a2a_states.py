"""Our task statuses as A2A task states (api/a2a.py): every status has one, an ended task is in
a terminal A2A state and an unended one is not, and a ListTasks state filter names exactly the
statuses that show as that state."""

from __future__ import annotations

from typing import get_args

from a2a.types.a2a_pb2 import TaskState

from api.a2a import STATES, STATUSES
from schemas.tasks import TERMINAL_TASK_STATUSES, TaskStatus

A2A_TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


def test_every_status_has_a_state_terminal_exactly_when_the_task_ended() -> None:
    assert set(STATES) == set(get_args(TaskStatus))
    for status, state in STATES.items():
        assert (state in A2A_TERMINAL) == (status in TERMINAL_TASK_STATUSES), status


def test_a_state_filter_names_the_statuses_shown_as_it() -> None:
    assert STATUSES[TaskState.TASK_STATE_WORKING] == ["dispatched", "running"]
    assert STATUSES[TaskState.TASK_STATE_FAILED] == ["failed", "expired"]
    assert sorted(s for statuses in STATUSES.values() for s in statuses) == sorted(STATES)
