"""The endpoint registry is consistent with the limits and the auth rules it drives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

import api.app  # noqa: F401  (registers every route)
from api.auth import GLOBAL_ANON_BUCKET, GLOBAL_AUTH_BUCKET, GLOBAL_READ_BUCKET
from api.endpoint import ENDPOINTS, Handler, Parsed, endpoint
from api.openapi import build_openapi
from schemas.limits import RATE_LIMITS_PER_MINUTE
from schemas.memory import DiaryCreateRequest, DiaryPath, DiaryUpdateRequest, TagQuery
from schemas.principals import AGENT_SCOPES


def test_every_rate_bucket_has_a_limit() -> None:
    buckets = {spec.rate_bucket for spec in ENDPOINTS if spec.rate_bucket}
    buckets |= {GLOBAL_ANON_BUCKET, GLOBAL_AUTH_BUCKET, GLOBAL_READ_BUCKET}
    assert buckets - set(RATE_LIMITS_PER_MINUTE) == set()


HELM_VALUES = Path(__file__).resolve().parents[2] / "infra/deploy/helm/cairn/values.yaml"
PROBES = {"/health", "/health/ready"}


def test_only_the_probes_are_exempt_from_rate_limits() -> None:
    exempt = {spec.path for spec in ENDPOINTS if not spec.rate_limited}
    assert exempt == PROBES


def test_the_charts_api_probes_are_never_rate_limited() -> None:
    """Kubelets of one node probe every pod on it from one address: a probe that can answer
    429 takes healthy pods out of service."""
    components = yaml.safe_load(HELM_VALUES.read_text())["components"]
    api_probes = {
        path
        for component in components.values()
        if component["command"] == ["api"]
        for path in component["probes"].values()
    }
    assert api_probes == PROBES
    gets = {spec.path: spec for spec in ENDPOINTS if spec.method == "GET"}
    assert all(not gets[path].rate_limited for path in api_probes)


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


def test_the_console_is_described_by_its_own_document_only() -> None:
    """Issue 34 §6: `/openapi.json` is the API; the console's pages and forms (HTML, under
    `/console/`) are in the console's document, and each route is in exactly one."""
    documents = {name: build_openapi("http://cairn.test", name) for name in ("api", "console")}
    for spec in ENDPOINTS:
        console = spec.path.startswith("/console/")
        assert spec.document == ("console" if console else "api"), spec.path
        for name, document in documents.items():
            listed = spec.method.lower() in document["paths"].get(spec.path, {})
            assert listed == (name == spec.document), (name, spec.method, spec.path)
