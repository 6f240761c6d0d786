"""Diary writes: create (row + team binding), update, delete (rows + every tuple), grants.

Each is a short request workflow with one activity step; the API awaits the result.
"""

from __future__ import annotations

from uuid import UUID

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.memory import MemoryActivities
    from schemas.memory import DiaryCreateInput, DiaryRef, DiaryUpdateInput, GrantChange
    from workflows.steps import RequestStep, request_step


def diary_create_workflow_id(diary_id: UUID) -> str:
    return f"diaries/{diary_id}/create"


@request_step("DiaryCreate", MemoryActivities.create_diary)
class DiaryCreateWorkflow(RequestStep[DiaryCreateInput, None]): ...


def diary_update_workflow_id(diary_id: UUID) -> str:
    """Keyed by the diary alone: a retried PATCH hits the same id, and two changes of one
    diary never run at once (the second answers 409 "This diary is being updated"); once a
    change has ended, the next one runs under the same id."""
    return f"diaries/{diary_id}/update"


@request_step("DiaryUpdate", MemoryActivities.update_diary)
class DiaryUpdateWorkflow(RequestStep[DiaryUpdateInput, None]): ...


def diary_delete_workflow_id(diary_id: UUID) -> str:
    return f"diaries/{diary_id}/delete"


@request_step("DiaryDelete", MemoryActivities.delete_diary)
class DiaryDeleteWorkflow(RequestStep[DiaryRef, None]): ...


def diary_grant_workflow_id(change: GrantChange) -> str:
    """Keyed by the grant (diary, subject, role), for writing and revoking alike, as task grants
    are: a retried request hits the same id, and a grant and its revocation never race."""
    return f"diaries/{change.diary_id}/grants/{change.subject_ns}:{change.subject_id}/{change.role}"


@request_step("DiaryGrantWrite", MemoryActivities.write_grant)
class DiaryGrantWriteWorkflow(RequestStep[GrantChange, None]): ...


@request_step("DiaryGrantRevoke", MemoryActivities.revoke_grant)
class DiaryGrantRevokeWorkflow(RequestStep[GrantChange, None]): ...
