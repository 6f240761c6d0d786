"""The integer types of requests: each bounded by what its column and its meaning allow.

Every integer a body, query or path carries is one of these or carries its own `le=` from
`schemas/limits.py` (a page size, a TTL); `tests/unit/test_request_bounds.py` fails on one that
has no upper bound, since an unbounded integer reaches Postgres as an overflow (a 500) instead of
a 400 naming the field.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from schemas import limits

# a position or number stored in a Postgres `integer` column, counted from 1: a pack rank, an
# attempt number
SqlOrdinal = Annotated[int, Field(ge=1, le=limits.SQL_INT_MAX)]
# a non-negative `integer` compared with or stored in one: an offset, a sequence number, a count
SqlCount = Annotated[int, Field(ge=0, le=limits.SQL_INT_MAX)]
# a non-negative amount kept inside jsonb (token usage): what every JSON reader holds exactly
JsonCount = Annotated[int, Field(ge=0, le=limits.JSON_INT_MAX)]
