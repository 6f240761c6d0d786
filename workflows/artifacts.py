"""Task-artifact workflows: the rows of an upload, and the scheduled sweep.

- `ArtifactStage` (`artifacts/staged/<teamId>/<cid>`) and `ArtifactAttach`
  (`artifacts/<taskId>/<n>/<cid>`) write the rows of an upload whose bytes the API has hashed.
  Their one step is a local activity: a short transaction on the upload's latency path.
- `ArtifactSweep` runs on a Temporal Schedule (`workers.schedules`, made at worker
  start; an operator can trigger it from the UI or `temporal schedule trigger`). One run deletes
  at most a batch of staged rows unbound past the grace period, then at most a batch of blobs
  nothing names any more (the row and the S3 object). The cutoff is `workflow.now()` minus the
  grace, so the sweep follows Temporal's clock (and the time-skipping test server's).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final
from uuid import UUID

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.artifacts import ArtifactActivities
    from schemas.artifacts import (
        ArtifactAttachInput,
        ArtifactStageInput,
        ArtifactSweepInput,
        ArtifactSweepResult,
        AttachedArtifact,
        BlobSweep,
        StagedExpiry,
    )
    from workflows.common import LONG_LIVED, LONG_STEP_HEARTBEAT, run_activity, run_local_step
    from workflows.steps import RequestStep, request_step

SWEEP_WORKFLOW_ID: Final = "artifacts/sweep"
# A sweep step is a batched delete, and S3 may be slow: give it time and keep retrying it
# through an outage (the next scheduled run would start over anyway).
SWEEP_STEP_TIMEOUT: Final = timedelta(minutes=5)
SWEEP_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=10,
)


def stage_workflow_id(team_id: UUID, cid: str) -> str:
    return f"artifacts/staged/{team_id}/{cid}"


def attach_workflow_id(task_id: UUID, attempt_n: int, cid: str) -> str:
    return f"artifacts/{task_id}/{attempt_n}/{cid}"


def sweep_schedule_id(task_queue: str) -> str:
    """One schedule per deployment (its task queue), even when several share a namespace."""
    return f"artifacts-sweep/{task_queue}"


@request_step("ArtifactStage", ArtifactActivities.stage, runner=run_local_step)
class ArtifactStageWorkflow(RequestStep[ArtifactStageInput, None]): ...


@request_step("ArtifactAttach", ArtifactActivities.attach, runner=run_local_step)
class ArtifactAttachWorkflow(RequestStep[ArtifactAttachInput, AttachedArtifact]): ...


@workflow.defn(name="ArtifactSweep", versioning_behavior=LONG_LIVED)
class ArtifactSweepWorkflow:
    @workflow.run
    async def run(self, inp: ArtifactSweepInput) -> ArtifactSweepResult:
        cutoff = workflow.now() - timedelta(seconds=inp.grace_sec)
        staged = await run_activity(
            ArtifactActivities.expire_staged,
            StagedExpiry(before=cutoff, limit=inp.batch_max),
            start_to_close=SWEEP_STEP_TIMEOUT,
            heartbeat=LONG_STEP_HEARTBEAT,
            retry=SWEEP_RETRY,
        )
        blobs = await run_activity(
            ArtifactActivities.delete_unreferenced_blobs,
            BlobSweep(limit=inp.batch_max),
            start_to_close=SWEEP_STEP_TIMEOUT,
            heartbeat=LONG_STEP_HEARTBEAT,
            retry=SWEEP_RETRY,
        )
        return ArtifactSweepResult(staged_deleted=staged.deleted, blobs_deleted=blobs.deleted)
