"""Writes of the attempt workflow (`Task`, SPEC 3.1): the task row with its relation tuples, and
one projection per transition.

Each method is one transaction, one statement unless the task binds input artifacts (the
workflow waits on each, so each round trip shows in a request's time), and idempotent under
retry: the insert is `ON CONFLICT DO NOTHING`, a projection sets the task's state and upserts
the attempt's row by `(task_id, attempt_n)` to exactly the workflow's values, and tuple writes
and deletes ignore what is already there. The workflow orders its projections, so the last
one written is the newest.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

import asyncpg
from pydantic import BaseModel, ConfigDict

from infra.db import Q
from schemas.errors import ArtifactNotStaged, FieldError, TaskOwnerGone
from schemas.kernel.permissions import PERMISSION_MODEL, Namespace, RelationTuple, Subject
from schemas.packs import is_pack_cid
from schemas.task_attempts import AttemptState, TaskProjection, TaskState, task_workflow_id
from schemas.tasks import AttemptStatus, TaskStart


def task_tuples(start: TaskStart) -> list[RelationTuple]:
    """The owning team and the provenance diary of a task (SPEC 5: "task imposed gives parent
    tuple"). The diary grants nothing on the task; the tuple records provenance."""
    return [
        RelationTuple.grant(
            Namespace.TASK, start.task_id, "team", Subject(ns=Namespace.TEAM, id=str(start.team_id))
        ),
        RelationTuple.grant(
            Namespace.TASK,
            start.task_id,
            "parent",
            Subject(ns=Namespace.DIARY, id=str(start.diary_id)),
        ),
    ]


def claimant_tuple(task_id: UUID, agent_id: UUID) -> RelationTuple:
    return RelationTuple.grant(
        Namespace.TASK, task_id, "claimant", Subject(ns=Namespace.AGENT, id=str(agent_id))
    )


class TaskRepo:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def insert(self, start: TaskStart) -> bool:
        """Insert the queued task and its tuples; False when the row existed already. The API
        checked the team, diary and project; one deleted since is a 404, not a retry. Without
        input artifacts to bind (most tasks) it is one statement, one round trip while the
        creating request waits; with them, one transaction with their bindings."""
        try:
            if not _input_artifacts(start):
                return await _insert(self._pool, start)
            async with self._pool.acquire() as conn, conn.transaction():
                created = await _insert(conn, start)
                if created:
                    await _bind_inputs(conn, start)
                return created
        except asyncpg.ForeignKeyViolationError:
            raise TaskOwnerGone("The task's team, diary or project no longer exists") from None

    async def project(self, projection: TaskProjection) -> None:
        """Write one transition: task state, attempt row and the claimant tuple when it
        changes, in one statement. Every transition is then one round trip to Postgres, a claim
        and a result too (they were four: begin, projection, tuple, commit), and the workflow
        task that waits on it is held that much shorter."""
        await self._pool.execute(
            Q.task_write_projection,
            *_projection_args(projection),
            *_claimant_args(projection),
        )


class AttemptColumns(BaseModel):
    """The `task_attempts` columns a projection writes, named as the table names them (the
    statement reads them by name from one jsonb parameter)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: UUID
    task_id: UUID
    attempt_n: int
    workflow_id: str
    lease_id: UUID
    claimed_by_agent_id: UUID
    status: AttemptStatus
    lease_ttl_sec: int
    claimed_at: datetime
    started_at: datetime | None
    last_heartbeat_at: datetime | None
    claim_expires_at: datetime | None
    finished_at: datetime | None
    output: dict[str, Any] | None
    output_cid: str | None
    content_signature: str | None
    usage: dict[str, Any] | None
    error: dict[str, Any] | None
    timeout_reason: str | None
    traceparent: str
    runtime_id: str | None
    daemon_state: dict[str, Any] | None
    runtime_profile_id: UUID | None = None
    runtime_profile_revision: int | None = None
    policy_snapshot: dict[str, Any] | None = None
    policy_snapshot_hash: str | None = None

    @classmethod
    def of(cls, task_id: UUID, attempt: AttemptState) -> AttemptColumns:
        return cls(
            id=attempt.attempt_id,
            task_id=task_id,
            workflow_id=task_workflow_id(task_id),
            claimed_by_agent_id=attempt.agent_id,
            **attempt.model_dump(exclude={"attempt_id", "agent_id"}),
        )


class TaskColumns(TaskState):
    """The `tasks` columns a projection writes: the task's state, and the row it belongs to."""

    id: UUID


def _projection_args(projection: TaskProjection) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The two parameters of `task_write_projection`: the attempt's columns and the task's."""
    attempt = projection.attempt
    attempt_columns = (
        None
        if attempt is None
        else AttemptColumns.of(projection.task_id, attempt).model_dump(mode="json")
    )
    task_columns = TaskColumns(id=projection.task_id, **projection.task.model_dump())
    return attempt_columns, task_columns.model_dump(mode="json")


def _claimant_args(projection: TaskProjection) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The last two parameters of `task_write_projection`: the tuples granted and revoked (the
    claimant's, as the permission model admits it), each a list of column objects."""

    def columns(agent_id: UUID | None) -> list[dict[str, str]]:
        if agent_id is None:
            return []
        claimant = claimant_tuple(projection.task_id, agent_id)
        PERMISSION_MODEL.validate_tuple(claimant)
        return [claimant.model_dump()]

    return columns(projection.grant_claimant), columns(projection.revoke_claimant)


async def _insert(db: asyncpg.Pool | asyncpg.Connection, start: TaskStart) -> bool:
    """The task row and its tuples in one statement (then its input bindings, in the caller's
    transaction); False when the row existed already."""
    granted = task_tuples(start)
    for item in granted:
        PERMISSION_MODEL.validate_tuple(item)
    row = await db.fetchrow(
        Q.task_write_insert,
        start.task_id,
        start.team_id,
        start.diary_id,
        start.project_id,
        start.task_type,
        start.title,
        start.input,
        start.input_cid,
        start.input_schema_cid,
        start.output_kind,
        start.correlation_id,
        start.references,
        start.claim_condition,
        start.allowed_profiles,
        start.required_trust_level,
        start.max_attempts,
        start.dispatch_timeout_sec,
        start.running_timeout_sec,
        start.expires_at,
        start.proposed_by_agent_id,
        start.proposed_by_human_id,
        start.idempotency_key,
        start.idempotency_cid,
        task_workflow_id(start.task_id),
        [item.model_dump() for item in granted],
    )
    if not row["diary_found"]:
        raise asyncpg.ForeignKeyViolationError("the provenance diary is gone")  # answered 404
    return row["inserted"] is not None  # None: a retry after a committed attempt


def _input_artifacts(start: TaskStart) -> list[dict[str, Any]]:
    """The references that bind a staged artifact (a judged_work reference may carry a
    rendered pack's CID: no bytes to bind)."""
    return [
        ref
        for ref in start.references
        if ref.get("artifact") and not is_pack_cid(str(ref["artifact"]["cid"]))
    ]


async def _bind_inputs(conn: asyncpg.Connection, start: TaskStart) -> None:
    """Bind the references' staged artifacts to the task (SPEC 2.6), all or nothing: a CID no
    longer staged by the team (swept since the API checked) refuses the task."""
    refs = _input_artifacts(start)
    if not refs:
        return
    artifacts = [ref["artifact"] for ref in refs]
    bound = await conn.fetch(
        Q.task_write_bind_inputs,
        start.team_id,
        start.task_id,
        [uuid5(start.task_id, artifact["cid"]) for artifact in artifacts],
        [artifact["cid"] for artifact in artifacts],
        [artifact.get("kind") or "input" for artifact in artifacts],
        [artifact.get("title") or artifact["cid"] for artifact in artifacts],
        [ref["role"] for ref in refs],
        start.proposed_by_agent_id,
        start.proposed_by_human_id,
        [artifact.get("contentType") for artifact in artifacts],
    )
    missing = {artifact["cid"] for artifact in artifacts} - {row["cid"] for row in bound}
    if missing:
        raise ArtifactNotStaged(
            "An input artifact is no longer staged by the team",
            errors=[
                FieldError(pointer="/references", message=f"not staged: {cid}") for cid in missing
            ],
        )
