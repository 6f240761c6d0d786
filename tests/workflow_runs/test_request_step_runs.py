"""Declared request steps (`workflows.steps`) run on Temporal: the input arrives as its model,
`prepare` runs in the workflow (an id it mints is the run's), and the run is its one step as a
local activity, finished in the workflow task that started it: why a request step needs no
replay history (tests/replay). `run_step` records the local-steps marker and `run_local_step`
does not, as the workflows declared with each recorded before they were declared."""

from __future__ import annotations

from temporalio import workflow

# The sandbox re-imports this module to run the probes below: what it must not load twice
# passes through.
with workflow.unsafe.imports_passed_through():
    import uuid
    from collections.abc import AsyncIterator
    from uuid import UUID

    import pytest
    from histories import patches_of
    from pydantic import BaseModel
    from temporalio import activity
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import WorkflowHistory
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from workflows.common import LOCAL_STEPS_PATCH, run_local_step
    from workflows.steps import RequestStep, request_step, with_minted_id

# how the SDK records a local activity's outcome in history
LOCAL_ACTIVITY = "core_local_activity"


class Probe(BaseModel):
    probe_id: UUID | None = None
    note: str


class ProbeActivities:
    @activity.defn(name="probe.echo")
    async def echo(self, inp: Probe) -> Probe:
        return inp


@request_step("ProbeStep", ProbeActivities.echo, prepare=with_minted_id("probe_id"))
class ProbeStepWorkflow(RequestStep[Probe, Probe]): ...


@request_step("ProbeLocalStep", ProbeActivities.echo, runner=run_local_step)
class ProbeLocalStepWorkflow(RequestStep[Probe, Probe]): ...


@pytest.fixture(scope="module")
async def queue(time_skipping_env: WorkflowEnvironment) -> AsyncIterator[str]:
    name = f"steps-{uuid.uuid4().hex[:8]}"
    async with Worker(
        time_skipping_env.client,
        task_queue=name,
        workflows=[ProbeStepWorkflow, ProbeLocalStepWorkflow],
        activities=[ProbeActivities().echo],
    ):
        yield name


def events_of(history: WorkflowHistory, kind: EventType.ValueType) -> int:
    return sum(1 for event in history.events if event.event_type == kind)


def local_activities_of(history: WorkflowHistory) -> int:
    return sum(
        1
        for event in history.events
        if event.HasField("marker_recorded_event_attributes")
        and event.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY
    )


async def run_probe(
    env: WorkflowEnvironment, queue: str, cls: type[RequestStep[Probe, Probe]], inp: Probe
) -> tuple[Probe, WorkflowHistory]:
    handle = await env.client.start_workflow(
        cls.run, inp, id=f"probe/{uuid.uuid4()}", task_queue=queue
    )
    result = await handle.result()
    return result, await handle.fetch_history()


def assert_one_local_step_in_one_task(history: WorkflowHistory) -> None:
    assert local_activities_of(history) == 1
    assert events_of(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) == 0
    assert events_of(history, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) == 1


async def test_a_step_mints_the_id_it_was_not_sent_and_runs_in_one_task(
    time_skipping_env: WorkflowEnvironment, queue: str
) -> None:
    result, history = await run_probe(
        time_skipping_env, queue, ProbeStepWorkflow, Probe(note="hello")
    )
    assert isinstance(result, Probe)
    assert result.note == "hello"
    assert result.probe_id is not None
    assert_one_local_step_in_one_task(history)
    assert patches_of(history) == {LOCAL_STEPS_PATCH}


async def test_a_step_keeps_the_id_it_was_sent(
    time_skipping_env: WorkflowEnvironment, queue: str
) -> None:
    sent = uuid.uuid4()
    result, _ = await run_probe(
        time_skipping_env, queue, ProbeStepWorkflow, Probe(probe_id=sent, note="kept")
    )
    assert result.probe_id == sent


async def test_a_local_step_records_no_patch_marker(
    time_skipping_env: WorkflowEnvironment, queue: str
) -> None:
    result, history = await run_probe(
        time_skipping_env, queue, ProbeLocalStepWorkflow, Probe(note="as sent")
    )
    assert result == Probe(note="as sent")
    assert_one_local_step_in_one_task(history)
    assert patches_of(history) == set()
