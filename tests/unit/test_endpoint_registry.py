"""The endpoint registry is consistent with the limits and the auth rules it drives."""

from __future__ import annotations

import api.app  # noqa: F401  (registers every route)
from api.auth import GLOBAL_ANON_BUCKET, GLOBAL_AUTH_BUCKET, GLOBAL_READ_BUCKET
from api.endpoint import ENDPOINTS
from schemas.limits import RATE_LIMITS_PER_MINUTE
from schemas.principals import AGENT_SCOPES


def test_every_rate_bucket_has_a_limit() -> None:
    buckets = {spec.rate_bucket for spec in ENDPOINTS if spec.rate_bucket}
    buckets |= {GLOBAL_ANON_BUCKET, GLOBAL_AUTH_BUCKET, GLOBAL_READ_BUCKET}
    assert buckets - set(RATE_LIMITS_PER_MINUTE) == set()


def test_every_required_scope_exists() -> None:
    required = {scope for spec in ENDPOINTS for scope in spec.scopes}
    assert required <= set(AGENT_SCOPES)


def test_routes_are_unique() -> None:
    pairs = [(spec.method, spec.path) for spec in ENDPOINTS]
    assert len(pairs) == len(set(pairs))
    assert len({spec.operation_id for spec in ENDPOINTS}) == len(ENDPOINTS)
