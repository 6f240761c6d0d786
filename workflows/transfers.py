"""A diary transfer (SPEC 3.3): store it pending, wait up to 7 days for the destination's
decision, then accept (move the diary), reject, or expire it.

The API starts the workflow together with the `diary.transfer.stored` update
(update-with-start), which answers once the pending row exists, or with the reason it could not
be stored (another transfer pending, destination not eligible). The decision is the
`TRANSFER_DECISION_EVENT` update of SPEC 6: its validator refuses, before anything is written, a
decision on a transfer that is no longer pending (409 `diary-transfer-already-resolved`), so a
repeated or late accept costs nothing; the handler runs one activity (accept moves the diary and
swaps its team tuple in one transaction) and answers with the resolved record. Who may decide
(an owner of the destination team) is checked by the API with the permission engine before the
update is sent. Without a decision by the deadline the transfer is `expired` and the diary
stays where it was.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from activities.transfers import TransferActivities
    from schemas import limits
    from schemas.errors import DiaryTransferNotReady, ServiceUnavailable
    from schemas.transfers import (
        TRANSFER_DECISION_EVENT,
        TRANSFER_RECORD_QUERY,
        TRANSFER_STORED,
        TransferDecision,
        TransferInput,
        TransferInsert,
        TransferRecord,
        TransferResolve,
        already_resolved,
    )
    from workflows.common import (
        LONG_LIVED,
        STEP_FAILURES,
        domain_failure,
        run_step,
        step_refused,
    )

# Nobody waits on an expiry, so it is retried until the database answers.
BACKGROUND_RETRY = RetryPolicy(maximum_interval=timedelta(minutes=1))
# A timer needs a positive duration, even when storing the row ate the whole wait.
MIN_WAIT = timedelta(seconds=1)


def transfer_workflow_id(transfer_id: UUID) -> str:
    return f"transfers/{transfer_id}"


@workflow.defn(name="DiaryTransfer", versioning_behavior=LONG_LIVED)
class DiaryTransferWorkflow:
    @workflow.init
    def __init__(self, inp: TransferInput) -> None:
        self._inp = inp
        self._record: TransferRecord | None = None
        self._store_failure: FailureError | None = None
        # The decision being recorded: set when a decision update is accepted, so that a
        # second one is refused while the first is still being written.
        self._deciding: TransferDecision | None = None
        self._deadline_passed = False

    @workflow.run
    async def run(self, inp: TransferInput) -> TransferRecord:
        deadline = workflow.now() + limits.DIARY_TRANSFER_WAIT
        if not await self._store(deadline):
            await workflow.wait_condition(workflow.all_handlers_finished)
            assert self._store_failure is not None
            raise self._store_failure
        await self._await_decision(deadline)
        await workflow.wait_condition(workflow.all_handlers_finished)
        assert self._record is not None
        return self._record

    async def _store(self, deadline: datetime) -> bool:
        """Insert the pending row; False (with the failure kept for `stored`) when refused."""
        try:
            self._record = await run_step(
                TransferActivities.insert_transfer,
                TransferInsert(
                    transfer=self._inp,
                    workflow_id=workflow.info().workflow_id,
                    expires_at=deadline,
                ),
            )
        except STEP_FAILURES as failure:
            self._store_failure = failure
            return False
        return True

    def _resolved(self) -> bool:
        return self._record is not None and self._record.status != "pending"

    async def _await_decision(self, deadline: datetime) -> None:
        """Until a decision is recorded; at the deadline, expire unless a decision is being
        recorded right then (it wins if its write succeeds)."""
        try:
            await workflow.wait_condition(
                self._resolved, timeout=max(deadline - workflow.now(), MIN_WAIT)
            )
            return
        except TimeoutError:
            self._deadline_passed = True
        await workflow.wait_condition(lambda: self._deciding is None or self._resolved())
        if self._resolved():
            return
        expired = await workflow.execute_activity_method(
            TransferActivities.expire_transfer,
            TransferResolve(transfer_id=self._inp.transfer_id),
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=BACKGROUND_RETRY,
        )
        assert self._record is not None
        # None: the diary was deleted, and its transfer with it; report the transfer expired.
        self._record = expired or self._record.model_copy(update={"status": "expired"})

    @workflow.update(name=TRANSFER_STORED)
    async def stored(self) -> TransferRecord:
        """The pending transfer (the API's 201), or the reason it was not stored."""
        await workflow.wait_condition(
            lambda: self._record is not None or self._store_failure is not None
        )
        if self._record is None:
            assert self._store_failure is not None
            raise self._store_failure
        return self._record

    @workflow.update(name=TRANSFER_DECISION_EVENT)
    async def decide(self, decision: TransferDecision) -> TransferRecord:
        """Record the destination's decision and answer with the resolved transfer. The same
        decision again (a retry) answers what the first one reached."""
        if self._repeats(decision):
            return await self._outcome_of(decision)
        self._deciding = decision
        step = (
            TransferActivities.accept_transfer
            if decision.decision == "accepted"
            else TransferActivities.reject_transfer
        )
        try:
            record = await run_step(step, TransferResolve(transfer_id=self._inp.transfer_id))
        except STEP_FAILURES as failure:
            # Nothing was written: the transfer stays pending and takes a decision again.
            self._deciding = None
            if step_refused(failure):
                raise  # a refusal (destination archived, diary moved): the caller's problem
            raise domain_failure(
                ServiceUnavailable("The decision could not be recorded; send it again")
            ) from None
        workflow.logger.info(
            "transfer decided",
            extra={"decision": decision.decision, "decided_by": str(decision.decided_by)},
        )
        self._record = record
        return record

    def _repeats(self, decision: TransferDecision) -> bool:
        """The decision already being recorded, or already recorded."""
        deciding = self._deciding is not None and self._deciding.decision == decision.decision
        return deciding or (self._record is not None and self._record.status == decision.decision)

    async def _outcome_of(self, decision: TransferDecision) -> TransferRecord:
        await workflow.wait_condition(lambda: self._deciding is None or self._resolved())
        assert self._record is not None
        if self._record.status == decision.decision:
            return self._record
        # the first one could not be recorded (it told its caller why): this one may retry
        raise domain_failure(
            ServiceUnavailable("The decision could not be recorded; send it again")
        )

    @decide.validator
    def _decision_allowed(self, decision: TransferDecision) -> None:
        if self._record is None:
            raise domain_failure(DiaryTransferNotReady("The transfer is not stored yet"))
        if self._repeats(decision):
            return  # a repeat is answered with the outcome; only the opposite is refused
        if self._deadline_passed:
            raise domain_failure(already_resolved("expired"))
        if self._deciding is not None:
            raise domain_failure(already_resolved(self._deciding.decision))
        if self._record.status != "pending":
            raise domain_failure(already_resolved(self._record.status))

    @workflow.query(name=TRANSFER_RECORD_QUERY)
    def record(self) -> TransferRecord | None:
        """The transfer as the workflow last knows it (None until stored)."""
        return self._record
