"""Signing routes (SPEC 4.4) and the public signature check.

Signing requests belong to agents (a human has no key: 403 `agents-only`) and are private to
their agent (another caller gets 404). Creating one starts the `SigningRequest` workflow with
its `envelope` update in one call and answers 201 once the row is stored; a signature is the
workflow's `sign` update, answered 200 with the verification result. An agent may hold at most
`SIGNING_MAX_PENDING_PER_AGENT` pending requests: one more is 429
`signing-request-limit-reached` (the reference's choice: it clears by itself within 300 s).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import cast
from uuid import UUID

import asyncpg
from aiohttp import web
from temporalio.client import Client
from temporalio.common import SearchAttributePair
from temporalio.service import RPCError, RPCStatusCode

from api import keys
from api.auth import require_principal
from api.endpoint import Parsed, endpoint
from api.flows import start_with_update, waiting_on_workflow
from api.idempotency import new_id, run_key
from infra.repos import identity_reads
from infra.repos.signing import get_signing_request, list_signing_requests
from schemas.errors import (
    AgentNotFound,
    AgentsOnly,
    OperationRunning,
    PermissionDenied,
    ServiceUnavailable,
    SignatureMalformed,
    SigningRequestAlreadyCompleted,
    SigningRequestExpired,
    SigningRequestLimitReached,
    SigningRequestNotFound,
    SigningRequestNotReady,
)
from schemas.kernel.crypto import normalize_fingerprint, parse_public_key, verify_signature
from schemas.principals import Principal
from schemas.signing import (
    ENVELOPE_UPDATE,
    SignatureSubmission,
    SignatureSubmit,
    SigningEnvelope,
    SigningRequestCreate,
    SigningRequestInput,
    SigningRequestList,
    SigningRequestListQuery,
    SigningRequestPath,
    SigningRequestRecord,
    SigningRequestView,
    SigningResult,
    SignOutcome,
    VerifyRequest,
    VerifyResult,
    effective_status,
    refusal,
)
from workflows.common import AGENT_ID
from workflows.signing import SigningRequestWorkflow, signing_workflow_id

routes = web.RouteTableDef()
TAG = "crypto"
SIGN_SCOPE = ("crypto:sign",)


def require_agent(request: web.Request) -> Principal:
    """The calling agent; a human has no signing key, so signing is not theirs (403)."""
    principal = require_principal(request)
    if principal.agent_id is None:
        raise AgentsOnly("Only agents sign: a human has no signing key")
    return principal


# --- signing requests -----------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/crypto/signing-requests",
    tag=TAG,
    status=201,
    body=SigningRequestCreate,
    response=SigningRequestView,
    scopes=SIGN_SCOPE,
    rate_bucket="signing",
    errors=(PermissionDenied, SigningRequestLimitReached, OperationRunning),
    idempotent=True,
)
async def create_signing_request(
    request: web.Request, parsed: Parsed[SigningRequestCreate]
) -> SigningRequestView:
    """Ask to sign a message; returns the nonce and the `signing_payload` to sign (300 s)."""
    principal = require_agent(request)
    body = parsed.body
    assert principal.agent_id is not None
    public_key = principal.public_key or await _public_key_of(request, principal)
    key = run_key(request, "signing-request")
    request_id = new_id(key)
    envelope = await start_with_update(
        request,
        SigningRequestWorkflow.run,
        SigningRequestInput(
            request_id=request_id,
            agent_id=principal.agent_id,
            public_key=public_key,
            message=body.message,
            nonce=uuid.uuid4(),
        ),
        workflow_id=signing_workflow_id(request_id),
        update=ENVELOPE_UPDATE,
        result_type=SigningEnvelope,
        key=key,
        on_duplicate=OperationRunning("This signing request is being created"),
        search=[SearchAttributePair(AGENT_ID, str(principal.agent_id))],
    )
    if envelope is not None:
        return envelope.view()
    # a keyed retry after the request's run ended: its row is the answer
    record = await get_signing_request(request.app[keys.READ_POOL], request_id)
    assert record is not None
    return record.view()


async def _public_key_of(request: web.Request, principal: Principal) -> str:
    """The agent's key from its row, for a credential that did not carry it."""
    agent = await identity_reads.agent_by_identity(
        request.app[keys.READ_POOL], principal.identity_id
    )
    if agent is None:
        raise AgentNotFound("The calling agent is unknown")
    return agent.public_key


@endpoint(
    routes,
    "GET",
    "/crypto/signing-requests",
    tag=TAG,
    query=SigningRequestListQuery,
    response=SigningRequestList,
    scopes=SIGN_SCOPE,
    errors=(PermissionDenied,),
)
async def list_own_signing_requests(
    request: web.Request, parsed: Parsed[None, SigningRequestListQuery]
) -> SigningRequestList:
    """The caller's signing requests, newest first (`status`, `limit`, `offset`)."""
    principal = require_agent(request)
    query = parsed.query
    assert principal.agent_id is not None
    records, total = await list_signing_requests(
        request.app[keys.READ_POOL], principal.agent_id, query.status, query.limit, query.offset
    )
    return SigningRequestList(
        items=[record.view() for record in records],
        total=total,
        limit=query.limit,
        offset=query.offset,
    )


@endpoint(
    routes,
    "GET",
    "/crypto/signing-requests/{id}",
    tag=TAG,
    path_params=SigningRequestPath,
    response=SigningRequestView,
    scopes=SIGN_SCOPE,
    errors=(PermissionDenied, SigningRequestNotFound),
)
async def get_own_signing_request(
    request: web.Request, parsed: Parsed[None, None, SigningRequestPath]
) -> SigningRequestView:
    """One of the caller's signing requests (another agent's is 404)."""
    principal = require_agent(request)
    path = parsed.path
    assert principal.agent_id is not None
    record = await _owned(request.app[keys.READ_POOL], principal.agent_id, path.id)
    return record.view()


@endpoint(
    routes,
    "POST",
    "/crypto/signing-requests/{id}/sign",
    tag=TAG,
    body=SignatureSubmit,
    path_params=SigningRequestPath,
    response=SignOutcome,
    scopes=SIGN_SCOPE,
    # the signing bucket counts the requests created, not the signatures sent to them
    errors=(
        PermissionDenied,
        SigningRequestNotFound,
        SignatureMalformed,
        SigningRequestExpired,
        SigningRequestAlreadyCompleted,
        SigningRequestNotReady,
        ServiceUnavailable,
    ),
)
async def sign_signing_request(
    request: web.Request, parsed: Parsed[SignatureSubmit, None, SigningRequestPath]
) -> SignOutcome:
    """Submit the base64 Ed25519 signature over `signing_payload`; returns `status`, `valid`."""
    principal = require_agent(request)
    path = parsed.path
    body = parsed.body
    assert principal.agent_id is not None
    async with waiting_on_workflow(request):
        return await submit_signature(
            request.app[keys.TEMPORAL],
            request.app[keys.READ_POOL],
            principal.agent_id,
            path.id,
            body.signature,
        )


async def submit_signature(
    temporal: Client, pool: asyncpg.Pool, agent_id: UUID, request_id: UUID, signature: str
) -> SignOutcome:
    """Send the signature to the request's workflow and return what it recorded.

    The row answers the cheap refusals (unknown or another agent's: 404; expired or completed:
    409) without a round trip; the update's validator answers the races. A finished workflow no
    longer takes updates, so its row says why.
    """
    record = await _owned(pool, agent_id, request_id)
    _refuse_unless_pending(record)
    handle = temporal.get_workflow_handle_for(SigningRequestWorkflow.run, record.workflow_id)
    try:
        result = cast(
            SigningResult,
            await handle.execute_update(
                SigningRequestWorkflow.sign, SignatureSubmission(signature=signature)
            ),
        )
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        _refuse_unless_pending(await _owned(pool, agent_id, request_id))
        raise SigningRequestExpired("The signing request no longer waits for a signature") from None
    assert result.valid is not None
    return SignOutcome(status=result.status, valid=result.valid)


async def _owned(pool: asyncpg.Pool, agent_id: UUID, request_id: UUID) -> SigningRequestRecord:
    record = await get_signing_request(pool, request_id)
    if record is None or record.agent_id != agent_id:
        raise SigningRequestNotFound("No such signing request")
    return record


def _refuse_unless_pending(record: SigningRequestRecord) -> None:
    refused = refusal(effective_status(record, datetime.now(UTC)))
    if refused is not None:
        raise refused


# --- public verification ----------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/crypto/verify",
    tag=TAG,
    body=VerifyRequest,
    response=VerifyResult,
    auth="none",
    rate_bucket="public_verify",
    errors=(AgentNotFound,),
)
async def verify(request: web.Request, parsed: Parsed[VerifyRequest]) -> VerifyResult:
    """Check an Ed25519 signature by a public key or a registered agent's fingerprint."""
    body = parsed.body
    public_key = body.publicKey or await _key_by_fingerprint(request, body.fingerprint or "")
    valid = verify_signature(parse_public_key(public_key), body.signed_bytes(), body.signature)
    return VerifyResult(valid=valid)


async def _key_by_fingerprint(request: web.Request, value: str) -> str:
    agent = await identity_reads.agent_by_fingerprint(
        request.app[keys.READ_POOL], normalize_fingerprint(value)
    )
    if agent is None:
        raise AgentNotFound("No agent has this fingerprint")
    return agent.public_key
