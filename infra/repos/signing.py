"""Signing-request rows (SPEC 2.4).

Readers (the API, signed-entry creation) use the functions, which take a pool or a connection
first so that a caller inside a transaction reads its own snapshot. Writers are the
`SigningRequest` workflow's activities, through `SigningRepo`: one transaction per method, each
idempotent under retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TypeAlias
from uuid import UUID

import asyncpg

from infra.db import Q
from schemas.signing import SigningRequestRecord, SigningStatus

# A pool or a connection (inside the caller's transaction): both answer fetch/fetchrow.
Db: TypeAlias = asyncpg.Pool | asyncpg.Connection


def _record(row: asyncpg.Record) -> SigningRequestRecord:
    return SigningRequestRecord.model_validate(dict(row))


async def get_signing_request(db: Db, request_id: UUID) -> SigningRequestRecord | None:
    """The row, or None. Signed-entry creation checks `agent_id`, `status == "completed"`,
    `valid` and `message` on it."""
    row = await db.fetchrow(Q.signing_get, request_id)
    return None if row is None else _record(row)


async def list_signing_requests(
    db: Db, agent_id: UUID, status: SigningStatus | None, limit: int, offset: int
) -> tuple[list[SigningRequestRecord], int]:
    """One page of an agent's requests, newest first, and how many match in all."""
    rows = await db.fetch(Q.signing_list_for_agent, agent_id, status, limit, offset)
    total = await db.fetchval(Q.signing_count_for_agent, agent_id, status)
    return [_record(row) for row in rows], int(total)


@dataclass(frozen=True)
class InsertOutcome:
    """The stored request's times, or, when the agent holds too many open requests, the
    seconds until the first of them expires."""

    created_at: datetime | None = None
    expires_at: datetime | None = None
    retry_after_sec: int | None = None


class SigningRepo:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def insert(
        self,
        request_id: UUID,
        agent_id: UUID,
        message: str,
        nonce: UUID,
        workflow_id: str,
        created_at: datetime,
        expires_at: datetime,
        max_open: int,
    ) -> InsertOutcome:
        """Insert a pending request unless the agent already holds `max_open` open ones.

        The per-agent advisory lock serialises concurrent creates, so the count cannot be
        overtaken; a retry after a committed attempt finds its own row and returns it.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            existing = await get_signing_request(conn, request_id)
            if existing is not None:
                return InsertOutcome(existing.created_at, existing.expires_at)
            await conn.execute(Q.signing_lock_agent, str(agent_id))
            held = await conn.fetchrow(Q.signing_open_for_agent, agent_id)
            if held["open"] >= max_open:
                return InsertOutcome(retry_after_sec=max(1, held["retry_after_sec"] or 1))
            row = await conn.fetchrow(
                Q.signing_insert,
                request_id,
                agent_id,
                message,
                nonce,
                workflow_id,
                created_at,
                expires_at,
            )
            return InsertOutcome(row["created_at"], row["expires_at"])

    async def record_signature(self, request_id: UUID, signature: str, valid: bool) -> bool:
        """Complete a pending request; False when it was no longer pending (a retry)."""
        done = await self._pool.execute(Q.signing_record_signature, request_id, signature, valid)
        return bool(done == "UPDATE 1")

    async def expire(self, request_id: UUID) -> bool:
        """Mark a pending request expired; False when it was no longer pending."""
        done = await self._pool.execute(Q.signing_expire, request_id)
        return bool(done == "UPDATE 1")
