"""The browser OAuth connector for humans (spec 5.5): the MCP server as an OAuth authorization
server and protected resource, built from the SDK's own `mcp.server.auth` handlers (metadata
RFC 8414 / RFC 9728, /authorize, /token, /register RFC 7591, /revoke RFC 7009) and a provider
that keeps nothing here: clients, codes and grants live behind the REST API's back channel
(`client.connector`), every write a workflow there, the human's login and consent on the
API's consent page.

The flow: the host registers, sends the human's browser to /authorize; the provider signs the
checked request and redirects to the consent page; the human logs in, approves, and the API
redirects to the host with a code bound to the human, client, redirect URI, S256 challenge and
this server's resource URL; the host redeems it at /token (the SDK checks PKCE and the redirect
URI), gets an access token whose audience is this server, and calls /mcp with it. The auth gate
checks it through the SDK's bearer backend; the API exchanges it for a short REST token acting as
the human, so tool calls run with the human's team roles, never as an agent.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.auth.middleware.client_auth import ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.server.auth.routes import (
    REVOCATION_PATH,
    TOKEN_PATH,
    _body_limited,
    _cors,
    build_resource_metadata_url,
    create_auth_routes,
    create_protected_resource_routes,
)
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, ValidationError
from starlette.requests import Request
from starlette.routing import Route, request_response

from client.connector import ConnectorApi
from client.rest import ApiError
from schemas import limits
from schemas.connector import (
    CONSENT_PATH,
    SECRET_MAX_CHARS,
    AuthorizeRequest,
    ClientRegistration,
    sign_authorize_request,
)
from schemas.kernel.crypto import hash_secret, secrets_match
from schemas.principals import AGENT_SCOPES
from toolserver.backend import Backend
from toolserver.config import ToolServerConfig


class ConnectorClientInfo(OAuthClientInformationFull):
    """A registered client as the SDK sees it. Its secret exists only as `secret_hash`
    (keyed under the connector secret): `client_secret` stays None except inside one token
    request's authentication (`HashedSecretAuthenticator`)."""

    secret_hash: str | None = None


class ConnectorCode(AuthorizationCode):
    used: bool = False


class ConnectorRefresh(RefreshToken):
    grant_id: str


class ConnectorAccess(AccessToken):
    """A checked connector token and the REST token that acts as its human."""

    grant_id: str
    api_token: str
    api_expires_at: float


def _same_url(left: str, right: str) -> bool:
    return left.rstrip("/") == right.rstrip("/")


@dataclass
class _Checked:
    access: ConnectorAccess
    until: float


class ConnectorProvider:
    """`OAuthAuthorizationServerProvider` backed by the REST API's back channel."""

    def __init__(self, config: ToolServerConfig, backend: Backend) -> None:
        self.config = config
        self.secret = config.connector_secret
        self._older_secrets = config.older_connector_secrets
        self._backend = backend
        self.resource = config.public_url
        self._checked: dict[str, _Checked] = {}

    # --- clients (RFC 7591) ---------------------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        try:
            found = await self.api.get_client(client_id)
        except ApiError as error:
            if error.status in (400, 404):  # malformed or unknown: not ours
                return None
            raise
        info = ConnectorClientInfo.model_validate(
            {**found.metadata, "client_id": found.clientId, "client_secret": None}
        )
        info.secret_hash = found.secretHash
        return info

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        secret = client_info.client_secret
        metadata = client_info.model_dump(
            mode="json", exclude={"client_id", "client_secret"}, exclude_none=True
        )
        uris = [str(uri) for uri in client_info.redirect_uris or []]
        if not uris or len(uris) > limits.CONNECTOR_REDIRECT_URIS_MAX:
            raise RegistrationError(
                "invalid_redirect_uri",
                f"Register 1 to {limits.CONNECTOR_REDIRECT_URIS_MAX} redirect URIs",
            )
        try:
            registration = ClientRegistration(
                clientId=client_info.client_id or "",
                secretHash=hash_secret(secret, self.secret_key) if secret else None,
                clientName=(client_info.client_name or "")[: limits.CONNECTOR_CLIENT_NAME_MAX_CHARS]
                or None,
                redirectUris=uris,
                metadata=metadata,
            )
        except ValidationError as invalid:
            raise RegistrationError("invalid_client_metadata", str(invalid)[:500]) from None
        try:
            await self.api.register_client(registration)
        except ApiError as error:
            if error.status >= 500:
                raise
            raise RegistrationError("invalid_client_metadata", error.detail) from error

    @property
    def secret_key(self) -> bytes:
        return self.secret.encode()

    @property
    def verifying_keys(self) -> tuple[bytes, ...]:
        """The current connector secret first, then those of the server's older keys."""
        return (self.secret_key, *(older.encode() for older in self._older_secrets))

    @property
    def api(self) -> ConnectorApi:
        return self._backend.connector_api(self.secret)

    # --- authorization: on to the consent page -------------------------------------------

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        resource = params.resource or self.resource
        if not _same_url(resource, self.resource):
            raise AuthorizeError("invalid_target", "This server issues tokens only for itself")
        request = AuthorizeRequest(
            clientId=client.client_id or "",
            redirectUri=str(params.redirect_uri),
            redirectUriExplicit=params.redirect_uri_provided_explicitly,
            codeChallenge=params.code_challenge,
            state=params.state,
            scopes=list(params.scopes or []),
            resource=self.resource,
            expiresAt=int(time.time()) + limits.CONNECTOR_REQUEST_TTL_SEC,
        )
        signed = sign_authorize_request(request, self.secret)
        if len(signed) > limits.CONNECTOR_REQUEST_MAX_CHARS:
            # the consent page and the login's `next` could not carry it
            raise AuthorizeError("invalid_request", "The state or the redirect URI is too long")
        return f"{self.config.browser_api_url}{CONSENT_PATH}?{urlencode({'request': signed})}"

    # --- codes and tokens ------------------------------------------------------------------

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> ConnectorCode | None:
        if not _plausible(authorization_code):
            return None
        try:
            found = await self.api.lookup_code(authorization_code, client.client_id or "")
        except ApiError as error:
            if error.status in (400, 404):  # malformed or unknown: not ours
                return None
            raise
        return ConnectorCode(
            code=authorization_code,
            scopes=found.scopes,
            expires_at=found.expiresAt.timestamp(),
            client_id=found.clientId,
            code_challenge=found.codeChallenge,
            redirect_uri=found.redirectUri,
            redirect_uri_provided_explicitly=found.redirectUriExplicit,
            resource=found.resource,
            subject=str(found.subject),
            used=found.used,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: ConnectorCode
    ) -> OAuthToken:
        try:
            tokens = await self.api.redeem_code(authorization_code.code, client.client_id or "")
        except ApiError as error:
            if error.status >= 500:
                raise
            raise _grant_refused(error) from error
        return _oauth_token(
            tokens.access_token, tokens.expires_in, tokens.refresh_token, tokens.scope
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> ConnectorRefresh | None:
        if not _plausible(refresh_token):
            return None
        try:
            found = await self.api.lookup_refresh(refresh_token, client.client_id or "")
        except ApiError as error:
            if error.status in (400, 404):  # malformed or unknown: not ours
                return None
            raise
        return ConnectorRefresh(
            token=refresh_token,
            client_id=found.clientId,
            scopes=found.scopes,
            expires_at=int(found.expiresAt.timestamp()),
            resource=found.resource,
            subject=str(found.subject),
            grant_id=str(found.grantId),
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: ConnectorRefresh, scopes: list[str]
    ) -> OAuthToken:
        try:
            tokens = await self.api.redeem_refresh(
                refresh_token.token, client.client_id or "", scopes
            )
        except ApiError as error:
            if error.status >= 500:
                raise
            raise _grant_refused(error) from error
        return _oauth_token(
            tokens.access_token, tokens.expires_in, tokens.refresh_token, tokens.scope
        )

    async def load_access_token(self, token: str) -> ConnectorAccess | None:
        """A bearer presented here: checked at the API (signature, audience = this server,
        grant still open) and remembered for at most `CONNECTOR_CHECK_TTL_SEC`, so a revoked
        grant stops working within that time even on a replica that did not revoke it."""
        if not _plausible(token):
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = time.time()
        checked = self._checked.get(digest)
        if checked is not None and checked.until > now:
            return checked.access
        try:
            found = await self.api.exchange(token, self.resource)
        except ApiError as error:
            if error.status in (400, 401, 404):
                self._checked.pop(digest, None)
                return None
            raise
        access = ConnectorAccess(
            token=token,
            client_id=found.clientId,
            scopes=found.scopes,
            expires_at=found.expiresAt,
            resource=found.resource,
            subject=str(found.subject),
            grant_id=str(found.grantId),
            api_token=found.apiToken,
            api_expires_at=now + found.apiTokenExpiresIn,
        )
        if len(self._checked) > 10_000:
            self._checked.clear()
        until = min(now + limits.CONNECTOR_CHECK_TTL_SEC, access.api_expires_at - 5)
        self._checked[digest] = _Checked(access=access, until=until)
        return access

    async def revoke_token(self, token: ConnectorAccess | ConnectorRefresh) -> None:
        await self.api.revoke(token.grant_id)
        for digest, checked in list(self._checked.items()):
            if checked.access.grant_id == token.grant_id:
                del self._checked[digest]

    async def exchange_identity_assertion(self, client: Any, params: Any) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "Only authorization_code and refresh_token")


def _plausible(secret: str) -> bool:
    """Whether a presented code or token could be one we issued (else it is unknown, without
    a call to the API)."""
    return 0 < len(secret) <= SECRET_MAX_CHARS


def _oauth_token(access: str, expires_in: int, refresh: str, scope: str) -> OAuthToken:
    return OAuthToken(
        access_token=access,
        token_type="Bearer",
        expires_in=expires_in,
        refresh_token=refresh,
        scope=scope or None,
    )


def _grant_refused(error: ApiError) -> TokenError:
    """The API refused a code or refresh token (400): RFC 6749 invalid_grant."""
    return TokenError("invalid_grant", error.detail or "The grant is not valid")


class _RevealingProvider:
    """What the SDK's client authenticator sees during one token request: the stored client,
    whose `client_secret` is the presented secret when it matches the stored keyed hash and a
    fresh random value otherwise (so the SDK's constant-time compare fails)."""

    def __init__(self, provider: ConnectorProvider, presented: list[str]) -> None:
        self._provider = provider
        self._presented = presented

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        client = await self._provider.get_client(client_id)
        if not isinstance(client, ConnectorClientInfo) or client.secret_hash is None:
            return client
        stored = client.secret_hash
        keys = self._provider.verifying_keys
        match = next(
            (s for s in self._presented if any(secrets_match(s, stored, k) for k in keys)), None
        )
        return client.model_copy(update={"client_secret": match or secrets.token_hex(32)})


class HashedSecretAuthenticator(ClientAuthenticator):
    """The SDK's client authentication (method, Basic vs post, expiry) over a secret that is
    stored only as a keyed hash: the SDK compares plaintexts, so it is shown the presented
    secret when, and only when, it matches."""

    def __init__(self, provider: ConnectorProvider) -> None:
        super().__init__(provider)
        self._connector = provider

    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        form = await request.form()
        presented = [value for value in [form.get("client_secret")] if isinstance(value, str)]
        basic = _basic_secret(request.headers.get("Authorization", ""))
        if basic is not None:
            presented.append(basic)
        revealing = ClientAuthenticator(_RevealingProvider(self._connector, presented))  # type: ignore[arg-type]
        return await revealing.authenticate_request(request)


def _basic_secret(header: str) -> str | None:
    if not header.startswith("Basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:]).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    _, colon, secret = decoded.partition(":")
    return unquote(secret) if colon else None


def issuer_url(config: ToolServerConfig) -> str:
    """The authorization server is this MCP server's origin."""
    parts = urlsplit(config.public_url)
    return f"{parts.scheme}://{parts.netloc}"


def resource_metadata_url(config: ToolServerConfig) -> str:
    return str(build_resource_metadata_url(AnyHttpUrl(config.public_url)))


def connector_routes(provider: ConnectorProvider) -> list[Route]:
    """The SDK's authorization-server and protected-resource routes; /token and /revoke
    authenticate clients against the hashed secrets."""
    config = provider.config
    routes = create_auth_routes(
        provider,
        AnyHttpUrl(issuer_url(config)),
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=list(AGENT_SCOPES), default_scopes=list(AGENT_SCOPES)
        ),
        revocation_options=RevocationOptions(enabled=True),
    )
    authenticator = HashedSecretAuthenticator(provider)
    token = TokenHandler(provider, authenticator)
    revoke = RevocationHandler(provider, authenticator)
    replaced = {
        TOKEN_PATH: _cors(_body_limited(request_response(token.handle)), ["POST", "OPTIONS"]),
        REVOCATION_PATH: _cors(_body_limited(request_response(revoke.handle)), ["POST", "OPTIONS"]),
    }
    routes = [
        Route(route.path, endpoint=replaced[route.path], methods=["POST", "OPTIONS"])
        if route.path in replaced
        else route
        for route in routes
    ]
    return routes + create_protected_resource_routes(
        AnyHttpUrl(config.public_url),
        [AnyHttpUrl(issuer_url(config))],
        scopes_supported=list(AGENT_SCOPES),
        resource_name="Cairn",
    )


def bearer_backend(provider: ConnectorProvider) -> BearerAuthBackend:
    """The SDK's bearer check: a token the API vouches for, issued for this very resource."""

    class _Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            return await provider.load_access_token(token)

    return BearerAuthBackend(_Verifier(), resource_server_url=AnyHttpUrl(provider.resource))
