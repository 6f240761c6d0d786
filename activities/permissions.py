"""Tuple writes of the permission engine, as activities (SPEC 5: "tuples written").

Each activity is one repository call (one transaction) and idempotent under retry: writes
are `ON CONFLICT DO NOTHING`, deletes of absent tuples delete nothing. Counts report what *this*
attempt changed, so a retry after a committed attempt reports 0. A tuple the model does not
admit is `ValidationFailed` (non-retryable) and nothing is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from schemas.kernel.permissions import (
    ObjectDelete,
    ObjectDeleteResult,
    TupleDelete,
    TupleDeleteResult,
    TupleReplace,
    TupleReplaceResult,
    TupleWrite,
    TupleWriteResult,
)

if TYPE_CHECKING:
    from infra.permissions import TupleRepository


class PermissionActivities:
    def __init__(self, repository: TupleRepository) -> None:
        self._tuples = repository

    @activity.defn(name="permissions.write_tuples")
    async def write_tuples(self, request: TupleWrite) -> TupleWriteResult:
        return TupleWriteResult(written=await self._tuples.write(request.tuples))

    @activity.defn(name="permissions.delete_tuples")
    async def delete_tuples(self, request: TupleDelete) -> TupleDeleteResult:
        return TupleDeleteResult(deleted=await self._tuples.delete(request.tuples))

    @activity.defn(name="permissions.replace_tuples")
    async def replace_tuples(self, request: TupleReplace) -> TupleReplaceResult:
        """Deletes, then writes, in one transaction (a diary transfer rebinds its team)."""
        deleted, written = await self._tuples.replace(request.delete, request.write)
        return TupleReplaceResult(deleted=deleted, written=written)

    @activity.defn(name="permissions.delete_object")
    async def delete_object(self, request: ObjectDelete) -> ObjectDeleteResult:
        deleted = await self._tuples.delete_object(request.namespace, request.object_id)
        return ObjectDeleteResult(deleted=deleted)
