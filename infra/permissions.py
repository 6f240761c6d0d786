"""The permission service: relation tuples in Postgres, evaluated by `schemas.kernel.permissions`.

`PostgresPermissionEngine` answers checks and lookups. A check reads each object's tuples with
one query (the objects of one breadth-first level share a query) inside one read-only,
repeatable-read transaction, so it sees one snapshot; the rewrite itself is the pure evaluator.
Any database failure (outage, closed pool, missing table, timeout) raises
`PermissionEvaluationFailed` (503): an outage is never mistaken for a denial.

The write side is helper functions (connection first, never opening a transaction: the repository
method that calls them owns it), and `TupleRepository`, whose methods are the units of work the
permission activities call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Final, Protocol, TypeVar
from uuid import UUID

import asyncpg

from infra.db import Q
from schemas.errors import PermissionEvaluationFailed
from schemas.kernel import permissions as rules
from schemas.kernel.permissions import (
    MAX_SUBJECT_SET_DEPTH,
    PERMISSION_MODEL,
    ObjectRef,
    PermissionModel,
    RelationTuple,
    Subject,
    TupleSource,
    Userset,
)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SEC: Final = 5.0

_DATABASE_ERRORS: Final = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)

T = TypeVar("T")


class PermissionEngine(Protocol):
    """The permission service as the API and workflows see it."""

    async def check(
        self,
        namespace: str,
        object_id: str | UUID,
        permission: str,
        subject: Subject,
        *,
        within_team: UUID | None = None,
    ) -> bool:
        """True when `subject` has `permission` (or the relation of that name) on the object;
        with `within_team`, false for an object another team owns (a team key's confinement)."""
        ...

    async def lookup(
        self, namespace: str, permission: str, subject: Subject, *, within_team: UUID | None = None
    ) -> set[str]:
        """Ids of the `namespace` objects on which `subject` has `permission` (with
        `within_team`, only those that team owns)."""
        ...


class PostgresPermissionEngine:
    """`PermissionEngine` over the `relation_tuples` table; works on a read-only pool."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        model: PermissionModel = PERMISSION_MODEL,
        max_depth: int = MAX_SUBJECT_SET_DEPTH,
        timeout: float = DEFAULT_TIMEOUT_SEC,
    ) -> None:
        self._pool = pool
        self._model = model
        self._max_depth = max_depth
        self._timeout = timeout

    async def check(
        self,
        namespace: str,
        object_id: str | UUID,
        permission: str,
        subject: Subject,
        *,
        within_team: UUID | None = None,
    ) -> bool:
        return await self._evaluate(
            lambda source: rules.check(
                self._model,
                source,
                namespace,
                str(object_id),
                permission,
                subject,
                max_depth=self._max_depth,
                within_team=_text(within_team),
            )
        )

    async def lookup(
        self, namespace: str, permission: str, subject: Subject, *, within_team: UUID | None = None
    ) -> set[str]:
        return await self._evaluate(
            lambda source: rules.lookup(
                self._model,
                source,
                namespace,
                permission,
                subject,
                max_depth=self._max_depth,
                within_team=_text(within_team),
            )
        )

    async def _evaluate(self, run: Callable[[TupleSource], Awaitable[T]]) -> T:
        try:
            async with (
                asyncio.timeout(self._timeout),
                self._pool.acquire() as conn,
                conn.transaction(isolation="repeatable_read", readonly=True),
            ):
                return await run(PostgresTupleSource(conn))
        except _DATABASE_ERRORS as exc:
            log.warning(
                "permission evaluation failed",
                extra={"error_type": type(exc).__name__},
                exc_info=True,
            )
            raise PermissionEvaluationFailed() from exc


def _text(team_id: UUID | None) -> str | None:
    return None if team_id is None else str(team_id)


class PostgresTupleSource:
    """A `TupleSource` reading `relation_tuples` through one connection."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def tuples_of(
        self, objects: Sequence[ObjectRef]
    ) -> Mapping[ObjectRef, Sequence[RelationTuple]]:
        if len(objects) == 1:
            rows = await self._conn.fetch(Q.list_object_tuples, *objects[0])
        else:
            rows = await self._conn.fetch(
                Q.list_objects_tuples,
                [ref.namespace for ref in objects],
                [ref.object_id for ref in objects],
            )
        found: dict[ObjectRef, list[RelationTuple]] = {}
        for row in rows:
            item = _tuple_from_row(row)
            found.setdefault(item.object, []).append(item)
        return found

    async def memberships(self, subject: Subject, max_depth: int) -> Mapping[Userset, int]:
        rows = await self._conn.fetch(
            Q.subject_memberships, subject.ns, subject.id, subject.relation or "", max_depth + 1
        )
        return {
            Userset(row["namespace"], row["object_id"], row["relation"]): row["hops"]
            for row in rows
        }

    async def objects_related(
        self, namespace: str, relation: str, subject_ns: str, subject_ids: Collection[str]
    ) -> set[str]:
        rows = await self._conn.fetch(
            Q.objects_related, namespace, relation, subject_ns, list(subject_ids)
        )
        return {row["object_id"] for row in rows}


def _tuple_from_row(row: asyncpg.Record) -> RelationTuple:
    return RelationTuple(
        namespace=row["namespace"],
        object_id=row["object_id"],
        relation=row["relation"],
        subject_ns=row["subject_ns"],
        subject_id=row["subject_id"],
        subject_relation=row["subject_relation"],
    )


def _columns(tuples: Sequence[RelationTuple]) -> list[list[str]]:
    unique = list(dict.fromkeys(tuples))
    return [
        [t.namespace for t in unique],
        [t.object_id for t in unique],
        [t.relation for t in unique],
        [t.subject_ns for t in unique],
        [t.subject_id for t in unique],
        [t.subject_relation for t in unique],
    ]


# --- helpers: the connection first; the calling repository method owns the transaction -------


async def list_tuples(
    conn: asyncpg.Connection, namespace: str, object_id: str | UUID
) -> list[RelationTuple]:
    """Every tuple of one object (grant listings, diagnostics)."""
    rows = await conn.fetch(Q.list_object_tuples, namespace, str(object_id))
    return sorted((_tuple_from_row(row) for row in rows), key=str)


async def write_tuples(
    conn: asyncpg.Connection,
    tuples: Sequence[RelationTuple],
    *,
    model: PermissionModel = PERMISSION_MODEL,
) -> int:
    """Insert the tuples the model admits (`ValidationFailed` otherwise, before any write);
    existing tuples are left alone. Returns how many were new."""
    for item in tuples:
        model.validate_tuple(item)
    if not tuples:
        return 0
    written: int = await conn.fetchval(Q.write_tuples, *_columns(tuples))
    return written


async def delete_tuples(conn: asyncpg.Connection, tuples: Sequence[RelationTuple]) -> int:
    """Delete exactly these tuples; absent ones are ignored. Returns how many were deleted."""
    if not tuples:
        return 0
    deleted: int = await conn.fetchval(Q.delete_tuples, *_columns(tuples))
    return deleted


async def delete_object(conn: asyncpg.Connection, namespace: str, object_id: str | UUID) -> int:
    """Delete every tuple of the object and every tuple naming it as a subject (a deleted diary
    leaves no team binding, grants, or entry/pack `parent` tuples pointing at it)."""
    deleted: int = await conn.fetchval(Q.delete_object_tuples, namespace, str(object_id))
    return deleted


class TupleRepository:
    """The tuple writes as units of work (what the permission activities call): each method is
    one transaction of its own, built from the connection-first functions above."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def write(self, tuples: Sequence[RelationTuple]) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            return await write_tuples(conn, tuples)

    async def delete(self, tuples: Sequence[RelationTuple]) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            return await delete_tuples(conn, tuples)

    async def replace(
        self, delete: Sequence[RelationTuple], write: Sequence[RelationTuple]
    ) -> tuple[int, int]:
        """Delete, then write, in one transaction (a diary transfer rebinds its team)."""
        async with self._pool.acquire() as conn, conn.transaction():
            return await delete_tuples(conn, delete), await write_tuples(conn, write)

    async def delete_object(self, namespace: str, object_id: str | UUID) -> int:
        async with self._pool.acquire() as conn, conn.transaction():
            return await delete_object(conn, namespace, object_id)
