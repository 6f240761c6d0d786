"""A signing request (SPEC 3.4): store it, wait up to 300 s for the agent's signature, verify it.

The API starts the workflow together with the `envelope` update (update-with-start), which
answers once the row is stored: the envelope event of SPEC 6 (message and nonce). The agent's
signature arrives as the `sign` update: its validator refuses, before anything is written, a
malformed signature (400) or a request that is no longer pending (409); the handler verifies
the Ed25519 signature over `message + "." + nonce` with the agent's public key (carried in the
input: the key of the token that asked) and records `completed` with `valid` true or false.
Without a signature by the deadline the request is `expired`. The `result` query is the result
event: status and validity.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from activities.signing import SigningActivities
    from schemas import limits
    from schemas.errors import (
        ServiceUnavailable,
        SignatureMalformed,
        SigningRequestNotReady,
    )
    from schemas.kernel.crypto import parse_public_key, signing_payload, verify_signature
    from schemas.signing import (
        ENVELOPE_UPDATE,
        SignatureRecord,
        SignatureSubmission,
        SigningEnvelope,
        SigningExpiry,
        SigningRequestInput,
        SigningResult,
        SigningRowInsert,
        check_signature_format,
        refusal,
    )
    from workflows.common import LONG_LIVED, STEP_FAILURES, domain_failure, run_step

# Nobody waits on an expiry, so it is retried until the database answers.
BACKGROUND_RETRY = RetryPolicy(maximum_interval=timedelta(minutes=1))
# A timer needs a positive duration, even when storing the row ate the whole wait.
MIN_WAIT = timedelta(seconds=1)


def signing_workflow_id(request_id: UUID) -> str:
    return f"signing/{request_id}"


@workflow.defn(name="SigningRequest", versioning_behavior=LONG_LIVED)
class SigningRequestWorkflow:
    @workflow.init
    def __init__(self, inp: SigningRequestInput) -> None:
        self._inp = inp
        self._envelope: SigningEnvelope | None = None
        self._store_failure: FailureError | None = None
        # The signature being recorded: set when a `sign` update is accepted, so that a second
        # one is refused while the first is still being written.
        self._signature: str | None = None
        self._deadline_passed = False
        self._result = SigningResult(request_id=inp.request_id, status="pending")

    @workflow.run
    async def run(self, inp: SigningRequestInput) -> SigningResult:
        created_at = workflow.now()
        deadline = created_at + limits.SIGNING_REQUEST_WAIT
        if not await self._store(created_at, deadline):
            await workflow.wait_condition(workflow.all_handlers_finished)
            assert self._store_failure is not None
            raise self._store_failure
        await self._await_signature(deadline)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._result

    async def _store(self, created_at: datetime, deadline: datetime) -> bool:
        """Insert the pending row; False (with the failure kept for `envelope`) when refused."""
        try:
            created = await run_step(
                SigningActivities.insert_request,
                SigningRowInsert(
                    request_id=self._inp.request_id,
                    agent_id=self._inp.agent_id,
                    message=self._inp.message,
                    nonce=self._inp.nonce,
                    workflow_id=workflow.info().workflow_id,
                    created_at=created_at,
                    expires_at=deadline,
                ),
            )
        except STEP_FAILURES as failure:
            self._store_failure = failure
            return False
        self._envelope = SigningEnvelope(
            request_id=self._inp.request_id,
            agent_id=self._inp.agent_id,
            message=self._inp.message,
            nonce=self._inp.nonce,
            created_at=created.created_at,
            expires_at=created.expires_at,
        )
        return True

    async def _await_signature(self, deadline: datetime) -> None:
        """Until a signature is recorded; at the deadline, expire unless one is being recorded
        right then (it wins if its write succeeds)."""
        try:
            await workflow.wait_condition(
                lambda: self._result.status == "completed",
                timeout=max(deadline - workflow.now(), MIN_WAIT),
            )
            return
        except TimeoutError:
            self._deadline_passed = True
        await workflow.wait_condition(
            lambda: self._signature is None or self._result.status == "completed"
        )
        if self._result.status != "completed":
            await workflow.execute_activity_method(
                SigningActivities.expire_request,
                SigningExpiry(request_id=self._inp.request_id),
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=BACKGROUND_RETRY,
            )
            self._result = SigningResult(request_id=self._inp.request_id, status="expired")

    @workflow.update(name=ENVELOPE_UPDATE)
    async def envelope(self) -> SigningEnvelope:
        """The stored request (the API's 201), or the reason it was not stored."""
        await workflow.wait_condition(
            lambda: self._envelope is not None or self._store_failure is not None
        )
        if self._envelope is None:
            assert self._store_failure is not None
            raise self._store_failure
        return self._envelope

    @workflow.update(name="sign")
    async def sign(self, submission: SignatureSubmission) -> SigningResult:
        """Verify the signature and record the outcome; a signature that does not verify is
        still a completed request, with `valid` false (SPEC 3.4)."""
        self._signature = submission.signature
        valid = self._verifies(submission.signature)
        try:
            await run_step(
                SigningActivities.record_signature,
                SignatureRecord(
                    request_id=self._inp.request_id, signature=submission.signature, valid=valid
                ),
            )
        except STEP_FAILURES:
            self._signature = None  # nothing was written: the request takes a signature again
            raise domain_failure(
                ServiceUnavailable("The signature could not be recorded; send it again")
            ) from None
        self._result = SigningResult(
            request_id=self._inp.request_id, status="completed", valid=valid
        )
        return self._result

    @sign.validator
    def _sign_allowed(self, submission: SignatureSubmission) -> None:
        try:
            check_signature_format(submission.signature)
        except ValueError as exc:
            raise domain_failure(SignatureMalformed(str(exc))) from None
        if self._envelope is None:
            raise domain_failure(SigningRequestNotReady("The signing request is not stored yet"))
        status = self._result.status
        if self._deadline_passed:
            status = "expired"
        elif self._signature is not None:
            status = "completed"
        refused = refusal(status)
        if refused is not None:
            raise domain_failure(refused)

    @workflow.query(name="result")
    def result(self) -> SigningResult:
        return self._result

    def _verifies(self, signature: str) -> bool:
        try:
            key = parse_public_key(self._inp.public_key)
        except ValueError:
            return False
        payload = signing_payload(self._inp.message, self._inp.nonce)
        return verify_signature(key, payload.encode("utf-8"), signature)
