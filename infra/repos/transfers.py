"""Diary-transfer rows (SPEC 2.2, 3.3) and the move of a diary between teams.

Readers (the API) use the functions, which take a pool or a connection first. Writers are the
`DiaryTransfer` workflow's activities, through `TransferRepo`: one transaction per method, each
idempotent under retry (the row id comes from the API; a retry after a committed attempt finds
the row already in the state it asked for and returns it). A refusal raises a `DomainError`
inside the transaction, so nothing of it is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias
from uuid import UUID

import asyncpg

from infra import permissions as tuples
from infra.db import Q
from infra.repos.rows import fetch_one
from infra.repos.team_reads import TeamState
from schemas.errors import (
    Conflict,
    DiaryNotFound,
    DiaryTransferNotFound,
    DiaryTransferPending,
    DiaryTransferPersonalTeam,
    DiaryTransferSameTeam,
    DiaryTransferStale,
    DiaryTransferTeamNotActive,
    TeamNotFound,
)
from schemas.kernel.permissions import RelationTuple, Subject
from schemas.transfers import (
    TransferInsert,
    TransferRecord,
    TransferStatus,
    already_resolved,
    record_from_row,
)

# A pool or a connection (inside the caller's transaction): both answer fetch/fetchrow.
Db: TypeAlias = asyncpg.Pool | asyncpg.Connection

PENDING_INDEX = "diary_transfers_one_pending"


def team_binding(diary_id: UUID, team_id: UUID) -> RelationTuple:
    """The Diary `team` tuple that makes a team's members read and write the diary."""
    return RelationTuple.grant("Diary", diary_id, "team", Subject(ns="Team", id=str(team_id)))


# --- readers ----------------------------------------------------------------------------------


async def get_transfer(db: Db, transfer_id: UUID) -> TransferRecord | None:
    row = await db.fetchrow(Q.transfer_get, transfer_id)
    return None if row is None else record_from_row(row)


async def pending_transfer_of(db: Db, diary_id: UUID) -> TransferRecord | None:
    row = await db.fetchrow(Q.transfer_pending_of_diary, diary_id)
    return None if row is None else record_from_row(row)


async def transfers_of_diary(db: Db, diary_id: UUID) -> list[TransferRecord]:
    """Every transfer of the diary, newest first (its history)."""
    return [record_from_row(row) for row in await db.fetch(Q.transfer_list_of_diary, diary_id)]


async def pending_transfers_to(db: Db, team_ids: Sequence[UUID]) -> list[TransferRecord]:
    """Pending transfers into any of these teams, oldest first (the one to decide first)."""
    rows = await db.fetch(Q.transfer_list_pending_to, list(team_ids))
    return [record_from_row(row) for row in rows]


def check_destination(
    team: TeamState | None, source_team_id: UUID, destination_team_id: UUID
) -> None:
    """The destination must exist, be another team, not a personal one, and be active.

    Shared by the route (a cheap early answer) and the insert (the authority, under locks).
    """
    if team is None:
        raise TeamNotFound("No such destination team")
    if destination_team_id == source_team_id:
        raise DiaryTransferSameTeam("The diary already belongs to this team")
    if team.personal:
        raise DiaryTransferPersonalTeam("A personal team cannot receive diaries")
    if team.status != "active":
        raise DiaryTransferTeamNotActive("The destination team is not active")


# --- writers ----------------------------------------------------------------------------------


class TransferRepo:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def insert(self, inp: TransferInsert) -> TransferRecord:
        """Store the pending transfer; refused when the diary left the source team meanwhile,
        the destination is not a team that can receive it, or another transfer is pending."""
        t = inp.transfer
        async with self._pool.acquire() as conn, conn.transaction():
            existing = await get_transfer(conn, t.transfer_id)
            if existing is not None:
                return existing
            # The diary's row lock serialises proposals for one diary, so the pending check
            # below cannot be overtaken (the unique index backs it up).
            diary = await conn.fetchrow(Q.transfer_lock_diary, t.diary_id)
            if diary is None:
                raise DiaryNotFound("No such diary")
            if diary["team_id"] != t.source_team_id:
                raise DiaryTransferStale("The diary changed teams meanwhile")
            team = await fetch_one(conn, TeamState, Q.transfer_lock_team, t.destination_team_id)
            check_destination(team, t.source_team_id, t.destination_team_id)
            if await pending_transfer_of(conn, t.diary_id) is not None:
                raise _pending()
            try:
                row = await conn.fetchrow(
                    Q.transfer_insert,
                    t.transfer_id,
                    t.diary_id,
                    t.source_team_id,
                    t.destination_team_id,
                    t.initiated_by,
                    inp.workflow_id,
                    inp.expires_at,
                )
            except asyncpg.UniqueViolationError as exc:
                if exc.constraint_name == PENDING_INDEX:
                    raise _pending() from None
                raise
            return record_from_row(row)

    async def accept(self, transfer_id: UUID) -> TransferRecord:
        """In one transaction: move the diary (compare-and-set on its team), swap its Diary
        `team` tuple from the source to the destination, and mark the transfer accepted."""
        async with self._pool.acquire() as conn, conn.transaction():
            record = await _locked(conn, transfer_id)
            if record.status == "accepted":
                return record  # a retry after the commit
            if record.status != "pending":
                raise already_resolved(record.status)
            team = await conn.fetchrow(Q.transfer_lock_team, record.destination_team_id)
            if team is None or team["status"] != "active":
                raise DiaryTransferTeamNotActive("The destination team is no longer active")
            moved = await conn.fetchval(
                Q.transfer_move_diary,
                record.diary_id,
                record.source_team_id,
                record.destination_team_id,
            )
            if moved is None:
                raise DiaryTransferStale("The diary changed teams meanwhile")
            await tuples.delete_tuples(conn, [team_binding(record.diary_id, record.source_team_id)])
            await tuples.write_tuples(
                conn, [team_binding(record.diary_id, record.destination_team_id)]
            )
            return await _resolve(conn, transfer_id, "accepted")

    async def reject(self, transfer_id: UUID) -> TransferRecord:
        """Mark the transfer rejected; the diary stays with its team."""
        async with self._pool.acquire() as conn, conn.transaction():
            record = await _locked(conn, transfer_id)
            if record.status == "rejected":
                return record
            if record.status != "pending":
                raise already_resolved(record.status)
            return await _resolve(conn, transfer_id, "rejected")

    async def expire(self, transfer_id: UUID) -> TransferRecord | None:
        """Mark a still-pending transfer expired; returns the row as it is (None when the
        diary, and with it the transfer, was deleted meanwhile)."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(Q.transfer_lock, transfer_id)
            if row is None:
                return None
            record = record_from_row(row)
            if record.status != "pending":
                return record
            return await _resolve(conn, transfer_id, "expired")


def _pending() -> Conflict:
    return DiaryTransferPending("This diary already has a pending transfer")


async def _locked(conn: asyncpg.Connection, transfer_id: UUID) -> TransferRecord:
    row = await conn.fetchrow(Q.transfer_lock, transfer_id)
    if row is None:
        raise DiaryTransferNotFound("No such transfer")
    return record_from_row(row)


async def _resolve(
    conn: asyncpg.Connection, transfer_id: UUID, status: TransferStatus
) -> TransferRecord:
    row = await conn.fetchrow(Q.transfer_resolve, transfer_id, status)
    assert row is not None, "the caller holds the row lock of a pending transfer"
    return record_from_row(row)
