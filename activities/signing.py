"""Side effects of the signing protocol: the `signing_requests` row, created, completed or
expired. One transaction per activity, idempotent under retry (the row id comes from the API,
and the updates only move a row out of `pending`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from schemas import limits
from schemas.errors import SigningRequestLimitReached
from schemas.signing import (
    SignatureRecord,
    SigningExpiry,
    SigningRowCreated,
    SigningRowInsert,
)

if TYPE_CHECKING:
    from infra.repos.signing import SigningRepo


class SigningActivities:
    def __init__(self, repo: SigningRepo) -> None:
        self._repo = repo

    @activity.defn(name="signing.insert_request")
    async def insert_request(self, inp: SigningRowInsert) -> SigningRowCreated:
        outcome = await self._repo.insert(
            inp.request_id,
            inp.agent_id,
            inp.message,
            inp.nonce,
            inp.workflow_id,
            inp.created_at,
            inp.expires_at,
            limits.SIGNING_MAX_PENDING_PER_AGENT,
        )
        if outcome.created_at is None or outcome.expires_at is None:
            raise SigningRequestLimitReached(
                f"At most {limits.SIGNING_MAX_PENDING_PER_AGENT} pending signing requests per "
                "agent; sign or let one expire first",
                extensions={"retryAfter": outcome.retry_after_sec},
            )
        return SigningRowCreated(created_at=outcome.created_at, expires_at=outcome.expires_at)

    @activity.defn(name="signing.record_signature")
    async def record_signature(self, inp: SignatureRecord) -> None:
        await self._repo.record_signature(inp.request_id, inp.signature, inp.valid)

    @activity.defn(name="signing.expire_request")
    async def expire_request(self, inp: SigningExpiry) -> None:
        await self._repo.expire(inp.request_id)
