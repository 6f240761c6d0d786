"""The browser OAuth connector for humans (spec 5.5, DECISIONS "Tool-protocol server").

The MCP server is the authorization server the MCP host talks to (the SDK's `mcp.server.auth`
handlers); it keeps nothing itself and reaches the REST API over a back channel authenticated by
the connector secret. The REST API keeps the clients, codes and grants (hashed), runs every
mutation as a workflow, shows the consent page after the human's login and signs the tokens.

Here: the back channel's bodies, the workflow payloads, the connector secret's derivation and
the signed authorize request that travels from the MCP server to the consent page.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import Field, StringConstraints, ValidationError

from schemas import limits
from schemas.base import Payload, RequestBody, ResponseBody

CONNECTOR_HEADER = "X-Connector-Secret"
CODE_PREFIX = "service_ac_"
REFRESH_PREFIX = "service_rt_"
CONSENT_PATH = "/oauth/consent"
ClientId = Annotated[str, StringConstraints(min_length=1, max_length=200)]
# a code, refresh token or access token: longer than any we issue is simply unknown
SECRET_MAX_CHARS = 4096
Secret = Annotated[str, StringConstraints(min_length=1, max_length=SECRET_MAX_CHARS)]


def connector_secret(server_key: bytes) -> str:
    """The shared secret of the API and the MCP server, derived from the server secret (both
    processes read the same settings, so there is nothing more to configure)."""
    return hmac.new(server_key, b"cairn:mcp-connector:v1", hashlib.sha256).hexdigest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class AuthorizeRequest(Payload):
    """What the MCP host asked at /authorize, after the SDK's checks (a registered client and
    redirect URI, S256, valid scopes) and ours (the resource is this MCP server)."""

    clientId: str
    redirectUri: str
    redirectUriExplicit: bool
    codeChallenge: str
    state: str | None = None
    scopes: list[str]
    resource: str
    expiresAt: int  # unix seconds


def sign_authorize_request(request: AuthorizeRequest, secret: str) -> str:
    """`<base64url JSON>.<base64url HMAC>`: the consent page trusts only what the MCP server
    checked; nothing in it is secret (the PKCE challenge is public by design)."""
    body = _b64(request.model_dump_json().encode())
    mac = hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()
    return f"{body}.{_b64(mac)}"


def read_authorize_request(token: str, secret: str) -> AuthorizeRequest | None:
    """The request behind a signed token; None when forged, malformed or expired."""
    body, _, mac = token.partition(".")
    expected = _b64(hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest())
    if not mac or not hmac.compare_digest(expected.encode(), mac.encode()):
        return None
    try:
        request = AuthorizeRequest.model_validate(json.loads(_unb64(body)))
    except (ValueError, ValidationError):
        return None
    return request if request.expiresAt > time.time() else None


# --- the back channel: bodies the MCP server sends, answers the API gives ------------------


class ClientRegistration(RequestBody):
    """An RFC 7591 client the SDK's /register handler accepted; `secretHash` is the keyed hash
    (under the connector secret) of the secret it minted, absent for a public client."""

    clientId: ClientId
    secretHash: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    clientName: str | None = Field(default=None, max_length=limits.CONNECTOR_CLIENT_NAME_MAX_CHARS)
    redirectUris: list[Annotated[str, StringConstraints(max_length=2000)]] = Field(
        min_length=1, max_length=limits.CONNECTOR_REDIRECT_URIS_MAX
    )
    metadata: dict[str, Any]


class ConnectorClient(ResponseBody):
    clientId: str
    secretHash: str | None = None
    clientName: str | None = None
    redirectUris: list[str]
    metadata: dict[str, Any]
    createdAt: datetime


class CodeLookup(RequestBody):
    code: Secret
    clientId: ClientId


class CodeView(ResponseBody):
    """An authorization code's binding, for the SDK's checks (PKCE, redirect URI, expiry)."""

    clientId: str
    redirectUri: str
    redirectUriExplicit: bool
    codeChallenge: str
    scopes: list[str]
    resource: str
    subject: UUID  # the human's identity
    expiresAt: datetime
    used: bool


class CodeRedeem(RequestBody):
    code: Secret
    clientId: ClientId


class RefreshLookup(RequestBody):
    refreshToken: Secret
    clientId: ClientId


class RefreshView(ResponseBody):
    grantId: UUID
    clientId: str
    scopes: list[str]
    resource: str
    subject: UUID
    expiresAt: datetime


class RefreshRedeem(RequestBody):
    refreshToken: Secret
    clientId: ClientId
    scopes: list[str] | None = None


class ConnectorTokens(ResponseBody):
    """RFC 6749 5.1, audience-bound to `resource` (RFC 8707)."""

    access_token: str
    token_type: str = "Bearer"
    expires_in: int
    refresh_token: str
    scope: str
    resource: str
    grantId: UUID


class TokenExchange(RequestBody):
    """The MCP server presents a bearer it received and names itself (its resource URL)."""

    token: Secret
    resource: Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class ExchangedToken(ResponseBody):
    """The connector token's claims, and a REST access token acting as its human (RFC 8693
    in spirit: the MCP server never passes the MCP-audience token on)."""

    grantId: UUID
    clientId: str
    scopes: list[str]
    resource: str
    subject: UUID
    expiresAt: int
    apiToken: str
    apiTokenExpiresIn: int


class GrantRevoke(RequestBody):
    grantId: UUID


# --- workflow payloads (hashes and ids only, never a code or token) -------------------------


class ClientRegister(Payload):
    client_id: str
    secret_hash: str | None = None
    client_name: str | None = None
    redirect_uris: list[str]
    metadata: dict[str, Any]


class CodeIssue(Payload):
    code_hash: str
    client_id: str
    human_id: UUID
    identity_id: UUID
    redirect_uri: str
    redirect_uri_explicit: bool
    code_challenge: str
    scopes: list[str]
    resource: str
    expires_at: datetime


class CodeExchange(Payload):
    code_hash: str
    client_id: str
    grant_id: UUID
    refresh_hash: str
    refresh_expires_at: datetime


class GrantIssued(Payload):
    grant_id: UUID
    identity_id: UUID
    human_id: UUID
    scopes: list[str]
    resource: str


class RefreshRotate(Payload):
    grant_id: UUID
    client_id: str
    old_hash: str
    new_hash: str
    refresh_expires_at: datetime


class GrantRef(Payload):
    grant_id: UUID
