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


class LeaseAsk(BucketAsk):
    """Places asked of a bucket for a lease: up to `want`, after giving back `give` places of
    the lease that lapsed."""

    want: int
    give: int


class LeaseGrant(Row):
    """A bucket after a lease was asked of it: `granted` places (0: refused), its `tat_us`."""

    bucket: str
    tat_us: int
    granted: int


async def reserve(db: Db, asks: Sequence[LeaseAsk], now_us: int) -> dict[str, LeaseGrant]:
    """Take a lease of places in each asked bucket, as many as fit up to `want` (a bucket that
    is full grants 0 and keeps its state). One statement when every bucket has its row; a bucket
    without one starts with its places, and one another process started meanwhile is asked
    again."""
    pending = sorted(asks, key=lambda ask: (ask.key, ask.bucket))
    grants: dict[str, LeaseGrant] = {}
    while pending:
        for grant in await _reserve_existing(db, pending, now_us):
            grants[grant.bucket] = grant
        fresh = [ask for ask in pending if ask.bucket not in grants]
        made = await _reserve_fresh(db, fresh, now_us) if fresh else {}
        grants |= made
        pending = [ask for ask in fresh if ask.bucket not in made]
    return grants


def fresh_places(ask: LeaseAsk) -> int:
    """The places a bucket without state grants: `want`, at most a burst."""
    return max(1, min(ask.want, ask.period_us // ask.emission_us))


async def _reserve_existing(db: Db, asks: Sequence[LeaseAsk], now_us: int) -> list[LeaseGrant]:
    return await fetch_all(
        db,
        LeaseGrant,
        Q.rate_limit_reserve,
        [ask.key for ask in asks],
        [ask.bucket for ask in asks],
        [ask.emission_us for ask in asks],
        [ask.period_us for ask in asks],
        [ask.want for ask in asks],
        [ask.give for ask in asks],
        now_us,
    )


async def _reserve_fresh(db: Db, asks: Sequence[LeaseAsk], now_us: int) -> dict[str, LeaseGrant]:
    places = {ask.bucket: fresh_places(ask) for ask in asks}
    tats = [now_us + places[ask.bucket] * ask.emission_us for ask in asks]
    rows = await db.fetch(
        Q.rate_limit_reserve_fresh,
        [ask.key for ask in asks],
        [ask.bucket for ask in asks],
        [ask.period_us for ask in asks],
        tats,
    )
    return {
        row["bucket"]: LeaseGrant(
            bucket=row["bucket"], tat_us=row["tat_us"], granted=places[row["bucket"]]
        )
        for row in rows
    }


async def give_back_leases(db: Db, asks: Sequence[LeaseAsk], now_us: int) -> None:
    """Return the unused places (`give`) of lapsed leases."""
    await db.execute(
        Q.rate_limit_return,
        [ask.key for ask in asks],
        [ask.bucket for ask in asks],
        [ask.emission_us for ask in asks],
        [ask.give for ask in asks],
        now_us,
    )


async def give_back(db: Db, ask: BucketAsk, now_us: int) -> None:
    """Return the place a request took in `ask.bucket` (it turned out to create nothing)."""
    await db.execute(Q.rate_limit_give_back, ask.key, ask.bucket, ask.emission_us, now_us)


async def sweep(db: Db, now_us: int, limit: int) -> int:
    """Delete at most `limit` rows whose state has run out; returns how many."""
    return int(await db.fetchval(Q.rate_limit_sweep, now_us, limit))
