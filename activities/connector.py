"""Side effects of the browser OAuth connector: one repository unit of work per activity."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from schemas.connector import (
    ClientRegister,
    CodeExchange,
    CodeIssue,
    GrantIssued,
    GrantRef,
    RefreshRotate,
)
from schemas.errors import ConnectorGrantInvalid

if TYPE_CHECKING:
    from infra.repos.connector import ConnectorRepo, Granted


def _issued(granted: Granted, detail: str) -> GrantIssued:
    if granted.refused is not None or granted.grant_id is None:
        raise ConnectorGrantInvalid(detail)
    assert granted.identity_id is not None and granted.human_id is not None
    return GrantIssued(
        grant_id=granted.grant_id,
        identity_id=granted.identity_id,
        human_id=granted.human_id,
        scopes=list(granted.scopes),
        resource=granted.resource,
    )


class ConnectorActivities:
    def __init__(self, repo: ConnectorRepo) -> None:
        self._repo = repo

    @activity.defn(name="connector.register_client")
    async def register_client(self, inp: ClientRegister) -> None:
        await self._repo.register_client(
            inp.client_id, inp.secret_hash, inp.client_name, inp.redirect_uris, inp.metadata
        )

    @activity.defn(name="connector.issue_code")
    async def issue_code(self, inp: CodeIssue) -> None:
        await self._repo.issue_code(inp.code_hash, inp.model_dump(exclude={"code_hash"}))

    @activity.defn(name="connector.redeem_code")
    async def redeem_code(self, inp: CodeExchange) -> GrantIssued:
        granted = await self._repo.redeem_code(
            inp.code_hash, inp.client_id, inp.grant_id, inp.refresh_hash, inp.refresh_expires_at
        )
        return _issued(granted, "The authorization code is unknown, used, expired or another's")

    @activity.defn(name="connector.rotate_refresh")
    async def rotate_refresh(self, inp: RefreshRotate) -> GrantIssued:
        granted = await self._repo.rotate_refresh(
            inp.grant_id, inp.client_id, inp.old_hash, inp.new_hash, inp.refresh_expires_at
        )
        return _issued(granted, "The refresh token is unknown, rotated, expired or revoked")

    @activity.defn(name="connector.revoke_grant")
    async def revoke_grant(self, inp: GrantRef) -> None:
        await self._repo.revoke_grant(inp.grant_id)
