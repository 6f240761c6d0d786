"""Per-identity rate limits: a fixed one-minute window per (identity, bucket), in process.

Anonymous callers are keyed by client address. Every response under a limit carries the
`x-ratelimit-*` headers; a 429 also carries `Retry-After`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from schemas.errors import RateLimited
from schemas.limits import RATE_LIMIT_WINDOW_SEC, RATE_LIMITS_PER_MINUTE

_MAX_TRACKED = 100_000


@dataclass
class Window:
    started: float
    count: int


@dataclass(frozen=True)
class Quota:
    limit: int
    remaining: int
    reset_sec: int


class RateLimiter:
    def __init__(self, limits: dict[str, int] | None = None, *, enabled: bool = True) -> None:
        self._limits = dict(limits or RATE_LIMITS_PER_MINUTE)
        self._windows: dict[tuple[str, str], Window] = {}
        self.enabled = enabled

    def limit_of(self, bucket: str) -> int:
        return self._limits[bucket]

    def hit(self, key: str, bucket: str, now: float | None = None) -> Quota:
        """Count one request; raise RateLimited past the bucket's limit."""
        now = time.monotonic() if now is None else now
        limit = self._limits[bucket]
        window = self._windows.get((key, bucket))
        if window is None or now - window.started >= RATE_LIMIT_WINDOW_SEC:
            if len(self._windows) > _MAX_TRACKED:
                self._evict(now)
            window = Window(started=now, count=0)
            self._windows[(key, bucket)] = window
        reset = math.ceil(RATE_LIMIT_WINDOW_SEC - (now - window.started))
        if self.enabled and window.count >= limit:
            raise RateLimited(
                f"Rate limit of {limit} requests per minute reached for '{bucket}'",
                extensions={"retryAfter": reset, "limit": limit},
            )
        window.count += 1
        return Quota(limit=limit, remaining=max(0, limit - window.count), reset_sec=reset)

    def _evict(self, now: float) -> None:
        self._windows = {
            k: w for k, w in self._windows.items() if now - w.started < RATE_LIMIT_WINDOW_SEC
        }
