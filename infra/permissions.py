"""The permission service: relation tuples in Postgres, evaluated by `schemas.kernel.permissions`.

`PostgresPermissionEngine` answers checks and lookups, each in one statement (so one snapshot),
whatever the depth of the groups and grants: a check reads the tuples of every object it may
walk to at once (`object_closure`: the object, what its arrows and owner path lead to, and the
subject sets below them, down to the depth a check may go), a lookup the subject's memberships
and the tuples its arrows walk backwards (`subject_closure`); the rewrite itself is the pure
evaluator, unchanged, over what was read. Several permissions of one object share a read
(`permitted`), and a diary is read with its closure (`diary_with_closure`). Past what the
statement read (a chain of subject sets deeper than a check may follow, which it then refuses)
the evaluator reads on, one statement per level as before, so the answer never depends on the
statement's bound.
Any database failure (outage, closed pool, missing table, timeout) raises
`PermissionEvaluationFailed` (503): an outage is never mistaken for a denial.

The write side is helper functions (connection first, never opening a transaction: the repository
method that calls them owns it), and `TupleRepository`, whose methods are the units of work the
permission activities call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar
from uuid import UUID

import asyncpg

from infra.db import Q
from schemas.errors import PermissionEvaluationFailed
from schemas.kernel import permissions as rules
from schemas.kernel.permissions import (
    MAX_SUBJECT_SET_DEPTH,
    PERMISSION_MODEL,
    Namespace,
    ObjectRef,
    PermissionModel,
    RelationTuple,
    Subject,
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

ClosureArgs = tuple[list[str], list[str], int]
"""What object_closure takes past the object: the followed relations' namespaces and names, and
how many levels it reads."""


class PermissionEngine(Protocol):
    """The permission service as the API and workflows see it."""

    closure_args: ClosureArgs
    """What a caller reading an object with its closure passes (`diary_with_closure`)."""

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

    async def permitted(
        self,
        namespace: str,
        object_id: str | UUID,
        permissions: Collection[str],
        subject: Subject,
        *,
        within_team: UUID | None = None,
        closure: Closure | None = None,
    ) -> set[str]:
        """Which of `permissions` `subject` has on the object, as `check` decides each; from
        `closure` when the caller read it already (`diary_with_closure`)."""
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
        followed = sorted(model.followed_relations())
        self._steps = model.follow_steps()
        # a check walks at most `steps` followed relations, then `max_depth` subject sets
        self.closure_args: ClosureArgs = (
            [namespace for namespace, _ in followed],
            [relation for _, relation in followed],
            max_depth + self._steps,
        )

    async def check(
        self,
        namespace: str,
        object_id: str | UUID,
        permission: str,
        subject: Subject,
        *,
        within_team: UUID | None = None,
    ) -> bool:
        found = await self.permitted(
            namespace, object_id, (permission,), subject, within_team=within_team
        )
        return permission in found

    async def permitted(
        self,
        namespace: str,
        object_id: str | UUID,
        permissions: Collection[str],
        subject: Subject,
        *,
        within_team: UUID | None = None,
        closure: Closure | None = None,
    ) -> set[str]:
        async def run() -> set[str]:
            source = closure or Closure.of_rows(
                await self._pool.fetch(
                    Q.object_closure, namespace, str(object_id), *self.closure_args
                )
            )
            granted = set()
            for permission in permissions:
                if await rules.check(
                    self._model,
                    _Prefetched(source, self._pool),
                    namespace,
                    str(object_id),
                    permission,
                    subject,
                    max_depth=self._max_depth,
                    within_team=_text(within_team),
                ):
                    granted.add(permission)
            return granted

        return await self._guarded(run())

    async def lookup(
        self, namespace: str, permission: str, subject: Subject, *, within_team: UUID | None = None
    ) -> set[str]:
        arrows = self._model.arrows_of(namespace, permission)
        if within_team is not None:
            arrows |= set(self._model.owner_chain(namespace) or ())

        async def run() -> set[str]:
            ordered = sorted(arrows)
            rows = await self._pool.fetch(
                Q.subject_closure,
                subject.ns,
                subject.id,
                subject.relation or "",
                self._max_depth + 1,
                [ns for ns, _ in ordered],
                [via for _, via in ordered],
                _text(within_team),
                self._steps + 1,
            )
            return await rules.lookup(
                self._model,
                _Reversed(rows, arrows, self._steps + 1, _text(within_team), self._pool),
                namespace,
                permission,
                subject,
                max_depth=self._max_depth,
                within_team=_text(within_team),
            )

        return await self._guarded(run())

    async def _guarded(self, run: Awaitable[T]) -> T:
        try:
            async with asyncio.timeout(self._timeout):
                return await run
        except _DATABASE_ERRORS as exc:
            log.warning(
                "permission evaluation failed",
                extra={"error_type": type(exc).__name__},
                exc_info=True,
            )
            raise PermissionEvaluationFailed() from exc


def _text(team_id: UUID | None) -> str | None:
    return None if team_id is None else str(team_id)


@dataclass(frozen=True)
class Closure:
    """What `object_closure` read for one object: the tuples of every object it reached (all
    of them: `reached` holds objects without any too)."""

    tuples: Mapping[ObjectRef, Sequence[RelationTuple]]
    reached: frozenset[ObjectRef]

    @classmethod
    def of_rows(cls, rows: Iterable[Sequence[str | None]]) -> Closure:
        """From object_closure's rows (or diary_with_closure's arrays of the same columns)."""
        tuples: dict[ObjectRef, list[RelationTuple]] = {}
        reached = set()
        for namespace, object_id, relation, subject_ns, subject_id, subject_relation in rows:
            assert namespace is not None and object_id is not None
            ref = ObjectRef(namespace, object_id)
            reached.add(ref)
            if relation is not None:
                tuples.setdefault(ref, []).append(
                    RelationTuple(
                        namespace=namespace,
                        object_id=object_id,
                        relation=relation,
                        subject_ns=subject_ns or "",
                        subject_id=subject_id or "",
                        subject_relation=subject_relation or "",
                    )
                )
        return cls(tuples, frozenset(reached))


class _Prefetched:
    """A check's `TupleSource` over a `Closure`. An object beyond it (a chain of subject sets
    longer than the closure's bound, which the check then refuses as too deep) is read from
    the pool like before, so the answer never depends on the bound."""

    def __init__(self, closure: Closure, pool: asyncpg.Pool) -> None:
        self._closure = closure
        self._pool = pool

    async def tuples_of(
        self, objects: Sequence[ObjectRef]
    ) -> Mapping[ObjectRef, Sequence[RelationTuple]]:
        found = {ref: self._closure.tuples.get(ref, ()) for ref in objects}
        beyond = [ref for ref in objects if ref not in self._closure.reached]
        if beyond:
            found |= await _read_tuples(self._pool, beyond)
        return found

    async def memberships(self, subject: Subject, max_depth: int) -> Mapping[Userset, int]:
        return await _read_memberships(self._pool, subject, max_depth)

    async def objects_related(
        self, namespace: str, relation: str, subject_ns: str, subject_ids: Collection[str]
    ) -> set[str]:
        return await _read_related(self._pool, namespace, relation, subject_ns, subject_ids)


class _Reversed:
    """A lookup's `TupleSource` over `subject_closure`'s rows: the subject's memberships, and
    the arrows' tuples walked backwards from them. An arrow or an object outside what was
    read is read from the pool like before."""

    def __init__(
        self,
        rows: Iterable[asyncpg.Record],
        arrows: Collection[tuple[str, str]],
        steps: int,
        team_id: str | None,
        pool: asyncpg.Pool,
    ) -> None:
        self._pool = pool
        self._arrows = set(arrows)
        self._held: dict[Userset, int] = {}
        self._related: list[RelationTuple] = []
        # the objects whose arrow tuples pointing at them were all read
        self._complete: set[ObjectRef] = set()
        if team_id is not None:
            self._complete.add(ObjectRef(Namespace.TEAM.value, team_id))
        for row in rows:
            if row["kind"] == "held":
                self._held[Userset(row["namespace"], row["object_id"], row["relation"])] = row[
                    "hops"
                ]
                self._complete.add(ObjectRef(row["namespace"], row["object_id"]))
                continue
            item = RelationTuple(
                namespace=row["namespace"],
                object_id=row["object_id"],
                relation=row["relation"],
                subject_ns=row["subject_ns"],
                subject_id=row["subject_id"],
            )
            self._related.append(item)
            if row["step"] < steps:
                self._complete.add(item.object)

    async def tuples_of(
        self, objects: Sequence[ObjectRef]
    ) -> Mapping[ObjectRef, Sequence[RelationTuple]]:
        return await _read_tuples(self._pool, objects)

    async def memberships(self, subject: Subject, max_depth: int) -> Mapping[Userset, int]:
        return self._held

    async def objects_related(
        self, namespace: str, relation: str, subject_ns: str, subject_ids: Collection[str]
    ) -> set[str]:
        ids = set(subject_ids)
        known = (namespace, relation) in self._arrows and all(
            ObjectRef(subject_ns, subject_id) in self._complete for subject_id in ids
        )
        if not known:
            return await _read_related(self._pool, namespace, relation, subject_ns, ids)
        return {
            t.object_id
            for t in self._related
            if t.namespace == namespace
            and t.relation == relation
            and t.subject_ns == subject_ns
            and t.subject_id in ids
        }


async def _read_tuples(
    pool: asyncpg.Pool, objects: Sequence[ObjectRef]
) -> dict[ObjectRef, list[RelationTuple]]:
    rows = await pool.fetch(
        Q.list_objects_tuples,
        [ref.namespace for ref in objects],
        [ref.object_id for ref in objects],
    )
    found: dict[ObjectRef, list[RelationTuple]] = {}
    for row in rows:
        item = _tuple_from_row(row)
        found.setdefault(item.object, []).append(item)
    return found


async def _read_memberships(
    pool: asyncpg.Pool, subject: Subject, max_depth: int
) -> dict[Userset, int]:
    """The subject's memberships alone: subject_closure without arrows."""
    rows = await pool.fetch(
        Q.subject_closure,
        subject.ns,
        subject.id,
        subject.relation or "",
        max_depth + 1,
        [],
        [],
        None,
        0,
    )
    return {
        Userset(row["namespace"], row["object_id"], row["relation"]): row["hops"] for row in rows
    }


async def _read_related(
    pool: asyncpg.Pool, namespace: str, relation: str, subject_ns: str, subject_ids: Collection[str]
) -> set[str]:
    rows = await pool.fetch(Q.objects_related, namespace, relation, subject_ns, list(subject_ids))
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
