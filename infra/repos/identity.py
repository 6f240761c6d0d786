"""Units of work on identity rows. Each method is one transaction; activities call them and
turn their outcomes into DomainErrors. Functions outside the class take the connection first."""

from __future__ import annotations

import hmac
import uuid
from datetime import datetime
from typing import Any

import asyncpg

from infra.db import Q
from infra.oauth import new_sealed_key, reseal
from schemas.errors import AgentExists, VoucherRejected
from schemas.identity import CredentialRehash
from schemas.kernel.keyring import SecretKeyring
from schemas.principals import AGENT_SCOPES


def voucher_proof(voucher_id: uuid.UUID) -> dict[str, str]:
    """An agent client's evidence of registration: the voucher it redeemed."""
    return {"kind": "voucher", "voucherId": str(voucher_id)}


_REHASH = {
    "session": Q.rehash_session,
    "oauth_client": Q.rehash_oauth_client,
    "agent_key": Q.rehash_agent_key,
}


async def _reseal_signing_keys(conn: asyncpg.Connection, ring: SecretKeyring) -> None:
    """Every signing key sealed under an older server secret, sealed under the current one
    (a key sealed under a secret no longer in the ring stays as it is: nothing opens it)."""
    for row in await conn.fetch(Q.list_signing_key_seals):
        sealed = bytes(row["sealed_seed"])
        resealed = reseal(ring, sealed)
        if resealed is not None:
            await conn.execute(Q.reseal_signing_key, row["kid"], sealed, resealed)


class IdentityRepo:
    def __init__(self, pool: asyncpg.Pool, ring: SecretKeyring) -> None:
        self._pool = pool
        self._ring = ring

    async def open_voucher_exists(self, code: str) -> bool:
        return await self._pool.fetchrow(Q.get_open_voucher, code) is not None

    async def issue_voucher(
        self,
        voucher_id: uuid.UUID,
        code: str,
        issuer_id: uuid.UUID | None,
        expires_at: datetime,
        max_open: int,
    ) -> dict[str, Any] | None:
        """Insert the voucher unless the issuer already holds `max_open`; None when over."""
        async with self._pool.acquire() as conn, conn.transaction():
            existing = await conn.fetchrow(Q.get_voucher, voucher_id)
            if existing is not None:
                return dict(existing)
            if issuer_id is not None:
                await conn.execute(Q.lock_issuer, str(issuer_id))
                if await conn.fetchval(Q.count_open_vouchers_for_issuer, issuer_id) >= max_open:
                    return None
            await conn.execute(Q.insert_voucher, voucher_id, code, issuer_id, expires_at)
            row = await conn.fetchrow(Q.get_voucher, voucher_id)
            assert row is not None
            return dict(row)

    async def create_identity(
        self,
        identity_id: uuid.UUID,
        schema_id: str,
        traits: dict[str, str],
        password_hash: str,
        email: str | None,
        display_name: str | None = None,
    ) -> bool:
        """False when the email is taken by another identity."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    Q.insert_identity,
                    identity_id,
                    schema_id,
                    traits,
                    password_hash,
                    email,
                    display_name,
                )
                row = await conn.fetchrow(Q.get_identity, identity_id)
        except asyncpg.UniqueViolationError:
            return False
        return row is not None

    async def set_display_name(self, identity_id: uuid.UUID, display_name: str | None) -> bool:
        """False when no human identity has this id."""
        row = await self._pool.fetchrow(Q.set_display_name, identity_id, display_name)
        return row is not None

    async def delete_identity(self, identity_id: uuid.UUID) -> None:
        await self._pool.execute(Q.delete_identity, identity_id)

    async def bind_agent(
        self,
        identity_id: uuid.UUID,
        agent_id: uuid.UUID,
        public_key: str,
        fingerprint: str,
        voucher_code: str,
    ) -> uuid.UUID:
        """Upsert the agent and redeem the voucher in one transaction, or change nothing (a key
        another identity holds: `agent-exists`; a voucher gone meanwhile: `voucher-rejected`).

        Idempotent: a retry after a commit finds the agent bound to this identity and the
        voucher redeemed by it. A key bound to another live identity is never taken over.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                Q.upsert_agent, agent_id, identity_id, public_key, fingerprint
            )
            if row is None:
                raise AgentExists("This public key is already registered")
            bound_id: uuid.UUID = row["id"]
            redeemed = await conn.fetchrow(Q.redeem_voucher, voucher_code, bound_id)
            # a retry after a commit finds the voucher already redeemed by this agent
            if redeemed is None and (
                await conn.fetchval(Q.voucher_redeemed_by, voucher_code) != bound_id
            ):
                raise VoucherRejected("The voucher was redeemed or expired meanwhile")
            return bound_id

    async def create_client(
        self,
        client_id: str,
        identity_id: uuid.UUID,
        agent_id: uuid.UUID,
        secret_hash: str,
        metadata: dict[str, str],
    ) -> None:
        """The agent's OAuth2 client; its metadata gains `proof` (SPEC 2.3, DECISIONS "Identity
        and authentication"): the voucher the registration redeemed, `{"kind": "voucher",
        "voucherId": ...}`. Migration 0008 gave it to clients registered before."""
        async with self._pool.acquire() as conn, conn.transaction():
            voucher_id = await conn.fetchval(Q.voucher_redeemed_by_agent, agent_id)
            proof = {} if voucher_id is None else {"proof": voucher_proof(voucher_id)}
            await conn.execute(
                Q.insert_oauth_client,
                client_id,
                identity_id,
                secret_hash,
                " ".join(AGENT_SCOPES),
                {**metadata, **proof},
            )

    async def ensure_signing_key(self, rotate: bool) -> tuple[str, bool]:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('jwt-signing-keys'))")
            current = await conn.fetchrow(
                "SELECT kid FROM jwt_signing_keys WHERE retired_at IS NULL "
                "ORDER BY created_at DESC LIMIT 1"
            )
            await _reseal_signing_keys(conn, self._ring)
            if current is not None and not rotate:
                return str(current["kid"]), False
            kid, sealed, public = new_sealed_key(self._ring)
            await conn.execute(Q.insert_signing_key, kid, sealed, public)
            await conn.execute(Q.retire_signing_keys_except, kid)
            return kid, True

    async def rehash_credential(self, rehash: CredentialRehash) -> bool:
        """Store a credential's hash under the current server secret; False when the row no
        longer holds the old hash (revoked, rotated or already moved)."""
        query = _REHASH[rehash.kind]
        done: str = await self._pool.execute(query, rehash.ref, rehash.old_hash, rehash.new_hash)
        return done.endswith(" 1")

    async def nonce_used(self, nonce: str) -> bool:
        return await self._pool.fetchrow(Q.recovery_nonce_used, nonce) is not None

    async def consume_nonce(self, nonce: str, expires_at: datetime) -> bool:
        return await self._pool.fetchrow(Q.consume_recovery_nonce, nonce, expires_at) is not None

    async def agent_by_public_key(self, public_key: str) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(Q.get_agent_by_public_key, public_key)
        return dict(row) if row is not None else None

    async def create_recovery_flow(
        self, flow_id: uuid.UUID, identity_id: uuid.UUID, code_hash: str, expires_at: datetime
    ) -> None:
        await self._pool.execute(
            Q.insert_recovery_flow, flow_id, identity_id, code_hash, expires_at
        )

    async def redeem_recovery(
        self, flow_id: uuid.UUID, candidate_hash: str, new_secret_hash: str, max_attempts: int
    ) -> tuple[str, dict[str, Any] | None]:
        """Check the code under a row lock; count a wrong try; rotate the secret on success.

        Returns (outcome, client) with outcome in ok / unknown / expired / used / exhausted / wrong.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            flow = await conn.fetchrow(Q.lock_recovery_flow, flow_id)
            if flow is None:
                return "unknown", None
            if flow["used_at"] is not None:
                return "used", None
            if flow["attempts"] >= max_attempts:
                return "exhausted", None
            if flow["expires_at"] <= await conn.fetchval("SELECT now()"):
                return "expired", None
            if not hmac.compare_digest(flow["code_hash"], candidate_hash):
                await conn.execute(Q.count_recovery_attempt, flow_id)
                return "wrong", None
            await conn.execute(Q.use_recovery_flow, flow_id)
            client = await conn.fetchrow(
                Q.rotate_client_secret, flow["identity_id"], new_secret_hash
            )
            if client is None:
                return "unknown", None
            return "ok", {"client_id": client["client_id"], "identity_id": flow["identity_id"]}

    async def open_session(
        self,
        session_id: uuid.UUID,
        identity_id: uuid.UUID,
        human_id: uuid.UUID,
        token_hash: str,
        expires_at: datetime,
    ) -> uuid.UUID:
        """Onboard the human on first login (humans.identity_id) and open the session."""
        async with self._pool.acquire() as conn, conn.transaction():
            bound = await conn.fetchval(Q.upsert_human_for_identity, human_id, identity_id)
            await conn.execute(
                Q.insert_session, session_id, token_hash, identity_id, bound, expires_at
            )
            return uuid.UUID(str(bound))

    async def close_session(self, session_id: uuid.UUID) -> None:
        await self._pool.execute(Q.revoke_session, session_id)
