"""Who may talk to the MCP endpoint: checked from the headers alone, before the body is read
(spec 5.5), so a caller without valid credentials gets HTTP 401 and no MCP message is parsed.

Accepted:
- `X-Client-Id` + `X-Client-Secret`, or `Authorization: Basic <id:secret>` (for hosts that only
  let users set `Authorization`): OAuth2 client credentials, exchanged at the token endpoint
  (cached per client until five minutes before expiry);
- `Authorization: Bearer <agent key>` (`service_ak_…`): passed to the REST API unchanged;
- `Authorization: Bearer <connector token>` when the browser OAuth connector is on: a human's
  token whose audience is this server, checked by the SDK's bearer backend
  (`toolserver.oauth`), and exchanged at the API for a REST token acting as the human.

Optionally `X-Service-Team-Id: <team uuid>`: the team context sent on every REST call made for
this request that does not name its own team (a tool's explicit `team_id` argument still decides
which team that call addresses). A team-bound agent key needs it (spec 5.4: equal to its
binding); the REST API judges it. A value that is not a uuid is refused here with 400.

Optionally `?toolsets=` / `X-Service-Toolsets` and `?readonly=` / `X-Service-Read-Only`: what
the connection sees (toolserver.toolsets), narrowed by the scopes whoami tells, widened by the
toolsets the connection enabled (its `cairn-toolsets` cookie). An unknown toolset is refused
here with 400, before any call to the API.

Any other bearer (in particular a REST access token) is refused: the MCP server never passes a
token through that was issued for another audience. With the connector on, a 401 names the
protected-resource metadata (RFC 9728), so an MCP host can start the browser flow. Secrets never
reach a log line.
"""

from __future__ import annotations

import base64
import binascii
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from starlette.datastructures import Headers, QueryParams
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from client.rest import AGENT_KEY_PREFIX, TEAM_HEADER, ApiError, ClientCredentials
from toolserver.backend import AgentKey, Backend, Credential, HumanToken
from toolserver.oauth import ConnectorAccess
from toolserver.registry import CREDENTIAL_KEY, TEAM_KEY
from toolserver.toolsets import SELECTION_KEY, BadSelection, answering, enabled_toolsets, select

log = logging.getLogger("cairn.mcp")
REALM = 'Bearer realm="cairn-mcp"'


class Unauthorized(Exception):
    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


class Malformed(Exception):
    """A header the gate cannot use (400), as opposed to credentials it does not accept."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


@dataclass(frozen=True)
class ConnectorBearer:
    """A bearer that is not an agent key: a connector token, or refused."""

    token: str = field(repr=False)


def read_credential(headers: Headers, *, connector: bool = False) -> Credential | ConnectorBearer:
    client_id = headers.get("x-client-id")
    client_secret = headers.get("x-client-secret")
    if client_id and client_secret:
        return ClientCredentials(client_id, client_secret)
    authorization = headers.get("authorization", "")
    scheme, _, value = authorization.partition(" ")
    value = value.strip()
    if scheme.lower() == "basic" and value:
        return _basic(value)
    if scheme.lower() == "bearer" and value:
        if value.startswith(AGENT_KEY_PREFIX):
            return AgentKey(value)
        if connector:
            return ConnectorBearer(value)
        raise Unauthorized(
            "invalid_token",
            "The MCP server accepts an agent key as bearer, not a REST access token; or send "
            "X-Client-Id and X-Client-Secret",
        )
    raise Unauthorized(
        "invalid_request",
        "Send X-Client-Id and X-Client-Secret, Authorization: Basic <id:secret>, or "
        "Authorization: Bearer <agent key>",
    )


def read_team(headers: Headers) -> str | None:
    """`X-Service-Team-Id` in its canonical form; None when absent."""
    raw = headers.get(TEAM_HEADER)
    if raw is None:
        return None
    try:
        return str(uuid.UUID(raw.strip()))
    except ValueError:
        raise Malformed(f"{TEAM_HEADER} must be a team id (a uuid)") from None


def _basic(value: str) -> ClientCredentials:
    try:
        decoded = base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as error:
        raise Unauthorized("invalid_request", "Authorization: Basic is not base64") from error
    client_id, colon, client_secret = decoded.partition(":")
    if not colon or not client_id or not client_secret:
        raise Unauthorized("invalid_request", "Authorization: Basic needs <client id>:<secret>")
    return ClientCredentials(client_id, client_secret)


class AuthGate:
    """ASGI middleware in front of the MCP endpoint; other paths (the /.well-known/ challenge)
    pass untouched."""

    def __init__(
        self,
        app: ASGIApp,
        backend: Backend,
        path: str,
        *,
        bearer: BearerAuthBackend | None = None,
        resource_metadata: str | None = None,
    ) -> None:
        self.app = app
        self.backend = backend
        self.path = path.rstrip("/")
        self.bearer = bearer
        self.resource_metadata = resource_metadata

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            presented = read_credential(headers, connector=self.bearer is not None)
            # before any call to the API: a malformed header costs none
            team = read_team(headers)
            query = QueryParams(scope.get("query_string", b""))
            select(query, headers, None)
            credential, scopes = await self._authenticate(presented, scope, team)
        except Malformed as malformed:
            log.info("MCP request refused: malformed %s", TEAM_HEADER)
            await _refusal(400, "invalid_request", malformed.description)(scope, receive, send)
            return
        except BadSelection as bad:
            log.info("MCP request refused: bad toolset selection")
            await _refusal(400, "invalid_request", str(bad))(scope, receive, send)
            return
        except Unauthorized as refused:
            log.info("MCP request refused: %s", refused.error)
            await _refusal(401, refused.error, refused.description, self.resource_metadata)(
                scope, receive, send
            )
            return
        except (aiohttp.ClientError, TimeoutError):
            log.warning("MCP request refused: the REST API did not answer")
            await _refusal(503, "temporarily_unavailable", "The API did not answer")(
                scope, receive, send
            )
            return
        # per request, in the ASGI scope: the server is stateless and serves many callers at once
        state = scope.setdefault("state", {})
        state[CREDENTIAL_KEY] = credential
        state[TEAM_KEY] = team
        state[SELECTION_KEY] = select(query, headers, scopes, enabled_toolsets(headers))
        accepts_sse = "text/event-stream" in headers.get("accept", "")
        await self.app(scope, receive, answering(send, state, self.path, accepts_sse))

    async def _authenticate(
        self, credential: Credential | ConnectorBearer, scope: Scope, team: str | None
    ) -> tuple[Credential, frozenset[str] | None]:
        """The credential the request acts with, and its scopes (None: not known)."""
        if isinstance(credential, ConnectorBearer):
            credential = await self._connector(credential, scope)
        return credential, await self._check(credential, team)

    async def _connector(self, bearer: ConnectorBearer, scope: Scope) -> HumanToken:
        """The SDK's bearer backend: a token the API vouches for, for this very resource."""
        assert self.bearer is not None
        try:
            found = await self.bearer.authenticate(HTTPConnection(scope))
        except ApiError as error:
            raise aiohttp.ClientError(f"API answered {error.status}") from error
        if found is None:
            raise Unauthorized(
                "invalid_token",
                "The bearer is neither an agent key nor a token issued for this MCP server",
            )
        user = found[1]
        access = user.access_token if isinstance(user, AuthenticatedUser) else None
        if not isinstance(access, ConnectorAccess):
            raise Unauthorized("invalid_token", "The bearer was not issued for this MCP server")
        return HumanToken(bearer=bearer.token, api_token=access.api_token)

    async def _check(self, credential: Credential, team: str | None) -> frozenset[str] | None:
        try:
            return await self.backend.authenticate(credential, team=team)
        except ApiError as error:
            if error.status >= 500:
                raise aiohttp.ClientError(f"API answered {error.status}") from error
            kind = (
                "invalid_client" if isinstance(credential, ClientCredentials) else "invalid_token"
            )
            raise Unauthorized(kind, "The credentials were not accepted") from error


def _refusal(
    status: int, error: str, description: str, resource_metadata: str | None = None
) -> JSONResponse:
    headers: dict[str, Any] = {}
    if status == 401:
        challenge = f'{REALM}, error="{error}"'
        if resource_metadata:
            challenge += f', resource_metadata="{resource_metadata}"'
        headers["WWW-Authenticate"] = challenge
    return JSONResponse(
        {"error": error, "error_description": description}, status_code=status, headers=headers
    )
