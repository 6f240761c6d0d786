"""Diary writes: create (row + team binding), update, delete (rows + every tuple), grants.

Each is a short request workflow with one activity step; the API awaits the result.
"""

from __future__ import annotations

from uuid import UUID

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.memory import MemoryActivities
    from schemas.memory import DiaryCreateInput, DiaryRef, DiaryUpdateInput, GrantChange
    from workflows.common import run_step


def diary_create_workflow_id(diary_id: UUID) -> str:
    return f"diaries/{diary_id}/create"


@workflow.defn(name="DiaryCreate")
class DiaryCreateWorkflow:
    @workflow.run
    async def run(self, inp: DiaryCreateInput) -> None:
        await run_step(MemoryActivities.create_diary, inp)


def diary_update_workflow_id(diary_id: UUID) -> str:
    """Keyed by the diary alone: a retried PATCH hits the same id, and two changes of one
    diary never run at once (the second answers 409 "This diary is being updated"); once a
    change has ended, the next one runs under the same id."""
    return f"diaries/{diary_id}/update"


@workflow.defn(name="DiaryUpdate")
class DiaryUpdateWorkflow:
    @workflow.run
    async def run(self, inp: DiaryUpdateInput) -> None:
        await run_step(MemoryActivities.update_diary, inp)


def diary_delete_workflow_id(diary_id: UUID) -> str:
    return f"diaries/{diary_id}/delete"


@workflow.defn(name="DiaryDelete")
class DiaryDeleteWorkflow:
    @workflow.run
    async def run(self, inp: DiaryRef) -> None:
        await run_step(MemoryActivities.delete_diary, inp)


def diary_grant_workflow_id(change: GrantChange) -> str:
    """Keyed by the grant (diary, subject, role), for writing and revoking alike, as task grants
    are: a retried request hits the same id, and a grant and its revocation never race."""
    return f"diaries/{change.diary_id}/grants/{change.subject_ns}:{change.subject_id}/{change.role}"


@workflow.defn(name="DiaryGrantWrite")
class DiaryGrantWriteWorkflow:
    @workflow.run
    async def run(self, inp: GrantChange) -> None:
        await run_step(MemoryActivities.write_grant, inp)


@workflow.defn(name="DiaryGrantRevoke")
class DiaryGrantRevokeWorkflow:
    @workflow.run
    async def run(self, inp: GrantChange) -> None:
        await run_step(MemoryActivities.revoke_grant, inp)
