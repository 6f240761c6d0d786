"""The agent-key credential store (SPEC 2.3, 4.6): typed reads for the API, writes for the
agent-key workflows' activities.

Reads take a pool or a connection first. Authentication reads a key by its primary key on
every request and caches nothing, so a revocation or rotation committed here is seen by the
next request in every API process.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias
from uuid import UUID

import asyncpg

from infra.db import Q
from schemas.agent_keys import AgentKeyAuthRow, AgentKeyCreate, AgentKeyRow, KeyStatus

Db: TypeAlias = asyncpg.Pool | asyncpg.Connection


async def get_key_for_auth(db: Db, key_id: UUID) -> AgentKeyAuthRow | None:
    """The key with its secret hash and its actor's identity, or None."""
    row = await db.fetchrow(Q.agent_key_for_auth, key_id)
    return None if row is None else AgentKeyAuthRow.model_validate(dict(row))


async def get_key(db: Db, key_id: UUID) -> AgentKeyRow | None:
    row = await db.fetchrow(Q.agent_key_get, key_id)
    return None if row is None else AgentKeyRow.model_validate(dict(row))


@dataclass(frozen=True)
class KeyFilter:
    """`GET /agent-keys` as the store filters it (None: no filter)."""

    binding_scope: str
    team_id: UUID | None = None
    agent_id: UUID | None = None
    status: KeyStatus | None = None


async def list_keys(
    db: Db, query: KeyFilter, after: tuple[datetime, UUID] | None, limit: int
) -> list[AgentKeyRow]:
    """One page, newest first, strictly after the keyset position `after`."""
    after_at, after_id = after if after is not None else (None, None)
    rows = await db.fetch(
        Q.agent_key_list,
        query.binding_scope,
        query.team_id,
        query.agent_id,
        query.status,
        after_at,
        after_id,
        limit,
    )
    return [AgentKeyRow.model_validate(dict(row)) for row in rows]


class AgentKeyRepo:
    """Writes: each method one transaction, idempotent under an activity's retry."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def insert(self, key: AgentKeyCreate) -> AgentKeyRow:
        """Store a new key (a retry finds the row it already wrote) and return it."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(Q.agent_key_insert, *_insert_args(key))
            stored = await get_key(conn, key.key_id)
        assert stored is not None
        return stored

    async def rotate(self, key_id: UUID, secret_hash: str) -> AgentKeyRow | None:
        """Swap the secret hash of an active, unexpired key (the old secret dies with the
        commit); None when the key is not active."""
        async with self._pool.acquire() as conn, conn.transaction():
            done = await conn.execute(Q.agent_key_rotate, key_id, secret_hash)
            if done != "UPDATE 1":
                return None
            return await get_key(conn, key_id)

    async def revoke(
        self, key_id: UUID, reason: str, description: str | None
    ) -> AgentKeyRow | None:
        """Revoke a key; an already revoked key is returned as it is (the first reason stays);
        None when there is no such key."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(Q.agent_key_revoke, key_id, reason, description)
            return await get_key(conn, key_id)

    async def expire(self, key_id: UUID, as_of: datetime) -> bool:
        """Record an active key whose expiry is at or before `as_of` as expired."""
        done = await self._pool.execute(Q.agent_key_expire, key_id, as_of)
        return bool(done == "UPDATE 1")


def _insert_args(key: AgentKeyCreate) -> tuple[Any, ...]:
    return (
        key.key_id,
        key.actor_id,
        key.name,
        key.metadata,
        key.scopes,
        key.secret_hash,
        key.expires_at,
        key.created_by_ns,
        key.created_by_id,
        key.idempotency_key_hash,
    )
