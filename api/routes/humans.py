"""Human self-service: registration, login (session cookie or X-Session-Token), logout.

Passwords are hashed with argon2id in a thread (never on the event loop) and only the hash
travels to the workflow; session tokens are random and stored as keyed hashes.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from aiohttp import web
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from api import keys
from api.auth import SESSION_COOKIE, require_principal
from api.endpoint import Parsed, endpoint, render
from api.flows import execute
from infra.repos import identity_reads
from schemas.errors import Conflict, Unauthorized
from schemas.identity import (
    Done,
    HumanIdentity,
    HumanLoginRequest,
    HumanRegisterRequest,
    HumanRegistration,
    HumanSession,
    SessionClose,
    SessionOpen,
)
from schemas.kernel.crypto import hash_secret, new_secret
from workflows.humans import (
    HumanRegistrationWorkflow,
    SessionCloseWorkflow,
    SessionOpenWorkflow,
    human_registration_workflow_id,
    session_close_workflow_id,
    session_open_workflow_id,
)

routes = web.RouteTableDef()
TAG = "humans"
SESSION_LIFETIME = timedelta(hours=24)
SESSION_PREFIX = "service_hs_"
_hasher = PasswordHasher()
# Verified against when the email is unknown, so both answers take the same time.
_DUMMY_HASH = _hasher.hash("cairn-timing-equaliser")


def _verify_password(stored: str, password: str) -> bool:
    try:
        return _hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False


@endpoint(
    routes,
    "POST",
    "/self-service/registration",
    tag=TAG,
    status=201,
    body=HumanRegisterRequest,
    response=HumanIdentity,
    auth="none",
    rate_bucket="registration",
    errors=(Conflict,),
)
async def register_human(
    request: web.Request, parsed: Parsed[HumanRegisterRequest]
) -> HumanIdentity:
    """Create a human identity (email + password)."""
    body = parsed.body
    password_hash = await asyncio.to_thread(_hasher.hash, body.password)
    identity_id = uuid.uuid4()
    await execute(
        request,
        HumanRegistrationWorkflow.run,
        HumanRegistration(identity_id=identity_id, email=body.email, password_hash=password_hash),
        workflow_id=human_registration_workflow_id(identity_id),
        on_duplicate=Conflict("This registration is already running"),
    )
    return HumanIdentity(identityId=identity_id, email=body.email, state="active")


@endpoint(
    routes,
    "POST",
    "/self-service/login",
    tag=TAG,
    body=HumanLoginRequest,
    response=HumanSession,
    auth="none",
    rate_bucket="recovery",
    errors=(Unauthorized,),
)
async def login(request: web.Request, parsed: Parsed[HumanLoginRequest]) -> web.StreamResponse:
    """Open a session: the token comes back once, and as an HttpOnly cookie."""
    body = parsed.body
    pool = request.app[keys.READ_POOL]
    identity = await identity_reads.identity_by_email(pool, body.email)
    stored = identity.password_hash if identity is not None else _DUMMY_HASH
    valid = await asyncio.to_thread(_verify_password, stored, body.password)
    if identity is None or not valid or (identity.schema_id, identity.state) != ("human", "active"):
        raise Unauthorized("Wrong email or password")
    token = new_secret(SESSION_PREFIX)
    session_id = uuid.uuid4()
    expires_at = datetime.now(UTC) + SESSION_LIFETIME
    human_id = await identity_reads.human_of(pool, identity.id)
    opened = await execute(
        request,
        SessionOpenWorkflow.run,
        SessionOpen(
            session_id=session_id,
            identity_id=identity.id,
            human_id=human_id if human_id is not None else uuid.uuid4(),
            token_hash=hash_secret(token, request.app[keys.SETTINGS].secret_bytes),
            expires_at=expires_at,
        ),
        workflow_id=session_open_workflow_id(session_id),
        on_duplicate=Conflict("This session is already being opened"),
    )
    response = render(
        HumanSession(
            sessionToken=token,
            expiresAt=expires_at,
            identityId=identity.id,
            humanId=opened.human_id,
        )
    )
    response.set_cookie(
        SESSION_COOKIE,
        token,
        httponly=True,
        samesite="Lax",
        secure=request.app[keys.SETTINGS].base_url.startswith("https://"),
        max_age=int(SESSION_LIFETIME.total_seconds()),
        path="/",
    )
    return response


@endpoint(routes, "POST", "/self-service/logout", tag=TAG, response=Done)
async def logout(request: web.Request, parsed: Parsed) -> web.StreamResponse:
    """Close the caller's session."""
    principal = require_principal(request)
    if principal.credential != "session":
        raise Unauthorized("Logout ends a human session; send the session token")
    token_hash = hash_secret(
        request.headers.get("X-Session-Token") or request.cookies.get(SESSION_COOKIE, ""),
        request.app[keys.SETTINGS].secret_bytes,
    )
    session = await identity_reads.open_session(request.app[keys.READ_POOL], token_hash)
    if session is not None:
        await execute(
            request,
            SessionCloseWorkflow.run,
            SessionClose(session_id=session.id),
            workflow_id=session_close_workflow_id(session.id),
            on_duplicate=Conflict("This session is already being closed"),
        )
    response = render(Done())
    response.del_cookie(SESSION_COOKIE, path="/")
    return response
