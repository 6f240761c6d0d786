"""The rate limiter's arithmetic (GCRA quotas and waits, leases) and its settings, no I/O.

The shared state and the statement that moves it are tested on real Postgres in
tests/integration/test_rate_limits.py.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import api.app  # noqa: F401  (registers every route)
from api.auth import CONNECTOR_BUCKET, GLOBAL_ANON_BUCKET, GLOBAL_AUTH_BUCKET, GLOBAL_READ_BUCKET
from api.endpoint import ENDPOINTS
from api.ratelimit import (
    Lease,
    Quota,
    Refusal,
    emission_us,
    lease_cap,
    lease_ttl_us,
    next_batch,
    quota_of,
    retry_after_sec,
)
from infra.repos.ratelimit import LeaseAsk, LeaseGrant, fresh_places
from infra.settings import Rate, Settings
from schemas.limits import (
    RATE_BUCKETS_COUNTING_CREATED,
    RATE_LEASE_MAX_PLACES,
    RATE_LEASE_MIN_LIMIT,
    RATE_LEASE_SHARE,
    RATE_LEASE_TTL_SEC,
    RATE_LIMITS_PER_MINUTE,
)

US = 1_000_000
NOW = 1_700_000_000 * US
PER_MINUTE = Rate(limit=5, period_sec=60)


def test_a_fresh_bucket_has_every_place_but_the_one_taken() -> None:
    quota = quota_of(PER_MINUTE, NOW + emission_us(PER_MINUTE), NOW)
    assert (quota.limit, quota.remaining, quota.reset_sec) == (5, 4, 12)


def test_places_come_back_one_emission_at_a_time() -> None:
    full = NOW + 60 * US  # five places taken at NOW
    assert quota_of(PER_MINUTE, full, NOW).remaining == 0
    assert quota_of(PER_MINUTE, full, NOW + 12 * US - 1).remaining == 0
    assert quota_of(PER_MINUTE, full, NOW + 12 * US).remaining == 1
    assert quota_of(PER_MINUTE, full, NOW + 60 * US).remaining == 5
    assert quota_of(PER_MINUTE, full, NOW + 600 * US).remaining == 5


def test_reset_is_the_time_until_the_bucket_is_full() -> None:
    assert quota_of(PER_MINUTE, NOW + 60 * US, NOW).reset_sec == 60
    assert quota_of(PER_MINUTE, NOW + 60 * US, NOW + 30 * US + 1).reset_sec == 30
    assert quota_of(PER_MINUTE, NOW, NOW + US).reset_sec == 0


def test_a_refused_caller_waits_until_the_next_place() -> None:
    full = NOW + 60 * US
    assert retry_after_sec(PER_MINUTE, full, NOW) == 12
    assert retry_after_sec(PER_MINUTE, full, NOW + 11 * US + 1) == 1
    # never 0: a refused caller always waits
    assert retry_after_sec(PER_MINUTE, full, NOW + 12 * US) == 1


def test_the_emission_rounds_down_so_limit_places_fit_the_period() -> None:
    rate = Rate(limit=7, period_sec=60)
    assert emission_us(rate) * 7 <= 60 * US
    assert quota_of(rate, NOW + 7 * emission_us(rate), NOW).remaining == 0
    assert quota_of(rate, NOW + 6 * emission_us(rate), NOW).remaining == 1


def test_a_limit_finer_than_a_microsecond_counts_one_a_microsecond() -> None:
    rate = Rate(limit=100_000_000, period_sec=60)
    assert emission_us(rate) == 1
    assert quota_of(rate, NOW + 1, NOW).remaining == 60 * US - 1
    assert quota_of(rate, NOW + 60 * US, NOW).remaining == 0


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("30/minute", Rate(30, 60)),
        ("30/min", Rate(30, 60)),
        ("5/30s", Rate(5, 30)),
        ("5/30 seconds", Rate(5, 30)),
        ("600/hour", Rate(600, 3600)),
        ("1000/day", Rate(1000, 86400)),
        (" 2 / 10 sec ", Rate(2, 10)),
    ],
)
def test_a_rate_is_n_per_period(text: str, rate: Rate) -> None:
    assert Rate.parse(text) == rate


@pytest.mark.parametrize("text", ["0/minute", "30", "30/week", "-1/min", "30/0s", "many/min"])
def test_a_malformed_rate_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="N/period"):
        Rate.parse(text)


def test_each_bucket_reads_its_own_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVICE_RATE_LIMIT_SIGNING", "90/minute")
    monkeypatch.setenv("SERVICE_RATE_LIMIT_SEARCH", "3/10s")
    rates = Settings().rate_limits
    assert rates["signing"] == Rate(90, 60)
    assert rates["search"] == Rate(3, 10)
    assert rates["recovery"] == Rate(RATE_LIMITS_PER_MINUTE["recovery"], 60)


def test_a_malformed_setting_stops_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVICE_RATE_LIMIT_SIGNING", "30 per minute")
    with pytest.raises(ValidationError, match="N/period"):
        Settings()


def test_every_bucket_in_use_has_a_setting() -> None:
    used = {spec.rate_bucket for spec in ENDPOINTS if spec.rate_bucket}
    used |= {GLOBAL_ANON_BUCKET, GLOBAL_AUTH_BUCKET, GLOBAL_READ_BUCKET, CONNECTOR_BUCKET}
    assert used <= set(Settings().rate_limits)
    assert used >= RATE_BUCKETS_COUNTING_CREATED


def test_the_signing_bucket_counts_creations_not_signatures() -> None:
    signing = {(s.method, s.path) for s in ENDPOINTS if s.rate_bucket == "signing"}
    assert signing == {("POST", "/crypto/signing-requests")}


def test_the_defaults_let_a_signed_diary_writer_keep_30_entries_a_minute() -> None:
    """Each signed entry is three authenticated writes (create the signing request, sign it,
    create the entry) and one signing request: the defaults admit 30 a minute of each."""
    rates = Settings().rate_limits
    per_minute = {b: rate.limit * 60 / rate.period_sec for b, rate in rates.items()}
    assert per_minute["signing"] >= 30
    assert per_minute["global_auth"] >= 3 * 30


# --- leases of the batched buckets ---------------------------------------------------------------

PER_MINUTE_600 = Rate(limit=600, period_sec=60)


def test_small_buckets_are_asked_on_every_request_and_large_ones_lease_a_share() -> None:
    for limit in (1, 5, 30, RATE_LEASE_MIN_LIMIT - 1):
        assert lease_cap(Rate(limit, 60)) == 1
    assert lease_cap(Rate(RATE_LEASE_MIN_LIMIT, 60)) == RATE_LEASE_MIN_LIMIT // RATE_LEASE_SHARE
    assert lease_cap(Rate(150, 60)) == 15
    assert lease_cap(Rate(6000, 60)) == RATE_LEASE_MAX_PLACES
    # the defaults: the strict buckets keep one statement per request
    rates = Settings().rate_limits
    for bucket in ("recovery", "registration", "agent_key", "signing", "vouch", "search"):
        assert lease_cap(rates[bucket]) == 1, bucket


def test_a_lease_lives_at_most_a_second_and_a_share_of_the_period() -> None:
    assert lease_ttl_us(PER_MINUTE_600) == int(RATE_LEASE_TTL_SEC * US)
    assert lease_ttl_us(Rate(600, 5)) == US // 2


def test_a_batch_doubles_while_leases_run_out_and_halves_when_one_lapses() -> None:
    assert [next_batch(b, True, 64) for b in (1, 2, 32, 64)] == [2, 4, 64, 64]
    assert [next_batch(b, False, 64) for b in (64, 2, 1)] == [32, 1, 1]
    assert next_batch(64, True, 10) == 10


def grant(granted: int, tat_us: int) -> LeaseGrant:
    return LeaseGrant(bucket="global_read", tat_us=tat_us, granted=granted)


def test_a_lease_hands_out_what_was_granted_then_asks_again_for_more() -> None:
    e = emission_us(PER_MINUTE_600)
    lease = Lease()
    assert lease.ask(NOW, cap=60) == (0, 1)  # a first lease: one place
    quota = lease.grant("global_read", PER_MINUTE_600, grant(1, NOW + e), NOW)
    assert isinstance(quota, Quota) and quota.remaining == 599
    assert not lease.usable(NOW)
    assert lease.ask(NOW + 1, cap=60) == (0, 2)  # ran out while live: twice as many
    lease.grant("global_read", PER_MINUTE_600, grant(2, NOW + 3 * e), NOW + 1)
    assert lease.usable(NOW + 1) and lease.places == 1
    # remaining: the shared count as of the grant plus the place still held
    assert lease.take_one(PER_MINUTE_600, NOW + 2).remaining == 597
    assert lease.places == 0


def test_a_lapsed_lease_gives_its_unused_places_back_and_hands_out_none() -> None:
    lease = Lease(batch=8)
    lease.grant("global_read", PER_MINUTE_600, grant(8, NOW + 8 * US), NOW)
    ttl = lease_ttl_us(PER_MINUTE_600)
    assert lease.usable(NOW + ttl - 1)
    assert not lease.usable(NOW + ttl)
    assert lease.ask(NOW + ttl, cap=60) == (7, 4)  # 7 given back with the next ask, batch halved
    lease.grant("global_read", PER_MINUTE_600, grant(4, NOW + 8 * US), NOW + ttl)
    assert lease.ask(NOW + 2 * ttl, cap=60) == (3, 2) and lease.places == 0


def test_a_lease_refused_by_the_shared_bucket_is_a_refusal_with_its_wait() -> None:
    lease = Lease()
    full = NOW + 60 * US
    outcome = lease.grant("global_read", PER_MINUTE_600, grant(0, full), NOW)
    assert outcome == Refusal(bucket="global_read", limit=600, retry_after=1)
    assert not lease.usable(NOW) and lease.places == 0


def test_a_fresh_bucket_grants_the_batch_at_most_a_burst() -> None:
    ask = LeaseAsk(key="k", bucket="b", emission_us=12 * US, period_us=60 * US, want=8, give=0)
    assert fresh_places(ask) == 5
    assert fresh_places(ask.model_copy(update={"want": 3})) == 3
