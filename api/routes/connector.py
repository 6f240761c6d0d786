"""The browser OAuth connector for humans (spec 5.5), REST side.

The MCP server is the authorization server an MCP host sees (the SDK's handlers for metadata,
/authorize, /token, /register, /revoke); this module keeps its state and does what needs the
human or the database:

- the consent page (`GET`/`POST /oauth/consent`): after the human's login, they approve or deny
  the client; approval issues an authorization code bound to the human, the client, the
  redirect URI, the PKCE S256 challenge, the resource (RFC 8707) and the scopes;
- the back channel the MCP server calls, authenticated by the connector secret
  (`X-Connector-Secret`): client registration and lookup, code lookup and redemption, refresh
  lookup and rotation, revocation, and the exchange of a connector token (audience = the MCP
  server) for a short REST token acting as the human. The MCP server never forwards the token it
  received, and this API never accepts an MCP-audience token as a bearer.

Codes, refresh tokens and client secrets are stored as keyed hashes; every write is a workflow.
"""

from __future__ import annotations

import html
import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated
from urllib.parse import quote, urlencode, urlsplit

from aiohttp import web
from pydantic import StringConstraints

from api import keys
from api.auth import SESSION_COOKIE
from api.endpoint import Parsed, endpoint
from api.flows import execute
from infra.oauth import HumanGrant
from infra.repos import connector as reads
from infra.repos.identity_reads import SessionRow, open_session
from schemas import limits
from schemas.base import RequestBody
from schemas.connector import (
    CODE_PREFIX,
    CONSENT_PATH,
    REFRESH_PREFIX,
    AuthorizeRequest,
    ClientRegister,
    ClientRegistration,
    CodeExchange,
    CodeIssue,
    CodeLookup,
    CodeRedeem,
    CodeView,
    ConnectorClient,
    ConnectorTokens,
    ExchangedToken,
    GrantIssued,
    GrantRef,
    GrantRevoke,
    RefreshLookup,
    RefreshRedeem,
    RefreshRotate,
    RefreshView,
    TokenExchange,
    connector_secret,
    read_authorize_request,
)
from schemas.errors import (
    AuthenticationRequired,
    AuthorizationCodeNotFound,
    ConnectorClientExists,
    ConnectorClientNotFound,
    ConnectorCsrf,
    ConnectorGrantInvalid,
    ConnectorRefused,
    ConnectorRequestInvalid,
    ConnectorTokenInvalid,
    OperationRunning,
    RefreshTokenNotFound,
    RequestInvalid,
    Unauthorized,
)
from schemas.identity import Done
from schemas.kernel.crypto import new_secret
from workflows.connector import (
    ConnectorClientRegisterWorkflow,
    ConnectorCodeIssueWorkflow,
    ConnectorCodeRedeemWorkflow,
    ConnectorGrantRevokeWorkflow,
    ConnectorRefreshRotateWorkflow,
    client_register_workflow_id,
    code_issue_workflow_id,
    code_redeem_workflow_id,
    grant_revoke_workflow_id,
    refresh_rotate_workflow_id,
)

routes = web.RouteTableDef()
TAG = "connector"
LOGIN_PATH = "/console/"
# a redirect URI's host[:port] as a CSP source may hold only these (no space, `;` or `,`)
_CSP_HOST = re.compile(r"[A-Za-z0-9.\-\[\]:]+")
SignedRequest = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.CONNECTOR_REQUEST_MAX_CHARS)
]


# --- the back channel ------------------------------------------------------------------------


def _hash(request: web.Request, value: str) -> str:
    return request.app[keys.SETTINGS].secret_ring.hash(value)


def _hashes(request: web.Request, value: str) -> list[str]:
    return request.app[keys.SETTINGS].secret_ring.hashes(value)


class ClientPath(RequestBody):
    clientId: Annotated[str, StringConstraints(min_length=1, max_length=200)]


def _client_view(row: reads.ConnectorClientRow) -> ConnectorClient:
    return ConnectorClient(
        clientId=row.client_id,
        secretHash=row.secret_hash,
        clientName=row.client_name,
        redirectUris=row.redirect_uris,
        metadata=row.metadata,
        createdAt=row.created_at,
    )


@endpoint(
    routes,
    "POST",
    "/oauth/connector/clients",
    tag=TAG,
    status=201,
    body=ClientRegistration,
    response=ConnectorClient,
    auth="connector",
    errors=(ConnectorRefused, ConnectorClientExists, OperationRunning),
)
async def connector_register_client(
    request: web.Request, parsed: Parsed[ClientRegistration]
) -> ConnectorClient:
    """Store a client the MCP server registered (RFC 7591); back channel only."""
    body = parsed.body
    await execute(
        request,
        ConnectorClientRegisterWorkflow.run,
        ClientRegister(
            client_id=body.clientId,
            secret_hash=body.secretHash,
            client_name=body.clientName,
            redirect_uris=body.redirectUris,
            metadata=body.metadata,
        ),
        workflow_id=client_register_workflow_id(body.clientId),
        on_duplicate=OperationRunning("This client is already being registered"),
    )
    row = await reads.get_client(request.app[keys.READ_POOL], body.clientId)
    if row is None or row.secret_hash != body.secretHash:
        raise ConnectorClientExists("Another client holds this id")
    return _client_view(row)


@endpoint(
    routes,
    "GET",
    "/oauth/connector/clients/{clientId}",
    tag=TAG,
    path_params=ClientPath,
    response=ConnectorClient,
    auth="connector",
    errors=(ConnectorRefused, ConnectorClientNotFound),
)
async def connector_get_client(
    request: web.Request, parsed: Parsed[None, None, ClientPath]
) -> ConnectorClient:
    """A registered client (its secret only as the keyed hash); back channel only."""
    row = await reads.get_client(request.app[keys.READ_POOL], parsed.path.clientId)
    if row is None:
        raise ConnectorClientNotFound("No such client")
    return _client_view(row)


@endpoint(
    routes,
    "POST",
    "/oauth/connector/codes/lookup",
    tag=TAG,
    body=CodeLookup,
    response=CodeView,
    auth="connector",
    errors=(ConnectorRefused, AuthorizationCodeNotFound),
)
async def connector_lookup_code(request: web.Request, parsed: Parsed[CodeLookup]) -> CodeView:
    """An authorization code's binding, for the SDK's token checks; back channel only."""
    row = await reads.get_code(request.app[keys.READ_POOL], _hash(request, parsed.body.code))
    if row is None or row.client_id != parsed.body.clientId:
        raise AuthorizationCodeNotFound("No such authorization code")
    return CodeView(
        clientId=row.client_id,
        redirectUri=row.redirect_uri,
        redirectUriExplicit=row.redirect_uri_explicit,
        codeChallenge=row.code_challenge,
        scopes=row.scopes,
        resource=row.resource,
        subject=row.identity_id,
        expiresAt=row.expires_at,
        used=row.used_at is not None,
    )


async def _tokens(
    request: web.Request, grant: GrantIssued, client_id: str, refresh: str
) -> ConnectorTokens:
    human = HumanGrant(
        grant_id=grant.grant_id,
        client_id=client_id,
        identity_id=grant.identity_id,
        human_id=grant.human_id,
        scopes=tuple(grant.scopes),
        resource=grant.resource,
    )
    access = await request.app[keys.TOKENS].issue_for_human(
        human, audience=grant.resource, ttl_sec=limits.CONNECTOR_ACCESS_TTL_SEC
    )
    return ConnectorTokens(
        access_token=access,
        expires_in=limits.CONNECTOR_ACCESS_TTL_SEC,
        refresh_token=refresh,
        scope=" ".join(grant.scopes),
        resource=grant.resource,
        grantId=grant.grant_id,
    )


def _refresh_expiry() -> datetime:
    return datetime.now(UTC) + timedelta(seconds=limits.CONNECTOR_REFRESH_TTL_SEC)


@endpoint(
    routes,
    "POST",
    "/oauth/connector/codes/redeem",
    tag=TAG,
    body=CodeRedeem,
    response=ConnectorTokens,
    auth="connector",
    errors=(ConnectorRefused, ConnectorGrantInvalid),
)
async def connector_redeem_code(
    request: web.Request, parsed: Parsed[CodeRedeem]
) -> ConnectorTokens:
    """Use an authorization code once: a grant, an access token for the MCP server and a
    refresh token. A replayed code revokes the grant it made. Back channel only; the MCP
    server checked PKCE and the redirect URI first."""
    code_hash = _hash(request, parsed.body.code)
    refresh = new_secret(REFRESH_PREFIX)
    grant = await execute(
        request,
        ConnectorCodeRedeemWorkflow.run,
        CodeExchange(
            code_hash=code_hash,
            client_id=parsed.body.clientId,
            grant_id=uuid.uuid4(),
            refresh_hash=_hash(request, refresh),
            refresh_expires_at=_refresh_expiry(),
        ),
        workflow_id=code_redeem_workflow_id(code_hash),
        on_duplicate=ConnectorGrantInvalid("This authorization code is being redeemed"),
    )
    return await _tokens(request, grant, parsed.body.clientId, refresh)


@endpoint(
    routes,
    "POST",
    "/oauth/connector/refresh/lookup",
    tag=TAG,
    body=RefreshLookup,
    response=RefreshView,
    auth="connector",
    errors=(ConnectorRefused, RefreshTokenNotFound),
)
async def connector_lookup_refresh(
    request: web.Request, parsed: Parsed[RefreshLookup]
) -> RefreshView:
    """The open grant behind a current refresh token; back channel only."""
    pool = request.app[keys.READ_POOL]
    grant = await reads.grant_by_refresh(pool, _hashes(request, parsed.body.refreshToken))
    if grant is None or grant.client_id != parsed.body.clientId:
        raise RefreshTokenNotFound("No such refresh token")
    assert grant.refresh_expires_at is not None
    return RefreshView(
        grantId=grant.id,
        clientId=grant.client_id,
        scopes=grant.scopes,
        resource=grant.resource,
        subject=grant.identity_id,
        expiresAt=grant.refresh_expires_at,
    )


@endpoint(
    routes,
    "POST",
    "/oauth/connector/refresh/redeem",
    tag=TAG,
    body=RefreshRedeem,
    response=ConnectorTokens,
    auth="connector",
    errors=(ConnectorRefused, ConnectorGrantInvalid),
)
async def connector_redeem_refresh(
    request: web.Request, parsed: Parsed[RefreshRedeem]
) -> ConnectorTokens:
    """Rotate a refresh token: a new access token and a new refresh token, the old one dead.
    Narrower scopes may be asked for, never wider. Back channel only."""
    body = parsed.body
    grant = await reads.grant_by_refresh(
        request.app[keys.READ_POOL], _hashes(request, body.refreshToken)
    )
    if grant is None or grant.client_id != body.clientId or grant.refresh_hash is None:
        raise ConnectorGrantInvalid("The refresh token is unknown, rotated or revoked")
    old_hash = grant.refresh_hash
    refresh = new_secret(REFRESH_PREFIX)
    issued = await execute(
        request,
        ConnectorRefreshRotateWorkflow.run,
        RefreshRotate(
            grant_id=grant.id,
            client_id=body.clientId,
            old_hash=old_hash,
            new_hash=_hash(request, refresh),
            refresh_expires_at=_refresh_expiry(),
        ),
        workflow_id=refresh_rotate_workflow_id(grant.id, old_hash),
        on_duplicate=ConnectorGrantInvalid("This refresh token is being redeemed"),
    )
    if body.scopes is not None:
        if not set(body.scopes) <= set(issued.scopes):
            raise ConnectorGrantInvalid("The scopes exceed the grant's")
        issued = issued.model_copy(update={"scopes": body.scopes})
    return await _tokens(request, issued, body.clientId, refresh)


@endpoint(
    routes,
    "POST",
    "/oauth/connector/exchange",
    tag=TAG,
    body=TokenExchange,
    response=ExchangedToken,
    auth="connector",
    errors=(ConnectorRefused, ConnectorTokenInvalid),
)
async def connector_exchange_token(
    request: web.Request, parsed: Parsed[TokenExchange]
) -> ExchangedToken:
    """The MCP server presents a bearer it received and its own resource URL: the grant behind
    it and a REST token acting as that human, valid no longer than the presented one. Anything
    else (a REST token, another resource's token, a revoked grant) is 401. Back channel only."""
    tokens = request.app[keys.TOKENS]
    try:
        grant = await tokens.verify_connector_token(parsed.body.token, parsed.body.resource)
    except Unauthorized as refused:
        raise ConnectorTokenInvalid(refused.detail) from None
    remaining = max(1, grant.expires_at - int(time.time()))
    api_token = await tokens.issue_for_human(grant, audience=tokens.issuer, ttl_sec=remaining)
    return ExchangedToken(
        grantId=grant.grant_id,
        clientId=grant.client_id,
        scopes=list(grant.scopes),
        resource=grant.resource,
        subject=grant.identity_id,
        expiresAt=grant.expires_at,
        apiToken=api_token,
        apiTokenExpiresIn=remaining,
    )


@endpoint(
    routes,
    "POST",
    "/oauth/connector/revoke",
    tag=TAG,
    body=GrantRevoke,
    response=Done,
    auth="connector",
    errors=(ConnectorRefused,),
)
async def connector_revoke_grant(request: web.Request, parsed: Parsed[GrantRevoke]) -> Done:
    """Revoke a grant: its access and refresh tokens stop working (RFC 7009). Back channel."""
    grant_id = parsed.body.grantId
    await execute(
        request,
        ConnectorGrantRevokeWorkflow.run,
        GrantRef(grant_id=grant_id),
        workflow_id=grant_revoke_workflow_id(grant_id),
        on_duplicate=OperationRunning("This grant is already being revoked"),
    )
    return Done()


# --- the consent page ------------------------------------------------------------------------


class ConsentQuery(RequestBody):
    request: SignedRequest


class ConsentForm(RequestBody):
    request: SignedRequest
    csrf: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    decision: Annotated[str, StringConstraints(pattern=r"^(approve|deny)$")]


def _authorize_request(request: web.Request, signed: str) -> AuthorizeRequest:
    ring = request.app[keys.SETTINGS].secret_ring
    found = ring.first(lambda key: read_authorize_request(signed, connector_secret(key)))
    if found is None:
        raise ConnectorRequestInvalid(
            "The authorization request is forged or expired: start again from the MCP host"
        )
    return found


async def _session(request: web.Request) -> SessionRow | None:
    """The human's browser session (cookie), None for an anonymous or expired one: the
    consent page sends those to the login page instead of answering 401."""
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        return None
    return await open_session(request.app[keys.READ_POOL], _hashes(request, token))


def _csrf_message(session: SessionRow, signed: str) -> bytes:
    """Bound to the session and to this authorization request (the cookie is SameSite=Lax too)."""
    return f"cairn:consent:{session.id}:{signed}".encode()


def _csrf(request: web.Request, session: SessionRow, signed: str) -> str:
    return request.app[keys.SETTINGS].secret_ring.mac(_csrf_message(session, signed))


def _to_login(signed: str) -> web.Response:
    next_url = f"{CONSENT_PATH}?{urlencode({'request': signed})}"
    response = web.HTTPFound(f"{LOGIN_PATH}?next={quote(next_url, safe='')}")
    response.headers["Cache-Control"] = "no-store"
    return response


def _back_to_client(auth: AuthorizeRequest, **params: str) -> web.Response:
    """RFC 6749 4.1.2: the answer goes to the registered redirect URI, with the state."""
    if auth.state is not None:
        params["state"] = auth.state
    separator = "&" if urlsplit(auth.redirectUri).query else "?"
    response = web.HTTPFound(f"{auth.redirectUri}{separator}{urlencode(params)}")
    response.headers["Cache-Control"] = "no-store"
    return response


@endpoint(
    routes,
    "GET",
    CONSENT_PATH,
    tag=TAG,
    query=ConsentQuery,
    auth="none",
    raw_response="text/html",
    errors=(RequestInvalid,),
)
async def consent_page(request: web.Request, parsed: Parsed[None, ConsentQuery]) -> web.Response:
    """The human approves or denies an MCP host's access (after login; anonymous visitors are
    sent to the console's login with a `next` back here)."""
    signed = parsed.query.request
    auth = _authorize_request(request, signed)
    session = await _session(request)
    if session is None:
        return _to_login(signed)
    client = await reads.get_client(request.app[keys.READ_POOL], auth.clientId)
    if client is None:
        raise ConnectorRequestInvalid("The client is not registered")
    page = _CONSENT_HTML.format(
        client=html.escape(client.client_name or client.client_id),
        host=html.escape(urlsplit(auth.redirectUri).netloc or auth.redirectUri),
        scopes=html.escape(" ".join(auth.scopes) or "(none)"),
        action=html.escape(CONSENT_PATH),
        request=html.escape(signed),
        csrf=html.escape(_csrf(request, session, signed)),
    )
    response = web.Response(text=page, content_type="text/html")
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = _consent_policy(auth.redirectUri)
    return response


def _consent_policy(redirect_uri: str) -> str:
    """The consent page's CSP. Its form posts here and is answered with a redirect to the
    client's registered redirect URI; browsers check `form-action` against every hop of that
    redirect (CSP 3), so the redirect URI's origin is allowed too, or the approval never
    reaches the client. A URI that is no plain origin gets nothing beyond 'self'."""
    parts = urlsplit(redirect_uri)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https") and _CSP_HOST.fullmatch(parts.netloc):
        target = f" {scheme}://{parts.netloc}"
    elif scheme and scheme not in ("http", "https"):
        target = f" {scheme}:"  # a native app's own scheme (RFC 8252 7.1)
    else:
        target = ""
    return (
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
        f"frame-ancestors 'none'; form-action 'self'{target}"
    )


@endpoint(
    routes,
    "POST",
    CONSENT_PATH,
    tag=TAG,
    body=ConsentForm,
    body_form=True,
    auth="none",
    errors=(RequestInvalid, AuthenticationRequired),
)
async def consent_decision(request: web.Request, parsed: Parsed[ConsentForm]) -> web.Response:
    """Approve (an authorization code to the client's redirect URI) or deny
    (`error=access_denied`)."""
    form = parsed.body
    auth = _authorize_request(request, form.request)
    session = await _session(request)
    if session is None:
        return _to_login(form.request)
    ring = request.app[keys.SETTINGS].secret_ring
    if not ring.mac_matches(_csrf_message(session, form.request), form.csrf):
        raise ConnectorCsrf("The consent form is stale or forged")
    if form.decision == "deny":
        return _back_to_client(auth, error="access_denied", error_description="Denied by the user")
    code = new_secret(CODE_PREFIX)
    code_hash = _hash(request, code)
    await execute(
        request,
        ConnectorCodeIssueWorkflow.run,
        CodeIssue(
            code_hash=code_hash,
            client_id=auth.clientId,
            human_id=session.human_id,
            identity_id=session.identity_id,
            redirect_uri=auth.redirectUri,
            redirect_uri_explicit=auth.redirectUriExplicit,
            code_challenge=auth.codeChallenge,
            scopes=auth.scopes,
            resource=auth.resource,
            expires_at=datetime.now(UTC) + timedelta(seconds=limits.CONNECTOR_CODE_TTL_SEC),
        ),
        workflow_id=code_issue_workflow_id(code_hash),
        on_duplicate=OperationRunning("This code is already being issued"),
    )
    return _back_to_client(auth, code=code)


_CONSENT_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Connect {client} to Cairn</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 32rem; margin: 3rem auto;">
<h1>Connect {client}?</h1>
<p><strong>{client}</strong> (returning to <code>{host}</code>) asks to act as you in Cairn:
it will see and change what you can, in the teams you belong to, with your roles.</p>
<p>Scopes: <code>{scopes}</code></p>
<form method="post" action="{action}">
<input type="hidden" name="request" value="{request}">
<input type="hidden" name="csrf" value="{csrf}">
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form></body></html>
"""
