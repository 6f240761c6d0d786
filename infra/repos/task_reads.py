"""Reads of the task queue for the REST API (SPEC 4.5): tasks, attempts, grants, messages, and
what `POST /tasks` checks before it starts a task (projects, staged artifacts, idempotency).

Functions take a pool or a connection first; the API passes its read-only pool. Rows are
mapped to the wire by `schemas.task_api` (`task_from_row`, `attempt_from_row`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeAlias
from uuid import UUID

import asyncpg

from infra.db import Q

Db: TypeAlias = asyncpg.Pool | asyncpg.Connection


@dataclass(frozen=True)
class TaskFilter:
    """`GET /tasks` filters as the list query takes them (None: no filter)."""

    team_id: UUID
    statuses: list[str] | None = None
    task_types: list[str] | None = None
    correlation_id: UUID | None = None
    general_only: bool = False
    project_id: UUID | None = None
    diary_id: UUID | None = None
    claimable_only: bool = False


@dataclass(frozen=True)
class StagedArtifact:
    cid: str
    content_type: str | None
    content_encoding: str | None
    size_bytes: int


async def get_task(db: Db, task_id: UUID) -> asyncpg.Record | None:
    row: asyncpg.Record | None = await db.fetchrow(Q.task_read_get, task_id)
    return row


async def task_for_idempotency_key(
    db: Db, team_id: UUID, creator_id: UUID, key: str
) -> asyncpg.Record | None:
    """`(id, idempotency_cid)` of the task this creator already made with `key` in the team."""
    row: asyncpg.Record | None = await db.fetchrow(
        Q.task_read_by_idempotency_key, team_id, creator_id, key
    )
    return row


async def list_tasks(
    db: Db, where: TaskFilter, after: tuple[datetime, UUID] | None, limit: int
) -> list[asyncpg.Record]:
    """Up to `limit` tasks after the keyset position `after`, newest first."""
    after_at, after_id = after if after is not None else (None, None)
    rows: list[asyncpg.Record] = await db.fetch(
        Q.task_read_list,
        where.team_id,
        where.statuses,
        where.task_types,
        where.correlation_id,
        where.general_only,
        where.project_id,
        where.diary_id,
        where.claimable_only,
        after_at,
        after_id,
        limit,
    )
    return rows


async def list_attempts(db: Db, task_id: UUID) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await db.fetch(Q.task_read_attempts, task_id)
    return rows


async def get_attempt(db: Db, task_id: UUID, attempt_n: int) -> asyncpg.Record | None:
    """`(id, task_id, attempt_n, status, claimed_by_agent_id)` of one attempt."""
    row: asyncpg.Record | None = await db.fetchrow(Q.task_read_attempt, task_id, attempt_n)
    return row


async def completed_attempt_n(db: Db, task_id: UUID, attempt_n: int | None) -> int | None:
    """The completed attempt `attempt_n` of the task (the latest when None), else None."""
    found: int | None = await db.fetchval(Q.task_read_completed_attempt, task_id, attempt_n)
    return found


async def project_team(db: Db, project_id: UUID) -> UUID | None:
    """The team a project belongs to, None when there is no such project."""
    row = await db.fetchrow(Q.task_read_project, project_id)
    return None if row is None else UUID(str(row["team_id"]))


async def staged_artifacts(db: Db, team_id: UUID, cids: Sequence[str]) -> dict[str, StagedArtifact]:
    """The team's staged artifacts among `cids`, by CID."""
    rows = await db.fetch(Q.task_read_staged, team_id, list(cids))
    return {
        row["cid"]: StagedArtifact(
            cid=row["cid"],
            content_type=row["content_type"],
            content_encoding=row["content_encoding"],
            size_bytes=row["size_bytes"],
        )
        for row in rows
    }


async def list_grants(db: Db, task_id: UUID) -> list[asyncpg.Record]:
    """`(relation, subject_ns, subject_id, created_at)` of the task's writer/manager tuples."""
    rows: list[asyncpg.Record] = await db.fetch(Q.task_read_grants, str(task_id))
    return rows


async def subject_exists(db: Db, subject_ns: str, subject_id: UUID) -> bool:
    return bool(await db.fetchval(Q.task_read_subject_exists, subject_ns, subject_id))


async def list_messages(
    db: Db, attempt_id: UUID, after_seq: int, limit: int
) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await db.fetch(Q.task_read_messages, attempt_id, after_seq, limit)
    return rows
