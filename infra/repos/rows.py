"""How a repository hands a row up: as a typed, immutable pydantic model named by its columns.

Routes never see an `asyncpg.Record`; a read function runs one named query and returns one of
these (or a wire model built from it). `fetch_one` and `fetch_all` are the two ways to do it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeAlias, TypeVar
from uuid import UUID

import asyncpg
from pydantic import BaseModel, ConfigDict

Db: TypeAlias = asyncpg.Pool | asyncpg.Connection


class Row(BaseModel):
    """The columns a query selects, typed; columns the model does not name are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


RowT = TypeVar("RowT", bound=Row)


class NamedSubjectRow(Row):
    """A row that names a subject, joined with the `subject_names` view (migration 0022)."""

    fingerprint: str | None = None
    email: str | None = None
    display_name: str | None = None

    def names(self) -> dict[str, Any]:
        """The `schemas.names.SubjectNames` fields of the subject."""
        return {
            "fingerprint": self.fingerprint,
            "email": self.email,
            "displayName": self.display_name,
        }


class GrantTuple(NamedSubjectRow):
    """A writer or manager tuple of one diary or task: who holds it, since when."""

    relation: str
    subject_ns: str
    subject_id: UUID
    created_at: datetime

    def grant(self) -> dict[str, Any]:
        """The fields a `Grant` and a `TaskGrant` share (`writers` tuples are writer grants)."""
        role = "writer" if self.relation == "writers" else "manager"
        fields = {"subjectNs": self.subject_ns, "role": role, "createdAt": self.created_at}
        return {"subjectId": self.subject_id, **fields, **self.names()}


async def fetch_one(db: Db, model: type[RowT], query: str, *args: Any) -> RowT | None:
    record = await db.fetchrow(query, *args)
    return None if record is None else model.model_validate(dict(record))


async def fetch_all(db: Db, model: type[RowT], query: str, *args: Any) -> list[RowT]:
    return [model.model_validate(dict(record)) for record in await db.fetch(query, *args)]
