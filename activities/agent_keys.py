"""Side effects of the agent-key workflows: the `agent_keys` row created, its secret hash
swapped, revoked or marked expired. One repository call each, idempotent under retry; a refusal
is a DomainError that the API answers with. Payloads carry the secret's keyed hash, never the
secret."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from schemas.agent_keys import (
    AgentKeyCreate,
    AgentKeyExpire,
    AgentKeyExpired,
    AgentKeyRevoke,
    AgentKeyRotate,
    AgentKeyRow,
)
from schemas.errors import AgentKeyNotActive, AgentKeyNotFound

if TYPE_CHECKING:
    from infra.repos.agent_keys import AgentKeyRepo


class AgentKeyActivities:
    def __init__(self, repo: AgentKeyRepo) -> None:
        self._repo = repo

    @activity.defn(name="agent_keys.insert")
    async def insert(self, inp: AgentKeyCreate) -> AgentKeyRow:
        return await self._repo.insert(inp)

    @activity.defn(name="agent_keys.rotate")
    async def rotate(self, inp: AgentKeyRotate) -> AgentKeyRow:
        rotated = await self._repo.rotate(inp.key_id, inp.secret_hash)
        if rotated is None:
            raise AgentKeyNotActive("Only an active key can be rotated")
        return rotated

    @activity.defn(name="agent_keys.revoke")
    async def revoke(self, inp: AgentKeyRevoke) -> AgentKeyRow:
        revoked = await self._repo.revoke(inp.key_id, inp.reason, inp.description)
        if revoked is None:
            raise AgentKeyNotFound()
        return revoked

    @activity.defn(name="agent_keys.expire")
    async def expire(self, inp: AgentKeyExpire) -> AgentKeyExpired:
        expired = await self._repo.expire(inp.key_id, inp.expires_at)
        return AgentKeyExpired(key_id=inp.key_id, expired=expired)
