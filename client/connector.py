"""The MCP server's back channel to the REST API for the browser OAuth connector (spec 5.5):
typed calls under the connector secret. `ApiError` carries a refusal (404 unknown, 400
invalid grant, 401 invalid token or wrong connector secret)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from client.rest import CairnClient
from schemas.connector import (
    CONNECTOR_HEADER,
    ClientRegistration,
    CodeLookup,
    CodeRedeem,
    CodeView,
    ConnectorClient,
    ConnectorTokens,
    ExchangedToken,
    GrantRevoke,
    RefreshLookup,
    RefreshRedeem,
    RefreshView,
    TokenExchange,
)


@dataclass
class ConnectorApi:
    api: CairnClient
    secret: str = field(repr=False)

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        payload = None if body is None else body.model_dump(mode="json", exclude_none=True)
        return await self.api.request(
            method, path, json=payload, auth=False, headers={CONNECTOR_HEADER: self.secret}
        )

    async def register_client(self, body: ClientRegistration) -> ConnectorClient:
        return ConnectorClient.model_validate(
            await self._call("POST", "/oauth/connector/clients", body)
        )

    async def get_client(self, client_id: str) -> ConnectorClient:
        path = f"/oauth/connector/clients/{quote(client_id, safe='')}"
        return ConnectorClient.model_validate(await self._call("GET", path))

    async def lookup_code(self, code: str, client_id: str) -> CodeView:
        body = CodeLookup(code=code, clientId=client_id)
        return CodeView.model_validate(
            await self._call("POST", "/oauth/connector/codes/lookup", body)
        )

    async def redeem_code(self, code: str, client_id: str) -> ConnectorTokens:
        body = CodeRedeem(code=code, clientId=client_id)
        return ConnectorTokens.model_validate(
            await self._call("POST", "/oauth/connector/codes/redeem", body)
        )

    async def lookup_refresh(self, refresh_token: str, client_id: str) -> RefreshView:
        body = RefreshLookup(refreshToken=refresh_token, clientId=client_id)
        return RefreshView.model_validate(
            await self._call("POST", "/oauth/connector/refresh/lookup", body)
        )

    async def redeem_refresh(
        self, refresh_token: str, client_id: str, scopes: list[str] | None
    ) -> ConnectorTokens:
        body = RefreshRedeem(refreshToken=refresh_token, clientId=client_id, scopes=scopes)
        return ConnectorTokens.model_validate(
            await self._call("POST", "/oauth/connector/refresh/redeem", body)
        )

    async def exchange(self, token: str, resource: str) -> ExchangedToken:
        body = TokenExchange(token=token, resource=resource)
        return ExchangedToken.model_validate(
            await self._call("POST", "/oauth/connector/exchange", body)
        )

    async def revoke(self, grant_id: Any) -> None:
        await self._call("POST", "/oauth/connector/revoke", GrantRevoke(grantId=grant_id))
