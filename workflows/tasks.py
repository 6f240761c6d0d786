"""The attempt workflow: one per task (id `task/<taskId>`), owner of its state machine (SPEC 3.1).

The API starts it with Update-with-Start on `created`, which answers once the `tasks` row and
its tuples (Task `team`, Task `parent`) exist. From then on the task lives here:

- `claim` (queued → dispatched): a new attempt, `claimed`, with a lease (default 300 s); the
  claimant tuple is written and `AgentId` is set on the run for operators.
- `heartbeat` by the claimant: the first starts the attempt (attempt and task `running`); each
  one refreshes `claim_expires_at` (now + lease). After a cancel it answers `cancelled: true`.
  The API sends the heartbeats of an attempt already running as the `liveness` signal instead:
  they change no state, only the lease, and a signal costs the server far less than an Update.
  One that no longer matches the running attempt (it ended meanwhile) changes nothing.
- `complete` / `fail` / `abort` by the claimant of the started, current attempt; `cancel` by an
  owner, manager or task manager (checked by the API) from any non-terminal status.
- Timers: no first heartbeat within `dispatch_timeout_sec` (300 s), no heartbeat within the
  lease, or no result within `running_timeout_sec` (7200 s) of the start time the attempt out
  (`timed_out`); `expires_at` expires a task still waiting in the queue.
- An attempt that ends without a result (timed out, aborted, or failed with `retryable`) puts
  the task back in the queue while it has attempts left (`max_attempts`), else fails it.

Every message is an Update whose validator answers the 409 guards before anything is written.
An accepted message changes the state here first (so a racing second claim is refused by its
validator) and then projects it into Postgres through a local activity, in order, retried until
it lands: the rows the API reads are this state. The history stays bounded: past
`TASK_WORKFLOW_HISTORY_MAX_EVENTS` events the run continues as new at a quiet moment, handing
its state (`TaskCarry`) to the next run; deadlines are absolute times, so they carry over.

Choices where the spec is silent: `claim_expires_at` is the claim time plus the lease until the
first heartbeat, while the dispatch deadline (`dispatch_timeout_sec`) decides the timeout; a
task returning to the queue after its `expires_at` expires at once; `completed_at` is the time a
task reached any terminal status; an abort's reason is stored as the attempt's `error`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from activities.tasks import TaskActivities
    from schemas import limits
    from schemas.errors import (
        AttemptNotClaimed,
        TaskNotQueued,
    )
    from schemas.kernel.attempts import is_claimant, state_refusal
    from schemas.task_attempts import (
        ABORT_UPDATE,
        CANCEL_UPDATE,
        CLAIM_UPDATE,
        COMPLETE_UPDATE,
        CREATED_UPDATE,
        FAIL_UPDATE,
        HEARTBEAT_UPDATE,
        LIVENESS_SIGNAL,
        STATE_QUERY,
        TASK_WORKFLOW,
        AbortCommand,
        AttemptState,
        CancelCommand,
        ClaimCommand,
        ClaimGranted,
        CompleteCommand,
        FailCommand,
        HeartbeatAck,
        HeartbeatCommand,
        Settled,
        TaskCarry,
        TaskCreated,
        TaskProjection,
        TaskState,
        TimeoutReason,
        attempt_finished,
        not_claimant,
        report_refused,
        task_finished,
    )
    from schemas.tasks import TERMINAL_ATTEMPT_STATUSES, TERMINAL_TASK_STATUSES, TaskStart
    from workflows.common import (
        AGENT_ID,
        LONG_LIVED,
        REQUEST_RETRY,
        STEP_FAILURES,
        domain_failure,
    )

# A transition has happened here; its projection must land even if Postgres is away for a
# while, so it is retried until it does (the state never rolls back).
PROJECTION_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=100),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=0,
)
PROJECTION_TIMEOUT = timedelta(seconds=10)

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
Due = tuple[datetime, Literal["expire"] | TimeoutReason]


@workflow.defn(name=TASK_WORKFLOW, versioning_behavior=LONG_LIVED)
class TaskWorkflow:
    @workflow.init
    def __init__(self, start: TaskStart, carry: TaskCarry | None = None) -> None:
        self._start = start
        self._task = carry.task if carry else TaskState()
        self._attempt = carry.attempt if carry else None
        self._trace = carry.trace_id if carry and carry.trace_id else None
        self._inserted = carry is not None
        self._insert_failure: FailureError | None = None
        # The deadline the main loop sleeps until, and a counter bumped to wake it earlier.
        self._sleeping_until: datetime | None = None
        self._wake = 0
        self._projecting = asyncio.Lock()

    @workflow.run
    async def run(self, start: TaskStart, carry: TaskCarry | None = None) -> TaskState:
        self._trace_id()
        if not self._inserted and not await self._insert():
            await workflow.wait_condition(workflow.all_handlers_finished)
            assert self._insert_failure is not None
            raise self._insert_failure
        while not self._finished():
            if self._history_is_long():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self._finished():
                    workflow.continue_as_new(
                        args=[start, self._carry()],
                        search_attributes=workflow.info().typed_search_attributes,
                    )
            await self._until_next_deadline()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._task

    # --- the main loop: creation, deadlines, history ---------------------------------------------

    async def _insert(self) -> bool:
        try:
            await workflow.execute_local_activity_method(
                TaskActivities.insert_task,
                self._start,
                start_to_close_timeout=PROJECTION_TIMEOUT,
                retry_policy=REQUEST_RETRY,
            )
        except STEP_FAILURES as failure:
            self._insert_failure = failure  # the `created` update reports it
            return False
        self._inserted = True
        return True

    def _finished(self) -> bool:
        return self._task.status in TERMINAL_TASK_STATUSES

    def _history_is_long(self) -> bool:
        info = workflow.info()
        return (
            info.get_current_history_length() >= limits.TASK_WORKFLOW_HISTORY_MAX_EVENTS
            or info.is_continue_as_new_suggested()
        )

    async def _until_next_deadline(self) -> None:
        """Sleep until the next deadline, an earlier one, the end, or a long history; then act
        on a deadline that has really passed. A deadline that moved later (a heartbeat renewing
        the lease, a first heartbeat after the dispatch deadline was set) does not wake the
        loop: it finds the new one when its timer fires, which saves a timer per transition."""
        due = self._next_deadline()
        if due is not None and due[0] <= workflow.now():
            await self._on_deadline(due)
            return
        self._sleeping_until = None if due is None else due[0]
        seen = self._wake
        with contextlib.suppress(TimeoutError):  # the loop looks at the deadline again
            await workflow.wait_condition(
                lambda: self._wake != seen or self._finished() or self._history_is_long(),
                timeout=None if due is None else due[0] - workflow.now(),
            )

    def _reschedule(self) -> None:
        """Wake the main loop when the state now has a deadline earlier than its timer."""
        due = self._next_deadline()
        if due is not None and (self._sleeping_until is None or due[0] < self._sleeping_until):
            self._wake += 1

    def _next_deadline(self) -> Due | None:
        task, attempt, start = self._task, self._attempt, self._start
        if task.status == "queued":
            return None if start.expires_at is None else (start.expires_at, "expire")
        if attempt is None:
            return None
        if task.status == "dispatched":
            dispatch = timedelta(seconds=start.dispatch_timeout_sec)
            return attempt.claimed_at + dispatch, "dispatch_expired"
        if task.status == "running":
            assert attempt.started_at is not None and attempt.last_heartbeat_at is not None
            lease = attempt.last_heartbeat_at + timedelta(seconds=attempt.lease_ttl_sec)
            total = attempt.started_at + timedelta(seconds=start.running_timeout_sec)
            return (lease, "lease_expired") if lease < total else (total, "running_total_exceeded")
        return None

    async def _on_deadline(self, due: Due) -> None:
        """Act on a passed deadline, dated when it passed (not when a worker got to it)."""
        at, reason = due
        if reason == "expire":
            if self._attempt is not None and self._attempt.finished_at is not None:
                at = max(at, self._attempt.finished_at)  # requeued after its expiry
            self._task = self._task.model_copy(update={"status": "expired", "completed_at": at})
            await self._project(self._projection())
            return
        await self._end_attempt("timed_out", requeue=True, update={"timeout_reason": reason}, at=at)

    # --- updates ---------------------------------------------------------------------------------

    @workflow.update(name=CREATED_UPDATE)
    async def created(self) -> TaskCreated:
        """Answers once the task row exists (the API's 201), or with why it could not."""
        await workflow.wait_condition(lambda: self._inserted or self._insert_failure is not None)
        if self._insert_failure is not None:
            raise self._insert_failure
        return TaskCreated(task_id=self._start.task_id)

    @workflow.update(name=CLAIM_UPDATE)
    async def claim(self, command: ClaimCommand) -> ClaimGranted:
        now = workflow.now()
        attempt_n = self._task.attempt_count + 1
        expires = now + timedelta(seconds=command.lease_ttl_sec)
        self._attempt = AttemptState(
            attempt_id=workflow.uuid4(),
            attempt_n=attempt_n,
            agent_id=command.agent_id,
            lease_id=workflow.uuid4(),
            status="claimed",
            lease_ttl_sec=command.lease_ttl_sec,
            claimed_at=now,
            claim_expires_at=expires,
            traceparent=self._new_traceparent(),
            runtime_id=command.runtime_id,
            runtime_profile_id=command.runtime_profile_id,
            runtime_profile_revision=command.runtime_profile_revision,
            policy_snapshot=command.policy_snapshot,
            policy_snapshot_hash=command.policy_snapshot_hash,
        )
        self._task = self._task.model_copy(
            update={
                "status": "dispatched",
                "attempt_count": attempt_n,
                "claim_agent_id": command.agent_id,
                "claim_expires_at": expires,
            }
        )
        self._reschedule()
        workflow.upsert_search_attributes([AGENT_ID.value_set(str(command.agent_id))])
        await self._project(self._projection(grant_claimant=command.agent_id))
        return ClaimGranted(
            attempt_n=attempt_n,
            attempt_id=self._attempt.attempt_id,
            claim_expires_at=expires,
            traceparent=self._attempt.traceparent,
        )

    @claim.validator
    def _check_claim(self, command: ClaimCommand) -> None:
        if not self._inserted:
            raise domain_failure(TaskNotQueued("The task is being created"))
        if self._task.status != "queued":
            raise domain_failure(TaskNotQueued(f"The task is {self._task.status}, not queued"))

    @workflow.update(name=HEARTBEAT_UPDATE)
    async def heartbeat(self, command: HeartbeatCommand) -> HeartbeatAck:
        attempt = self._current()
        if self._task.status == "cancelled":
            return self._cancelled_ack(attempt)
        expires = await self._renew(attempt, command.lease_ttl_sec)
        return HeartbeatAck(cancelled=False, claim_expires_at=expires)

    @workflow.signal(name=LIVENESS_SIGNAL)
    async def liveness(self, command: HeartbeatCommand) -> None:
        attempt = self._attempt
        if (
            attempt is None
            or attempt.status != "running"
            or attempt.attempt_n != command.attempt_n
            or attempt.agent_id != command.agent_id
        ):
            return  # the attempt ended (or another began) after the API read its row
        await self._renew(attempt, command.lease_ttl_sec)

    async def _renew(self, attempt: AttemptState, lease_ttl_sec: int | None) -> datetime:
        """The claimant is alive: the attempt runs, its lease starts again from now."""
        now = workflow.now()
        lease = lease_ttl_sec or attempt.lease_ttl_sec
        expires = now + timedelta(seconds=lease)
        self._attempt = attempt.model_copy(
            update={
                "status": "running",
                "started_at": attempt.started_at or now,
                "last_heartbeat_at": now,
                "lease_ttl_sec": lease,
                "claim_expires_at": expires,
            }
        )
        self._task = self._task.model_copy(
            update={"status": "running", "claim_expires_at": expires}
        )
        self._reschedule()
        await self._project(self._projection())
        return expires

    @heartbeat.validator
    def _check_heartbeat(self, command: HeartbeatCommand) -> None:
        attempt = self._require_claimant(command.agent_id, command.attempt_n)
        if self._task.status == "cancelled" and attempt.status == "cancelled":
            return  # the claimant learns about the cancel
        if attempt.status in TERMINAL_ATTEMPT_STATUSES:
            raise domain_failure(attempt_finished(attempt.attempt_n, attempt.status))

    @workflow.update(name=COMPLETE_UPDATE)
    async def complete(self, command: CompleteCommand) -> Settled:
        return await self._end_attempt(
            "completed",
            requeue=False,
            update={
                "output": command.output,
                "output_cid": command.output_cid,
                "content_signature": command.content_signature,
                "usage": command.usage,
                "daemon_state": command.daemon_state,
            },
        )

    @complete.validator
    def _check_complete(self, command: CompleteCommand) -> None:
        self._require_reportable(command.agent_id, command.attempt_n)

    @workflow.update(name=FAIL_UPDATE)
    async def fail(self, command: FailCommand) -> Settled:
        return await self._end_attempt(
            "failed", requeue=command.retryable, update={"error": command.error}
        )

    @fail.validator
    def _check_fail(self, command: FailCommand) -> None:
        self._require_reportable(command.agent_id, command.attempt_n)

    @workflow.update(name=ABORT_UPDATE)
    async def abort(self, command: AbortCommand) -> Settled:
        error = {"code": "aborted", "message": command.reason or "aborted by the claimant"}
        return await self._end_attempt("aborted", requeue=True, update={"error": error})

    @abort.validator
    def _check_abort(self, command: AbortCommand) -> None:
        self._require_reportable(command.agent_id, command.attempt_n)

    @workflow.update(name=CANCEL_UPDATE)
    async def cancel(self, command: CancelCommand) -> Settled:
        """Any non-terminal task. The attempt in flight is cancelled too, but its claimant tuple
        stays, so the worker's next heartbeat answers `cancelled: true` with the reason."""
        now = workflow.now()
        by_agent = command.subject_ns == "Agent"
        self._task = self._task.model_copy(
            update={
                "status": "cancelled",
                "cancelled_by_agent_id": command.subject_id if by_agent else None,
                "cancelled_by_human_id": None if by_agent else command.subject_id,
                "cancel_reason": command.reason,
                "cancelled_at": now,
                "completed_at": now,
            }
        )
        attempt = self._attempt
        if attempt is not None and attempt.status not in TERMINAL_ATTEMPT_STATUSES:
            self._attempt = attempt.model_copy(update={"status": "cancelled", "finished_at": now})
        self._reschedule()
        await self._project(self._projection())
        return Settled(status="cancelled", attempt_status=self._attempt_status())

    @cancel.validator
    def _check_cancel(self, command: CancelCommand) -> None:
        if self._finished():
            raise domain_failure(task_finished(self._task.status))

    @workflow.query(name=STATE_QUERY)
    def state(self) -> TaskCarry:
        return self._carry()

    # --- guards ----------------------------------------------------------------------------------

    def _current(self) -> AttemptState:
        assert self._attempt is not None
        return self._attempt

    def _require_claimant(self, agent_id: Any, attempt_n: int) -> AttemptState:
        """The current attempt, asked about by its claimant. The API answers for attempts that
        do not exist; an earlier attempt has ended (409); another agent is refused (403)."""
        attempt = self._attempt
        if attempt is None or attempt_n > attempt.attempt_n:
            raise domain_failure(AttemptNotClaimed(f"Attempt {attempt_n} has not been claimed"))
        if attempt_n < attempt.attempt_n:
            raise domain_failure(attempt_finished(attempt_n, "over"))
        if not is_claimant(attempt.agent_id, agent_id):
            raise domain_failure(not_claimant(attempt_n))
        return attempt

    def _require_reportable(self, agent_id: Any, attempt_n: int) -> None:
        """SPEC 3.1: complete, fail and abort need a started attempt that has not ended."""
        attempt = self._require_claimant(agent_id, attempt_n)
        refusal = state_refusal(attempt.status)
        if refusal is not None:
            raise domain_failure(report_refused(refusal, attempt_n, attempt.status))

    # --- transitions -----------------------------------------------------------------------------

    async def _end_attempt(
        self,
        status: Literal["completed", "failed", "aborted", "timed_out"],
        *,
        requeue: bool,
        update: dict[str, Any],
        at: datetime | None = None,
    ) -> Settled:
        """The current attempt ends; the task completes, returns to the queue (when `requeue`
        and attempts remain) or fails. The claimant tuple goes with the claim."""
        now = at or workflow.now()
        attempt = self._current()
        self._attempt = attempt.model_copy(update={**update, "status": status, "finished_at": now})
        if status == "completed":
            next_status = "completed"
        elif requeue and self._task.attempt_count < self._start.max_attempts:
            next_status = "queued"
        else:
            next_status = "failed"
        self._task = self._task.model_copy(
            update={
                "status": next_status,
                "claim_agent_id": None,
                "claim_expires_at": None,
                "completed_at": None if next_status == "queued" else now,
            }
        )
        self._reschedule()
        await self._project(self._projection(revoke_claimant=attempt.agent_id))
        return Settled(status=self._task.status, attempt_status=status)

    def _cancelled_ack(self, attempt: AttemptState) -> HeartbeatAck:
        return HeartbeatAck(
            cancelled=True,
            cancel_reason=self._task.cancel_reason,
            claim_expires_at=attempt.claim_expires_at,
        )

    def _attempt_status(self) -> Any:
        return None if self._attempt is None else self._attempt.status

    # --- projection and carried state ------------------------------------------------------------

    def _projection(
        self, *, grant_claimant: Any = None, revoke_claimant: Any = None
    ) -> TaskProjection:
        """The state as it is now, taken before waiting for earlier projections to land."""
        return TaskProjection(
            task_id=self._start.task_id,
            task=self._task,
            attempt=self._attempt,
            grant_claimant=grant_claimant,
            revoke_claimant=revoke_claimant,
        )

    async def _project(self, projection: TaskProjection) -> None:
        """Write one transition; transitions are written in the order they happened."""
        async with self._projecting:
            await workflow.execute_local_activity_method(
                TaskActivities.project,
                projection,
                start_to_close_timeout=PROJECTION_TIMEOUT,
                retry_policy=PROJECTION_RETRY,
            )

    def _carry(self) -> TaskCarry:
        # also answers the `state` query, which must not draw random numbers: no `_trace_id()`
        return TaskCarry(task=self._task, attempt=self._attempt, trace_id=self._trace or "")

    def _trace_id(self) -> str:
        """The trace of the task's creation (its `traceparent`), which every claim continues;
        a new one when the creation had none. Drawn in the run, never in a query."""
        if self._trace is None:
            found = _TRACEPARENT.match(self._start.traceparent or "")
            self._trace = found.group(1) if found else _random_hex(32)
        return self._trace

    def _new_traceparent(self) -> str:
        """A span of the creation trace for this attempt (W3C trace context, sampled)."""
        return f"00-{self._trace_id()}-{_random_hex(16)}-01"


def _random_hex(digits: int) -> str:
    value = 0
    while value == 0:  # all-zero ids are invalid in W3C trace context
        value = workflow.random().getrandbits(digits * 4)
    return f"{value:0{digits}x}"
