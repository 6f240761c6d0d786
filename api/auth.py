"""Authentication and route authorization (the spec's `requireAuth` / `optionalAuth`).

A request carries at most one credential: `Authorization: Bearer <JWT>` (OAuth2 access token),
or a human session (`X-Session-Token` header or the session cookie). Every route declares
whether auth is required and which scopes it needs; a missing scope is 403, a missing,
invalid, expired or rotated credential is 401.
"""

from __future__ import annotations

from aiohttp import web

from api import keys
from api.ratelimit import Quota
from api.spec import EndpointSpec
from infra.repos import identity_reads
from schemas.errors import MissingScope, RateLimited, Unauthorized
from schemas.kernel.crypto import hash_secret
from schemas.principals import AGENT_SCOPES, Principal

SESSION_COOKIE = "cairn_session"
SESSION_HEADER = "X-Session-Token"
GLOBAL_AUTH_BUCKET = "global_auth"
GLOBAL_ANON_BUCKET = "global_anon"
GLOBAL_READ_BUCKET = "global_read"


async def authenticate(request: web.Request) -> Principal | None:
    """The caller's principal, None when no credential is sent; 401 for a bad credential."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Use 'Authorization: Bearer <token>'")
        principal: Principal = await request.app[keys.TOKENS].verify(token.strip())
        return principal
    session_token = request.headers.get(SESSION_HEADER) or request.cookies.get(SESSION_COOKIE)
    if session_token:
        return await human_session(request, session_token)
    return None


async def human_session(request: web.Request, token: str) -> Principal:
    settings = request.app[keys.SETTINGS]
    token_hash = hash_secret(token, settings.secret_bytes)
    session = await identity_reads.open_session(request.app[keys.READ_POOL], token_hash)
    if session is None:
        raise Unauthorized("The session is unknown, expired or logged out")
    # A human acts through the permission engine; scopes gate only what agents delegate.
    return Principal(
        subject_type="human",
        identity_id=session.identity_id,
        credential="session",
        scopes=frozenset(AGENT_SCOPES),
        human_id=session.human_id,
    )


async def authorize(request: web.Request, spec: EndpointSpec) -> Principal | None:
    principal = None
    if spec.auth != "none":
        principal = await authenticate(request)
        if principal is None and spec.auth == "required":
            raise Unauthorized("This endpoint needs a bearer token or a session")
    request[keys.PRINCIPAL] = principal
    _count_rate(request, spec, principal)
    if principal is not None and not principal.has_scopes(spec.scopes):
        missing = sorted(set(spec.scopes) - principal.scopes)
        raise MissingScope(f"The credential lacks scope(s): {', '.join(missing)}")
    return principal


def _count_rate(request: web.Request, spec: EndpointSpec, principal: Principal | None) -> None:
    limiter = request.app[keys.RATE_LIMITER]
    if principal is None:
        key = f"ip:{request.remote}"
        global_bucket = GLOBAL_ANON_BUCKET
    else:
        key = principal.rate_key
        global_bucket = GLOBAL_READ_BUCKET if request.method == "GET" else GLOBAL_AUTH_BUCKET
    buckets = [global_bucket] + ([spec.rate_bucket] if spec.rate_bucket else [])
    quotas = []
    for bucket in buckets:
        try:
            quotas.append(limiter.hit(key, bucket))
        except RateLimited as limited:
            # the 429 carries the x-ratelimit-* headers of the bucket that refused it
            request[keys.RATE_QUOTA] = Quota(
                limit=limiter.limit_of(bucket), remaining=0, reset_sec=limited.retry_after
            )
            raise
    tightest = min(quotas, key=lambda q: q.remaining)
    request[keys.RATE_QUOTA] = tightest


def require_principal(request: web.Request) -> Principal:
    principal = request.get(keys.PRINCIPAL)
    if not isinstance(principal, Principal):
        raise Unauthorized("This endpoint needs a bearer token or a session")
    return principal


def optional_principal(request: web.Request) -> Principal | None:
    principal = request.get(keys.PRINCIPAL)
    return principal if isinstance(principal, Principal) else None
