"""Rows of task artifacts: blobs by CID, staged input bytes, artifacts bound to tasks.

Readers (the API) are the functions, which take a pool or a connection first. Writers are the
artifact workflows' activities, through `ArtifactRepo`: one transaction per method, idempotent
under retry (a CID-keyed upsert; the artifact id comes from the API). A refusal raises a
`DomainError` inside the transaction, so nothing of it is written.

Who deletes what: a task's `task_artifacts` rows go with the task (ON DELETE CASCADE); staged
rows and blobs nothing names any more go in the maintenance sweep (`ArtifactSweep`), which
deletes a blob's S3 object while it still holds the blob's row, so an upload naming the same
bytes meanwhile either waits and then re-creates both, or fails the sweep's delete through the
foreign keys: a row never names a deleted object.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeAlias
from uuid import UUID

import asyncpg

from infra.db import Q
from infra.repos.rows import Row, fetch_one
from schemas.artifacts import (
    ArtifactAttachInput,
    ArtifactStageInput,
    AttachedArtifact,
    TaskArtifact,
    artifact_from_row,
)
from schemas.errors import ArtifactMetadataConflict, AttemptNotFound, Conflict
from schemas.kernel.attempts import report_refusal
from schemas.task_attempts import report_refused  # the attempt routes' answer, one wording
from schemas.tasks import AttemptStatus

Db: TypeAlias = asyncpg.Pool | asyncpg.Connection
DeleteObjects: TypeAlias = Callable[[Sequence[str]], Awaitable[None]]


def attempt_guard(attempt: AttemptGuard | None, attempt_n: int, agent_id: UUID | None) -> None:
    """Only the claimant of a started attempt uploads its outputs (SPEC 2.6).

    Checked by the API before it reads the body, and again under the attempt's row lock when
    the row is written. The order is the spec's: who asks (403), then the attempt's state (409,
    like complete and fail on a `claimed` or terminal attempt).
    """
    if attempt is None:
        raise AttemptNotFound(f"The task has no attempt {attempt_n}")
    refusal = report_refusal(attempt.status, attempt.claimed_by_agent_id, agent_id)
    if refusal is not None:
        raise report_refused(refusal, attempt_n, attempt.status, "uploads its artifacts")


def metadata_conflict(cid: str, attempt_n: int) -> Conflict:
    return ArtifactMetadataConflict(
        f"{cid} is already attached to attempt {attempt_n} with another kind, title, "
        "content type or content encoding"
    )


# --- readers ----------------------------------------------------------------------------------


class AttemptGuard(Row):
    """What `attempt_guard` decides on, and the runtime policy frozen on the attempt."""

    status: AttemptStatus
    claimed_by_agent_id: UUID
    policy_snapshot: dict[str, Any] | None = None


class ArtifactBlob(Row):
    """An artifact binding as a download needs it."""

    id: UUID
    cid: str
    content_type: str | None
    content_encoding: str | None
    size_bytes: int


async def get_attempt(db: Db, task_id: UUID, attempt_n: int) -> AttemptGuard | None:
    return await fetch_one(db, AttemptGuard, Q.artifact_attempt_get, task_id, attempt_n)


async def list_page(
    db: Db, task_id: UUID, after: tuple[datetime, UUID] | None, limit: int
) -> list[TaskArtifact]:
    """Up to `limit` artifacts of the task after the keyset position `after`."""
    after_at, after_id = after if after is not None else (None, None)
    rows = await db.fetch(Q.artifact_list_page, task_id, after_at, after_id, limit)
    return [artifact_from_row(row) for row in rows]


async def bound_on_task(db: Db, task_id: UUID, cid: str) -> ArtifactBlob | None:
    """The artifact that binds `cid` anywhere on the task (an input first)."""
    return await fetch_one(db, ArtifactBlob, Q.artifact_by_task_cid, task_id, cid)


async def bound_on_attempt(db: Db, task_id: UUID, attempt_n: int, cid: str) -> ArtifactBlob | None:
    return await fetch_one(db, ArtifactBlob, Q.artifact_by_attempt_cid, task_id, attempt_n, cid)


# --- writers ----------------------------------------------------------------------------------


class ArtifactRepo:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def stage(self, inp: ArtifactStageInput) -> None:
        """The blob row and the team's staged row (re-staging renews its grace period)."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(Q.artifact_blob_insert, inp.cid, inp.size_bytes)
            await conn.execute(
                Q.artifact_stage_upsert,
                inp.team_id,
                inp.cid,
                inp.content_type,
                inp.content_encoding,
            )

    async def attach(self, inp: ArtifactAttachInput) -> AttachedArtifact:
        """Bind an output to a running attempt of its claimant; the same CID again on the same
        attempt answers the existing row (a retry) or 409 when its metadata differs."""
        async with self._pool.acquire() as conn, conn.transaction():
            attempt = await fetch_one(
                conn, AttemptGuard, Q.artifact_attempt_lock, inp.task_id, inp.attempt_n
            )
            attempt_guard(attempt, inp.attempt_n, inp.agent_id)
            await conn.execute(Q.artifact_blob_insert, inp.cid, inp.size_bytes)
            inserted = await conn.execute(
                Q.artifact_output_insert,
                inp.artifact_id,
                inp.team_id,
                inp.task_id,
                inp.attempt_n,
                inp.cid,
                inp.kind,
                inp.title,
                inp.content_type,
                inp.content_encoding,
                inp.size_bytes,
                inp.agent_id,
            )
            row = await conn.fetchrow(Q.artifact_output_get, inp.task_id, inp.attempt_n, inp.cid)
        assert row is not None  # inserted, or there already
        attached = AttachedArtifact(**dict(row), created=inserted.endswith(" 1"))
        if not inp.same_metadata(attached):
            raise metadata_conflict(inp.cid, inp.attempt_n)
        return attached

    async def expire_staged(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` staged rows older than `before` that no task binds."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(Q.artifact_staged_expire, before, limit)
        return len(rows)

    async def delete_unreferenced_blobs(self, limit: int, delete_objects: DeleteObjects) -> int:
        """Delete up to `limit` blobs nothing names, their S3 objects first (inside the
        transaction, so the rows stay locked until the objects are gone)."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(Q.artifact_blob_delete_unreferenced, limit)
            cids = [row["cid"] for row in rows]
            if cids:
                await delete_objects(cids)
        return len(cids)
