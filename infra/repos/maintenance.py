"""Writes of the maintenance workflows (SPEC 6): purges of expired rows, and the settling of
tasks whose workflow no longer runs.

Each method is one transaction. A purge deletes at most `limit` rows that expired before
`before` and returns how many, so a run is bounded and the next run takes the rest; deleting
what is already gone is a no-op, so a retry is harmless.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final
from uuid import UUID

import asyncpg

from infra import permissions as tuples
from infra.db import Q
from infra.repos.tasks import claimant_tuple
from schemas.maintenance import StaleTaskPage
from schemas.tasks import TERMINAL_TASK_STATUSES

WORKFLOW_GONE_CODE: Final = "task-workflow-gone"


class MaintenanceRepo:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def purge_signing_requests(self, before: datetime, limit: int) -> int:
        """Signing requests not completed whose expiry is before `before`."""
        return int(await self._pool.fetchval(Q.maintenance_purge_signing_requests, before, limit))

    async def purge_recovery_nonces(self, before: datetime, limit: int) -> int:
        """Used recovery nonces whose expiry is before `before`."""
        return int(await self._pool.fetchval(Q.maintenance_purge_recovery_nonces, before, limit))

    async def purge_vouchers(self, before: datetime, limit: int) -> int:
        """Unredeemed vouchers whose expiry is before `before`."""
        return int(await self._pool.fetchval(Q.maintenance_purge_vouchers, before, limit))

    async def purge_connector_codes(self, before: datetime, limit: int) -> int:
        """The browser OAuth connector's authorization codes (used or not) expired before
        `before`."""
        return int(await self._pool.fetchval(Q.maintenance_purge_connector_codes, before, limit))

    async def purge_connector_grants(self, before: datetime, limit: int) -> int:
        """The connector's grants revoked, or whose refresh token expired, before `before`."""
        return int(await self._pool.fetchval(Q.maintenance_purge_connector_grants, before, limit))

    async def nonterminal_tasks(self, page: StaleTaskPage) -> list[tuple[UUID, str]]:
        """`(task id, workflow id)` of one page of tasks not in a terminal status, last written
        before `page.before`."""
        rows = await self._pool.fetch(
            Q.maintenance_nonterminal_tasks, page.after, page.limit, page.before
        )
        return [(row["id"], row["workflow_id"]) for row in rows]

    async def settle_task(self, task_id: UUID, workflow_status: str) -> str | None:
        """Settle a task whose workflow no longer runs; the status given, or None when the row
        is gone or terminal already (its workflow's last projection landed after the scan).

        A queued task past its `expires_at` becomes `expired` (what its workflow would have
        done); any other becomes `failed`. The attempt in flight becomes `failed` with an error
        naming the cause, the claim is cleared and the claimant tuple deleted, as when an
        attempt ends in the workflow.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(Q.maintenance_lock_task, task_id)
            if row is None or row["status"] in TERMINAL_TASK_STATUSES:
                return None
            status = "expired" if row["status"] == "queued" and row["past_expiry"] else "failed"
            await conn.execute(Q.maintenance_settle_task, task_id, status)
            claimants = await conn.fetch(
                Q.maintenance_settle_attempts, task_id, _gone_error(workflow_status)
            )
            agents = {r["claimed_by_agent_id"] for r in claimants} | {row["claim_agent_id"]}
            await tuples.delete_tuples(
                conn, [claimant_tuple(task_id, agent) for agent in agents if agent is not None]
            )
            return status


def _gone_error(workflow_status: str) -> dict[str, Any]:
    return {
        "code": WORKFLOW_GONE_CODE,
        "message": f"The task's workflow no longer runs ({workflow_status}); "
        "settled by the maintenance reconciler",
    }
