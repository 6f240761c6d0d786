"""The rate limiter's shared state (`rate_limits`, migration 0011): one GCRA per (key, bucket).

The API calls these on its limiter pool, the one writable pool it keeps for this counter (not
domain state: an UNLOGGED table, no workflow; see api/ratelimit.py). Each function is one
statement, so it is its own transaction and two API processes never both take the last place;
a request's count, whatever buckets it falls in, is one `reserve`.
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
    """Take places in each asked bucket, as many as fit up to `want` (a bucket that is full
    grants 0 and keeps its state): a lease, or a request's one place in a strict bucket. One
    statement, a bucket without state included; one that another process started meanwhile
    is asked again."""
    pending = sorted(asks, key=lambda ask: (ask.key, ask.bucket))
    grants: dict[str, LeaseGrant] = {}
    while pending:
        for grant in await fetch_all(
            db,
            LeaseGrant,
            Q.rate_limit_reserve,
            [ask.key for ask in pending],
            [ask.bucket for ask in pending],
            [ask.emission_us for ask in pending],
            [ask.period_us for ask in pending],
            [ask.want for ask in pending],
            [ask.give for ask in pending],
            now_us,
            [now_us + fresh_places(ask) * ask.emission_us for ask in pending],
        ):
            grants[grant.bucket] = grant
        pending = [ask for ask in pending if ask.bucket not in grants]
    return grants


def fresh_places(ask: LeaseAsk) -> int:
    """The places a bucket without state grants: `want`, at most a burst."""
    return max(1, min(ask.want, ask.period_us // ask.emission_us))


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
