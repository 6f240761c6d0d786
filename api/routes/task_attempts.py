"""The attempt lifecycle routes (SPEC 3.1, 4.5): claim, heartbeat, complete, fail, abort, cancel.

Each route reads the task (and attempt) row, decides who may act, checks the body, and sends one
Update to the task's workflow (`task/<taskId>`), whose validator answers the state's 409s before
anything is written; then it renders the rows the workflow projected. The exception is a later
heartbeat of a running attempt: it changes no state, so the rows answer its guards and it goes
as the `liveness` signal, which costs the server a fraction of an Update.

Who may act (permission engine, Task namespace):
- claim: Task `claim` (the owning team's agent executors, or an explicit writer/manager grant),
  scope `task:claim`. Attempts belong to agents, so a human grantee is 403 `agents-only`.
  Under a runtime profile (`runtimeProfileId`, one of the task's team): a task with
  `allowedProfiles` only under one of them (403 `profile-not-allowed`, with another profile or
  none), and only what the profile's policy claims (403 `profile-task-type-not-allowed`,
  `profile-scope-denied`). The attempt keeps the profile's id, revision and policy as read here.
- heartbeat, complete, fail, abort: the claimant of that attempt (the attempt row says who;
  the workflow checks the same against its state), scope `task:execute`, which the policy
  frozen on the attempt must keep too (403 `profile-scope-denied`; `api.access`).
- cancel: Task `cancel` (owners and managers of the owning team, or an explicit task manager),
  scope `task:manage`, with a reason.
A caller denied who cannot see the task (`can_view_task`: any member of the owning team, or an
explicit grantee) gets 404, as for `GET /tasks/{id}`; one who can is 403. With the
`x-service-team-id` header, a task of another team is 404: by-id operations run in the owning
team's context (SPEC 5).

Checks in order: the body's shape (400), the caller (404/403), the body against the task (an
output failing its type's schema, a wrong `outputCid`, a bad `contentSignature`: 400), then the
state (409). A workflow that has finished takes no Update; its rows say why (409, or for a
heartbeat after a cancel `cancelled: true`).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

import asyncpg
from aiohttp import web

from api import idempotency, keys
from api.access import can_view_task, require_attempt_scopes, task_target
from api.auth import require_principal
from api.endpoint import Parsed, endpoint, render
from api.flows import waiting_on_workflow
from api.headers import TEAM_HEADER, team_header
from api.task_flows import TaskClosed, task_signal, task_update
from api.task_type_checks import run_complete_checks
from infra.repos import runtime_profiles, task_reads
from infra.repos.task_reads import AttemptTarget, ClaimTarget
from schemas.base import Payload
from schemas.errors import (
    AgentsOnly,
    AttemptFinished,
    AttemptNotFound,
    AttemptNotStarted,
    ClaimConditionUnmet,
    FieldError,
    Forbidden,
    InternalError,
    InvalidSignature,
    JsonNotCanonical,
    NotClaimant,
    NotFound,
    OutputCidMismatch,
    PermissionDenied,
    RequestInvalid,
    TaskFinished,
    TaskNotFound,
    TaskNotQueued,
    TaskOutputInvalid,
)
from schemas.kernel.attempts import is_claimant, state_refusal
from schemas.kernel.cids import json_cid
from schemas.kernel.crypto import parse_public_key, verify_signature
from schemas.kernel.runtime_profiles import claim_refusal, policy_snapshot_hash
from schemas.kernel.task_types import get_task_type, validate_output
from schemas.principals import Principal
from schemas.runtime_profiles import claim_refused, unknown_profile
from schemas.task_api import AttemptPath, Task, TaskPath
from schemas.task_attempts import (
    ABORT_UPDATE,
    CANCEL_UPDATE,
    CLAIM_UPDATE,
    COMPLETE_UPDATE,
    FAIL_UPDATE,
    HEARTBEAT_UPDATE,
    LIVENESS_SIGNAL,
    AbortCommand,
    AbortRequest,
    CancelCommand,
    CancelRequest,
    ClaimCommand,
    ClaimGranted,
    ClaimRequest,
    ClaimResponse,
    CompleteCommand,
    CompleteRequest,
    FailCommand,
    FailRequest,
    HeartbeatAck,
    HeartbeatCommand,
    HeartbeatRequest,
    HeartbeatResponse,
    Settled,
    attempt_finished,
    claim_condition_met,
    not_claimant,
    report_refused,
    task_finished,
)
from schemas.tasks import TERMINAL_ATTEMPT_STATUSES, TERMINAL_TASK_STATUSES

routes = web.RouteTableDef()
TAG = "tasks"
CLAIM_SCOPES = ("task:claim",)
EXECUTE_SCOPES = ("task:execute",)
MANAGE_SCOPES = ("task:manage",)
TRACEPARENT_HEADER = "traceparent"
REPORT_ERRORS = (
    RequestInvalid,
    TaskNotFound,
    AttemptNotFound,
    PermissionDenied,
    NotClaimant,
    AttemptNotStarted,
    AttemptFinished,
    TaskFinished,
)

ResultT = TypeVar("ResultT", bound=Payload)


# --- who may act ---------------------------------------------------------------------------------


def _pool(request: web.Request) -> asyncpg.Pool:
    return request.app[keys.READ_POOL]


def _in_team_context(request: web.Request, team_id: UUID) -> None:
    header = team_header(request)
    if header is not None and header != team_id:
        raise TaskNotFound("No such task in this team")


async def _denied(
    request: web.Request, task: AttemptTarget | ClaimTarget, refusal: Forbidden
) -> Forbidden | NotFound:
    """403 for a caller who can see the task (as `GET /tasks/{id}` decides), else 404."""
    visible = await can_view_task(request, task.team_id, task.id)
    return refusal if visible else TaskNotFound("No such task")


async def _attempt_target(
    request: web.Request, path: AttemptPath, *, with_input: bool = False
) -> AttemptTarget:
    """The task and attempt `n` of it, for the attempt's claimant; 404 or 403 for others."""
    target = await task_reads.attempt_target(_pool(request), path.id, path.n, with_input=with_input)
    if target is None:
        raise TaskNotFound("No such task")
    _in_team_context(request, target.team_id)
    principal = require_principal(request)
    if is_claimant(target.claimed_by_agent_id, principal.agent_id):
        require_attempt_scopes(request, target.policy_snapshot)
        return target
    denied = await _denied(request, target, not_claimant(path.n))
    if isinstance(denied, Forbidden) and target.attempt_status is None:
        raise AttemptNotFound(f"Task has no attempt {path.n}")
    raise denied


def _agent_of(principal: Principal) -> UUID:
    if principal.agent_id is None:
        raise AgentsOnly("Only agents work on tasks")
    return principal.agent_id


async def _update(
    request: web.Request,
    task_id: UUID,
    update: str,
    command: Payload,
    result: type[ResultT],
    update_id: str | None = None,
) -> ResultT:
    async with waiting_on_workflow(request):
        return await task_update(
            request.app[keys.TEMPORAL], task_id, update, command, result, update_id
        )


async def _task_view(request: web.Request, task_id: UUID) -> Task:
    task = await task_reads.get_task(_pool(request), task_id)
    if task is None:
        raise TaskNotFound("No such task")
    return task


# --- claim ---------------------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/tasks/{id}/claim",
    tag=TAG,
    headers=(TEAM_HEADER,),
    path_params=TaskPath,
    body=ClaimRequest,
    response=ClaimResponse,
    scopes=CLAIM_SCOPES,
    errors=(TaskNotFound, PermissionDenied, TaskNotQueued, ClaimConditionUnmet),
    idempotent=True,
)
async def claim_task(
    request: web.Request, parsed: Parsed[ClaimRequest, None, TaskPath]
) -> web.StreamResponse:
    """Claim a queued task: a new attempt (`claimed`) with a lease (`leaseTtlSec`, default
    300 s). Send the first heartbeat within the task's dispatch timeout to start it. Answers
    `{task, attemptN, attempt, traceparent}` and the `traceparent` header, which continues the
    trace of the task's creation. 409 when the task is not queued or its claim condition is not
    met (`claim-condition-unmet`). A claim retried with its `Idempotency-Key` (and body)
    answers the attempt it was granted."""
    path = parsed.path
    body = parsed.body
    principal = require_principal(request)
    target, may_claim = await task_target(request, path.id, "claim")
    _in_team_context(request, target.team_id)
    if not may_claim:
        raise await _denied(
            request, target, PermissionDenied("Claiming needs an executor of the task's team")
        )
    agent_id = _agent_of(principal)
    profile = await _claim_profile(request, target, body.runtimeProfileId)
    update_id = idempotency.update_id(request, "task-claim")
    # a keyed retry of a granted claim finds the task dispatched: the workflow answers it
    if target.status != "queued" and update_id is None:
        raise TaskNotQueued(f"The task is {target.status}, not queued")
    if not claim_condition_met(target.claim_condition, target.condition_status):
        raise ClaimConditionUnmet("The task's claim condition is not met")
    command = ClaimCommand(
        agent_id=agent_id, lease_ttl_sec=body.leaseTtlSec, runtime_id=body.runtimeId, **profile
    )
    try:
        granted = await _update(request, path.id, CLAIM_UPDATE, command, ClaimGranted, update_id)
    except TaskClosed:
        raise TaskNotQueued("The task is no longer queued") from None
    task, attempt = await asyncio.gather(
        _task_view(request, path.id),
        task_reads.attempt_view(_pool(request), path.id, granted.attempt_n),
    )
    if attempt is None:
        raise InternalError("The claim was granted but its attempt is not readable")
    claimed = ClaimResponse(
        task=task,
        attemptN=granted.attempt_n,
        attempt=attempt,
        traceparent=granted.traceparent,
    )
    response = render(claimed)
    response.headers[TRACEPARENT_HEADER] = granted.traceparent
    return response


async def _claim_profile(
    request: web.Request, target: ClaimTarget, profile_id: UUID | None
) -> dict[str, Any]:
    """The runtime profile a claim is made under, as the attempt will keep it (empty without
    one): 400 `unknown-runtime-profile` for a profile that is not one of the task's team, 403
    when the task is pinned to other profiles or the profile's policy refuses the claim."""
    profile = None
    if profile_id is not None:
        profile = await runtime_profiles.team_profile(_pool(request), target.team_id, profile_id)
        if profile is None:
            raise unknown_profile("/runtimeProfileId")
    policy = None if profile is None else profile.policy.model_dump(exclude_none=True)
    refusal = claim_refusal(
        allowed_profiles=target.allowed_profiles,
        profile_id=profile_id,
        policy=policy,
        task_type=target.task_type,
        claim_scopes=CLAIM_SCOPES,
        credential_scopes=require_principal(request).scopes,
    )
    if refusal is not None:
        raise claim_refused(refusal, target.task_type)
    if profile is None or policy is None:
        return {}
    return {
        "runtime_profile_id": profile.id,
        "runtime_profile_revision": profile.revision,
        "policy_snapshot": policy,
        "policy_snapshot_hash": policy_snapshot_hash(policy),
    }


# --- heartbeat -----------------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/tasks/{id}/attempts/{n}/heartbeat",
    tag=TAG,
    headers=(TEAM_HEADER,),
    path_params=AttemptPath,
    body=HeartbeatRequest,
    response=HeartbeatResponse,
    scopes=EXECUTE_SCOPES,
    errors=(TaskNotFound, AttemptNotFound, PermissionDenied, NotClaimant, AttemptFinished),
)
async def heartbeat_attempt(
    request: web.Request, parsed: Parsed[HeartbeatRequest, None, AttemptPath]
) -> dict[str, Any]:
    """The claimant is alive. The first heartbeat starts the attempt (`running`); each one
    renews the lease (`claimExpiresAt`, optionally with a new `leaseTtlSec`). After a cancel it
    answers `cancelled: true` with the reason: stop working and drop the result."""
    path = parsed.path
    body = parsed.body
    target = await _attempt_target(request, path)
    _refuse_heartbeat_on_ended(target, path.n)
    if target.attempt_status == "cancelled":
        return _with_nulls(_cancelled(target))
    command = HeartbeatCommand(
        agent_id=target.claimant, attempt_n=path.n, lease_ttl_sec=body.leaseTtlSec
    )
    try:
        if target.attempt_status == "running":
            return _with_nulls(await _renew_liveness(request, path, target, command))
        ack = await _update(request, path.id, HEARTBEAT_UPDATE, command, HeartbeatAck)
    except TaskClosed:  # ended since the row was read: the row it left says how
        target = await _attempt_target(request, path)
        _refuse_heartbeat_on_ended(target, path.n)
        return _with_nulls(_cancelled(target))
    return _with_nulls(
        HeartbeatResponse(
            cancelled=ack.cancelled,
            cancelReason=ack.cancel_reason,
            claimExpiresAt=ack.claim_expires_at,
        )
    )


async def _renew_liveness(
    request: web.Request, path: AttemptPath, target: AttemptTarget, command: HeartbeatCommand
) -> HeartbeatResponse:
    """A running attempt's later heartbeat: the rows answered the guards, so the workflow only
    hears it (a signal, not an Update) and renews the lease from the moment it does, a few
    milliseconds after the `claimExpiresAt` answered here. Its rows catch up as it projects."""
    lease = command.lease_ttl_sec or target.lease_ttl_sec
    assert lease is not None  # the claimant's attempt exists, and has a lease
    expires = datetime.now(UTC) + timedelta(seconds=lease)
    await task_signal(request.app[keys.TEMPORAL], path.id, LIVENESS_SIGNAL, command)
    return HeartbeatResponse(cancelled=False, claimExpiresAt=expires)


def _with_nulls(response: HeartbeatResponse) -> dict[str, Any]:
    """The spec's `{cancelled, cancelReason}` shape: `cancelReason` is there, null or not."""
    return response.model_dump(mode="json")


def _refuse_heartbeat_on_ended(target: AttemptTarget, attempt_n: int) -> None:
    """An ended attempt takes no heartbeat, except a cancelled one (the worker learns of it)."""
    status = target.attempt_status
    if status in TERMINAL_ATTEMPT_STATUSES and status != "cancelled":
        raise attempt_finished(attempt_n, status)


def _cancelled(target: AttemptTarget) -> HeartbeatResponse:
    return HeartbeatResponse(
        cancelled=True,
        cancelReason=target.cancel_reason,
        claimExpiresAt=target.claim_expires_at,
    )


# --- complete, fail, abort -----------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/tasks/{id}/attempts/{n}/complete",
    tag=TAG,
    headers=(TEAM_HEADER,),
    path_params=AttemptPath,
    body=CompleteRequest,
    response=Task,
    scopes=EXECUTE_SCOPES,
    errors=(*REPORT_ERRORS, InvalidSignature),
)
async def complete_attempt(
    request: web.Request, parsed: Parsed[CompleteRequest, None, AttemptPath]
) -> Task:
    """Submit the result of a started attempt: `output` (valid against the type's output
    schema), `outputCid` (the json CID of its RFC 8785 form, recomputed here) and optionally
    `contentSignature` (Ed25519 over the UTF-8 `outputCid`, by the claimant's key). 400 when
    any of them is wrong; 409 when the attempt has not started or has ended."""
    path = parsed.path
    body = parsed.body
    target = await _attempt_target(request, path, with_input=True)
    _check_output(target, body)
    await run_complete_checks(
        request, get_task_type(target.task_type), path.id, target.input, body.output
    )
    await _check_signature(request, target.claimant, body)
    _refuse_report(target, path.n)
    command = CompleteCommand(
        agent_id=target.claimant,
        attempt_n=path.n,
        output=body.output,
        output_cid=body.outputCid,
        content_signature=body.contentSignature,
        usage=None if body.usage is None else body.usage.model_dump(exclude_none=True),
        daemon_state=None if body.daemonState is None else body.daemonState.model_dump(mode="json"),
    )
    return await _report(request, path, COMPLETE_UPDATE, command)


def _check_output(target: AttemptTarget, body: CompleteRequest) -> None:
    errors = validate_output(
        target.task_type, body.output, task_input=target.input, input_cid=target.input_cid
    )
    if errors:
        raise TaskOutputInvalid(
            "The output does not match the task type's output schema", errors=errors
        )
    try:
        expected = json_cid(body.output)
    except ValueError as exc:
        raise JsonNotCanonical(
            f"The output cannot be canonicalised: {exc}",
            errors=[FieldError(pointer="/output", message=str(exc))],
        ) from None
    if body.outputCid != expected:
        raise OutputCidMismatch(
            "outputCid is not the CID of the output",
            errors=[FieldError(pointer="/outputCid", message=f"expected {expected}")],
        )


async def _check_signature(request: web.Request, agent_id: UUID, body: CompleteRequest) -> None:
    if body.contentSignature is None:
        return
    principal = require_principal(request)
    public_key = principal.public_key or await task_reads.agent_public_key(_pool(request), agent_id)
    valid = public_key is not None and verify_signature(
        parse_public_key(public_key), body.outputCid.encode("utf-8"), body.contentSignature
    )
    if not valid:
        raise InvalidSignature(
            "contentSignature is not the claimant's Ed25519 signature of outputCid",
            errors=[FieldError(pointer="/contentSignature", message="does not verify")],
        )


@endpoint(
    routes,
    "POST",
    "/tasks/{id}/attempts/{n}/fail",
    tag=TAG,
    headers=(TEAM_HEADER,),
    path_params=AttemptPath,
    body=FailRequest,
    response=Task,
    scopes=EXECUTE_SCOPES,
    errors=REPORT_ERRORS,
)
async def fail_attempt(
    request: web.Request, parsed: Parsed[FailRequest, None, AttemptPath]
) -> Task:
    """Give up on a started attempt with `{error: {code, message, retryable?}}`. The task goes
    back to the queue when `retryable` and it has attempts left, else it fails."""
    path = parsed.path
    body = parsed.body
    target = await _attempt_target(request, path)
    _refuse_report(target, path.n)
    command = FailCommand(
        agent_id=target.claimant,
        attempt_n=path.n,
        error=body.error.model_dump(),
        retryable=body.error.retryable,
    )
    return await _report(request, path, FAIL_UPDATE, command)


@endpoint(
    routes,
    "POST",
    "/tasks/{id}/attempts/{n}/abort",
    tag=TAG,
    headers=(TEAM_HEADER,),
    path_params=AttemptPath,
    body=AbortRequest,
    response=Task,
    scopes=EXECUTE_SCOPES,
    errors=REPORT_ERRORS,
)
async def abort_attempt(
    request: web.Request, parsed: Parsed[AbortRequest, None, AttemptPath]
) -> Task:
    """The claimant abandons a started attempt (`aborted`, claim cleared, no cancellation
    fields): the task returns to the queue while it has attempts left, else it fails."""
    path = parsed.path
    body = parsed.body
    target = await _attempt_target(request, path)
    _refuse_report(target, path.n)
    command = AbortCommand(agent_id=target.claimant, attempt_n=path.n, reason=body.reason)
    return await _report(request, path, ABORT_UPDATE, command)


def _refuse_report(target: AttemptTarget, attempt_n: int) -> None:
    """SPEC 3.1 guards, answered from the rows when they already decide (the workflow's
    validator answers the races)."""
    status = target.attempt_status
    if status is None:
        return  # no attempt n: `_attempt_target` has answered already
    refusal = state_refusal(status)
    if refusal is not None:
        raise report_refused(refusal, attempt_n, status)


async def _report(request: web.Request, path: AttemptPath, update: str, command: Payload) -> Task:
    try:
        await _update(request, path.id, update, command, Settled)
    except TaskClosed:
        target = await _attempt_target(request, path)
        _refuse_report(target, path.n)
        raise task_finished(target.status) from None
    return await _task_view(request, path.id)


# --- cancel --------------------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/tasks/{id}/cancel",
    tag=TAG,
    headers=(TEAM_HEADER,),
    path_params=TaskPath,
    body=CancelRequest,
    response=Task,
    scopes=MANAGE_SCOPES,
    errors=(RequestInvalid, TaskNotFound, PermissionDenied, TaskFinished),
    idempotent=True,  # a decision: repeated, it answers the cancelled task
)
async def cancel_task(request: web.Request, parsed: Parsed[CancelRequest, None, TaskPath]) -> Task:
    """Cancel a task that has not ended, with a `reason` (owners and managers of its team, or
    an explicit task manager). A worker on it learns on its next heartbeat (`cancelled:
    true`); a result it sends afterwards is refused (409). Cancelling a cancelled task again
    answers it as it is (200); any other ended task is 409."""
    path = parsed.path
    body = parsed.body
    principal = require_principal(request)
    target, may_cancel = await task_target(request, path.id, "cancel")
    _in_team_context(request, target.team_id)
    if not may_cancel:
        raise await _denied(
            request,
            target,
            PermissionDenied(
                "Cancelling needs an owner or manager of the task's team, or a task manager"
            ),
        )
    if target.status == "cancelled":
        return await _task_view(request, path.id)
    if target.status in TERMINAL_TASK_STATUSES:
        raise task_finished(target.status)
    command = CancelCommand(
        subject_ns=_subject_ns(principal), subject_id=principal.subject_id, reason=body.reason
    )
    try:
        await _update(request, path.id, CANCEL_UPDATE, command, Settled)
    except TaskClosed:
        task = await _task_view(request, path.id)
        if task.status != "cancelled":
            raise task_finished(task.status) from None
    return await _task_view(request, path.id)


def _subject_ns(principal: Principal) -> Any:
    return "Agent" if principal.agent_id is not None else "Human"
