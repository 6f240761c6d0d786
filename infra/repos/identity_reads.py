"""Reads of agents, humans, sessions, OAuth clients and vouchers for the API.

Functions take a pool or a connection first (the API passes its read-only pool) and return
row models (`infra.repos.rows`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from infra.db import Q
from infra.repos.rows import Db, Row, fetch_all, fetch_one


class AgentRow(Row):
    id: UUID
    identity_id: UUID
    public_key: str
    fingerprint: str
    created_at: datetime
    updated_at: datetime


async def agent_by_identity(db: Db, identity_id: UUID) -> AgentRow | None:
    return await fetch_one(db, AgentRow, Q.get_agent_by_identity, identity_id)


async def agent_by_fingerprint(db: Db, fingerprint: str) -> AgentRow | None:
    """`fingerprint` normalized by the caller (`normalize_fingerprint`)."""
    return await fetch_one(db, AgentRow, Q.get_agent_by_fingerprint, fingerprint)


async def agent_of_client(db: Db, client_id: str) -> AgentRow | None:
    """The agent an OAuth2 client acts for."""
    return await fetch_one(db, AgentRow, Q.get_agent_of_client, client_id)


class IdentityRow(Row):
    """What a login checks: the password hash, the identity's schema and state."""

    id: UUID
    schema_id: str
    traits: dict[str, Any]
    state: str
    password_hash: str


async def identity_by_email(db: Db, email: str) -> IdentityRow | None:
    return await fetch_one(db, IdentityRow, Q.get_identity_by_email, email)


class HumanProfileRow(Row):
    """A human identity's names."""

    id: UUID
    email: str
    display_name: str | None


async def human_profile(db: Db, identity_id: UUID) -> HumanProfileRow | None:
    return await fetch_one(db, HumanProfileRow, Q.get_human_profile, identity_id)


async def human_of(db: Db, identity_id: UUID) -> UUID | None:
    """The id of the human an identity belongs to (None before its first session)."""
    row = await db.fetchrow(Q.get_human_by_identity, identity_id)
    return None if row is None else UUID(str(row["id"]))


class SessionRow(Row):
    """An open (unrevoked, unexpired) human session: who it signs in."""

    id: UUID
    identity_id: UUID
    human_id: UUID
    token_hash: str


async def open_session(db: Db, token_hashes: list[str]) -> SessionRow | None:
    """The open session whose token hashes to one of `token_hashes` (its hash under each
    server secret of the ring)."""
    return await fetch_one(db, SessionRow, Q.get_session_by_hash, token_hashes)


class VoucherRow(Row):
    id: UUID
    code: str
    issuer_id: UUID | None
    expires_at: datetime
    created_at: datetime | None = None


async def voucher_is_open(db: Db, code: str) -> bool:
    """Whether the voucher exists, unredeemed and unexpired."""
    return await db.fetchrow(Q.get_open_voucher, code) is not None


async def open_vouchers_of(db: Db, issuer_id: UUID | None) -> list[VoucherRow]:
    return await fetch_all(db, VoucherRow, Q.list_open_vouchers_for_issuer, issuer_id)
