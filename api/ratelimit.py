"""Per-identity rate limits, shared by every API process (DECISIONS "Operations").

Each (identity, bucket) is a GCRA kept in Postgres (`rate_limits`, an UNLOGGED table): a bucket
of `limit` requests per `period` frees one place every period/limit and admits a burst of up
to `limit`, so a caller who keeps to the rate is never refused however its requests bunch, and
one who does not waits only until the next place frees (`Retry-After`). One statement per
request decides every bucket it counts in, so processes never both take the last place.

The table is written through the limiter's own small pool, the one writable pool of the API
besides the task-message appender: a counter is not domain state (no workflow, no history), and
the API's read pool stays read-only. Anonymous callers are keyed by client address. Every
counted response carries the `x-ratelimit-*` headers; a 429 also carries `Retry-After`.

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
from dataclasses import dataclass

import asyncpg

from infra.repos import ratelimit as store
from infra.repos.ratelimit import BucketAsk, BucketState
from infra.settings import Rate
from schemas.errors import RateLimited
from schemas.limits import (
    RATE_BUCKETS_COUNTING_CREATED,
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

    @property
    def enabled(self) -> bool:
        return self._pool is not None

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

    async def take(self, key: str, buckets: Sequence[str]) -> Quota | Refusal | None:
        """Count one request in each bucket: the tightest quota, the first refusal (that
        bucket did not count it; the others did), or None when limits are off or the store is
        down."""
        if self._pool is None:
            return None
        now_us = self._now_us()
        try:
            states = await store.take(self._pool, [self._ask(key, b) for b in buckets], now_us)
        except _STORE_DOWN as exc:
            log.warning("rate limits not counted, the store is down: %r", exc)
            return None
        outcome = self._decide(buckets, states, now_us)
        if isinstance(outcome, Refusal):
            self._remember(key, outcome)
        return outcome

    def _decide(
        self, buckets: Sequence[str], states: Mapping[str, BucketState], now_us: int
    ) -> Quota | Refusal:
        for bucket in buckets:
            state = states[bucket]
            if not state.admitted:
                rate = self._rates[bucket]
                wait = retry_after_sec(rate, state.tat_us, now_us)
                return Refusal(bucket=bucket, limit=rate.limit, retry_after=wait)
        quotas = [quota_of(self._rates[b], states[b].tat_us, now_us) for b in buckets]
        return min(quotas, key=lambda quota: quota.remaining)

    async def give_back(self, key: str, bucket: str) -> None:
        """Return the place a request took in a bucket that counts what requests create (it
        created nothing)."""
        if self._pool is None or bucket not in RATE_BUCKETS_COUNTING_CREATED:
            return
        try:
            await store.give_back(self._pool, self._ask(key, bucket), self._now_us())
        except _STORE_DOWN as exc:
            log.warning("rate limit place not given back, the store is down: %r", exc)

    async def sweep_forever(self, every_sec: float = RATE_LIMIT_SWEEP_EVERY_SEC) -> None:
        """Delete the rows that ran out, now and then (every API process does; deleting what is
        gone is a no-op)."""
        while self._pool is not None:
            await asyncio.sleep(every_sec)
            with contextlib.suppress(*_STORE_DOWN):
                await store.sweep(self._pool, self._now_us(), RATE_LIMIT_SWEEP_BATCH)
