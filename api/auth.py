"""Authentication and route authorization (the spec's `requireAuth` / `optionalAuth`).

A request carries at most one credential: `Authorization: Bearer <JWT>` (OAuth2 access token),
`Authorization: Bearer service_ak_...` (an agent key, told apart by its prefix), or a human
session (`X-Session-Token` header or the session cookie). Every route declares
whether auth is required and which scopes it needs; a missing scope is 403, a missing,
invalid, expired or rotated credential is 401.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from aiohttp import web
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from api import keys
from api.forwarded import client_address
from api.headers import team_header
from api.ratelimit import Quota, Refusal
from api.spec import EndpointSpec
from infra.logs import current_request
from infra.repos import identity_reads
from infra.repos.agent_keys import get_key_for_auth
from schemas.agent_keys import InvalidKeyMetadata, agent_key_id, binding_of, is_agent_key
from schemas.connector import CONNECTOR_HEADER, connector_secret
from schemas.errors import (
    AccessTokenInvalid,
    AgentKeyBindingInvalid,
    AgentKeyExpired,
    AgentKeyInvalid,
    AgentKeyMalformed,
    AgentKeyRevoked,
    AuthenticationRequired,
    AuthorizationSchemeInvalid,
    ConnectorRefused,
    ConnectorTokenInvalid,
    CrossOriginRefused,
    DomainError,
    KeyTeamHeaderRequired,
    KeyTeamMismatch,
    KeyTeamNotAuthorized,
    MissingScope,
    SessionInvalid,
    Unauthorized,
)
from schemas.identity import SESSION_HEADER, CredentialRehash
from schemas.kernel.permissions import Subject
from schemas.principals import AGENT_SCOPES, Principal
from workflows.credentials import CredentialRehashWorkflow, credential_rehash_workflow_id

SESSION_COOKIE = "cairn_session"
SESSION_LIFETIME = timedelta(hours=24)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# What authenticating a request can answer, one code per cause (the OpenAPI document lists them
# on every route that authenticates)
AUTHENTICATION_REFUSALS: tuple[type[DomainError], ...] = (
    AuthenticationRequired,
    AuthorizationSchemeInvalid,
    AccessTokenInvalid,
    ConnectorTokenInvalid,
    SessionInvalid,
    AgentKeyMalformed,
    AgentKeyInvalid,
    AgentKeyExpired,
    AgentKeyRevoked,
    AccessTokenInvalid,
    AgentKeyBindingInvalid,
)
GLOBAL_AUTH_BUCKET = "global_auth"
GLOBAL_ANON_BUCKET = "global_anon"
GLOBAL_READ_BUCKET = "global_read"
CONNECTOR_BUCKET = "connector"
CONNECTOR_RATE_KEY = "connector:mcp"

log = logging.getLogger(__name__)


async def authenticate(request: web.Request) -> Principal | None:
    """The caller's principal, None when no credential is sent; 401 for a bad credential."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthorizationSchemeInvalid("Use 'Authorization: Bearer <token>'")
        if is_agent_key(token.strip()):
            return await agent_key_principal(request, token.strip())
        principal: Principal = await request.app[keys.TOKENS].verify(token.strip())
        return principal
    session_token = request.headers.get(SESSION_HEADER)
    if session_token:
        return await human_session(request, session_token)
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        _refuse_cross_origin(request)
        return await human_session(request, cookie)
    return None


def _refuse_cross_origin(request: web.Request) -> None:
    """A browser sends the session cookie with whatever page asks; for anything but a read the
    request's `Origin` (which browsers always send on such requests) must be this service's (or,
    for a route the Temporal UI calls, the UI's)."""
    if request.method in SAFE_METHODS:
        return
    origin = request.headers.get("Origin")
    if origin is None:
        return  # not a browser's request: the cookie was set by hand, no page can forge it
    settings = request.app[keys.SETTINGS]
    own = {origin_of(settings.base_url), f"{request.scheme}://{request.host}"}
    spec = request.get(keys.ENDPOINT)
    if isinstance(spec, EndpointSpec) and spec.ui_origin:
        own.add(origin_of(settings.temporal_ui_url))  # the codec endpoint, asked by the UI
    if origin not in own:
        raise CrossOriginRefused(f"A request from {origin[:100]} may not use this session")


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def cookie_secure(base_url: str) -> bool:
    """Session cookies are `Secure` everywhere but on loopback (a developer's plain-HTTP
    `make run`): on any other host the service is reached over TLS."""
    host = urlsplit(base_url).hostname or ""
    return not (host == "localhost" or _is_loopback_address(host))


def _is_loopback_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def set_session_cookie(response: web.StreamResponse, token: str, request: web.Request) -> None:
    """The human session as a cookie: HttpOnly, SameSite=Lax, Secure off loopback."""
    response.set_cookie(
        SESSION_COOKIE,
        token,
        httponly=True,
        samesite="Lax",
        secure=cookie_secure(request.app[keys.SETTINGS].base_url),
        max_age=int(SESSION_LIFETIME.total_seconds()),
        path="/",
    )


def session_token_of(request: web.Request) -> str | None:
    """The human session a request carries (header or cookie), unverified."""
    return request.headers.get(SESSION_HEADER) or request.cookies.get(SESSION_COOKIE)


async def find_session(request: web.Request, token: str) -> identity_reads.SessionRow | None:
    """The open session of a token hashed under any server secret; one found under an older
    secret moves to the current one (nobody is logged out by a rotation)."""
    ring = request.app[keys.SETTINGS].secret_ring
    hashes = ring.hashes(token)
    session = await identity_reads.open_session(request.app[keys.READ_POOL], hashes)
    if session is not None and session.token_hash != hashes[0]:
        await move_to_current_key(
            request,
            CredentialRehash(
                kind="session", ref=str(session.id), old_hash=session.token_hash, new_hash=hashes[0]
            ),
        )
    return session


async def move_to_current_key(request: web.Request, rehash: CredentialRehash | None) -> None:
    """Start moving a credential's stored hash to the current server secret. The request it
    came with goes on either way: if Temporal cannot take it now, a later use moves it."""
    if rehash is None:
        return
    client = request.app[keys.TEMPORAL]
    try:
        await client.start_workflow(
            CredentialRehashWorkflow.run,
            rehash,
            id=credential_rehash_workflow_id(rehash.kind, rehash.ref),
            task_queue=request.app[keys.SETTINGS].temporal_task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
    except RPCError as error:
        log.warning("credential %s %s stays under an older key: %s", rehash.kind, rehash.ref, error)


async def human_session(request: web.Request, token: str) -> Principal:
    session = await find_session(request, token)
    if session is None:
        raise SessionInvalid("The session is unknown, expired or logged out")
    # A human acts through the permission engine; scopes gate only what agents delegate.
    return Principal(
        subject_type="human",
        identity_id=session.identity_id,
        credential="session",
        scopes=frozenset(AGENT_SCOPES),
        human_id=session.human_id,
    )


# compared against when the key id is unknown, so that a miss costs what a hit costs
_ABSENT_KEY_HASH = "0" * 64


async def agent_key_principal(request: web.Request, secret: str) -> Principal:
    """The agent behind an agent key (SPEC 5.4): one primary-key read and a constant-time
    compare of the secret's keyed hash; nothing is cached, so a revocation or a rotation counts
    from the next request in every process. Then the binding: a team key only with its own
    team's header, an identity key only in teams where its agent is a member right now."""
    key_id = agent_key_id(secret)
    if key_id is None:
        raise AgentKeyMalformed("Agent keys look like service_ak_<key id>_<secret>")
    row = await get_key_for_auth(request.app[keys.READ_POOL], key_id)
    stored = row.secret_hash if row is not None else _ABSENT_KEY_HASH
    ring = request.app[keys.SETTINGS].secret_ring
    match = ring.match(secret, stored)
    if not match or row is None:
        raise AgentKeyInvalid("The agent key is unknown, wrong or was rotated")
    if row.status == "revoked":
        raise AgentKeyRevoked("The agent key was revoked")
    if row.status == "expired":
        raise AgentKeyExpired("The agent key has expired")
    try:
        binding = binding_of(row.metadata, actor_is_agent=row.identity_id is not None)
    except InvalidKeyMetadata as exc:
        raise AgentKeyBindingInvalid(f"The key's stored binding is rejected: {exc}") from None
    if row.identity_id is None:
        raise AgentKeyInvalid("The key's agent has no identity")
    await _check_key_team(request, row.actor_id, binding.binding_scope, binding.team_id)
    if match.stale:
        await move_to_current_key(
            request,
            CredentialRehash(
                kind="agent_key", ref=str(row.id), old_hash=stored, new_hash=ring.hash(secret)
            ),
        )
    return Principal(
        subject_type="agent",
        identity_id=row.identity_id,
        credential="agent_key",
        scopes=frozenset(row.scopes),
        agent_id=row.actor_id,
        public_key=row.public_key,
        fingerprint=row.fingerprint,
        key_id=row.id,
        binding_scope=binding.binding_scope,
        bound_team_id=binding.team_id,
    )


async def _check_key_team(
    request: web.Request, agent_id: UUID, binding_scope: str, bound_team_id: UUID | None
) -> None:
    team_id = team_header(request)
    if binding_scope == "team":
        if team_id is None:
            raise KeyTeamHeaderRequired("Send x-service-team-id with the key's team")
        if team_id != bound_team_id:
            raise KeyTeamMismatch("The team key is bound to another team than x-service-team-id")
        return
    # an identity key: the agent's current membership decides (neither binding grants any)
    if team_id is not None:
        member = Subject(ns="Agent", id=str(agent_id))
        engine = request.app[keys.PERMISSIONS]
        if not await engine.check("Team", team_id, "verify_claim", member):
            raise KeyTeamNotAuthorized("The key's agent is not a member of this team")


def require_connector(request: web.Request) -> None:
    """The MCP server's back channel for the browser OAuth connector: the connector secret,
    derived from the server secret by both processes (spec 5.5, `schemas.connector`)."""
    ring = request.app[keys.SETTINGS].secret_ring
    presented = request.headers.get(CONNECTOR_HEADER, "").encode()
    expected = [connector_secret(key).encode() for key in ring.keys]
    if not any([hmac.compare_digest(secret, presented) for secret in expected]):
        raise ConnectorRefused(f"Send the connector secret in {CONNECTOR_HEADER}")


async def authorize(
    request: web.Request, spec: EndpointSpec, *, counted: bool = False
) -> Principal | None:
    """Authenticate, count the request in its rate buckets and check the route's scopes.

    `counted`: the carrying request was already counted in its global bucket (a route run for
    an A2A call), so only the route's own bucket counts here."""
    if spec.auth == "connector":
        require_connector(request)
        request[keys.PRINCIPAL] = None
        # one MCP server speaks for all its humans: its own bucket, not an anonymous IP's
        _start_count(request, CONNECTOR_RATE_KEY, [CONNECTOR_BUCKET])
        await settle_rate(request)
        return None
    principal = None
    if spec.auth == "browser":
        principal = await _browser_principal(request)
    elif spec.auth != "none":
        principal = await authenticate(request)
        if principal is None and spec.auth == "required":
            raise AuthenticationRequired("This endpoint needs a bearer token or a session")
    request[keys.PRINCIPAL] = principal
    _name_in_logs(principal)
    if spec.rate_limited:
        buckets = _buckets(request, spec, principal)[1 if counted else 0 :]
        if buckets:
            _start_count(request, _rate_key(request, principal), buckets)
        if not _may_overlap(request, spec):
            await settle_rate(request)
    if principal is not None and not principal.has_scopes(spec.scopes):
        missing = sorted(set(spec.scopes) - principal.scopes)
        raise MissingScope(f"The credential lacks scope(s): {', '.join(missing)}")
    return principal


def _name_in_logs(principal: Principal | None) -> None:
    """The request's log lines from here on say who asked (ids only, never a credential)."""
    context = current_request()
    if principal is not None and context is not None:
        context.principal_kind = principal.subject_type
        context.principal_id = str(principal.subject_id)


async def _browser_principal(request: web.Request) -> Principal | None:
    """A page a person's browser asks for: a stale or logged-out session is no session."""
    try:
        return await authenticate(request)
    except Unauthorized:
        return None


def _rate_key(request: web.Request, principal: Principal | None) -> str:
    return f"ip:{client_address(request)}" if principal is None else principal.rate_key


def _buckets(request: web.Request, spec: EndpointSpec, principal: Principal | None) -> list[str]:
    """The global bucket of the caller's kind and method, and the route's own if it has one."""
    if principal is None:
        global_bucket = GLOBAL_ANON_BUCKET
    else:
        global_bucket = GLOBAL_READ_BUCKET if request.method == "GET" else GLOBAL_AUTH_BUCKET
    return [global_bucket] + ([spec.rate_bucket] if spec.rate_bucket else [])


def _start_count(request: web.Request, key: str, buckets: list[str]) -> None:
    """Count the request in its buckets (a task: see `_may_overlap`)."""
    limiter = request.app[keys.RATE_LIMITER]
    if not limiter.enabled:
        return
    request[keys.RATE_KEY] = key
    local = limiter.take_local(key, buckets)
    if local is not None:  # served from this process's leases: no round trip, no task
        decided: asyncio.Future[Quota | Refusal | None] = asyncio.get_running_loop().create_future()
        decided.set_result(local)
        request[keys.RATE_DECISION] = decided
        return
    decision = asyncio.ensure_future(limiter.take(key, buckets))
    decision.add_done_callback(_retrieved)  # a request cancelled before settling logs nothing
    request[keys.RATE_DECISION] = decision


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _may_overlap(request: web.Request, spec: EndpointSpec) -> bool:
    """A GET changes nothing and its response is sent only after `settle_rate`, so its count
    runs beside the handler's own reads instead of before them (the round trip to the shared
    state then adds next to no latency). Anything else waits for the count first, and so does
    a GET whose body streams out of the handler, or whose caller was refused lately (an
    abusive caller makes no reads past its limit)."""
    key = request.get(keys.RATE_KEY)
    if spec.method != "GET" or spec.raw_response is not None or key is None:
        return False
    return not request.app[keys.RATE_LIMITER].refused_lately(key)


async def settle_rate(request: web.Request) -> None:
    """Wait for the request's count: its quota for the `x-ratelimit-*` headers, or a 429 with
    the headers of the bucket that refused it."""
    decision = request.pop(keys.RATE_DECISION, None)
    if decision is None:
        return
    outcome = await decision
    if isinstance(outcome, Refusal):
        request[keys.RATE_QUOTA] = outcome.quota()
        request[keys.RATE_ADMITTED] = False
        raise outcome.error()
    if outcome is not None:
        request[keys.RATE_QUOTA] = outcome
        request[keys.RATE_ADMITTED] = True


async def give_back_rate(request: web.Request, spec: EndpointSpec) -> None:
    """The request failed after it was counted: a bucket that counts what requests create (the
    signing requests) gets its place back."""
    key = request.get(keys.RATE_KEY)
    if spec.rate_bucket is not None and key is not None and request.get(keys.RATE_ADMITTED):
        await request.app[keys.RATE_LIMITER].give_back(key, spec.rate_bucket)


def require_principal(request: web.Request) -> Principal:
    principal = request.get(keys.PRINCIPAL)
    if not isinstance(principal, Principal):
        raise AuthenticationRequired("This endpoint needs a bearer token or a session")
    return principal


def optional_principal(request: web.Request) -> Principal | None:
    principal = request.get(keys.PRINCIPAL)
    return principal if isinstance(principal, Principal) else None
