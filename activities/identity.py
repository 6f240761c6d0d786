"""Side effects of identity: the identity provider's rows, agents, vouchers, OAuth2 clients,
recovery and human sessions. One unit of work per activity, idempotent under retry."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from temporalio import activity

from schemas import limits
from schemas.errors import (
    ChallengeAlreadyUsed,
    Gone,
    HumanNotFound,
    IdentityExists,
    InvalidRecoveryCode,
    InvalidSignature,
    RecoveryFlowExhausted,
    RecoveryFlowExpired,
    RecoveryFlowNotFound,
    RecoveryFlowUsed,
    TooManyVouchers,
    VoucherRejected,
)
from schemas.identity import (
    AgentBinding,
    AgentBound,
    AgentFound,
    AgentLookup,
    CredentialRehash,
    IdentityCreate,
    IdentityRef,
    NonceConsume,
    OAuthClientCreate,
    ProfileChange,
    RecoveryFlowCreate,
    RecoveryRedeem,
    RecoveryRedeemed,
    SessionClose,
    SessionOpen,
    SessionOpened,
    SigningKeyEnsure,
    SigningKeyState,
    Voucher,
    VoucherCheck,
    VoucherIssue,
)

if TYPE_CHECKING:
    from infra.repos.identity import IdentityRepo

# A recovery flow that can no longer be redeemed, by the repository's outcome.
_FLOW_ENDED: dict[str, type[Gone]] = {
    "expired": RecoveryFlowExpired,
    "used": RecoveryFlowUsed,
    "exhausted": RecoveryFlowExhausted,
}


class IdentityActivities:
    def __init__(self, repo: IdentityRepo) -> None:
        self._repo = repo

    @activity.defn(name="identity.check_voucher")
    async def check_voucher(self, inp: VoucherCheck) -> None:
        if not await self._repo.open_voucher_exists(inp.voucher_code):
            raise VoucherRejected("The voucher is unknown, already redeemed or expired")

    @activity.defn(name="identity.create_identity")
    async def create_identity(self, inp: IdentityCreate) -> None:
        # The provider's identities need a password; an agent's is random and never used.
        password_hash = inp.password_hash or secrets.token_hex(32)
        created = await self._repo.create_identity(
            inp.identity_id, inp.schema_id, inp.traits, password_hash, inp.email, inp.display_name
        )
        if not created:
            raise IdentityExists("An identity with this email already exists")

    @activity.defn(name="identity.set_display_name")
    async def set_display_name(self, inp: ProfileChange) -> None:
        if not await self._repo.set_display_name(inp.identity_id, inp.display_name):
            raise HumanNotFound("No human identity has this id")

    @activity.defn(name="identity.delete_identity")
    async def delete_identity(self, inp: IdentityRef) -> None:
        await self._repo.delete_identity(inp.identity_id)

    @activity.defn(name="identity.bind_agent")
    async def bind_agent(self, inp: AgentBinding) -> AgentBound:
        bound = await self._repo.bind_agent(
            inp.identity_id, inp.agent_id, inp.public_key, inp.fingerprint, inp.voucher_code
        )
        return AgentBound(agent_id=bound)

    @activity.defn(name="identity.create_oauth_client")
    async def create_oauth_client(self, inp: OAuthClientCreate) -> None:
        metadata = {
            "agent_id": str(inp.agent_id),
            "identity_id": str(inp.identity_id),
            "fingerprint": inp.fingerprint,
            "public_key": inp.public_key,
        }
        await self._repo.create_client(
            inp.client_id, inp.identity_id, inp.agent_id, inp.client_secret_hash, metadata
        )

    @activity.defn(name="identity.issue_voucher")
    async def issue_voucher(self, inp: VoucherIssue) -> Voucher:
        expires_at = activity.info().current_attempt_scheduled_time + limits.VOUCHER_LIFETIME
        row = await self._repo.issue_voucher(
            inp.voucher_id, inp.code, inp.issuer_id, expires_at, limits.MAX_OPEN_VOUCHERS_PER_ISSUER
        )
        if row is None:
            raise TooManyVouchers(
                f"At most {limits.MAX_OPEN_VOUCHERS_PER_ISSUER} unredeemed vouchers per agent"
            )
        return Voucher(code=row["code"], expiresAt=row["expires_at"], issuedBy=row["issuer_id"])

    @activity.defn(name="identity.ensure_signing_key")
    async def ensure_signing_key(self, inp: SigningKeyEnsure) -> SigningKeyState:
        kid, created = await self._repo.ensure_signing_key(inp.rotate)
        return SigningKeyState(kid=kid, created=created)

    @activity.defn(name="identity.rehash_credential")
    async def rehash_credential(self, inp: CredentialRehash) -> None:
        """Idempotent: a retry finds the row moved already and changes nothing."""
        await self._repo.rehash_credential(inp)

    @activity.defn(name="identity.check_recovery_nonce")
    async def check_recovery_nonce(self, inp: NonceConsume) -> None:
        """Refuse a used nonce without using it up (the signature is checked after this)."""
        if await self._repo.nonce_used(inp.nonce):
            raise ChallengeAlreadyUsed("Challenge already used")

    @activity.defn(name="identity.consume_recovery_nonce")
    async def consume_recovery_nonce(self, inp: NonceConsume) -> None:
        if not await self._repo.consume_nonce(inp.nonce, inp.expires_at):
            raise ChallengeAlreadyUsed("Challenge already used")

    @activity.defn(name="identity.find_agent")
    async def find_agent(self, inp: AgentLookup) -> AgentFound:
        agent = await self._repo.agent_by_public_key(inp.public_key)
        if agent is None or agent["identity_id"] is None:
            # Same answer as a bad signature: no enumeration of registered keys.
            raise InvalidSignature("The signature does not verify for this key")
        return AgentFound(agent_id=agent["id"], identity_id=agent["identity_id"])

    @activity.defn(name="identity.create_recovery_flow")
    async def create_recovery_flow(self, inp: RecoveryFlowCreate) -> None:
        await self._repo.create_recovery_flow(
            inp.flow_id, inp.identity_id, inp.code_hash, inp.expires_at
        )

    @activity.defn(name="identity.redeem_recovery")
    async def redeem_recovery(self, inp: RecoveryRedeem) -> RecoveryRedeemed:
        outcome, client = await self._repo.redeem_recovery(
            inp.flow_id, inp.code_hash, inp.new_secret_hash, limits.RECOVERY_CODE_MAX_TRIES
        )
        if outcome == "ok" and client is not None:
            return RecoveryRedeemed(
                client_id=client["client_id"], identity_id=client["identity_id"]
            )
        if outcome == "unknown":
            raise RecoveryFlowNotFound("No such recovery flow")
        if outcome == "wrong":
            raise InvalidRecoveryCode("The recovery code is wrong")
        raise _FLOW_ENDED[outcome](f"The recovery flow is {outcome}")

    @activity.defn(name="identity.open_session")
    async def open_session(self, inp: SessionOpen) -> SessionOpened:
        human_id = await self._repo.open_session(
            inp.session_id, inp.identity_id, inp.human_id, inp.token_hash, inp.expires_at
        )
        return SessionOpened(human_id=human_id)

    @activity.defn(name="identity.close_session")
    async def close_session(self, inp: SessionClose) -> None:
        await self._repo.close_session(inp.session_id)
