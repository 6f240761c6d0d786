"""Reads of the task queue for the REST API (SPEC 4.5): tasks, attempts, grants, messages,
what `POST /tasks` checks before it starts a task (projects, staged artifacts, idempotency), and
what the attempt routes decide on (`attempt_target`, `claim_target`).

Functions take a pool or a connection first; the API passes its read-only pool. They return the
wire models of `schemas.task_api` (`Task`, `TaskAttempt`, ...), mapped from the rows once here,
or a row model (`infra.repos.rows`) where a route decides on columns the wire does not show.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from infra.db import Q
from infra.permissions import Closure, ClosureArgs
from infra.repos.rows import Db, GrantTuple, Row, fetch_all, fetch_one
from schemas.task_api import (
    Task,
    TaskAttempt,
    TaskGrant,
    TaskMessage,
    attempt_from_row,
    message_from_row,
    task_from_row,
)
from schemas.tasks import AttemptStatus, TaskStatus


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
    # a runtime profile's view: tasks pinned to other profiles, and types outside its policy,
    # are left out
    runtime_profile_id: UUID | None = None
    profile_task_types: list[str] | None = None


@dataclass(frozen=True)
class StagedArtifact:
    cid: str
    content_type: str | None
    content_encoding: str | None
    size_bytes: int


class IdempotentTask(Row):
    """The task an Idempotency-Key names, and the CID of the body it was created with."""

    id: UUID
    idempotency_cid: str | None


class AttemptRef(Row):
    id: UUID
    task_id: UUID
    attempt_n: int
    status: AttemptStatus
    claimed_by_agent_id: UUID


class AttemptTarget(Row):
    """What an attempt route decides on: the task, and attempt n of it (its columns are None
    when there is no such attempt); `input` only when asked for."""

    id: UUID
    team_id: UUID
    status: TaskStatus
    task_type: str
    input_cid: str
    workflow_id: str
    cancel_reason: str | None
    input: Any = None
    attempt_status: AttemptStatus | None
    claimed_by_agent_id: UUID | None
    claim_expires_at: datetime | None
    lease_ttl_sec: int | None
    # the runtime policy frozen on the attempt at claim (None: claimed under no profile)
    policy_snapshot: dict[str, Any] | None = None

    @property
    def claimant(self) -> UUID:
        """The attempt's agent; asked only once the attempt is known to exist."""
        if self.claimed_by_agent_id is None:
            raise LookupError(f"Task {self.id} has no such attempt")
        return self.claimed_by_agent_id


class ClaimTarget(Row):
    """What a claim (or a cancel) decides on: the task, and the status of the task its claim
    condition names."""

    id: UUID
    team_id: UUID
    status: TaskStatus
    workflow_id: str
    claim_condition: dict[str, Any] | None
    condition_status: TaskStatus | None
    task_type: str
    allowed_profiles: list[dict[str, Any]]


# --- tasks ------------------------------------------------------------------------------------


async def get_task(db: Db, task_id: UUID) -> Task | None:
    row = await db.fetchrow(Q.task_read_get, task_id)
    return None if row is None else task_from_row(row)


async def task_for_idempotency_key(
    db: Db, team_id: UUID, creator_id: UUID, key: str
) -> IdempotentTask | None:
    """The task this creator already made with `key` in the team."""
    return await fetch_one(
        db, IdempotentTask, Q.task_read_by_idempotency_key, team_id, creator_id, key
    )


async def list_tasks(
    db: Db, where: TaskFilter, after: tuple[datetime, UUID] | None, limit: int
) -> list[Task]:
    """Up to `limit` tasks after the keyset position `after`, newest first."""
    after_at, after_id = after if after is not None else (None, None)
    rows = await db.fetch(
        Q.task_read_list,
        where.team_id,
        where.statuses,
        where.task_types,
        where.correlation_id,
        where.general_only,
        where.project_id,
        where.diary_id,
        where.claimable_only,
        where.runtime_profile_id,
        where.profile_task_types,
        after_at,
        after_id,
        limit,
    )
    return [task_from_row(row) for row in rows]


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


async def list_grants(db: Db, task_id: UUID) -> list[TaskGrant]:
    """The task's explicit writer and manager grants."""
    tuples = await fetch_all(db, GrantTuple, Q.task_read_grants, str(task_id))
    return [TaskGrant(taskId=task_id, **held.grant()) for held in tuples]


async def subject_exists(db: Db, subject_ns: str, subject_id: UUID) -> bool:
    return bool(await db.fetchval(Q.task_read_subject_exists, subject_ns, subject_id))


# --- attempts ---------------------------------------------------------------------------------


async def list_attempts(db: Db, task_id: UUID) -> list[TaskAttempt]:
    return [attempt_from_row(row) for row in await db.fetch(Q.task_read_attempts, task_id)]


async def get_attempt(db: Db, task_id: UUID, attempt_n: int) -> AttemptRef | None:
    return await fetch_one(db, AttemptRef, Q.task_read_attempt, task_id, attempt_n)


async def attempt_view(db: Db, task_id: UUID, attempt_n: int) -> TaskAttempt | None:
    """Attempt `attempt_n` of the task with every column, as the API shows it."""
    row = await db.fetchrow(Q.task_flow_attempt, task_id, attempt_n)
    return None if row is None else attempt_from_row(row)


async def completed_attempt_n(db: Db, task_id: UUID, attempt_n: int | None) -> int | None:
    """The completed attempt `attempt_n` of the task (the latest when None), else None."""
    found: int | None = await db.fetchval(Q.task_read_completed_attempt, task_id, attempt_n)
    return found


async def attempt_target(
    db: Db, task_id: UUID, attempt_n: int, *, with_input: bool = False
) -> AttemptTarget | None:
    return await fetch_one(
        db, AttemptTarget, Q.task_flow_attempt_target, task_id, attempt_n, with_input
    )


async def claim_target(
    db: Db, task_id: UUID, closure_args: ClosureArgs
) -> tuple[ClaimTarget, Closure] | None:
    """The task as a claim or a cancel decides on it, and its permission closure
    (`PostgresPermissionEngine.closure_args`), in one statement."""
    row = await db.fetchrow(Q.task_flow_claim_target, str(task_id), *closure_args)
    if row is None:
        return None
    return ClaimTarget.model_validate(dict(row)), Closure.of_rows(row["closure"])


async def agent_public_key(db: Db, agent_id: UUID) -> str | None:
    key: str | None = await db.fetchval(Q.task_flow_agent_key, agent_id)
    return key


# --- messages ---------------------------------------------------------------------------------


async def list_messages(
    db: Db, attempt: AttemptRef, after_seq: int, limit: int
) -> list[TaskMessage]:
    """The attempt's messages after `after_seq` (exclusive), in `seq` order."""
    rows = await db.fetch(Q.task_read_messages, attempt.id, after_seq, limit)
    return [message_from_row(attempt.task_id, attempt.attempt_n, row) for row in rows]


# --- the queue's depth (a metric) --------------------------------------------------------------


class OpenTaskCount(Row):
    """How many tasks of one type are in one unfinished status."""

    task_type: str
    status: TaskStatus
    tasks: int


async def count_open_tasks(db: Db) -> list[OpenTaskCount]:
    """Queued, dispatched and running tasks by type and status (groups with none are absent)."""
    return await fetch_all(db, OpenTaskCount, Q.task_read_open_counts)
