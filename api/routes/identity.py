"""Identity routes: vouchers, agent registration, recovery, whoami and agent lookup."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from aiohttp import web
from temporalio.common import SearchAttributePair, WorkflowIDReusePolicy

from api import keys
from api.auth import require_principal
from api.endpoint import Parsed, endpoint
from api.flows import execute
from api.idempotency import new_id, run_key
from infra.repos import identity_reads
from schemas import limits
from schemas.errors import (
    AgentExists,
    AgentNotFound,
    AgentsOnly,
    ChallengeAlreadyUsed,
    ChallengeExpired,
    ChallengeFromFuture,
    ChallengeHmacInvalid,
    ChallengeKeyMismatch,
    ChallengeMalformed,
    InvalidChallenge,
    InvalidRecoveryCode,
    InvalidSignature,
    OperationRunning,
    PermissionDenied,
    PublicKeyInvalid,
    RecoveryFlowExhausted,
    RecoveryFlowExpired,
    RecoveryFlowNotFound,
    RecoveryFlowUsed,
    TooManyVouchers,
    VoucherRejected,
)
from schemas.identity import (
    AgentProfile,
    FingerprintPath,
    IdentityBinding,
    RecoveryChallenge,
    RecoveryChallengeRequest,
    RecoveryCodeRequest,
    RecoveryCompleted,
    RecoveryFlowQuery,
    RecoveryRedeem,
    RecoveryStart,
    RecoveryVerified,
    RecoveryVerifyRequest,
    RegisterRequest,
    RegisterResponse,
    RegistrationInput,
    TeamBinding,
    Voucher,
    VoucherIssue,
    VoucherList,
    Whoami,
)
from schemas.kernel.crypto import (
    CheckedChallenge,
    RecoveryChallengeError,
    RecoveryFailure,
    check_recovery_challenge,
    fingerprint,
    hash_secret,
    new_recovery_challenge,
    new_secret,
    new_voucher_code,
    normalize_fingerprint,
    parse_public_key,
)
from workflows.common import AGENT_ID
from workflows.recovery import (
    RecoveryRedeemWorkflow,
    RecoveryVerifyWorkflow,
    recovery_redeem_workflow_id,
    recovery_verify_workflow_id,
)
from workflows.registration import RegistrationWorkflow, registration_workflow_id
from workflows.vouchers import VoucherIssueWorkflow, voucher_workflow_id

routes = web.RouteTableDef()
TAG = "identity"
CLIENT_SECRET_PREFIX = "service_cs_"
# the problem of each check the pure challenge verification can refuse
CHALLENGE_REFUSED: dict[RecoveryFailure, type[InvalidChallenge]] = {
    RecoveryFailure.MALFORMED: ChallengeMalformed,
    RecoveryFailure.KEY_MISMATCH: ChallengeKeyMismatch,
    RecoveryFailure.BAD_HMAC: ChallengeHmacInvalid,
    RecoveryFailure.EXPIRED: ChallengeExpired,
    RecoveryFailure.FROM_FUTURE: ChallengeFromFuture,
}


def _server_secret(request: web.Request) -> bytes:
    return request.app[keys.SETTINGS].secret_bytes


# --- vouchers -------------------------------------------------------------------------------


async def issue_voucher(request: web.Request, issuer_id: uuid.UUID | None) -> Voucher:
    key = run_key(request, "voucher")
    voucher_id = new_id(key)
    return await execute(
        request,
        VoucherIssueWorkflow.run,
        VoucherIssue(voucher_id=voucher_id, code=new_voucher_code(), issuer_id=issuer_id),
        workflow_id=voucher_workflow_id(voucher_id),
        key=key,
        on_duplicate=OperationRunning("This voucher is being issued"),
    )


@endpoint(
    routes,
    "POST",
    "/vouch",
    tag=TAG,
    status=201,
    response=Voucher,
    rate_bucket="vouch",
    errors=(TooManyVouchers, PermissionDenied),
    idempotent=True,
)
async def create_voucher(request: web.Request, parsed: Parsed) -> Voucher:
    """Issue a voucher another agent can register with (24 h, at most 5 unredeemed)."""
    principal = require_principal(request)
    if principal.agent_id is None:
        raise AgentsOnly("Only agents issue vouchers")
    return await issue_voucher(request, principal.agent_id)


@endpoint(routes, "GET", "/vouch/active", tag=TAG, response=VoucherList)
async def list_vouchers(request: web.Request, parsed: Parsed) -> VoucherList:
    """The caller's unredeemed, unexpired vouchers."""
    principal = require_principal(request)
    vouchers = await identity_reads.open_vouchers_of(
        request.app[keys.READ_POOL], principal.agent_id
    )
    return VoucherList(
        items=[Voucher(code=v.code, expiresAt=v.expires_at, issuedBy=v.issuer_id) for v in vouchers]
    )


# --- registration -------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/auth/register",
    tag=TAG,
    body=RegisterRequest,
    response=RegisterResponse,
    auth="none",
    rate_bucket="registration",
    errors=(VoucherRejected, OperationRunning, AgentExists),
)
async def register(request: web.Request, parsed: Parsed[RegisterRequest]) -> RegisterResponse:
    """Register an agent with a voucher; returns OAuth2 client credentials (secret shown once)."""
    body = parsed.body
    agent_fingerprint = fingerprint(parse_public_key(body.public_key))
    client_id = str(uuid.uuid4())
    client_secret = new_secret(CLIENT_SECRET_PREFIX)
    agent_id = uuid.uuid4()
    result = await execute(
        request,
        RegistrationWorkflow.run,
        RegistrationInput(
            public_key=body.public_key,
            fingerprint=agent_fingerprint,
            voucher_code=body.voucher_code,
            identity_id=uuid.uuid4(),
            agent_id=agent_id,
            client_id=client_id,
            client_secret_hash=hash_secret(client_secret, _server_secret(request)),
        ),
        workflow_id=registration_workflow_id(agent_fingerprint),
        on_duplicate=OperationRunning("A registration for this key is already running"),
        search=[SearchAttributePair(AGENT_ID, str(agent_id))],
    )
    return RegisterResponse(
        identityId=result.identity_id,
        fingerprint=agent_fingerprint,
        publicKey=body.public_key,
        clientId=result.client_id,
        clientSecret=client_secret,
    )


# --- recovery -----------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/recovery/challenge",
    tag=TAG,
    body=RecoveryChallengeRequest,
    response=RecoveryChallenge,
    auth="none",
    rate_bucket="recovery",
    errors=(PublicKeyInvalid,),
)
async def recovery_challenge(
    request: web.Request, parsed: Parsed[RecoveryChallengeRequest]
) -> RecoveryChallenge:
    """A challenge to sign with the agent's key (issued for any key: no enumeration)."""
    body = parsed.body
    try:
        challenge, mac = new_recovery_challenge(
            body.publicKey, _server_secret(request), int(time.time() * 1000)
        )
    except ValueError as exc:
        raise PublicKeyInvalid(str(exc)) from None
    return RecoveryChallenge(challenge=challenge, hmac=mac)


def _checked_challenge(request: web.Request, body: RecoveryVerifyRequest) -> CheckedChallenge:
    """The challenge checked against its HMAC under each server secret, current first: one
    issued just before a rotation still verifies. Any failure but the HMAC's is final."""
    now_ms = int(time.time() * 1000)
    failure: RecoveryChallengeError | None = None
    for key in request.app[keys.SETTINGS].secret_ring.keys:
        try:
            return check_recovery_challenge(body.challenge, body.hmac, body.publicKey, key, now_ms)
        except RecoveryChallengeError as exc:
            if exc.reason is not RecoveryFailure.BAD_HMAC:
                raise
            failure = failure or exc
    assert failure is not None  # the ring holds at least one key
    raise failure


@endpoint(
    routes,
    "POST",
    "/recovery/verify",
    tag=TAG,
    body=RecoveryVerifyRequest,
    response=RecoveryVerified,
    auth="none",
    rate_bucket="recovery",
    errors=(*CHALLENGE_REFUSED.values(), ChallengeAlreadyUsed, InvalidSignature),
)
async def recovery_verify(
    request: web.Request, parsed: Parsed[RecoveryVerifyRequest]
) -> RecoveryVerified:
    """Verify a signed challenge; returns a one-time recovery code and the flow URL."""
    body = parsed.body
    secret = _server_secret(request)
    try:
        checked = _checked_challenge(request, body)
    except RecoveryChallengeError as exc:
        raise CHALLENGE_REFUSED[exc.reason](str(exc)) from None
    flow_id = uuid.uuid4()
    code = new_secret()
    now = datetime.now(UTC)
    await execute(
        request,
        RecoveryVerifyWorkflow.run,
        RecoveryStart(
            nonce=checked.nonce,
            nonce_expires_at=datetime.fromtimestamp(checked.expires_at_ms / 1000, UTC),
            public_key=body.publicKey,
            challenge=body.challenge,
            signature=body.signature,
            flow_id=flow_id,
            code_hash=hash_secret(code, secret),
            flow_expires_at=now + limits.RECOVERY_CODE_LIFETIME,
        ),
        workflow_id=recovery_verify_workflow_id(checked.nonce),
        # a failed try (a wrong signature) leaves the challenge usable; a success uses it up
        reuse=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
        on_duplicate=ChallengeAlreadyUsed("Challenge already used"),
    )
    base = request.app[keys.SETTINGS].issuer
    return RecoveryVerified(
        recoveryCode=code, recoveryFlowUrl=f"{base}/self-service/recovery?flow={flow_id}"
    )


@endpoint(
    routes,
    "POST",
    "/self-service/recovery",
    tag=TAG,
    body=RecoveryCodeRequest,
    query=RecoveryFlowQuery,
    response=RecoveryCompleted,
    auth="none",
    rate_bucket="recovery",
    errors=(
        InvalidRecoveryCode,
        RecoveryFlowNotFound,
        RecoveryFlowExpired,
        RecoveryFlowUsed,
        RecoveryFlowExhausted,
        OperationRunning,
    ),
)
async def recovery_complete(
    request: web.Request, parsed: Parsed[RecoveryCodeRequest, RecoveryFlowQuery]
) -> RecoveryCompleted:
    """Redeem the recovery code: the agent's client gets a new secret, the old one dies."""
    body = parsed.body
    flow = parsed.query
    secret = _server_secret(request)
    client_secret = new_secret(CLIENT_SECRET_PREFIX)
    redeemed = await execute(
        request,
        RecoveryRedeemWorkflow.run,
        RecoveryRedeem(
            flow_id=flow.flow,
            code_hash=hash_secret(body.code, secret),
            new_secret_hash=hash_secret(client_secret, secret),
        ),
        workflow_id=recovery_redeem_workflow_id(flow.flow),
        on_duplicate=OperationRunning("This recovery is already being redeemed"),
    )
    return RecoveryCompleted(clientId=redeemed.client_id, clientSecret=client_secret)


# --- who is who ---------------------------------------------------------------------------


@endpoint(routes, "GET", "/agents/whoami", tag=TAG, response=Whoami, scopes=("agent:profile",))
async def whoami(request: web.Request, parsed: Parsed) -> Whoami:
    """The authenticated caller: agent or human, its key material and scopes."""
    principal = require_principal(request)
    binding: TeamBinding | IdentityBinding | None = None
    if principal.key_id is not None and principal.bound_team_id is not None:
        binding = TeamBinding(keyId=principal.key_id, boundTeamId=principal.bound_team_id)
    elif principal.key_id is not None:
        binding = IdentityBinding(keyId=principal.key_id)
    names = None
    if principal.subject_type == "human":
        names = await identity_reads.human_profile(
            request.app[keys.READ_POOL], principal.identity_id
        )
    return Whoami(
        subjectType=principal.subject_type,
        identityId=principal.identity_id,
        agentId=principal.agent_id,
        humanId=principal.human_id,
        clientId=principal.client_id,
        publicKey=principal.public_key,
        fingerprint=principal.fingerprint,
        email=names.email if names is not None else None,
        displayName=names.display_name if names is not None else None,
        scopes=sorted(principal.scopes),
        credentialBinding=binding,
    )


@endpoint(
    routes,
    "GET",
    "/agents/{fingerprint}",
    tag=TAG,
    path_params=FingerprintPath,
    response=AgentProfile,
    auth="none",
    errors=(AgentNotFound,),
)
async def agent_profile(
    request: web.Request, parsed: Parsed[None, None, FingerprintPath]
) -> AgentProfile:
    """Public lookup of an agent by fingerprint."""
    path = parsed.path
    agent = await identity_reads.agent_by_fingerprint(
        request.app[keys.READ_POOL], normalize_fingerprint(path.fingerprint)
    )
    if agent is None:
        raise AgentNotFound("No agent has this fingerprint")
    return AgentProfile(
        fingerprint=agent.fingerprint,
        publicKey=agent.public_key,
        agentId=agent.id,
        createdAt=agent.created_at,
    )
