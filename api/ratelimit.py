"""Per-identity rate limits, shared by every API process (DECISIONS "Operations").

Each (identity, bucket) is a GCRA kept in Postgres (`rate_limits`, an UNLOGGED table): a bucket
of `limit` requests per `period` frees one place every period/limit and admits a burst of up
to `limit`, so a caller who keeps to the rate is never refused however its requests bunch, and
one who does not waits only until the next place frees (`Retry-After`). One statement per
request decides every (strict) bucket it counts in, so processes never both take the last place.

The table is written through the limiter's own small pool, the one writable pool of the API
besides the task-message appender: a counter is not domain state (no workflow, no history), and
the API's read pool stays read-only. Anonymous callers are keyed by client address. Every
counted response carries the `x-ratelimit-*` headers; a 429 also carries `Retry-After`.

Buckets of at least RATE_LEASE_MIN_LIMIT a period (global_auth, global_read, connector, ...) are
not asked on every request: a process takes a lease of places (`Lease`) in one statement and
hands them out itself, without a round trip, until they run out or the lease lapses (at most
RATE_LEASE_TTL_SEC); the unused places of a lapsed lease go back to the bucket. Every request
admitted holds a place the shared bucket granted, so all processes together never admit more
than the limit; a lease only lets a place be used up to its lifetime after it was granted, and
lets one process hold places another is refused until the lease lapses. A batch starts at one
place and doubles while leases run out (`next_batch`), so a quiet key holds at most one. Only one
lease is asked per (key, bucket) at a time in a process; other requests wait for it. For these
buckets `x-ratelimit-remaining` is approximate (the shared count as of this process's last
lease, plus the places it still holds). Smaller (strict) buckets keep one statement per request,
exact. Whatever buckets a request falls in, its count is at most one statement (strict
places and new leases are asked together).

If Postgres cannot be reached the limiter admits the request (as the reference's store fails
open) and logs it: a rate limit must not turn an outage of its store into one of the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import asyncpg

from infra.repos import ratelimit as store
from infra.repos.ratelimit import BucketAsk, LeaseAsk, LeaseGrant
from infra.settings import Rate
from schemas.errors import RateLimited
from schemas.limits import (
    RATE_BUCKETS_COUNTING_CREATED,
    RATE_LEASE_MAX_PLACES,
    RATE_LEASE_MIN_LIMIT,
    RATE_LEASE_RETURN_EVERY_SEC,
    RATE_LEASE_SHARE,
    RATE_LEASE_TTL_SEC,
    RATE_LIMIT_SWEEP_BATCH,
    RATE_LIMIT_SWEEP_EVERY_SEC,
)

log = logging.getLogger(__name__)

Clock = Callable[[], float]
_US = 1_000_000
_REFUSALS_KEPT = 10_000
# the store cannot answer: a connection lost or refused, Postgres starting or stopping
_STORE_DOWN = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
)


@dataclass(frozen=True)
class Quota:
    """What the `x-ratelimit-*` headers say: the limit, the places left, and the seconds until
    the bucket is full again."""

    limit: int
    remaining: int
    reset_sec: int


@dataclass(frozen=True)
class Refusal:
    """The first bucket that refused, and the seconds until it frees a place."""

    bucket: str
    limit: int
    retry_after: int

    def error(self) -> RateLimited:
        return RateLimited(
            f"Rate limit of {self.limit} requests reached for '{self.bucket}'",
            extensions={"retryAfter": self.retry_after, "limit": self.limit},
        )

    def quota(self) -> Quota:
        return Quota(limit=self.limit, remaining=0, reset_sec=self.retry_after)


def emission_us(rate: Rate) -> int:
    """Microseconds between two places of the bucket (rounded down: never stricter; at least
    one, for a limit above a million a second)."""
    return max(1, rate.period_sec * _US // rate.limit)


def quota_of(rate: Rate, tat_us: int, now_us: int) -> Quota:
    """The bucket's quota once its theoretical arrival time is `tat_us`."""
    ahead = max(0, tat_us - now_us)
    remaining = (rate.period_sec * _US - ahead) // emission_us(rate)
    return Quota(
        limit=rate.limit,
        remaining=min(rate.limit, max(0, remaining)),
        reset_sec=math.ceil(ahead / _US),
    )


def retry_after_sec(rate: Rate, tat_us: int, now_us: int) -> int:
    """Seconds until a refused bucket frees its next place (at least 1)."""
    wait = tat_us - now_us + emission_us(rate) - rate.period_sec * _US
    return max(1, math.ceil(wait / _US))


def lease_cap(rate: Rate) -> int:
    """The most places one lease of the bucket holds: 1 (no lease, every request asks the
    shared bucket) below RATE_LEASE_MIN_LIMIT a period, else a share of the limit, capped."""
    if rate.limit < RATE_LEASE_MIN_LIMIT:
        return 1
    return max(1, min(RATE_LEASE_MAX_PLACES, rate.limit // RATE_LEASE_SHARE))


def lease_ttl_us(rate: Rate) -> int:
    """How long a lease's places may be handed out: RATE_LEASE_TTL_SEC, at most a share of the
    period."""
    return min(int(RATE_LEASE_TTL_SEC * _US), rate.period_sec * _US // RATE_LEASE_SHARE)


def next_batch(previous: int, used_up: bool, cap: int) -> int:
    """The places the next lease asks: twice the last when it ran out before it lapsed, half
    when it lapsed with places unused (a key's rate found in a few leases)."""
    batch = previous * 2 if used_up else previous // 2
    return max(1, min(cap, batch))


@dataclass
class Lease:
    """Places of one (key, bucket) this process took from the shared bucket and hands out
    itself until `expires_us`; `tat_us` is the shared state the last grant left."""

    batch: int = 1
    places: int = 0
    tat_us: int = 0
    expires_us: int = 0
    # the reservation under way (one at a time per key and bucket), done when it is answered
    pending: asyncio.Future[None] | None = field(default=None, repr=False)

    def live(self, now_us: int) -> bool:
        return now_us < self.expires_us

    def usable(self, now_us: int) -> bool:
        return self.places > 0 and self.live(now_us)

    def take_one(self, rate: Rate, now_us: int) -> Quota:
        """Hand out one place (the lease is usable); the quota as this process knows it."""
        self.places -= 1
        return self.quota(rate, now_us)

    def quota(self, rate: Rate, now_us: int) -> Quota:
        shared = quota_of(rate, self.tat_us, now_us)
        remaining = min(rate.limit, shared.remaining + self.places)
        return Quota(limit=rate.limit, remaining=remaining, reset_sec=shared.reset_sec)

    def ask(self, now_us: int, cap: int) -> tuple[int, int]:
        """(places to give back, places to ask) for a new lease; the places this lease held
        leave it now (given back with the ask, or lost if the ask fails: never admitted)."""
        live = self.live(now_us)
        give = 0 if live else self.places
        # asked while live: it ran out (grow); after a lapse: the key is slower (shrink)
        self.batch = next_batch(self.batch, live, cap) if self.expires_us else 1
        self.places = 0
        return give, self.batch

    def grant(self, bucket: str, rate: Rate, grant: LeaseGrant, now_us: int) -> Quota | Refusal:
        """Hold what the shared bucket granted, and take one place of it for the request."""
        self.tat_us = grant.tat_us
        if grant.granted <= 0:
            self.expires_us = now_us  # refused: the next request asks again
            wait = retry_after_sec(rate, grant.tat_us, now_us)
            return Refusal(bucket=bucket, limit=rate.limit, retry_after=wait)
        self.places = grant.granted
        self.expires_us = now_us + lease_ttl_us(rate)
        return self.take_one(rate, now_us)


def _tightest(outcomes: Sequence[Quota | Refusal]) -> Quota | Refusal:
    """The first refusal, else the quota with the fewest places left."""
    for outcome in outcomes:
        if isinstance(outcome, Refusal):
            return outcome
    quotas = [outcome for outcome in outcomes if isinstance(outcome, Quota)]
    return min(quotas, key=lambda quota: quota.remaining)


class RateLimiter:
    """The buckets' rates and the pool that holds their state (None: limits are off)."""

    def __init__(
        self, pool: asyncpg.Pool | None, rates: Mapping[str, Rate], *, clock: Clock = time.time
    ) -> None:
        self._pool = pool
        self._rates = dict(rates)
        self._clock = clock
        # keys refused in this process, until when (their GETs then wait for the count)
        self._refused_until: dict[str, float] = {}
        # this process's leases of the batched buckets, by (key, bucket)
        self._leases: dict[tuple[str, str], Lease] = {}

    @property
    def enabled(self) -> bool:
        return self._pool is not None

    @property
    def pool(self) -> asyncpg.Pool | None:
        return self._pool

    def rate_of(self, bucket: str) -> Rate:
        return self._rates[bucket]

    def refused_lately(self, key: str) -> bool:
        """Whether a bucket refused `key` in this process and has not freed a place since."""
        until = self._refused_until.get(key)
        if until is None:
            return False
        if until <= self._clock():
            del self._refused_until[key]
            return False
        return True

    def _remember(self, key: str, refusal: Refusal) -> None:
        if len(self._refused_until) >= _REFUSALS_KEPT:
            self._refused_until.clear()  # only a hint: forgetting costs one overlapped count
        self._refused_until[key] = self._clock() + refusal.retry_after

    def _now_us(self) -> int:
        return int(self._clock() * _US)

    def _ask(self, key: str, bucket: str) -> BucketAsk:
        rate = self._rates[bucket]
        return BucketAsk(
            key=key, bucket=bucket, emission_us=emission_us(rate), period_us=rate.period_sec * _US
        )

    def _batched(self, bucket: str) -> bool:
        return lease_cap(self._rates[bucket]) > 1

    def take_local(self, key: str, buckets: Sequence[str]) -> Quota | None:
        """Count one request from this process's leases alone, when every bucket is batched and
        its lease has a place (no I/O): the tightest quota; else None and nothing taken."""
        if self._pool is None:
            return None
        now_us = self._now_us()
        leases = []
        for bucket in buckets:
            lease = self._leases.get((key, bucket))
            if lease is None or not lease.usable(now_us):
                return None
            leases.append((lease, self._rates[bucket]))
        quotas = [lease.take_one(rate, now_us) for lease, rate in leases]
        return min(quotas, key=lambda quota: quota.remaining)

    async def take(self, key: str, buckets: Sequence[str]) -> Quota | Refusal | None:
        """Count one request in each bucket: the tightest quota, the first refusal (that
        bucket did not count it; the others did), or None when limits are off or the store is
        down. A batched bucket hands out a place of its lease, or takes a new lease."""
        if self._pool is None:
            return None
        batched = [b for b in buckets if self._batched(b)]
        await self._await_reservations(key, batched)
        now_us = self._now_us()
        outcomes: dict[str, Quota | Refusal] = {}
        reserving: dict[str, Lease] = {}
        for bucket in batched:
            lease = self._leases.setdefault((key, bucket), Lease())
            if lease.usable(now_us):
                outcomes[bucket] = lease.take_one(self._rates[bucket], now_us)
            else:
                reserving[bucket] = lease
        strict = [b for b in buckets if b not in batched]
        try:
            if strict or reserving:
                outcomes |= await self._ask_store(key, strict, reserving, now_us)
        except _STORE_DOWN as exc:
            log.warning("rate limits not counted, the store is down: %r", exc)
            return None
        outcome = _tightest([outcomes[b] for b in buckets])
        if isinstance(outcome, Refusal):
            self._remember(key, outcome)
        return outcome

    async def _await_reservations(self, key: str, buckets: Sequence[str]) -> None:
        """Wait while another request of this process is taking a lease these buckets need (one
        reservation at a time per key and bucket)."""
        while True:
            now_us = self._now_us()
            under_way = [
                lease.pending
                for bucket in buckets
                if (lease := self._leases.get((key, bucket))) is not None
                and lease.pending is not None
                and not lease.usable(now_us)
            ]
            if not under_way:
                return
            await asyncio.wait(under_way)

    async def _ask_store(
        self, key: str, strict: Sequence[str], reserving: Mapping[str, Lease], now_us: int
    ) -> dict[str, Quota | Refusal]:
        """One place of each strict bucket (a lease of one, used at once) and a lease of each
        batched one whose lease is empty or lapsed: one statement for them all."""
        loop = asyncio.get_running_loop()
        asks = [self._lease_ask(key, bucket, 1, 0) for bucket in strict]
        for bucket, lease in reserving.items():
            lease.pending = loop.create_future()
            give, want = lease.ask(now_us, lease_cap(self._rates[bucket]))
            asks.append(self._lease_ask(key, bucket, want, give))
        try:
            granted = await self._reserve(asks, now_us)
        finally:
            for lease in reserving.values():
                if lease.pending is not None:
                    lease.pending.set_result(None)
                    lease.pending = None
        outcomes = {bucket: self._decide(bucket, granted[bucket], now_us) for bucket in strict}
        for bucket, lease in reserving.items():
            rate = self._rates[bucket]
            outcomes[bucket] = lease.grant(bucket, rate, granted[bucket], now_us)
        return outcomes

    async def _reserve(self, asks: Sequence[LeaseAsk], now_us: int) -> dict[str, LeaseGrant]:
        if not asks or self._pool is None:
            return {}
        return await store.reserve(self._pool, asks, now_us)

    def _lease_ask(self, key: str, bucket: str, want: int, give: int) -> LeaseAsk:
        return LeaseAsk(**self._ask(key, bucket).model_dump(), want=want, give=give)

    def _decide(self, bucket: str, grant: LeaseGrant, now_us: int) -> Quota | Refusal:
        """A strict bucket's answer to its one place."""
        rate = self._rates[bucket]
        if grant.granted <= 0:
            wait = retry_after_sec(rate, grant.tat_us, now_us)
            return Refusal(bucket=bucket, limit=rate.limit, retry_after=wait)
        return quota_of(rate, grant.tat_us, now_us)

    async def give_back(self, key: str, bucket: str) -> None:
        """Return the place a request took in a bucket that counts what requests create (it
        created nothing): to the lease it came from while that is live, else to the bucket."""
        if self._pool is None or bucket not in RATE_BUCKETS_COUNTING_CREATED:
            return
        lease = self._leases.get((key, bucket))
        if lease is not None and lease.live(self._now_us()):
            lease.places += 1
            return
        try:
            await store.give_back(self._pool, self._ask(key, bucket), self._now_us())
        except _STORE_DOWN as exc:
            log.warning("rate limit place not given back, the store is down: %r", exc)

    async def return_lapsed(self, *, every_lease: bool = False) -> int:
        """Give the unused places of every lapsed lease (or of all, when the process stops)
        back to the shared buckets in one statement and forget those leases; returns how many
        places."""
        if self._pool is None:
            return 0
        now_us = self._now_us()
        asks = []
        for (key, bucket), lease in list(self._leases.items()):
            if lease.pending is not None or (lease.live(now_us) and not every_lease):
                continue
            give, lease.places = lease.places, 0
            del self._leases[(key, bucket)]  # a quiet key's next lease starts at one place
            if give:
                asks.append(self._lease_ask(key, bucket, 0, give))
        if asks:
            # places lost if the store is down are only places not admitted
            with contextlib.suppress(*_STORE_DOWN):
                await store.give_back_leases(self._pool, asks, now_us)
        return sum(ask.give for ask in asks)

    async def return_lapsed_forever(self, every_sec: float = RATE_LEASE_RETURN_EVERY_SEC) -> None:
        """Give back what lapsed leases did not use, now and then."""
        while self._pool is not None:
            await asyncio.sleep(every_sec)
            try:
                await self.return_lapsed()
            except Exception:  # the loop must outlive one bad round
                log.exception("rate limit leases not returned")

    async def sweep_forever(self, every_sec: float = RATE_LIMIT_SWEEP_EVERY_SEC) -> None:
        """Delete the rows that ran out, now and then (every API process does; deleting what is
        gone is a no-op)."""
        while self._pool is not None:
            await asyncio.sleep(every_sec)
            with contextlib.suppress(*_STORE_DOWN):
                await store.sweep(self._pool, self._now_us(), RATE_LIMIT_SWEEP_BATCH)
