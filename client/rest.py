"""The agent side of the REST API: a typed async client.

Tokens are cached with their expiry, re-requested under five minutes before it, and on a 401
the client fetches a new token and retries once (spec section 5). Errors come back as
`ApiError` carrying the RFC 9457 problem body.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from schemas.identity import (
    AgentProfile,
    RecoveryChallenge,
    RecoveryCompleted,
    RecoveryVerified,
    RegisterResponse,
    TokenResponse,
    Voucher,
    VoucherList,
    Whoami,
)

REFRESH_MARGIN_SEC = 300


class ApiError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status} {body.get('code') or body.get('error')}: {body.get('detail')}")
        self.status = status
        self.body = body

    @property
    def code(self) -> str | None:
        value = self.body.get("code") or self.body.get("error")
        return str(value) if value is not None else None


@dataclass
class ClientCredentials:
    client_id: str
    client_secret: str


@dataclass
class CairnClient:
    """One agent's view of the API. Use as `async with CairnClient(base_url) as api:`."""

    base_url: str
    credentials: ClientCredentials | None = None
    # An agent key (spec 5.4) is sent as it is: never exchanged, never refreshed, so a 401 on it
    # is final (a revoked or rotated key does not come back by retrying).
    agent_key: str | None = field(default=None, repr=False)
    scope: str | None = None
    session: aiohttp.ClientSession | None = None
    _token: str | None = field(default=None, repr=False)
    _token_expires: float = 0.0

    async def __aenter__(self) -> CairnClient:
        self.session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.session is not None:
            await self.session.close()

    # --- plumbing ------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, str] | None = None,
        auth: bool = True,
        headers: dict[str, str] | None = None,
    ) -> Any:
        for attempt in range(2):
            sent = dict(headers or {})
            if auth:
                sent["Authorization"] = f"Bearer {await self.access_token(force=attempt > 0)}"
            assert self.session is not None, "use the client as an async context manager"
            async with self.session.request(
                method, self.base_url + path, json=json, params=params, headers=sent
            ) as response:
                body = (
                    await response.json(content_type=None) if response.content_length != 0 else {}
                )
                retry = self.credentials is not None and self.agent_key is None
                if response.status == 401 and auth and attempt == 0 and retry:
                    continue
                if response.status >= 400:
                    raise ApiError(response.status, body if isinstance(body, dict) else {})
                return body
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
        assert self.session is not None, "use the client as an async context manager"
        async with self.session.put(
            self.base_url + path, data=data, params=params, headers=sent
        ) as response:
            body = await response.json(content_type=None) if response.content_length != 0 else {}
            if response.status >= 400:
                raise ApiError(response.status, body if isinstance(body, dict) else {})
            return body

    async def access_token(self, *, force: bool = False) -> str:
        if self.agent_key is not None:
            return self.agent_key
        if not force and self._token and time.time() < self._token_expires - REFRESH_MARGIN_SEC:
            return self._token
        token = await self.fetch_token()
        self._token = token.access_token
        self._token_expires = time.time() + token.expires_in
        return self._token

    async def fetch_token(self) -> TokenResponse:
        if self.credentials is None:
            raise ValueError("no client credentials")
        basic = base64.b64encode(
            f"{self.credentials.client_id}:{self.credentials.client_secret}".encode()
        ).decode()
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        assert self.session is not None
        async with self.session.post(
            self.base_url + "/oauth2/token", data=form, headers={"Authorization": f"Basic {basic}"}
        ) as response:
            body = await response.json(content_type=None)
            if response.status != 200:
                raise ApiError(response.status, body)
            return TokenResponse.model_validate(body)

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
        self._token = None
        return registered

    async def whoami(self) -> Whoami:
        return Whoami.model_validate(await self.request("GET", "/agents/whoami"))

    async def agent(self, fingerprint: str) -> AgentProfile:
        return AgentProfile.model_validate(
            await self.request("GET", f"/agents/{fingerprint}", auth=False)
        )

    async def vouch(self) -> Voucher:
        return Voucher.model_validate(await self.request("POST", "/vouch"))

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
        self._token = None
        return completed
