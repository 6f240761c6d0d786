"""Payloads of the maintenance workflows (SPEC 6: expired rows purged, stale tasks settled on a
schedule). Each run returns a result that says what it did; Temporal keeps it in the run's
history, where an operator reads it in the UI."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import Field

from schemas import limits
from schemas.base import Payload


class PurgeInput(Payload):
    """One run of `ExpiredRowsPurge` (the schedule's arguments)."""

    batch_max: int = limits.MAINTENANCE_BATCH_MAX
    signing_retention_sec: int = limits.SIGNING_REQUEST_RETENTION_SEC
    expiry_margin_sec: int = limits.MAINTENANCE_EXPIRY_MARGIN_SEC
    connector_code_retention_sec: int = limits.CONNECTOR_CODE_RETENTION_SEC
    connector_grant_retention_sec: int = limits.CONNECTOR_GRANT_RETENTION_SEC


class Purge(Payload):
    """Delete at most `limit` rows that expired before `before`."""

    before: datetime
    limit: int


class PurgeCount(Payload):
    deleted: int


class PurgeResult(Payload):
    """What one purge run deleted, per kind of row (the connector's two counts are 0 in a run
    that started before the connector's purge was deployed)."""

    signing_requests_deleted: int
    recovery_nonces_deleted: int
    vouchers_deleted: int
    connector_codes_deleted: int = 0
    connector_grants_deleted: int = 0


class StaleTaskInput(Payload):
    """One run of `StaleTaskReconcile` (the schedule's arguments)."""

    page: int = limits.STALE_TASK_PAGE
    scan_max: int = limits.STALE_TASK_SCAN_MAX
    grace_sec: int = limits.STALE_TASK_GRACE_SEC


class StaleTaskPage(Payload):
    """Non-terminal tasks last written before `before`, with an id after `after` (keyset
    paging), at most `limit`."""

    before: datetime
    after: UUID | None = None
    limit: int


class StaleTask(Payload):
    """A non-terminal task row whose workflow does not run, and what Temporal said of it."""

    task_id: UUID
    workflow_id: str
    workflow_status: str  # `not_found`, or the run's status: `terminated`, `failed`, ...


class StaleTaskScan(Payload):
    """One page: how many rows it looked at, the last id, and the stale ones among them."""

    checked: int
    last_id: UUID | None = None
    stale: list[StaleTask] = Field(default_factory=list)


class SettledTask(Payload):
    """A stale task as the reconciler left it (None: it had reached a terminal status itself
    meanwhile, and was left alone)."""

    task_id: UUID
    status: str | None = None


class StaleTaskResult(Payload):
    """What one reconcile run did: rows looked at, stale ones found, and the tasks it settled
    (with the status each was given)."""

    checked: int
    stale: int
    settled: list[SettledTask] = Field(default_factory=list)
