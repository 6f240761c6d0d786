"""The per-identity fixed-window rate limiter, with an injected clock (no I/O)."""

from __future__ import annotations

import pytest

from api.ratelimit import RateLimiter
from schemas.errors import RateLimited
from schemas.limits import RATE_LIMIT_WINDOW_SEC as WINDOW_SEC
from schemas.limits import RATE_LIMITS_PER_MINUTE

T0 = 1000.0


def limiter(limit: int = 3, *, enabled: bool = True) -> RateLimiter:
    return RateLimiter({"bucket": limit, "other": limit}, enabled=enabled)


def test_admits_up_to_the_limit_then_refuses() -> None:
    rl = limiter(3)
    quotas = [rl.hit("agent:a", "bucket", now=T0 + i) for i in range(3)]
    assert [q.remaining for q in quotas] == [2, 1, 0]
    assert all(q.limit == 3 for q in quotas)
    with pytest.raises(RateLimited):
        rl.hit("agent:a", "bucket", now=T0 + 3)


def test_a_refused_request_is_not_counted() -> None:
    rl = limiter(1)
    rl.hit("k", "bucket", now=T0)
    for i in range(5):
        with pytest.raises(RateLimited):
            rl.hit("k", "bucket", now=T0 + 1 + i)
    assert rl.hit("k", "bucket", now=T0 + WINDOW_SEC).remaining == 0


def test_the_window_resets_after_a_minute() -> None:
    rl = limiter(2)
    rl.hit("k", "bucket", now=T0)
    rl.hit("k", "bucket", now=T0 + 30)
    with pytest.raises(RateLimited):
        rl.hit("k", "bucket", now=T0 + WINDOW_SEC - 0.001)
    quota = rl.hit("k", "bucket", now=T0 + WINDOW_SEC)
    assert quota.remaining == 1
    assert quota.reset_sec == 60


def test_reset_counts_down_within_the_window() -> None:
    rl = limiter(10)
    assert rl.hit("k", "bucket", now=T0).reset_sec == 60
    assert rl.hit("k", "bucket", now=T0 + 20.5).reset_sec == 40
    assert rl.hit("k", "bucket", now=T0 + 59.2).reset_sec == 1


def test_keys_are_isolated() -> None:
    rl = limiter(1)
    rl.hit("agent:a", "bucket", now=T0)
    with pytest.raises(RateLimited):
        rl.hit("agent:a", "bucket", now=T0)
    assert rl.hit("agent:b", "bucket", now=T0).remaining == 0
    assert rl.hit("ip:127.0.0.1", "bucket", now=T0).remaining == 0


def test_buckets_are_isolated() -> None:
    rl = limiter(1)
    rl.hit("k", "bucket", now=T0)
    assert rl.hit("k", "other", now=T0).remaining == 0


def test_the_429_carries_retry_after() -> None:
    rl = limiter(1)
    rl.hit("k", "bucket", now=T0)
    with pytest.raises(RateLimited) as refused:
        rl.hit("k", "bucket", now=T0 + 15)
    error = refused.value
    assert error.status == 429
    assert error.extensions["retryAfter"] == 45
    problem = error.to_problem()
    assert problem.status == 429
    assert problem.code == "rate-limit-exceeded"
    assert problem.retryAfter == 45
    assert "bucket" in (problem.detail or "")


def test_retry_after_is_at_least_one_second() -> None:
    rl = limiter(1)
    rl.hit("k", "bucket", now=T0)
    with pytest.raises(RateLimited) as refused:
        rl.hit("k", "bucket", now=T0 + WINDOW_SEC - 0.01)
    assert refused.value.extensions["retryAfter"] >= 1


def test_disabled_limiter_counts_but_never_refuses() -> None:
    rl = limiter(2, enabled=False)
    quotas = [rl.hit("k", "bucket", now=T0) for _ in range(10)]
    assert quotas[-1].remaining == 0


def test_unknown_bucket_is_a_programming_error() -> None:
    with pytest.raises(KeyError):
        limiter().hit("k", "no-such-bucket", now=T0)


def test_default_limits_are_the_reference_buckets() -> None:
    rl = RateLimiter()
    assert rl.limit_of("recovery") == 5
    assert rl.limit_of("registration") == 5
    assert rl.limit_of("global_anon") == RATE_LIMITS_PER_MINUTE["global_anon"]


def test_expired_windows_are_evicted_when_the_table_is_full(monkeypatch) -> None:
    import api.ratelimit as ratelimit

    monkeypatch.setattr(ratelimit, "_MAX_TRACKED", 3)
    rl = limiter(1)
    for i in range(5):
        rl.hit(f"key-{i}", "bucket", now=T0)
    rl.hit("late", "bucket", now=T0 + WINDOW_SEC + 1)
    assert len(rl._windows) == 1
