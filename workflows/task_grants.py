"""Explicit task grants (SPEC 5, Task `writers` / `managers`): one tuple written or deleted.

A grant is a permission fact, not part of the task's lifecycle, so it does not go through the
attempt workflow `task/<taskId>` (which may have finished long ago: a completed task can still
be shared). Each is a short request workflow with one activity step; the API awaits it.
"""

from __future__ import annotations

from uuid import UUID

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.permissions import PermissionActivities
    from schemas.kernel.permissions import (
        TupleDelete,
        TupleDeleteResult,
        TupleWrite,
        TupleWriteResult,
    )
    from workflows.steps import RequestStep, request_step


def task_grant_workflow_id(task_id: UUID, subject_ns: str, subject_id: UUID, role: str) -> str:
    """Keyed by the grant, for writing and revoking alike: a retried request hits the same id,
    and a grant and its revocation never race (409 `grant-in-progress`)."""
    return f"task/{task_id}/grants/{subject_ns}:{subject_id}/{role}"


@request_step("TaskGrantWrite", PermissionActivities.write_tuples)
class TaskGrantWriteWorkflow(RequestStep[TupleWrite, TupleWriteResult]): ...


@request_step("TaskGrantRevoke", PermissionActivities.delete_tuples)
class TaskGrantRevokeWorkflow(RequestStep[TupleDelete, TupleDeleteResult]): ...
