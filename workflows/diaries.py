"""Diary writes: create (row + team binding), update, delete (rows + every tuple), grants.

Each is a short request workflow with one activity step; the API awaits the result.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.memory import MemoryActivities
    from schemas.memory import DiaryCreateInput, DiaryRef, DiaryUpdateInput, GrantChange
    from workflows.common import run_step


@workflow.defn(name="DiaryCreate")
class DiaryCreateWorkflow:
    @workflow.run
    async def run(self, inp: DiaryCreateInput) -> None:
        await run_step(MemoryActivities.create_diary, inp)


@workflow.defn(name="DiaryUpdate")
class DiaryUpdateWorkflow:
    @workflow.run
    async def run(self, inp: DiaryUpdateInput) -> None:
        await run_step(MemoryActivities.update_diary, inp)


@workflow.defn(name="DiaryDelete")
class DiaryDeleteWorkflow:
    @workflow.run
    async def run(self, inp: DiaryRef) -> None:
        await run_step(MemoryActivities.delete_diary, inp)


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
