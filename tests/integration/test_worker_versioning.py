"""Worker Versioning on the dev server (issue 30 section 2; workers/versioning.py).

Build A serves a deployment of its own; a pinned run and a long-lived run start on it. Build B
comes up on the same task queue and an operator makes it current with the documented command
(`temporal worker deployment set-current-version`). The pinned run finishes on A, the
long-lived one moves to B at its next workflow task, and a new run goes to B. Which build ran
each workflow task is read from the run's history.

The two probe workflows stand for the two kinds the registry declares: a request workflow
(pinned, the worker's default) and a long-lived one (`workflows.common.LONG_LIVED`); the
registry test below holds every real workflow to that split. The build id is the package
version and a hash of the workflow code: the same in another process, another after an edit.
"""

from __future__ import annotations

from temporalio import workflow

# The sandbox re-imports this module to run the probes below: what it must not load twice
# passes through.
with workflow.unsafe.imports_passed_through():
    import asyncio
    import inspect
    import os
    import shutil
    import subprocess
    import sys
    import types
    import uuid
    from collections.abc import AsyncIterator
    from pathlib import Path
    from typing import Any

    import pytest
    from processes import wait_until
    from pydantic import ValidationError
    from temporalio.api.enums.v1 import EventType, RoutingConfigUpdateState
    from temporalio.api.workflowservice.v1 import (
        DescribeWorkerDeploymentRequest,
        DescribeWorkerDeploymentVersionRequest,
    )
    from temporalio.client import Client, WorkflowHandle
    from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.service import RPCError
    from temporalio.worker import Worker

    from infra.devstack import venv_binary
    from infra.settings import Settings
    from workers.registry import WORKFLOWS
    from workers.versioning import code_build_id, deployment_config, promote
    from workflows.artifacts import ArtifactSweepWorkflow
    from workflows.common import LONG_LIVED
    from workflows.consolidation import ConsolidationSweepWorkflow
    from workflows.diary_archive import DiaryImportWorkflow
    from workflows.maintenance import ExpiredRowsPurgeWorkflow, StaleTaskReconcileWorkflow
    from workflows.packs import PackSweepWorkflow
    from workflows.tasks import TaskWorkflow
    from workflows.teams import TeamFoundingWorkflow
    from workflows.transfers import DiaryTransferWorkflow


def repo() -> Path:
    return Path(__file__).resolve().parents[2]


class _HeldOpen:
    """Open until the test signals `go`."""

    def __init__(self) -> None:
        self._go = False

    @workflow.signal
    def go(self) -> None:
        self._go = True

    async def _until_go(self) -> None:
        await workflow.wait_condition(lambda: self._go)


@workflow.defn(name="VersionProbeRequest")
class RequestProbe(_HeldOpen):
    """A request workflow held open: pinned, as every request workflow is."""

    @workflow.run
    async def run(self) -> None:
        await self._until_go()


@workflow.defn(name="VersionProbeLongLived", versioning_behavior=LONG_LIVED)
class LongLivedProbe(_HeldOpen):
    """A long-lived workflow: declared as the service's long-lived workflows are."""

    @workflow.run
    async def run(self) -> None:
        await self._until_go()


@pytest.fixture(scope="module")
async def client(temporal_address: str) -> Client:
    return await Client.connect(temporal_address, data_converter=pydantic_data_converter)


@pytest.fixture
def deployment() -> str:
    return f"ab-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def queue() -> str:
    return f"versions-{uuid.uuid4().hex[:8]}"


def build(client: Client, queue: str, version: WorkerDeploymentVersion) -> Worker:
    return Worker(
        client,
        task_queue=queue,
        workflows=[RequestProbe, LongLivedProbe],
        deployment_config=deployment_config(version),
    )


@pytest.fixture
async def build_a(client: Client, queue: str, deployment: str) -> AsyncIterator[Worker]:
    version = WorkerDeploymentVersion(deployment, "A")
    async with build(client, queue, version) as worker:
        # the deployment's first version: made current by its own worker, as at a fresh start
        await promote(client, version, Settings(worker_set_current="first"))
        yield worker


async def polled_by(client: Client, version: WorkerDeploymentVersion) -> bool:
    """Whether the server knows the version (its worker's pollers have reached it)."""
    try:
        await client.workflow_service.describe_worker_deployment_version(
            DescribeWorkerDeploymentVersionRequest(
                namespace=client.namespace, deployment_version=version._to_proto()
            )
        )
    except RPCError:
        return False
    return True


async def operator_sets_current(
    client: Client, address: str, version: WorkerDeploymentVersion
) -> None:
    """`temporal worker deployment set-current-version`, as docs/deployment.md has it."""
    await wait_until(lambda: polled_by(client, version), what=f"pollers of {version}")
    process = await asyncio.create_subprocess_exec(
        str(venv_binary("temporal")),
        "worker",
        "deployment",
        "set-current-version",
        "--address",
        address,
        "--deployment-name",
        version.deployment_name,
        "--build-id",
        version.build_id,
        "--yes",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()
    # the server takes the new routing to the queue's partitions after it answers
    await wait_until(lambda: routed_to(client, version), what=f"routing to {version}")


async def routed_to(client: Client, version: WorkerDeploymentVersion) -> bool:
    """Whether `version` is current and the routing has reached every task queue partition."""
    described = await client.workflow_service.describe_worker_deployment(
        DescribeWorkerDeploymentRequest(
            namespace=client.namespace, deployment_name=version.deployment_name
        )
    )
    info = described.worker_deployment_info
    return (
        info.routing_config.current_deployment_version.build_id == version.build_id
        and info.routing_config_update_state
        == RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED
    )


async def task_builds(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The build id of the worker that completed each of the run's workflow tasks."""
    completed = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    return [
        event.workflow_task_completed_event_attributes.deployment_version.build_id
        async for event in handle.fetch_history_events()
        if event.event_type == completed
    ]


async def after_first_task(handle: WorkflowHandle[Any, Any]) -> None:
    await wait_until(lambda: _has_tasks(handle), what=f"{handle.id} running its first task")


async def _has_tasks(handle: WorkflowHandle[Any, Any]) -> bool:
    return bool(await task_builds(handle))


async def test_pinned_runs_finish_on_their_build_while_new_and_long_lived_runs_move_on(
    client: Client, temporal_address: str, queue: str, deployment: str, build_a: Worker
) -> None:
    pinned = await client.start_workflow(RequestProbe.run, id=f"pinned-{queue}", task_queue=queue)
    long_lived = await client.start_workflow(
        LongLivedProbe.run, id=f"long-lived-{queue}", task_queue=queue
    )
    await after_first_task(pinned)
    await after_first_task(long_lived)

    version_b = WorkerDeploymentVersion(deployment, "B")
    async with build(client, queue, version_b):
        await operator_sets_current(client, temporal_address, version_b)
        fresh = await client.start_workflow(RequestProbe.run, id=f"fresh-{queue}", task_queue=queue)
        for handle in (pinned, long_lived, fresh):
            await handle.signal(RequestProbe.go)
            await asyncio.wait_for(handle.result(), 60)

    assert await task_builds(pinned) == ["A", "A"]
    assert await task_builds(long_lived) == ["A", "B"]
    assert set(await task_builds(fresh)) == {"B"}


async def test_a_later_build_waits_for_the_operator(
    client: Client, queue: str, deployment: str, build_a: Worker
) -> None:
    """`first` promotes only a deployment's first version: build B, started while A is
    current, leaves A current and new runs on A."""
    version_b = WorkerDeploymentVersion(deployment, "B")
    async with build(client, queue, version_b):
        await promote(client, version_b, Settings(worker_set_current="first"))
        run = await client.start_workflow(RequestProbe.run, id=f"run-{queue}", task_queue=queue)
        await run.signal(RequestProbe.go)
        await asyncio.wait_for(run.result(), 60)
    assert set(await task_builds(run)) == {"A"}


def test_every_workflow_that_waits_or_sweeps_is_long_lived_and_the_rest_are_pinned() -> None:
    """A workflow that can outlive a deploy (it waits on people or timers, or continues as
    new) must move to the current build; the issue names tasks, founding, transfers and the
    sweeps; an import runs its embedding batches for minutes. Every other workflow leaves
    its behaviour to the worker's default, PINNED."""
    named = {
        TaskWorkflow,
        DiaryImportWorkflow,
        TeamFoundingWorkflow,
        DiaryTransferWorkflow,
        ArtifactSweepWorkflow,
        PackSweepWorkflow,
        ConsolidationSweepWorkflow,
        ExpiredRowsPurgeWorkflow,
        StaleTaskReconcileWorkflow,
    }
    waits = ("wait_condition(", "workflow.sleep(", "continue_as_new(")
    for cls in WORKFLOWS:
        behaviour = workflow._Definition.must_from_class(cls).versioning_behavior
        if cls in named or any(word in inspect.getsource(cls) for word in waits):
            assert behaviour == LONG_LIVED, cls.__name__
        else:
            assert behaviour == VersioningBehavior.UNSPECIFIED, cls.__name__
    assert deployment_config(WorkerDeploymentVersion("d", "b")).default_versioning_behavior == (
        VersioningBehavior.PINNED
    )


def _build_id_in_a_process(cwd: Path) -> str:
    """`code_build_id()` in a new interpreter whose first import path is `cwd`."""
    code = "from workers.versioning import code_build_id; print(code_build_id())"
    env = os.environ | {"PYTHONPATH": str(repo())}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_build_id_is_the_same_in_every_process_and_changes_with_the_workflow_code(
    tmp_path: Path,
) -> None:
    here = code_build_id()
    assert here.startswith("0.") and len(here.rsplit("-", 1)[1]) == 12
    assert _build_id_in_a_process(repo()) == here
    # the same workflow modules imported from elsewhere: the same code, the same id
    copy = tmp_path / "workflows"
    shutil.copytree(repo() / "workflows", copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert _build_id_in_a_process(tmp_path) == here
    # one workflow module edited: another build
    with (copy / "tasks.py").open("a") as tasks:
        tasks.write("\n# a change to the task workflow\n")
    assert _build_id_in_a_process(tmp_path) != here


def test_the_build_id_holds_when_a_namespace_package_takes_the_package_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A folder named like the package elsewhere on the import path (once `tests/workflows`)
    can stand in `sys.modules` as a namespace package with no file: the id still hashes the
    workflow code alone, as in a worker process, never the whole working tree."""
    assert str(sys.modules["workflows"].__file__).endswith("workflows/__init__.py")
    here = code_build_id()
    stand_in = types.ModuleType("workflows")
    stand_in.__path__ = [str(repo() / "tests")]  # a namespace package: no __file__
    monkeypatch.setitem(sys.modules, "workflows", stand_in)
    assert code_build_id.__wrapped__() == here


def test_a_deployment_name_has_no_dot() -> None:
    """Temporal writes a version as `<deployment>.<build id>`: a dot in the name is refused at
    start, not when a worker first polls."""
    with pytest.raises(ValidationError):
        Settings(worker_deployment="cairn.eu")
    assert Settings(worker_deployment="cairn-eu").worker_deployment == "cairn-eu"


def test_the_dev_server_takes_more_task_queues_than_one_version_holds_by_default() -> None:
    """The suite runs ~150 stacks on one dev server, each on its own task queue and all in the
    deployment version of this code: past Temporal's default of 100 queues in a version, a new
    stack's worker was refused by the server and never got a task (the whole suite found it)."""
    from infra.devstack import DEV_SERVER_TASK_QUEUES_MAX, TemporalDevServer

    command = TemporalDevServer(db_file=None, port=7233, ui_port=None).command()
    values = {command[i + 1] for i, flag in enumerate(command) if flag == "--dynamic-config-value"}
    assert DEV_SERVER_TASK_QUEUES_MAX >= 1000
    assert f"matching.maxTaskQueuesInDeploymentVersion={DEV_SERVER_TASK_QUEUES_MAX}" in values
    assert f"matching.maxTaskQueuesInDeployment={DEV_SERVER_TASK_QUEUES_MAX}" in values
