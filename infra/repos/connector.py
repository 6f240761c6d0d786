"""The browser OAuth connector's rows: clients, authorization codes and grants.

`ConnectorRepo` holds the units of work the activities call (one transaction each, idempotent
under retry); the functions below it are the API's reads, returning row models.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from infra.db import Q
from infra.repos.rows import Db, Row, fetch_one


@dataclass(frozen=True)
class Granted:
    """The grant a code or refresh token became; `refused` says why nothing was granted."""

    grant_id: UUID | None = None
    identity_id: UUID | None = None
    human_id: UUID | None = None
    scopes: tuple[str, ...] = ()
    resource: str = ""
    refused: str | None = None


class ConnectorRepo:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def register_client(
        self,
        client_id: str,
        secret_hash: str | None,
        client_name: str | None,
        redirect_uris: list[str],
        metadata: dict[str, Any],
    ) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                Q.insert_connector_client,
                client_id,
                secret_hash,
                client_name,
                redirect_uris,
                metadata,
            )

    async def issue_code(self, code_hash: str, fields: dict[str, Any]) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                Q.insert_connector_code,
                code_hash,
                fields["client_id"],
                fields["human_id"],
                fields["identity_id"],
                fields["redirect_uri"],
                fields["redirect_uri_explicit"],
                fields["code_challenge"],
                fields["scopes"],
                fields["resource"],
                fields["expires_at"],
            )

    async def redeem_code(
        self,
        code_hash: str,
        client_id: str,
        grant_id: UUID,
        refresh_hash: str,
        refresh_expires_at: datetime,
    ) -> Granted:
        """Use the code once and open its grant, in one transaction.

        A retry after the commit finds the grant this very call made (same id). A second
        redemption of a used code revokes the grant the first one opened (RFC 6749 4.1.2):
        whoever replays a code learns nothing, and the legitimate holder must log in again.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            existing = await conn.fetchrow(Q.get_connector_grant_by_code, code_hash)
            if existing is not None and existing["id"] == grant_id:
                return _granted(existing)
            used = await conn.fetchrow(Q.use_connector_code, code_hash, client_id)
            if used is None:
                if existing is not None:
                    await conn.execute(Q.revoke_connector_grant_of_code, code_hash)
                return Granted(refused="code-unusable")
            await conn.execute(
                Q.insert_connector_grant,
                grant_id,
                client_id,
                code_hash,
                used["human_id"],
                used["identity_id"],
                used["scopes"],
                used["resource"],
                refresh_hash,
                refresh_expires_at,
            )
            return Granted(
                grant_id=grant_id,
                identity_id=used["identity_id"],
                human_id=used["human_id"],
                scopes=tuple(used["scopes"]),
                resource=used["resource"],
            )

    async def rotate_refresh(
        self,
        grant_id: UUID,
        client_id: str,
        old_hash: str,
        new_hash: str,
        refresh_expires_at: datetime,
    ) -> Granted:
        """Swap the grant's refresh token; a retry after the commit finds the new hash."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                Q.rotate_connector_refresh,
                grant_id,
                client_id,
                old_hash,
                new_hash,
                refresh_expires_at,
            )
            if row is None:
                current = await conn.fetchrow(Q.get_connector_grant_refresh, grant_id)
                if current is None or current["refresh_hash"] != new_hash:
                    return Granted(refused="refresh-unusable")
                row = current
            return _granted(row)

    async def revoke_grant(self, grant_id: UUID) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(Q.revoke_connector_grant, grant_id)


def _granted(row: asyncpg.Record) -> Granted:
    return Granted(
        grant_id=row["id"],
        identity_id=row["identity_id"],
        human_id=row["human_id"],
        scopes=tuple(row["scopes"]),
        resource=row["resource"],
    )


# --- reads for the API --------------------------------------------------------------------


class ConnectorClientRow(Row):
    client_id: str
    secret_hash: str | None
    client_name: str | None
    redirect_uris: list[str]
    metadata: dict[str, Any]
    created_at: datetime


async def get_client(db: Db, client_id: str) -> ConnectorClientRow | None:
    return await fetch_one(db, ConnectorClientRow, Q.get_connector_client, client_id)


class CodeRow(Row):
    code_hash: str
    client_id: str
    human_id: UUID
    identity_id: UUID
    redirect_uri: str
    redirect_uri_explicit: bool
    code_challenge: str
    scopes: list[str]
    resource: str
    expires_at: datetime
    used_at: datetime | None


async def get_code(db: Db, code_hash: str) -> CodeRow | None:
    return await fetch_one(db, CodeRow, Q.get_connector_code, code_hash)


class GrantRow(Row):
    id: UUID
    client_id: str
    human_id: UUID
    identity_id: UUID
    scopes: list[str]
    resource: str
    refresh_expires_at: datetime | None = None
    refresh_hash: str | None = None  # read by refresh token only


async def grant_by_refresh(db: Db, refresh_hashes: list[str]) -> GrantRow | None:
    """The unrevoked grant whose current refresh token hashes to one of `refresh_hashes` (its
    hash under each server secret: a rotation of the secret keeps refresh tokens working, and
    the next refresh stores the new token's hash under the current one)."""
    return await fetch_one(db, GrantRow, Q.get_connector_grant_by_refresh, refresh_hashes)


async def active_grant(db: Db, grant_id: UUID | uuid.UUID) -> GrantRow | None:
    return await fetch_one(db, GrantRow, Q.get_active_connector_grant, grant_id)
