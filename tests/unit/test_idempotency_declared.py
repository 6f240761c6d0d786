"""Every POST that creates or decides honours `Idempotency-Key` (DECISIONS "Trust at the
edges"): its endpoint says `idempotent=True`. A new POST fails this test until it either does
or is named below with the reason it is exempt."""

from __future__ import annotations

import api.app  # noqa: F401  (registers every route)
from api.endpoint import ENDPOINTS
from api.headers import IDEMPOTENCY_HEADER
from api.openapi import build_openapi

# POSTs that neither create nor decide, or whose protocol fixes the retry rule elsewhere.
EXEMPT: dict[tuple[str, str], str] = {
    # reads that take a body
    ("POST", "/diary/search"): "a read: searching twice changes nothing",
    ("POST", "/diaries/{diaryId}/packs/preview"): "a read: nothing is stored",
    ("POST", "/packs/{id}/render/preview"): "a read: nothing is stored",
    ("POST", "/crypto/verify"): "a read: checks a signature, stores nothing",
    # Temporal's codec server protocol: a transform of the payloads sent, nothing stored
    ("POST", "/codec/decode"): "a read: opens the payloads it is sent, stores nothing",
    ("POST", "/codec/encode"): "seals the payloads it is sent, stores nothing",
    # unauthenticated: no principal to scope a key to; each has its own one-time rule
    ("POST", "/auth/register"): "one registration per voucher (the voucher is used up)",
    ("POST", "/recovery/challenge"): "stores nothing (an HMAC-signed challenge)",
    ("POST", "/recovery/verify"): "one use per challenge nonce (the workflow id)",
    ("POST", "/self-service/registration"): "one identity per email: a second is a 409",
    ("POST", "/self-service/login"): "a session, not a resource; a retry is a new login",
    ("POST", "/self-service/recovery"): "one use per recovery code",
    ("POST", "/self-service/logout"): "ends the session; again is a no-op",
    # OAuth2 and hooks: RFC 6749 and the hooks' callers define their retries
    ("POST", "/oauth2/token"): "RFC 6749: every call issues a fresh token",
    ("POST", "/hooks/hydra/token-exchange"): "a read of the agent's claims",
    ("POST", "/hooks/kratos/after-registration"): "a check for the identity provider, no write",
    ("POST", "/hooks/kratos/after-settings"): "a check for the identity provider, no write",
    # the MCP server's back channel: one-time codes and tokens, by RFC 6749/7009
    ("POST", "/oauth/connector/clients"): "RFC 7591 registration by the MCP server",
    ("POST", "/oauth/connector/codes/lookup"): "a read",
    ("POST", "/oauth/connector/codes/redeem"): "RFC 6749: an authorization code is used once",
    ("POST", "/oauth/connector/refresh/lookup"): "a read",
    ("POST", "/oauth/connector/refresh/redeem"): "RFC 6749: a refresh token rotates once",
    ("POST", "/oauth/connector/exchange"): "issues a fresh token each call",
    ("POST", "/oauth/connector/revoke"): "RFC 7009: revoking again is a no-op",
    ("POST", "/oauth/consent"): "a human's browser form; each consent issues one code",
    # the task attempt lifecycle: SPEC 3.1 fixes what a repeat answers
    ("POST", "/tasks/{id}/attempts/{n}/heartbeat"): "a liveness report; each one renews the lease",
    # append-only observations the API writes without a workflow; the server numbers them
    ("POST", "/tasks/{id}/attempts/{n}/messages"): "a stream: a resent batch is appended again",
    ("POST", "/tasks/{id}/attempts/{n}/complete"): "SPEC 3.1: on a terminal attempt, 409",
    ("POST", "/tasks/{id}/attempts/{n}/fail"): "SPEC 3.1: on a terminal attempt, 409",
    ("POST", "/tasks/{id}/attempts/{n}/abort"): "SPEC 3.1: on a terminal attempt, 409",
    ("POST", "/crypto/signing-requests/{id}/sign"): "SPEC 3.4: a completed request is 409",
    # A2A: keyed by the protocol itself; each operation runs its REST route with the same rule
    ("POST", "/a2a"): "SendMessage's message id is the Idempotency-Key of the POST /tasks it runs",
    # secrets shown once: a retry cannot answer the secret again
}


def _posts() -> set[tuple[str, str]]:
    return {(spec.method, spec.path) for spec in ENDPOINTS if spec.method == "POST"}


def test_every_create_and_decision_declares_idempotency_key() -> None:
    """A console form (a door: `EndpointSpec.door`) runs REST routes that declare it
    themselves; the key a page minted travels in the form's `idempotencyKey` field
    (api/console/kit.py `act`, tests/integration/test_console_http.py)."""
    undeclared = {
        (spec.method, spec.path)
        for spec in ENDPOINTS
        if spec.method == "POST" and not spec.idempotent and not spec.door
    }
    assert undeclared - set(EXEMPT) == set(), "declare idempotent=True or exempt with a reason"


def test_the_exemptions_name_real_undeclared_routes() -> None:
    declared = {(spec.method, spec.path) for spec in ENDPOINTS if spec.idempotent}
    assert set(EXEMPT) <= _posts()
    assert set(EXEMPT) & declared == set()


def test_the_openapi_document_shows_the_header_where_declared() -> None:
    paths = {name: build_openapi("http://cairn.test", name)["paths"] for name in ("api", "console")}
    for spec in ENDPOINTS:
        operation = paths[spec.document][spec.path][spec.method.lower()]
        parameters = operation.get("parameters", [])
        named = [p for p in parameters if p["name"] == IDEMPOTENCY_HEADER]
        assert len(named) == (1 if spec.idempotent else 0), spec.path
        if spec.idempotent:
            assert named[0]["schema"] == {"type": "string", "minLength": 1, "maxLength": 200}
