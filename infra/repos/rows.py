"""How a repository hands a row up: as a typed, immutable pydantic model named by its columns.

Routes never see an `asyncpg.Record`; a read function runs one named query and returns one of
these (or a wire model built from it). `fetch_one` and `fetch_all` are the two ways to do it.
"""

from __future__ import annotations

from typing import Any, TypeAlias, TypeVar

import asyncpg
from pydantic import BaseModel, ConfigDict

Db: TypeAlias = asyncpg.Pool | asyncpg.Connection


class Row(BaseModel):
    """The columns a query selects, typed; columns the model does not name are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


RowT = TypeVar("RowT", bound=Row)


async def fetch_one(db: Db, model: type[RowT], query: str, *args: Any) -> RowT | None:
    record = await db.fetchrow(query, *args)
    return None if record is None else model.model_validate(dict(record))


async def fetch_all(db: Db, model: type[RowT], query: str, *args: Any) -> list[RowT]:
    return [model.model_validate(dict(record)) for record in await db.fetch(query, *args)]
