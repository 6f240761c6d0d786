"""The agent side of the REST API: a typed async client.

Tokens are cached with their expiry, re-requested under five minutes before it, and on a 401
the client fetches a new token and retries once (spec section 5). Errors come back as
`ApiError` carrying the RFC 9457 problem body.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

import aiohttp
from opentelemetry import propagate
from pydantic import BaseModel

from schemas.apps import TaskCounts
from schemas.artifacts import StagedArtifact, TaskArtifact, TaskArtifactList
from schemas.embedding import SearchRequest, SearchResponse
from schemas.hygiene import HygieneReport
from schemas.identity import (
    SESSION_HEADER,
    AgentProfile,
    Done,
    HumanIdentity,
    HumanProfile,
    HumanSession,
    RecoveryChallenge,
    RecoveryCompleted,
    RecoveryVerified,
    RegisterResponse,
    TokenResponse,
    Voucher,
    VoucherList,
    Whoami,
)
from schemas.kernel.diary_car import CAR_MEDIA_TYPE
from schemas.memory import (
    Diary,
    DiaryCreateRequest,
    DiaryList,
    Entry,
    EntryCreateRequest,
    EntryList,
    EntryUpdateRequest,
    Grant,
    GrantList,
    GrantRequest,
    Relation,
    RelationCreateRequest,
    RelationList,
    RelationUpdateRequest,
    TagHistogram,
)
from schemas.packs import (
    ContextPack,
    PackCompiled,
    PackCreateRequest,
    PackDiff,
    PackList,
    PackUpdateRequest,
    ProvenanceGraph,
    RenderedPack,
    RenderedPackList,
    RenderedPackUpdateRequest,
    RenderRequest,
)
from schemas.signing import SigningRequestView, SignOutcome, VerifyRequest, VerifyResult
from schemas.task_api import (
    CreateTaskRequest,
    Task,
    TaskAttemptList,
    TaskList,
    TaskMessageList,
    TaskSchemaList,
)
from schemas.teams import (
    CreateInviteRequest,
    CreateTeamRequest,
    Deleted,
    Invite,
    InviteList,
    Joined,
    MemberList,
    Team,
    TeamList,
    TeamMember,
)

REFRESH_MARGIN_SEC = 300
TEAM_HEADER = "x-service-team-id"
IDEMPOTENCY_HEADER = "Idempotency-Key"
# A request lost to a dropped connection or a timeout, or refused with a passing status, is
# sent again this many times when it is safe to: a method that means the same when repeated, or
# a POST carrying an Idempotency-Key (the API's 503 says to send the same request with the same
# key). Waits grow from RESEND_BACKOFF_SEC; a Retry-After is honoured up to RESEND_MAX_WAIT_SEC.
# A longer outage is the caller's to wait out (the daemon's `resend_while_passing`).
RESENDS = 2
RESEND_BACKOFF_SEC = 0.25
RESEND_MAX_WAIT_SEC = 5.0
SAFE_TO_RESEND = frozenset({"GET", "HEAD", "PUT", "DELETE"})
# An API between replicas or restarting (502/504 from the ingress), or one that could not reach
# its database or workers in time (503): the same request may succeed a moment later.
PASSING_STATUSES = frozenset({502, 503, 504})
AGENT_KEY_PREFIX = "service_ak_"


class ApiError(Exception):
    """A REST problem (RFC 9457 body) or an OAuth2 error (RFC 6749 body), with its status."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status} {body.get('code') or body.get('error')}: {body.get('detail')}")
        self.status = status
        self.body = body

    @property
    def code(self) -> str | None:
        value = self.body.get("code") or self.body.get("error")
        return str(value) if value is not None else None

    @property
    def detail(self) -> str:
        value = self.body.get("detail") or self.body.get("error_description") or ""
        return str(value)


@dataclass(frozen=True)
class ClientCredentials:
    client_id: str
    client_secret: str = field(repr=False)

    @property
    def cache_key(self) -> str:
        """Names the pair without the secret: a wrong secret never finds another's token."""
        material = f"{self.client_id}\0{self.client_secret}".encode()
        return hashlib.sha256(material).hexdigest()


@dataclass
class _CachedToken:
    value: str
    expires_at: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TokenCache:
    """Client-credentials access tokens shared by many clients (spec 5.1).

    One token per (client, secret), reused until five minutes before it expires; concurrent
    callers wait for one exchange instead of each making their own. `exchanges` counts the
    calls to the token endpoint, so a caller can check "once per client per token lifetime".
    """

    def __init__(self, *, max_clients: int = 10_000) -> None:
        self._tokens: dict[str, _CachedToken] = {}
        self._max_clients = max_clients
        self.exchanges = 0

    async def token(
        self,
        http: aiohttp.ClientSession,
        base_url: str,
        credentials: ClientCredentials,
        *,
        scope: str | None = None,
        renew: bool = False,
    ) -> str:
        key = credentials.cache_key if scope is None else f"{credentials.cache_key} {scope}"
        entry = self._tokens.get(key)
        if entry is None:
            if len(self._tokens) >= self._max_clients:
                self._tokens.pop(next(iter(self._tokens)))
            entry = self._tokens.setdefault(key, _CachedToken("", 0.0))
        stale = entry.value
        async with entry.lock:
            fresh = time.time() < entry.expires_at - REFRESH_MARGIN_SEC
            # A caller that saw a token rejected renews it once, unless another already did.
            if entry.value and fresh and not (renew and entry.value == stale):
                return entry.value
            token = await self.exchange(http, base_url, credentials, scope)
            entry.value = token.access_token
            entry.expires_at = time.time() + token.expires_in
            return entry.value

    async def exchange(
        self,
        http: aiohttp.ClientSession,
        base_url: str,
        credentials: ClientCredentials,
        scope: str | None,
    ) -> TokenResponse:
        self.exchanges += 1
        basic = base64.b64encode(
            f"{credentials.client_id}:{credentials.client_secret}".encode()
        ).decode()
        form = {"grant_type": "client_credentials"}
        if scope:
            form["scope"] = scope
        async with http.post(
            base_url + "/oauth2/token", data=form, headers={"Authorization": f"Basic {basic}"}
        ) as response:
            body = await response.json(content_type=None)
            if response.status != 200:
                raise ApiError(response.status, body if isinstance(body, dict) else {})
            return TokenResponse.model_validate(body)


@dataclass(frozen=True)
class Download:
    """Bytes of an artifact and the metadata headers that came with them."""

    content: bytes
    content_type: str
    headers: dict[str, str]


@dataclass
class CairnClient:
    """One agent's view of the API. Use as `async with CairnClient(base_url) as api:`.

    The caller authenticates with OAuth2 client credentials (exchanged for a token, cached in
    `tokens`) or with a fixed `bearer` (an agent key, or a token obtained elsewhere) sent as
    it is and never renewed; a human, with the `session_token` that `login_human` sets (sent
    as X-Session-Token). A client built around a shared `session` (the MCP server's) is
    used without `async with`. `default_team` is sent as `x-service-team-id` on every call that
    names no team of its own (a team-bound agent key needs it on every call, spec 5.4); a call
    that names its team sends that one instead.
    """

    base_url: str
    credentials: ClientCredentials | None = None
    scope: str | None = None
    session: aiohttp.ClientSession | None = None
    bearer: str | None = field(default=None, repr=False)
    tokens: TokenCache = field(default_factory=TokenCache, repr=False)
    default_team: str | None = None
    session_token: str | None = field(default=None, repr=False)
    _owns_session: bool = field(default=False, repr=False)

    async def __aenter__(self) -> CairnClient:
        if self.session is None:
            self.session = aiohttp.ClientSession()
            self._owns_session = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.session is not None and self._owns_session:
            await self.session.close()
            self.session = None

    # --- plumbing ------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        auth: bool = True,
        headers: dict[str, str] | None = None,
        team: UUID | str | None = None,
        data: bytes | None = None,
        idempotent: bool = False,
    ) -> Any:
        """The JSON body of a 2xx answer; `ApiError` otherwise. A 401 renews the token once.

        `idempotent`: a create or a decision. It carries an `Idempotency-Key` (a fresh one unless
        `headers` bring one), so that a resend after a dropped connection, a timeout or a
        passing refusal (502/503/504), which reuses the key, is answered with the first
        response instead of writing twice."""
        if idempotent:
            headers = {IDEMPOTENCY_HEADER: uuid.uuid4().hex, **(headers or {})}
        async with self._send(
            method, path, json=json, params=params, auth=auth, headers=headers, team=team, data=data
        ) as response:
            if response.content_length == 0:
                return {}
            return await response.json(content_type=None)

    async def download(
        self, path: str, *, team: UUID | str | None = None, params: Mapping[str, Any] | None = None
    ) -> Download:
        async with self._send("GET", path, team=team, params=params) as response:
            return Download(
                content=await response.read(),
                content_type=response.content_type,
                headers={k.lower(): v for k, v in response.headers.items()},
            )

    @contextlib.asynccontextmanager
    async def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        auth: bool = True,
        headers: dict[str, str] | None = None,
        team: UUID | str | None = None,
        data: bytes | None = None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        assert self.session is not None, "use the client as an async context manager"
        query = _query(params) if params else None
        resendable = method in SAFE_TO_RESEND or IDEMPOTENCY_HEADER in (headers or {})
        renewed = answered = False
        for attempt in range(RESENDS + 1):
            sent = dict(headers or {})  # the same Idempotency-Key on every resend
            addressed = team if team is not None else self.default_team
            if addressed is not None:
                sent[TEAM_HEADER] = str(addressed)
            propagate.inject(sent)  # the caller's trace goes on into the API (W3C traceparent)
            if auth and self.session_token is not None:
                sent[SESSION_HEADER] = self.session_token
            elif auth:
                sent["Authorization"] = f"Bearer {await self.access_token(force=renewed)}"
            try:
                async with self.session.request(
                    method, self.base_url + path, json=json, params=query, headers=sent, data=data
                ) as response:
                    renewable = auth and self.credentials is not None and self.bearer is None
                    if response.status == 401 and renewable and not renewed and attempt < RESENDS:
                        renewed = True
                        continue
                    passing = response.status in PASSING_STATUSES and resendable
                    if passing and attempt < RESENDS:
                        await asyncio.sleep(_resend_wait(attempt, response))
                        continue
                    if response.status >= 400:
                        body = (
                            await response.json(content_type=None)
                            if response.content_length
                            else {}
                        )
                        raise ApiError(response.status, body if isinstance(body, dict) else {})
                    answered = True
                    yield response
                    return
            except (aiohttp.ClientConnectionError, TimeoutError):
                # the request may have been carried out: resend only what says it is safe to
                # (and never once the caller has started reading an answer)
                if answered or not resendable or attempt == RESENDS:
                    raise
                await asyncio.sleep(_resend_wait(attempt, None))
        raise AssertionError("unreachable")

    async def upload(
        self,
        path: str,
        data: Any,
        *,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """PUT raw bytes (a file object is streamed, never read whole) as octet-stream."""
        sent = {
            **(headers or {}),
            "Content-Type": "application/octet-stream",
            "Authorization": f"Bearer {await self.access_token()}",
        }
        if self.default_team is not None:
            sent.setdefault(TEAM_HEADER, self.default_team)
        assert self.session is not None, "use the client as an async context manager"
        async with self.session.put(
            self.base_url + path, data=data, params=params, headers=sent
        ) as response:
            body = await response.json(content_type=None) if response.content_length != 0 else {}
            if response.status >= 400:
                raise ApiError(response.status, body if isinstance(body, dict) else {})
            return body

    async def access_token(self, *, force: bool = False) -> str:
        if self.bearer is not None:
            return self.bearer
        if self.credentials is None:
            raise ValueError("no client credentials")
        assert self.session is not None
        return await self.tokens.token(
            self.session, self.base_url, self.credentials, scope=self.scope, renew=force
        )

    async def fetch_token(self) -> TokenResponse:
        if self.credentials is None:
            raise ValueError("no client credentials")
        assert self.session is not None
        return await self.tokens.exchange(self.session, self.base_url, self.credentials, self.scope)

    # --- identity ------------------------------------------------------------------------

    async def register(self, public_key: str, voucher_code: str) -> RegisterResponse:
        body = await self.request(
            "POST",
            "/auth/register",
            json={"public_key": public_key, "voucher_code": voucher_code},
            auth=False,
        )
        registered = RegisterResponse.model_validate(body)
        self.credentials = ClientCredentials(registered.clientId, registered.clientSecret)
        return registered

    async def whoami(self) -> Whoami:
        return Whoami.model_validate(await self.request("GET", "/agents/whoami"))

    # --- humans --------------------------------------------------------------------------

    async def register_human(
        self, email: str, password: str, display_name: str | None = None
    ) -> HumanIdentity:
        body: dict[str, Any] = {"email": email, "password": password}
        if display_name is not None:
            body["displayName"] = display_name
        return HumanIdentity.model_validate(
            await self.request("POST", "/self-service/registration", json=body, auth=False)
        )

    async def login_human(self, email: str, password: str) -> HumanSession:
        """Open a session; later calls of this client act as the human."""
        session = HumanSession.model_validate(
            await self.request(
                "POST",
                "/self-service/login",
                json={"email": email, "password": password},
                auth=False,
            )
        )
        self.session_token = session.sessionToken
        return session

    async def profile(self) -> HumanProfile:
        return HumanProfile.model_validate(await self.request("GET", "/self-service/profile"))

    async def update_profile(self, display_name: str | None) -> HumanProfile:
        """Set the human's display name (None clears it)."""
        return HumanProfile.model_validate(
            await self.request("PATCH", "/self-service/profile", json={"displayName": display_name})
        )

    async def agent(self, fingerprint: str) -> AgentProfile:
        return AgentProfile.model_validate(
            await self.request("GET", f"/agents/{fingerprint}", auth=False)
        )

    async def vouch(self) -> Voucher:
        return Voucher.model_validate(await self.request("POST", "/vouch", idempotent=True))

    async def active_vouchers(self) -> VoucherList:
        return VoucherList.model_validate(await self.request("GET", "/vouch/active"))

    async def recovery_challenge(self, public_key: str) -> RecoveryChallenge:
        body = await self.request(
            "POST", "/recovery/challenge", json={"publicKey": public_key}, auth=False
        )
        return RecoveryChallenge.model_validate(body)

    async def recovery_verify(
        self, challenge: RecoveryChallenge, signature: str, public_key: str
    ) -> RecoveryVerified:
        body = await self.request(
            "POST",
            "/recovery/verify",
            json={
                "challenge": challenge.challenge,
                "hmac": challenge.hmac,
                "signature": signature,
                "publicKey": public_key,
            },
            auth=False,
        )
        return RecoveryVerified.model_validate(body)

    async def recovery_complete(self, flow_url: str, code: str) -> RecoveryCompleted:
        assert self.session is not None
        async with self.session.post(flow_url, json={"method": "code", "code": code}) as response:
            body = await response.json(content_type=None)
            if response.status != 200:
                raise ApiError(response.status, body)
        completed = RecoveryCompleted.model_validate(body)
        self.credentials = ClientCredentials(completed.clientId, completed.clientSecret)
        return completed

    # --- diaries and grants --------------------------------------------------------------

    async def list_diaries(self, *, team_id: UUID | None = None) -> DiaryList:
        """Every diary the caller reads, or those of one team."""
        return DiaryList.model_validate(await self.request("GET", "/diaries", team=team_id))

    async def create_diary(self, team_id: UUID, body: DiaryCreateRequest) -> Diary:
        created = await self.request(
            "POST", "/diaries", json=_json(body), team=team_id, idempotent=True
        )
        return Diary.model_validate(created)

    async def get_diary(self, diary_id: UUID) -> Diary:
        return Diary.model_validate(await self.request("GET", f"/diaries/{diary_id}"))

    async def export_diary(self, diary_id: UUID) -> bytes:
        """The diary as a CAR file; `schemas.kernel.diary_car.read_archive` checks it offline
        (every CID and signature) and returns its entries."""
        return (await self.download(f"/diaries/{diary_id}/export")).content

    async def import_diary(
        self,
        team_id: UUID,
        archive: bytes,
        *,
        name: str | None = None,
        content_type: str = CAR_MEDIA_TYPE,
    ) -> Diary:
        """A new diary in the team from a file of `export_diary` (its entries keep their CIDs),
        or from a Mem0, Letta or COGX export (docs/imports.md; `application/octet-stream`
        lets the server tell which)."""
        body = await self.request(
            "POST",
            "/diaries/import",
            params={"name": name},
            team=team_id,
            data=archive,
            headers={"Content-Type": content_type},
        )
        return Diary.model_validate(body)

    async def diary_tags(
        self,
        diary_id: UUID,
        *,
        prefix: str | None = None,
        min_count: int = 1,
        entry_type: str | None = None,
    ) -> TagHistogram:
        params = {"prefix": prefix, "minCount": min_count, "entryType": entry_type}
        body = await self.request("GET", f"/diaries/{diary_id}/tags", params=params)
        return TagHistogram.model_validate(body)

    async def diary_hygiene(self, diary_id: UUID) -> HygieneReport:
        """How clean the diary is (`GET /diaries/{id}/hygiene`)."""
        return HygieneReport.model_validate(
            await self.request("GET", f"/diaries/{diary_id}/hygiene")
        )

    async def create_grant(self, diary_id: UUID, body: GrantRequest) -> Grant:
        created = await self.request(
            "POST", f"/diaries/{diary_id}/grants", json=_json(body), idempotent=True
        )
        return Grant.model_validate(created)

    async def list_grants(self, diary_id: UUID) -> GrantList:
        return GrantList.model_validate(await self.request("GET", f"/diaries/{diary_id}/grants"))

    async def revoke_grant(self, diary_id: UUID, body: GrantRequest) -> Done:
        revoked = await self.request("DELETE", f"/diaries/{diary_id}/grants", json=_json(body))
        return Done.model_validate(revoked)

    # --- entries, search, relations ------------------------------------------------------

    async def create_entry(self, diary_id: UUID, body: EntryCreateRequest) -> Entry:
        created = await self.request(
            "POST", f"/diaries/{diary_id}/entries", json=_json(body), idempotent=True
        )
        return Entry.model_validate(created)

    async def get_entry(self, entry_id: UUID) -> Entry:
        return Entry.model_validate(await self.request("GET", f"/entries/{entry_id}"))

    async def list_entries(
        self,
        diary_id: UUID,
        *,
        limit: int = 20,
        offset: int = 0,
        tags: list[str] | None = None,
        exclude_tags: list[str] | None = None,
        entry_type: str | None = None,
        as_of: datetime | None = None,
    ) -> EntryList:
        params = {
            "limit": limit,
            "offset": offset,
            "tags": tags,
            "excludeTags": exclude_tags,
            "entryType": entry_type,
            "asOf": as_of,
        }
        body = await self.request("GET", f"/diaries/{diary_id}/entries", params=params)
        return EntryList.model_validate(body)

    async def update_entry(self, entry_id: UUID, body: EntryUpdateRequest) -> Entry:
        updated = await self.request("PATCH", f"/entries/{entry_id}", json=_json(body))
        return Entry.model_validate(updated)

    async def delete_entry(self, entry_id: UUID) -> Done:
        return Done.model_validate(await self.request("DELETE", f"/entries/{entry_id}"))

    async def entry_map_json(self, diary_id: UUID) -> dict[str, Any]:
        """The diary map (`EntryMap`) as the API sent it: 10 000 entries are not worth
        validating twice on their way through the tool server."""
        body: dict[str, Any] = await self.request("GET", f"/diaries/{diary_id}/map")
        return body

    async def search(self, body: SearchRequest) -> SearchResponse:
        return SearchResponse.model_validate(await self.search_json(body))

    async def search_json(self, body: SearchRequest) -> dict[str, Any]:
        """The `SearchResponse` JSON as the API sent it, unparsed (for a proxy that forwards it)."""
        found: dict[str, Any] = await self.request("POST", "/diary/search", json=_json(body))
        return found

    async def create_relation(self, entry_id: UUID, body: RelationCreateRequest) -> Relation:
        created = await self.request(
            "POST", f"/entries/{entry_id}/relations", json=_json(body), idempotent=True
        )
        return Relation.model_validate(created)

    async def list_relations(
        self,
        entry_id: UUID,
        *,
        relation: str | None = None,
        status: str | None = None,
        direction: str = "both",
        limit: int = 50,
        offset: int = 0,
    ) -> RelationList:
        params = {
            "relation": relation,
            "status": status,
            "direction": direction,
            "limit": limit,
            "offset": offset,
        }
        body = await self.request("GET", f"/entries/{entry_id}/relations", params=params)
        return RelationList.model_validate(body)

    async def update_relation(self, relation_id: UUID, body: RelationUpdateRequest) -> Relation:
        updated = await self.request("PATCH", f"/relations/{relation_id}", json=_json(body))
        return Relation.model_validate(updated)

    async def delete_relation(self, relation_id: UUID) -> None:
        await self.request("DELETE", f"/relations/{relation_id}")

    # --- teams ---------------------------------------------------------------------------

    async def list_teams(self) -> TeamList:
        return TeamList.model_validate(await self.request("GET", "/teams"))

    async def create_team(self, body: CreateTeamRequest) -> Team:
        return Team.model_validate(
            await self.request("POST", "/teams", json=_json(body), idempotent=True)
        )

    async def delete_team(self, team_id: UUID) -> Deleted:
        return Deleted.model_validate(await self.request("DELETE", f"/teams/{team_id}"))

    async def join_team(self, code: str) -> Joined:
        return Joined.model_validate(
            await self.request("POST", "/teams/join", json={"code": code}, idempotent=True)
        )

    async def list_members(self, team_id: UUID) -> MemberList:
        return MemberList.model_validate(await self.request("GET", f"/teams/{team_id}/members"))

    async def update_member_role(self, team_id: UUID, subject_id: UUID, role: str) -> TeamMember:
        path = f"/teams/{team_id}/members/{subject_id}"
        return TeamMember.model_validate(await self.request("PATCH", path, json={"role": role}))

    async def remove_member(self, team_id: UUID, subject_id: UUID) -> Deleted:
        path = f"/teams/{team_id}/members/{subject_id}"
        return Deleted.model_validate(await self.request("DELETE", path))

    async def create_invite(self, team_id: UUID, body: CreateInviteRequest) -> Invite:
        created = await self.request(
            "POST", f"/teams/{team_id}/invites", json=_json(body), idempotent=True
        )
        return Invite.model_validate(created)

    async def list_invites(self, team_id: UUID) -> InviteList:
        return InviteList.model_validate(await self.request("GET", f"/teams/{team_id}/invites"))

    async def delete_invite(self, team_id: UUID, invite_id: UUID) -> Deleted:
        path = f"/teams/{team_id}/invites/{invite_id}"
        return Deleted.model_validate(await self.request("DELETE", path))

    # --- signing -------------------------------------------------------------------------

    async def create_signing_request(self, message: str) -> SigningRequestView:
        body = await self.request(
            "POST", "/crypto/signing-requests", json={"message": message}, idempotent=True
        )
        return SigningRequestView.model_validate(body)

    async def get_signing_request(self, request_id: UUID) -> SigningRequestView:
        body = await self.request("GET", f"/crypto/signing-requests/{request_id}")
        return SigningRequestView.model_validate(body)

    async def submit_signature(self, request_id: UUID, signature: str) -> SignOutcome:
        path = f"/crypto/signing-requests/{request_id}/sign"
        return SignOutcome.model_validate(
            await self.request("POST", path, json={"signature": signature})
        )

    async def verify_signature(self, body: VerifyRequest) -> VerifyResult:
        verified = await self.request("POST", "/crypto/verify", json=_json(body))
        return VerifyResult.model_validate(verified)

    # --- tasks ---------------------------------------------------------------------------

    async def task_schemas(self) -> TaskSchemaList:
        return TaskSchemaList.model_validate(await self.request("GET", "/tasks/schemas"))

    async def create_task(
        self, body: CreateTaskRequest, *, idempotency_key: str | None = None
    ) -> Task:
        headers = {IDEMPOTENCY_HEADER: idempotency_key} if idempotency_key else None
        created = await self.request(
            "POST", "/tasks", json=_json(body), team=body.teamId, headers=headers, idempotent=True
        )
        return Task.model_validate(created)

    async def get_task(self, task_id: UUID, *, team_id: UUID | None = None) -> Task:
        return Task.model_validate(await self.request("GET", f"/tasks/{task_id}", team=team_id))

    async def list_tasks(self, team_id: UUID, **filters: Any) -> TaskList:
        """`filters` are the query names of `GET /tasks` (`status`, `taskType`, `cursor`...)."""
        body = await self.request("GET", "/tasks", params=filters, team=team_id)
        return TaskList.model_validate(body)

    async def task_counts(self, team_id: UUID, **filters: Any) -> TaskCounts:
        """`filters`: `taskType`, `projectId` (an id or `none`)."""
        body = await self.request("GET", "/task-counts", params=filters, team=team_id)
        return TaskCounts.model_validate(body)

    async def cancel_task(self, task_id: UUID, team_id: UUID, reason: str) -> Task:
        path = f"/tasks/{task_id}/cancel"
        body = await self.request(
            "POST", path, json={"reason": reason}, team=team_id, idempotent=True
        )
        return Task.model_validate(body)

    async def list_attempts(self, task_id: UUID, *, team_id: UUID | None = None) -> TaskAttemptList:
        body = await self.request("GET", f"/tasks/{task_id}/attempts", team=team_id)
        return TaskAttemptList.model_validate(body)

    async def list_messages(
        self,
        task_id: UUID,
        attempt_n: int,
        *,
        team_id: UUID | None = None,
        after_seq: int = 0,
        limit: int = 200,
    ) -> TaskMessageList:
        path = f"/tasks/{task_id}/attempts/{attempt_n}/messages"
        params = {"afterSeq": after_seq, "limit": limit}
        body = await self.request("GET", path, params=params, team=team_id)
        return TaskMessageList.model_validate(body)

    async def stage_artifact(
        self,
        team_id: UUID,
        content: bytes,
        *,
        content_type: str | None = None,
        content_encoding: str | None = None,
    ) -> StagedArtifact:
        params = {"contentType": content_type, "contentEncoding": content_encoding}
        body = await self.request(
            "PUT",
            "/task-artifacts/staged",
            params=params,
            team=team_id,
            data=content,
            headers={"Content-Type": "application/octet-stream"},
        )
        return StagedArtifact.model_validate(body)

    async def upload_artifact(
        self,
        task_id: UUID,
        attempt_n: int,
        team_id: UUID,
        content: bytes,
        *,
        kind: str,
        title: str,
        content_type: str | None = None,
        content_encoding: str | None = None,
    ) -> TaskArtifact:
        params = {
            "kind": kind,
            "title": title,
            "contentType": content_type,
            "contentEncoding": content_encoding,
        }
        body = await self.request(
            "PUT",
            f"/tasks/{task_id}/attempts/{attempt_n}/artifacts",
            params=params,
            team=team_id,
            data=content,
            headers={"Content-Type": "application/octet-stream"},
        )
        return TaskArtifact.model_validate(body)

    async def list_artifacts(
        self, task_id: UUID, team_id: UUID, *, limit: int = 50, cursor: str | None = None
    ) -> TaskArtifactList:
        params = {"limit": limit, "cursor": cursor}
        body = await self.request("GET", f"/tasks/{task_id}/artifacts", params=params, team=team_id)
        return TaskArtifactList.model_validate(body)

    async def download_artifact(
        self, task_id: UUID, team_id: UUID, cid: str, *, attempt_n: int | None = None
    ) -> Download:
        if attempt_n is None:
            return await self.download(f"/tasks/{task_id}/artifacts/{cid}/content", team=team_id)
        path = f"/tasks/{task_id}/attempts/{attempt_n}/artifacts/{cid}/content"
        return await self.download(path, team=team_id)

    # --- context packs -------------------------------------------------------------------

    async def get_pack(self, pack_id: UUID, *, entries: bool = False) -> ContextPack:
        params = {"expand": "entries" if entries else None}
        return ContextPack.model_validate(
            await self.request("GET", f"/packs/{pack_id}", params=params)
        )

    async def list_diary_packs(
        self, diary_id: UUID, *, limit: int = 20, offset: int = 0, entries: bool = False
    ) -> PackList:
        params = {"limit": limit, "offset": offset, "expand": "entries" if entries else None}
        body = await self.request("GET", f"/diaries/{diary_id}/packs", params=params)
        return PackList.model_validate(body)

    async def list_team_packs(
        self,
        team_id: UUID,
        *,
        limit: int = 20,
        offset: int = 0,
        contains_entry: UUID | None = None,
        include_rendered: bool = False,
        entries: bool = False,
    ) -> PackList:
        params = {
            "limit": limit,
            "offset": offset,
            "containsEntry": contains_entry,
            "includeRendered": include_rendered,
            "expand": "entries" if entries else None,
        }
        body = await self.request("GET", "/packs", params=params, team=team_id)
        return PackList.model_validate(body)

    async def preview_pack(self, diary_id: UUID, body: PackCreateRequest) -> PackCompiled:
        compiled = await self.request(
            "POST", f"/diaries/{diary_id}/packs/preview", json=_json(body)
        )
        return PackCompiled.model_validate(compiled)

    async def create_pack(self, diary_id: UUID, body: PackCreateRequest) -> PackCompiled:
        """201 for a new pack, 200 with `created: false` for a selection already packed."""
        created = await self.request(
            "POST", f"/diaries/{diary_id}/packs", json=_json(body), idempotent=True
        )
        return PackCompiled.model_validate(created)

    async def update_pack(self, pack_id: UUID, body: PackUpdateRequest) -> ContextPack:
        # `exclude_unset`, not `exclude_none`: `expiresAt: null` is a choice the API reads
        payload = body.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return ContextPack.model_validate(
            await self.request("PATCH", f"/packs/{pack_id}", json=payload)
        )

    async def pack_provenance(self, pack_id: UUID, *, depth: int | None = None) -> ProvenanceGraph:
        body = await self.request("GET", f"/packs/{pack_id}/provenance", params={"depth": depth})
        return ProvenanceGraph.model_validate(body)

    async def diff_packs(self, pack_id: UUID, other_id: UUID) -> PackDiff:
        return PackDiff.model_validate(
            await self.request("GET", f"/packs/{pack_id}/diff/{other_id}")
        )

    async def preview_render(self, pack_id: UUID, body: RenderRequest) -> RenderedPack:
        made = await self.request("POST", f"/packs/{pack_id}/render/preview", json=_json(body))
        return RenderedPack.model_validate(made)

    async def render_pack(self, pack_id: UUID, body: RenderRequest) -> RenderedPack:
        made = await self.request(
            "POST", f"/packs/{pack_id}/render", json=_json(body), idempotent=True
        )
        return RenderedPack.model_validate(made)

    async def get_rendered_pack(self, rendered_id: UUID) -> RenderedPack:
        return RenderedPack.model_validate(
            await self.request("GET", f"/rendered-packs/{rendered_id}")
        )

    async def latest_rendered_pack(self, pack_id: UUID) -> RenderedPack:
        return RenderedPack.model_validate(await self.request("GET", f"/packs/{pack_id}/rendered"))

    async def list_rendered_packs(
        self,
        diary_id: UUID,
        *,
        limit: int = 20,
        offset: int = 0,
        source_pack_id: UUID | None = None,
        render_method: str | None = None,
    ) -> RenderedPackList:
        params = {
            "limit": limit,
            "offset": offset,
            "sourcePackId": source_pack_id,
            "renderMethod": render_method,
        }
        body = await self.request("GET", f"/diaries/{diary_id}/rendered-packs", params=params)
        return RenderedPackList.model_validate(body)

    async def update_rendered_pack(
        self, rendered_id: UUID, body: RenderedPackUpdateRequest
    ) -> RenderedPack:
        payload = body.model_dump(mode="json", by_alias=True, exclude_unset=True)
        updated = await self.request("PATCH", f"/rendered-packs/{rendered_id}", json=payload)
        return RenderedPack.model_validate(updated)


def _json(body: BaseModel) -> Any:
    """A request model as the API reads it: camelCase aliases, no unset optional fields."""
    return body.model_dump(mode="json", by_alias=True, exclude_none=True)


def _query(params: Mapping[str, Any]) -> dict[str, str]:
    """Query values as the API reads them: no None, booleans lower-case, lists comma-joined."""
    query: dict[str, str] = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            query[name] = "true" if value else "false"
        elif isinstance(value, datetime):
            query[name] = value.isoformat()
        elif isinstance(value, list | tuple):
            query[name] = ",".join(str(v) for v in value)
        else:
            query[name] = str(value)
    return query


def _resend_wait(attempt: int, refusal: aiohttp.ClientResponse | None) -> float:
    """How long to wait before resend number `attempt + 1`: the refusal's Retry-After (in
    seconds; capped), else a wait that doubles each time."""
    backoff: float = RESEND_BACKOFF_SEC * 2**attempt
    asked = refusal.headers.get("Retry-After", "") if refusal is not None else ""
    if asked.isdigit():
        return min(float(asked), RESEND_MAX_WAIT_SEC)
    return backoff
