"""The OAuth2 server's endpoints (RFC 6749 client credentials, RFC 8414 metadata, JWKS) and the
hooks an external identity provider / OAuth2 server calls for token enrichment."""

from __future__ import annotations

import base64
import binascii
import hmac
import uuid
from typing import Any
from urllib.parse import unquote_plus

from aiohttp import web
from pydantic import ConfigDict, ValidationError

from api import keys
from api.auth import move_to_current_key
from api.endpoint import Parsed, endpoint
from infra.repos import identity_reads
from schemas.base import RequestBody
from schemas.errors import (
    HookSecretInvalid,
    PublicKeyImmutable,
    PublicKeyInvalid,
    RequestInvalid,
    UnknownClient,
    VoucherRejected,
)
from schemas.identity import OAuthError, TokenRequest, TokenResponse
from schemas.kernel.crypto import parse_public_key

routes = web.RouteTableDef()
TAG = "oauth2"
HOOK_SECRET_HEADER = "X-Hook-Secret"


def oauth_error(status: int, error: str, description: str) -> web.Response:
    """RFC 6749 section 5.2: token endpoint errors are plain JSON, never problems."""
    body = OAuthError(error=error, error_description=description).model_dump()
    response = web.json_response(body, status=status)
    response.headers["Cache-Control"] = "no-store"
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Basic realm="cairn"'
    return response


async def _token_request(request: web.Request) -> dict[str, str]:
    if request.content_type == "application/json":
        data: Any = await request.json()
        if not isinstance(data, dict):
            return {}
        return {str(k): str(v) for k, v in data.items()}
    form = await request.post()
    return {k: str(v) for k, v in form.items()}


def _basic_credentials(request: web.Request) -> tuple[str, str] | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        return None
    return unquote_plus(client_id), unquote_plus(secret)


@endpoint(
    routes,
    "POST",
    "/oauth2/token",
    tag=TAG,
    body=TokenRequest,
    body_form=True,
    manual_body=True,
    response=TokenResponse,
    error_body=OAuthError,
    error_statuses=(400, 401),
    auth="none",
)
async def token(request: web.Request, parsed: Parsed) -> web.Response:
    """Client-credentials grant (client_secret_basic or client_secret_post); errors per RFC 6749."""
    try:
        body = TokenRequest.model_validate(await _token_request(request))
    except (ValidationError, ValueError):
        return oauth_error(400, "invalid_request", "Malformed token request")
    if body.grant_type != "client_credentials":
        return oauth_error(400, "unsupported_grant_type", "Only client_credentials is supported")
    basic = _basic_credentials(request)
    if basic is not None and (body.client_id or body.client_secret):
        return oauth_error(400, "invalid_request", "Use one client authentication method")
    client_id, client_secret = basic or (body.client_id or "", body.client_secret or "")
    tokens = request.app[keys.TOKENS]
    client = await tokens.authenticate(client_id, client_secret) if client_id else None
    if client is None:
        return oauth_error(401, "invalid_client", "Client authentication failed")
    await move_to_current_key(request, client.rehash)
    requested = body.scope.split() if body.scope else sorted(client.scopes)
    if not set(requested) <= client.scopes:
        return oauth_error(400, "invalid_scope", "The scope exceeds the client's scopes")
    access_token, expires_in = await tokens.issue(client, requested)
    response = web.json_response(
        TokenResponse(
            access_token=access_token, expires_in=expires_in, scope=" ".join(requested)
        ).model_dump()
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@endpoint(routes, "GET", "/.well-known/jwks.json", tag=TAG, auth="none")
async def jwks(request: web.Request, parsed: Parsed) -> dict[str, Any]:
    """The token signing keys (EdDSA, Ed25519)."""
    key_set: dict[str, Any] = await request.app[keys.TOKENS].jwks()
    return key_set


@endpoint(routes, "GET", "/.well-known/oauth-authorization-server", tag=TAG, auth="none")
async def oauth_metadata(request: web.Request, parsed: Parsed) -> dict[str, Any]:
    """RFC 8414 authorization server metadata."""
    metadata: dict[str, Any] = request.app[keys.TOKENS].metadata()
    return metadata


# --- hooks for an external identity provider / OAuth2 server ------------------------------


def _require_hook_secret(request: web.Request) -> None:
    expected = request.app[keys.SETTINGS].hook_secret.get_secret_value()
    presented = request.headers.get(HOOK_SECRET_HEADER, "")
    if not expected or not hmac.compare_digest(expected.encode(), presented.encode()):
        raise HookSecretInvalid("The hook secret is missing or wrong")


class TokenExchangeHook(RequestBody):
    """What the OAuth2 server sends before issuing a token (only the client matters here)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    client_id: str | None = None
    request: dict[str, Any] | None = None
    session: dict[str, Any] | None = None


@endpoint(
    routes,
    "POST",
    "/hooks/hydra/token-exchange",
    tag="hooks",
    body=TokenExchangeHook,
    auth="none",
    errors=(HookSecretInvalid, UnknownClient),
)
async def token_exchange_hook(
    request: web.Request, parsed: Parsed[TokenExchangeHook]
) -> dict[str, Any]:
    """Token enrichment for an external OAuth2 server: the agent's identity claims."""
    _require_hook_secret(request)
    body = parsed.body
    client_id = body.client_id or str((body.request or {}).get("client_id", ""))
    agent = await identity_reads.agent_of_client(request.app[keys.READ_POOL], client_id)
    if agent is None:
        raise UnknownClient("Unknown client")
    claims = {
        "identity_id": str(agent.identity_id),
        "fingerprint": agent.fingerprint,
        "public_key": agent.public_key,
        "subject_type": "agent",
    }
    return {"session": {"access_token": claims}}


class IdentityHook(RequestBody):
    """What an external identity provider sends about an identity (Kratos-style webhook)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    identity: dict[str, Any]


def _hook_traits(body: IdentityHook) -> dict[str, Any]:
    traits = body.identity.get("traits")
    return traits if isinstance(traits, dict) else {}


@endpoint(
    routes,
    "POST",
    "/hooks/kratos/after-registration",
    tag="hooks",
    body=IdentityHook,
    auth="none",
    errors=(HookSecretInvalid, PublicKeyInvalid, VoucherRejected),
)
async def after_registration_hook(
    request: web.Request, parsed: Parsed[IdentityHook]
) -> dict[str, Any]:
    """An external provider asks whether an agent identity may be created: the voucher must be
    open and the key well-formed (the binding itself is the registration workflow's job)."""
    _require_hook_secret(request)
    traits = _hook_traits(parsed.body)
    if parsed.body.identity.get("schema_id", "agent") != "agent":
        return {"accepted": True}
    try:
        parse_public_key(str(traits.get("public_key", "")))
    except ValueError as exc:
        raise PublicKeyInvalid(str(exc)) from None
    code = str(traits.get("voucher_code", ""))
    if not await identity_reads.voucher_is_open(request.app[keys.READ_POOL], code):
        raise VoucherRejected("The voucher is unknown, already redeemed or expired")
    return {"accepted": True}


@endpoint(
    routes,
    "POST",
    "/hooks/kratos/after-settings",
    tag="hooks",
    body=IdentityHook,
    auth="none",
    errors=(HookSecretInvalid, RequestInvalid, PublicKeyImmutable),
)
async def after_settings_hook(request: web.Request, parsed: Parsed[IdentityHook]) -> dict[str, Any]:
    """An agent's public key is its identity: a settings change may not replace it."""
    _require_hook_secret(request)
    identity_id = str(parsed.body.identity.get("id", ""))
    traits = _hook_traits(parsed.body)
    try:
        agent_identity = uuid.UUID(identity_id)
    except ValueError:
        raise RequestInvalid.at("/identity/id", "identity.id must be a uuid") from None
    agent = await identity_reads.agent_by_identity(request.app[keys.READ_POOL], agent_identity)
    if agent is not None and traits.get("public_key") not in (None, agent.public_key):
        raise PublicKeyImmutable("An agent's public key cannot change")
    return {"accepted": True}
