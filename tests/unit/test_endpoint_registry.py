"""The endpoint registry is consistent with the limits and the auth rules it drives."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

import api.app  # noqa: F401  (registers every route)
from api.auth import GLOBAL_ANON_BUCKET, GLOBAL_AUTH_BUCKET, GLOBAL_READ_BUCKET
from api.endpoint import ENDPOINTS, Handler, Parsed, endpoint
from schemas.limits import RATE_LIMITS_PER_MINUTE
from schemas.memory import DiaryCreateRequest, DiaryPath, DiaryUpdateRequest, TagQuery
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


def _declare(handler: Handler, **options: Any) -> None:
    """Declare `handler` on a table of its own (the check runs before anything is recorded)."""
    endpoint(web.RouteTableDef(), "POST", "/probe", tag="probe", **options)(handler)


async def _typed(request: web.Request, parsed: Parsed[DiaryCreateRequest, None, DiaryPath]) -> None:
    return None


async def _untyped(request: web.Request, parsed: Parsed) -> None:
    return None


def test_a_handler_declares_the_models_its_endpoint_parses() -> None:
    """`parsed: Parsed[Body, Query, Path]` must name the endpoint's models (None where it has
    none), so the type a handler reads is the one it gets; a mismatch fails at declaration."""
    with pytest.raises(TypeError, match="_typed declares"):
        _declare(_typed, body=DiaryCreateRequest, path_params=DiaryPath, query=TagQuery)
    with pytest.raises(TypeError, match="_untyped declares"):
        _declare(_untyped, body=DiaryCreateRequest)
    with pytest.raises(TypeError):
        _declare(_typed, body=DiaryUpdateRequest, path_params=DiaryPath)
