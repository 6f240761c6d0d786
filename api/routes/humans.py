"""Human self-service: registration, login (session cookie or X-Session-Token), logout, and the
human's profile (email and an optional display name, which other members of a shared team see).

Passwords are hashed with argon2id in a thread (never on the event loop) and only the hash
travels to the workflow; session tokens are random and stored as keyed hashes.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

from aiohttp import web
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from api import keys
from api.auth import (
    SESSION_COOKIE,
    SESSION_LIFETIME,
    require_principal,
    session_token_of,
    set_session_cookie,
)
from api.endpoint import Parsed, endpoint, render
from api.flows import execute
from infra.repos import identity_reads
from schemas.errors import (
    HumanNotFound,
    HumansOnly,
    IdentityExists,
    LoginFailed,
    OperationRunning,
    SessionRequired,
)
from schemas.identity import (
    Done,
    HumanIdentity,
    HumanLoginRequest,
    HumanProfile,
    HumanRegisterRequest,
    HumanRegistration,
    HumanSession,
    ProfileChange,
    ProfileUpdateRequest,
    SessionClose,
    SessionOpen,
)
from schemas.kernel.crypto import new_secret
from schemas.principals import Principal
from workflows.humans import (
    HumanRegistrationWorkflow,
    ProfileChangeWorkflow,
    SessionCloseWorkflow,
    SessionOpenWorkflow,
    human_registration_workflow_id,
    profile_change_workflow_id,
    session_close_workflow_id,
    session_open_workflow_id,
)

routes = web.RouteTableDef()
TAG = "humans"
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
    errors=(IdentityExists,),
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
        HumanRegistration(
            identity_id=identity_id,
            email=body.email,
            password_hash=password_hash,
            display_name=body.displayName,
        ),
        workflow_id=human_registration_workflow_id(identity_id),
        on_duplicate=OperationRunning("This registration is already running"),
    )
    return HumanIdentity(
        identityId=identity_id, email=body.email, state="active", displayName=body.displayName
    )


@endpoint(
    routes,
    "POST",
    "/self-service/login",
    tag=TAG,
    body=HumanLoginRequest,
    response=HumanSession,
    auth="none",
    rate_bucket="recovery",
    errors=(LoginFailed,),
)
async def login(request: web.Request, parsed: Parsed[HumanLoginRequest]) -> web.StreamResponse:
    """Open a session: the token comes back once, and as an HttpOnly cookie."""
    body = parsed.body
    pool = request.app[keys.READ_POOL]
    identity = await identity_reads.identity_by_email(pool, body.email)
    stored = identity.password_hash if identity is not None else _DUMMY_HASH
    valid = await asyncio.to_thread(_verify_password, stored, body.password)
    if identity is None or not valid or (identity.schema_id, identity.state) != ("human", "active"):
        raise LoginFailed("Wrong email or password")
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
            token_hash=request.app[keys.SETTINGS].secret_ring.hash(token),
            expires_at=expires_at,
        ),
        workflow_id=session_open_workflow_id(session_id),
        on_duplicate=OperationRunning("This session is already being opened"),
    )
    response = render(
        HumanSession(
            sessionToken=token,
            expiresAt=expires_at,
            identityId=identity.id,
            humanId=opened.human_id,
        )
    )
    set_session_cookie(response, token, request)
    return response


@endpoint(routes, "POST", "/self-service/logout", tag=TAG, response=Done, errors=(SessionRequired,))
async def logout(request: web.Request, parsed: Parsed) -> web.StreamResponse:
    """Close the caller's session."""
    principal = require_principal(request)
    if principal.credential != "session":
        raise SessionRequired("Logout ends a human session; send the session token")
    token_hashes = request.app[keys.SETTINGS].secret_ring.hashes(session_token_of(request) or "")
    session = await identity_reads.open_session(request.app[keys.READ_POOL], token_hashes)
    if session is not None:
        await execute(
            request,
            SessionCloseWorkflow.run,
            SessionClose(session_id=session.id),
            workflow_id=session_close_workflow_id(session.id),
            on_duplicate=OperationRunning("This session is already being closed"),
        )
    response = render(Done())
    response.del_cookie(SESSION_COOKIE, path="/")
    return response


# --- the profile ----------------------------------------------------------------------------


def _human(request: web.Request) -> Principal:
    """The caller, who must be a person: a profile is a human's (an agent is named by its
    fingerprint)."""
    principal = require_principal(request)
    if principal.subject_type != "human":
        raise HumansOnly("Only a human has a profile; an agent is named by its fingerprint")
    return principal


async def _profile(request: web.Request, identity_id: uuid.UUID) -> HumanProfile:
    row = await identity_reads.human_profile(request.app[keys.READ_POOL], identity_id)
    if row is None:
        raise HumanNotFound("No human identity has this id")
    return HumanProfile(identityId=row.id, email=row.email, displayName=row.display_name)


@endpoint(
    routes,
    "GET",
    "/self-service/profile",
    tag=TAG,
    response=HumanProfile,
    errors=(HumansOnly,),
)
async def get_profile(request: web.Request, parsed: Parsed) -> HumanProfile:
    """The logged-in human's profile: email and display name."""
    return await _profile(request, _human(request).identity_id)


@endpoint(
    routes,
    "PATCH",
    "/self-service/profile",
    tag=TAG,
    body=ProfileUpdateRequest,
    response=HumanProfile,
    errors=(HumansOnly, OperationRunning),
)
async def update_profile(
    request: web.Request, parsed: Parsed[ProfileUpdateRequest]
) -> HumanProfile:
    """Set the logged-in human's display name (null clears it)."""
    identity_id = _human(request).identity_id
    await execute(
        request,
        ProfileChangeWorkflow.run,
        ProfileChange(identity_id=identity_id, display_name=parsed.body.displayName),
        workflow_id=profile_change_workflow_id(identity_id),
        on_duplicate=OperationRunning("This profile is already being changed"),
    )
    return await _profile(request, identity_id)
