"""The rate limiter's shared state (`rate_limits`, migration 0011): one GCRA per (key, bucket).

The API calls these on its limiter pool, the one writable pool it keeps for this counter (not
domain state: an UNLOGGED table, no workflow; see api/ratelimit.py). Each function is one
statement, so it is its own transaction and two API processes never both take the last place.
"""

from __future__ import annotations

from collections.abc import Sequence

from infra.db import Q
from infra.repos.rows import Db, Row, fetch_all


class BucketAsk(Row):
    """One place asked of a bucket: `emission_us` = period / limit, `period_us` the burst."""

    key: str
    bucket: str
    emission_us: int
    period_us: int


class BucketState(Row):
    """A bucket after the ask: `admitted`, and its theoretical arrival time (µs since the epoch)."""

    bucket: str
    tat_us: int
    admitted: bool


async def take(db: Db, asks: Sequence[BucketAsk], now_us: int) -> dict[str, BucketState]:
    """Take one place in each asked bucket at once; a bucket that is full refuses and keeps its
    state. Rows are locked in (key, bucket) order, so two requests never wait on each other in a
    cycle."""
    ordered = sorted(asks, key=lambda ask: (ask.key, ask.bucket))
    states = await fetch_all(
        db,
        BucketState,
        Q.rate_limit_take,
        [ask.key for ask in ordered],
        [ask.bucket for ask in ordered],
        [ask.emission_us for ask in ordered],
        [ask.period_us for ask in ordered],
        now_us,
    )
    return {state.bucket: state for state in states}


async def give_back(db: Db, ask: BucketAsk, now_us: int) -> None:
    """Return the place a request took in `ask.bucket` (it turned out to create nothing)."""
    await db.execute(Q.rate_limit_give_back, ask.key, ask.bucket, ask.emission_us, now_us)


async def sweep(db: Db, now_us: int, limit: int) -> int:
    """Delete at most `limit` rows whose state has run out; returns how many."""
    return int(await db.fetchval(Q.rate_limit_sweep, now_us, limit))
