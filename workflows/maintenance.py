"""Maintenance workflows (SPEC 6: "clean up expired signing requests, stale tasks and expired
packs on a schedule"), each on a Temporal Schedule the worker makes at start-up
(`workers.schedules.ensure_maintenance_schedules`, idempotent; visible, pausable and
triggerable in the Temporal UI or with `temporal schedule trigger`). Each run returns what it
did; the cutoffs follow `workflow.now()`, so Temporal's clock (and the time-skipping test
server's) decides what is old.

- `ExpiredRowsPurge` deletes, at most a batch of each per run: signing requests not completed
  whose expiry is more than `SIGNING_REQUEST_RETENTION_SEC` ago (until then `GET` still shows
  them `expired`; completed ones stay, they record a signature), used recovery nonces past their
  expiry (their challenge is too old to verify by then, so nothing can replay them), and
  unredeemed vouchers past their expiry (a redeemed voucher stays: an agent's `proof` names it);
  the last two an hour after expiry (`MAINTENANCE_EXPIRY_MARGIN_SEC`), so that a clock skew
  between the API's host and Temporal's cannot make a purged nonce replayable. Since the
  `connector-purge` patch it also deletes the browser OAuth connector's authorization codes,
  used or not, a day past their expiry (`CONNECTOR_CODE_RETENTION_SEC`; until then a replayed
  code is still known as used and revokes its grant), and its grants revoked or whose refresh
  token expired 30 days ago (`CONNECTOR_GRANT_RETENTION_SEC`).
- `StaleTaskReconcile` finds task rows in a non-terminal status (`queued`, `dispatched`,
  `running`) whose workflow (`task/<taskId>`) no longer runs: terminated by an operator, failed,
  or gone from Temporal altogether. Such a task can never move again, since every transition of
  SPEC 3.1 is a message to that workflow, so a claimant's heartbeats and results would be
  refused forever while the row still looks live. The reconciler settles it the way the workflow
  ends an attempt that cannot finish: the attempt in flight becomes `failed` with an error
  (`task-workflow-gone`, naming the workflow's status), the claim is cleared and the claimant
  tuple deleted, and the task becomes `failed` (terminal, as for an attempt that ends with no
  attempts left: nothing can run another attempt without its workflow), or `expired` if it was
  waiting in the queue past its `expires_at`, as its workflow would have done. The settled tasks
  are listed in the run's result and logged by the worker. Rows written in the last hour
  (`STALE_TASK_GRACE_SEC`) are not looked at, and a row the workflow finishes while the
  reconciler looks is left as the workflow wrote it (re-read under a row lock).

Expired packs are swept by the packs' own maintenance.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.maintenance import MaintenanceActivities
    from schemas.maintenance import (
        Purge,
        PurgeInput,
        PurgeResult,
        SettledTask,
        StaleTaskInput,
        StaleTaskPage,
        StaleTaskResult,
    )
    from workflows.common import LONG_LIVED, LONG_STEP_HEARTBEAT, run_activity

PURGE_WORKFLOW_ID: Final = "maintenance/purge"
# ExpiredRowsPurge's steps for the browser OAuth connector's codes and grants, added after the
# workflow was deployed
CONNECTOR_PURGE_PATCH: Final = "connector-purge"
STALE_TASKS_WORKFLOW_ID: Final = "maintenance/stale-tasks"
# A step is a batched delete or a page of describes: give it time, and keep retrying it through
# an outage (the next scheduled run would start over anyway).
STEP_TIMEOUT: Final = timedelta(minutes=5)
STEP_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=10,
)


def purge_schedule_id(task_queue: str) -> str:
    """One schedule per deployment (its task queue), even when several share a namespace."""
    return f"maintenance-purge/{task_queue}"


def stale_tasks_schedule_id(task_queue: str) -> str:
    return f"maintenance-stale-tasks/{task_queue}"


@workflow.defn(name="ExpiredRowsPurge", versioning_behavior=LONG_LIVED)
class ExpiredRowsPurgeWorkflow:
    @workflow.run
    async def run(self, inp: PurgeInput) -> PurgeResult:
        now = workflow.now()
        signing_cutoff = now - timedelta(seconds=inp.signing_retention_sec)
        expired_cutoff = now - timedelta(seconds=inp.expiry_margin_sec)
        signing = await run_activity(
            MaintenanceActivities.purge_signing_requests,
            Purge(before=signing_cutoff, limit=inp.batch_max),
            start_to_close=STEP_TIMEOUT,
            heartbeat=LONG_STEP_HEARTBEAT,
            retry=STEP_RETRY,
        )
        nonces = await run_activity(
            MaintenanceActivities.purge_recovery_nonces,
            Purge(before=expired_cutoff, limit=inp.batch_max),
            start_to_close=STEP_TIMEOUT,
            heartbeat=LONG_STEP_HEARTBEAT,
            retry=STEP_RETRY,
        )
        vouchers = await run_activity(
            MaintenanceActivities.purge_vouchers,
            Purge(before=expired_cutoff, limit=inp.batch_max),
            start_to_close=STEP_TIMEOUT,
            heartbeat=LONG_STEP_HEARTBEAT,
            retry=STEP_RETRY,
        )
        codes = grants = 0
        # runs started before the connector's purge replay the three steps they recorded
        if workflow.patched(CONNECTOR_PURGE_PATCH):
            codes, grants = await self._purge_connector(inp, now)
        return PurgeResult(
            signing_requests_deleted=signing.deleted,
            recovery_nonces_deleted=nonces.deleted,
            vouchers_deleted=vouchers.deleted,
            connector_codes_deleted=codes,
            connector_grants_deleted=grants,
        )

    async def _purge_connector(self, inp: PurgeInput, now: datetime) -> tuple[int, int]:
        """The browser OAuth connector's used or expired codes and its ended grants."""
        codes = await run_activity(
            MaintenanceActivities.purge_connector_codes,
            Purge(
                before=now - timedelta(seconds=inp.connector_code_retention_sec),
                limit=inp.batch_max,
            ),
            start_to_close=STEP_TIMEOUT,
            heartbeat=LONG_STEP_HEARTBEAT,
            retry=STEP_RETRY,
        )
        grants = await run_activity(
            MaintenanceActivities.purge_connector_grants,
            Purge(
                before=now - timedelta(seconds=inp.connector_grant_retention_sec),
                limit=inp.batch_max,
            ),
            start_to_close=STEP_TIMEOUT,
            heartbeat=LONG_STEP_HEARTBEAT,
            retry=STEP_RETRY,
        )
        return codes.deleted, grants.deleted


@workflow.defn(name="StaleTaskReconcile", versioning_behavior=LONG_LIVED)
class StaleTaskReconcileWorkflow:
    @workflow.run
    async def run(self, inp: StaleTaskInput) -> StaleTaskResult:
        checked, stale = 0, 0
        settled: list[SettledTask] = []
        before = workflow.now() - timedelta(seconds=inp.grace_sec)
        page = StaleTaskPage(before=before, after=None, limit=inp.page)
        while checked < inp.scan_max:
            scan = await run_activity(
                MaintenanceActivities.find_stale_tasks,
                page,
                start_to_close=STEP_TIMEOUT,
                heartbeat=LONG_STEP_HEARTBEAT,
                retry=STEP_RETRY,
            )
            checked += scan.checked
            stale += len(scan.stale)
            for task in scan.stale:
                outcome = await run_activity(
                    MaintenanceActivities.settle_stale_task,
                    task,
                    start_to_close=STEP_TIMEOUT,
                    retry=STEP_RETRY,
                )
                if outcome.status is not None:
                    settled.append(outcome)
            if scan.checked < inp.page or scan.last_id is None:
                break
            page = StaleTaskPage(before=before, after=scan.last_id, limit=inp.page)
        return StaleTaskResult(checked=checked, stale=stale, settled=settled)
