"""Pack workflows: create, update, render, update a rendering, and the scheduled sweep.

- `PackCreate` (`packs/<diaryId>/<request CID>`): one step reads the selected entries, fits
  them to the budget, addresses the pack and inserts it with its entries and parent tuple in
  one transaction. Entry content never enters the history (500 entries of 10 000 characters
  would pass Temporal's payload cap); the pack id is the workflow's, stable under retry.
- `PackRender` (`packs/<packId>/render/<request CID>`): the server method renders inside the
  step, from the rows; an agent-defined method's Markdown (at most 500 000 characters) is the
  one body that travels through the history.
- `PackSweep` runs on a Temporal Schedule (`workers.schedules`, made at worker start):
  rendered packs first, then packs, each expired, unpinned and at most a batch per run. The
  cutoff is `workflow.now()`, so the sweep follows Temporal's clock (and the test server's).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final
from uuid import UUID

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.packs import PackActivities
    from schemas.packs import (
        PackCreated,
        PackCreateInput,
        PackSweepInput,
        PackSweepResult,
        PackSweepStep,
        PackUpdateInput,
        RenderCreated,
        RenderedPackUpdateInput,
        RenderInput,
    )
    from workflows.common import LONG_LIVED, LONG_STEP_HEARTBEAT, run_activity, run_local_step
    from workflows.steps import RequestStep, request_step, with_minted_id

SWEEP_WORKFLOW_ID: Final = "packs/sweep"
SWEEP_STEP_TIMEOUT: Final = timedelta(minutes=2)
SWEEP_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=10,
)
# Compiling 500 entries (compression of each) is more than a quick row write.
CREATE_TIMEOUT: Final = timedelta(seconds=30)


def pack_workflow_id(diary_id: UUID, request_cid: str) -> str:
    """One create per diary and canonical request body: a retried request meets the same id."""
    return f"packs/{diary_id}/{request_cid}"


def pack_update_workflow_id(pack_id: UUID, request_cid: str) -> str:
    return f"packs/{pack_id}/update/{request_cid}"


def render_workflow_id(pack_id: UUID, request_cid: str) -> str:
    return f"packs/{pack_id}/render/{request_cid}"


def rendered_update_workflow_id(rendered_id: UUID, request_cid: str) -> str:
    return f"rendered-packs/{rendered_id}/update/{request_cid}"


def sweep_schedule_id(task_queue: str) -> str:
    return f"packs-sweep/{task_queue}"


@request_step(
    "PackCreate",
    PackActivities.create_pack,
    prepare=with_minted_id("pack_id"),
    runner=run_local_step,
    start_to_close=CREATE_TIMEOUT,
)
class PackCreateWorkflow(RequestStep[PackCreateInput, PackCreated]): ...


@request_step("PackUpdate", PackActivities.update_pack, runner=run_local_step)
class PackUpdateWorkflow(RequestStep[PackUpdateInput, None]): ...


@request_step(
    "PackRender",
    PackActivities.render,
    prepare=with_minted_id("rendered_id"),
    runner=run_local_step,
    start_to_close=CREATE_TIMEOUT,
)
class PackRenderWorkflow(RequestStep[RenderInput, RenderCreated]): ...


@request_step("RenderedPackUpdate", PackActivities.update_rendered, runner=run_local_step)
class RenderedPackUpdateWorkflow(RequestStep[RenderedPackUpdateInput, None]): ...


@workflow.defn(name="PackSweep", versioning_behavior=LONG_LIVED)
class PackSweepWorkflow:
    @workflow.run
    async def run(self, inp: PackSweepInput) -> PackSweepResult:
        step = PackSweepStep(before=workflow.now(), limit=inp.batch_max)
        rendered = await run_activity(
            PackActivities.delete_expired_rendered,
            step,
            start_to_close=SWEEP_STEP_TIMEOUT,
            heartbeat=LONG_STEP_HEARTBEAT,
            retry=SWEEP_RETRY,
        )
        packs = await run_activity(
            PackActivities.delete_expired_packs,
            step,
            start_to_close=SWEEP_STEP_TIMEOUT,
            heartbeat=LONG_STEP_HEARTBEAT,
            retry=SWEEP_RETRY,
        )
        return PackSweepResult(packs_deleted=packs.deleted, rendered_deleted=rendered.deleted)
