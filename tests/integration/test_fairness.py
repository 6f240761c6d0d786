"""Fair to every team (issue 30 §5): the work the API starts carries Temporal's `Priority`, read
back from the dev server (which runs with fairness on, `infra.devstack.FAIRNESS_TEMPORAL_FLAGS`,
and runs every one of these prioritised runs to completion).

Two teams write an entry and create a task each: each run's fairness key is its own team and
its priority key the request row of `schemas.priorities`; the follow-up consolidation the API
starts after a write and the scheduled sweeps sit lower in the table, with no team's key.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from actors import Actor, new_diary
from temporalio import workflow
from temporalio.client import Client, ScheduleActionStartWorkflow, WorkflowExecutionDescription
from temporalio.common import Priority
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from waiting import wait_until

from schemas.priorities import PRIORITY_KEYS, WorkKind
from schemas.task_attempts import task_workflow_id
from workflows import artifacts, maintenance, packs
from workflows.common import work_priority
from workflows.entries import entry_create_workflow_id


def priority_of(described: WorkflowExecutionDescription) -> Priority:
    return Priority._from_proto(described.raw_info.priority)


async def write_entry(actor: Actor, diary_id: str) -> str:
    status, entry = await actor.call(
        "POST", f"/diaries/{diary_id}/entries", json={"content": f"a note {uuid.uuid4()}"}
    )
    assert status == 201, entry
    return str(entry["id"])


async def create_task(actor: Actor, team_id: str, diary_id: str) -> str:
    body = {
        "taskType": "freeform",
        "teamId": team_id,
        "diaryId": diary_id,
        "input": {"brief": "Write a haiku"},
    }
    status, task = await actor.call("POST", "/tasks", json=body, team=team_id)
    assert status == 201, task
    return str(task["id"])


@pytest.fixture(scope="module")
async def teams(actors: Any) -> list[tuple[Actor, dict[str, Any]]]:
    """Two agents, each writing to a diary of their own personal team."""
    return [(agent, await new_diary(agent)) for agent in [await actors.agent() for _ in "AB"]]


async def test_each_teams_entry_write_is_dispatched_under_its_own_fairness_key(
    teams: list[tuple[Actor, dict[str, Any]]], stack: Any
) -> None:
    for agent, diary in teams:
        entry_id = await write_entry(agent, diary["id"])
        handle = stack.temporal.get_workflow_handle(entry_create_workflow_id(entry_id))
        assert priority_of(await handle.describe()) == Priority(
            priority_key=PRIORITY_KEYS[WorkKind.REQUEST], fairness_key=diary["teamId"]
        )


async def test_each_teams_task_is_dispatched_under_its_own_fairness_key(
    teams: list[tuple[Actor, dict[str, Any]]], stack: Any
) -> None:
    """The task's run takes its claim, heartbeats and result as workflow tasks of this
    priority: the dispatch of a team's task is that team's turn."""
    for agent, diary in teams:
        task_id = await create_task(agent, diary["teamId"], diary["id"])
        handle = stack.temporal.get_workflow_handle(task_workflow_id(task_id))
        assert priority_of(await handle.describe()) == Priority(
            priority_key=PRIORITY_KEYS[WorkKind.REQUEST], fairness_key=diary["teamId"]
        )


async def test_a_writes_consolidation_follows_requests_with_no_teams_key(
    teams: list[tuple[Actor, dict[str, Any]]], stack: Any
) -> None:
    agent, diary = teams[0]
    await write_entry(agent, diary["id"])
    queue = stack.settings.temporal_task_queue
    query = f"WorkflowType = 'EntryConsolidation' AND TaskQueue = '{queue}'"
    started: list[Any] = []

    async def listed() -> bool:
        started[:] = [run async for run in stack.temporal.list_workflows(query)]
        return bool(started)

    await wait_until(listed, what="a consolidation run after the write")
    described = await stack.temporal.get_workflow_handle(started[0].id).describe()
    assert priority_of(described) == Priority(priority_key=PRIORITY_KEYS[WorkKind.FOLLOW_UP])


@pytest.mark.parametrize(
    "schedule_id",
    [
        artifacts.sweep_schedule_id,
        packs.sweep_schedule_id,
        maintenance.purge_schedule_id,
        maintenance.stale_tasks_schedule_id,
    ],
)
async def test_the_sweeps_go_after_every_request(schedule_id: Any, stack: Any) -> None:
    queue = stack.settings.temporal_task_queue
    described = await stack.temporal.get_schedule_handle(schedule_id(queue)).describe()
    action = described.schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    assert action.priority == Priority(priority_key=PRIORITY_KEYS[WorkKind.SWEEP])


@workflow.defn(name="TestFairnessNoop")
class NoopWorkflow:
    @workflow.run
    async def run(self) -> None:
        return None


async def test_a_quiet_teams_runs_queued_behind_a_flood_take_every_other_turn(stack: Any) -> None:
    """Twelve of team A's runs, then three of team B's, wait in a queue no worker polls yet;
    a one-slot worker then drains it. The dev server orders the backlog by team (one partition
    a queue, `infra.devstack.TUNED_TEMPORAL_FLAGS`): B's runs close second, fourth and sixth,
    not after A's twelve (one FIFO), nor wherever the partition each landed in came up."""
    client: Client = stack.temporal
    queue = f"fairness-{uuid.uuid4().hex[:8]}"
    started = []
    for team, runs in ((uuid.uuid4(), 12), (uuid.uuid4(), 3)):
        for _ in range(runs):
            handle = await client.start_workflow(
                NoopWorkflow.run,
                id=f"{queue}/{uuid.uuid4()}",
                task_queue=queue,
                priority=work_priority(WorkKind.REQUEST, team),
            )
            started.append((team, handle))
    async with Worker(
        client,
        task_queue=queue,
        workflows=[NoopWorkflow],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_concurrent_workflow_tasks=1,
    ):
        for _, handle in started:
            await handle.result()
    closed = []
    for team, handle in started:
        close_time = (await handle.describe()).close_time
        assert close_time is not None
        closed.append((close_time, team))
    quiet = started[-1][0]
    assert [place for place, (_, team) in enumerate(sorted(closed), 1) if team == quiet] == [
        2,
        4,
        6,
    ]
