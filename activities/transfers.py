"""Side effects of a diary transfer: the `diary_transfers` row, and on acceptance the move of
the diary with its team tuple. One transaction per activity, idempotent under retry; a refusal
is a `DomainError` (non-retryable, and the API answers with the same problem)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from schemas.transfers import TransferInsert, TransferRecord, TransferResolve

if TYPE_CHECKING:
    from infra.repos.transfers import TransferRepo


class TransferActivities:
    def __init__(self, repo: TransferRepo) -> None:
        self._repo = repo

    @activity.defn(name="transfers.insert_transfer")
    async def insert_transfer(self, inp: TransferInsert) -> TransferRecord:
        return await self._repo.insert(inp)

    @activity.defn(name="transfers.accept_transfer")
    async def accept_transfer(self, inp: TransferResolve) -> TransferRecord:
        record = await self._repo.accept(inp.transfer_id)
        activity.logger.info(
            "diary transferred",
            extra={"diary_id": str(record.diary_id), "team_id": str(record.destination_team_id)},
        )
        return record

    @activity.defn(name="transfers.reject_transfer")
    async def reject_transfer(self, inp: TransferResolve) -> TransferRecord:
        return await self._repo.reject(inp.transfer_id)

    @activity.defn(name="transfers.expire_transfer")
    async def expire_transfer(self, inp: TransferResolve) -> TransferRecord | None:
        return await self._repo.expire(inp.transfer_id)
