"""The workers' sandbox (workers/sandbox.py): a run answers the payload contexts temporalio asks
for on every activation without entering the sandbox, and answers what the stock runner does.
(Async: a run is made on a running event loop, as a worker makes it.)"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import CommandType
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DataConverter
from temporalio.worker._command_aware_visitor import CommandInfo
from temporalio.worker._workflow_instance import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox._runner import _fake_info
from temporalio.workflow import _Definition

from workers.sandbox import SandboxedWorkflows
from workflows.entry_create import EntryCreateWorkflow
from workflows.tasks import TaskWorkflow

# no pending command has sequence number 1 in a fresh run: the workflow's own context
ASKED = (
    None,
    CommandInfo(command_type=CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK, command_seq=1),
)


def details(workflow: type) -> WorkflowInstanceDetails:
    """A run of `workflow` as the runner's own `prepare_workflow` makes one to validate it."""
    return WorkflowInstanceDetails(
        payload_converter_factory=DataConverter.default._new_payload_converter,
        failure_converter_class=DataConverter.default.failure_converter_class,
        interceptor_classes=[],
        defn=_Definition.must_from_class(workflow),
        info=_fake_info,
        randomness_seed=-1,
        extern_functions={},
        disable_eager_activity_execution=False,
        worker_level_failure_exception_types=[],
        patch_activation_callback=None,
        last_completion_result=Payloads(),
        last_failure=Failure(),
    )


def entries_counted(instance: WorkflowInstance, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The code the instance runs inside the sandbox from now on."""
    entered: list[str] = []
    run_code = instance._run_code  # type: ignore[attr-defined]

    def counting(code: str, **extra: Any) -> None:
        entered.append(code)
        run_code(code, **extra)

    monkeypatch.setattr(instance, "_run_code", counting)
    return entered


@pytest.mark.parametrize("workflow", [TaskWorkflow, EntryCreateWorkflow])
async def test_payload_contexts_are_answered_without_entering_the_sandbox(
    workflow: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = SandboxedWorkflows().create_instance(details(workflow))
    stock = SandboxedWorkflowRunner().create_instance(details(workflow))
    entered = entries_counted(ours, monkeypatch)
    for command in ASKED:
        assert ours.get_serialization_context(command) == stock.get_serialization_context(command)
        assert ours.get_external_store_context(command) == stock.get_external_store_context(command)
    assert entered == []


async def test_workflow_code_still_runs_in_the_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the two lookups skip the sandbox: the stock runner's instance enters it for them,
    ours does not, and both are the same sandbox otherwise."""
    stock = SandboxedWorkflowRunner().create_instance(details(TaskWorkflow))
    entered = entries_counted(stock, monkeypatch)
    stock.get_serialization_context(None)
    assert len(entered) == 1
    assert isinstance(SandboxedWorkflows(), SandboxedWorkflowRunner)


def test_entry_create_has_its_module_to_itself() -> None:
    """The sandbox re-imports a workflow's module for every new run, and every creation is a
    new run: no other workflow is defined (and inspected again) beside `EntryCreate`."""
    module = importlib.import_module(EntryCreateWorkflow.__module__)
    defined = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and value.__module__ == module.__name__
        and _Definition.from_class(value) is not None
    ]
    assert defined == [EntryCreateWorkflow]
