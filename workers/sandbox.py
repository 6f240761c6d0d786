"""The workflow sandbox every workflow of the service runs in: temporalio's own, restrictions
and all, with one cost taken out.

temporalio 1.35 asks a run for the serialization context of each payload sequence it decodes
or encodes (six passes over every activation and its completion, `temporalio.bridge.worker`).
The sandboxed runner answers each ask by entering the sandbox: it compiles a two-line snippet
and runs it under the sandbox's import hook, swapping `sys.modules`, `__import__` and the
restricted builtins in and out. The answer is plain data read off the run's pending commands
(`_WorkflowInstanceImpl.get_serialization_context`: which activity, which child workflow),
with no import and no workflow code, so `SandboxedWorkflows` asks the run directly. Workflow
code itself still runs inside the sandbox exactly as before; only these two lookups skip the
entry. On the task lifecycle (bench/tasks.py) the lookups were ~5 % of the worker's CPU
(py-spy, issue 32).
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.converter import SerializationContext
from temporalio.converter._extstore import StorageDriverStoreContext
from temporalio.worker import _command_aware_visitor
from temporalio.worker._workflow_instance import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox._runner import _Instance

CommandInfo = _command_aware_visitor.CommandInfo
# where `_Instance` keeps the run it created inside the sandbox (`InSandbox`)
IN_SANDBOX = "__temporal_in_sandbox"


class _DirectContexts(_Instance):
    """A sandboxed run whose payload contexts are read off the run without entering the
    sandbox (see the module)."""

    def _run_in_sandbox(self) -> WorkflowInstance:
        run: WorkflowInstance = self.globals_and_locals[IN_SANDBOX]  # type: ignore[assignment]
        return run

    def get_serialization_context(
        self, command_info: CommandInfo | None
    ) -> SerializationContext | None:
        return self._run_in_sandbox().get_serialization_context(command_info)

    def get_external_store_context(
        self, command_info: CommandInfo | None
    ) -> StorageDriverStoreContext:
        return self._run_in_sandbox().get_external_store_context(command_info)


@dataclass(frozen=True)
class SandboxedWorkflows(SandboxedWorkflowRunner):
    """`SandboxedWorkflowRunner` (default restrictions) whose runs answer payload contexts
    directly: the runner of the service's workers and of the replay tests."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _DirectContexts(det, self.runner_class, self.restrictions)
