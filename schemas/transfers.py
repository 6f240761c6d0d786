"""Models of diary transfers (SPEC 2.2 `diary_transfers`, 3.3, 6 `TRANSFER_DECISION_EVENT`).

An owner of the diary's team proposes to hand the diary to another team; an owner of that
destination team accepts or rejects within 7 days, or the transfer expires. Only an accepted
transfer moves the diary: `diaries.team_id` and the Diary `team` tuple change together.

HTTP bodies are camelCase and closed; workflow payloads tolerate unknown fields. The stored
row (`TransferRecord`) is the one shape every reader gets, and `view()` is its JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Literal
from uuid import UUID

from pydantic import Field

from schemas.base import Payload, RequestBody, ResponseBody
from schemas.errors import (
    DiaryTransferAlreadyResolved,
    DomainError,
)
from schemas.names import SubjectNames

TransferStatus = Literal["pending", "accepted", "rejected", "expired"]
Decision = Literal["accepted", "rejected"]

TRANSFER_DECISION_EVENT: Final = "TRANSFER_DECISION_EVENT"
"""The decision message of SPEC 6, an Update so that the caller gets the resolved record back
and a repeated or late decision is refused by its validator before anything is written."""
TRANSFER_STORED: Final = "diary.transfer.stored"
"""Update sent with the workflow start: answers once the pending row exists."""
TRANSFER_RECORD_QUERY: Final = "diary.transfer.record"


# --- HTTP -------------------------------------------------------------------------------------


class TransferCreateRequest(RequestBody):
    """`POST /diaries/{diaryId}/transfers`: the team that should own the diary."""

    destinationTeamId: UUID


class DiaryTransfersPath(RequestBody):
    diaryId: UUID


class WaitingTransfersQuery(RequestBody):
    """`GET /transfers`: only the transfers waiting for this team (any member may ask)."""

    teamId: UUID | None = None


class TransferPath(RequestBody):
    diaryId: UUID
    transferId: UUID


class Transfer(ResponseBody):
    """A diary transfer as clients see it."""

    id: UUID
    diaryId: UUID
    sourceTeamId: UUID
    destinationTeamId: UUID
    initiatedBy: UUID
    initiator: SubjectNames | None = Field(
        default=None, description="The names of `initiatedBy` (an agent or a human)"
    )
    diaryName: str | None = Field(default=None, description="The name of the diary that moves")
    sourceTeamName: str | None = Field(default=None, description="The name of the team it leaves")
    destinationTeamName: str | None = Field(
        default=None, description="The name of the team it goes to"
    )
    status: TransferStatus
    createdAt: datetime
    resolvedAt: datetime | None = None
    expiresAt: datetime


class TransferList(ResponseBody):
    items: list[Transfer]


# --- the stored row ---------------------------------------------------------------------------


class TransferRecord(Payload):
    """A row of `diary_transfers`, as every reader gets it and as activities return it."""

    id: UUID
    diary_id: UUID
    source_team_id: UUID
    destination_team_id: UUID
    initiated_by: UUID
    status: TransferStatus
    workflow_id: str
    created_at: datetime
    resolved_at: datetime | None = None
    expires_at: datetime
    # the initiator's names, where the read joined them (the writes' RETURNING does not)
    initiator_fingerprint: str | None = None
    initiator_email: str | None = None
    initiator_display_name: str | None = None
    # what moves where, by name, where the read joined them
    diary_name: str | None = None
    source_team_name: str | None = None
    destination_team_name: str | None = None

    def view(self) -> Transfer:
        return Transfer(
            id=self.id,
            diaryId=self.diary_id,
            sourceTeamId=self.source_team_id,
            destinationTeamId=self.destination_team_id,
            initiatedBy=self.initiated_by,
            initiator=self._initiator(),
            diaryName=self.diary_name,
            sourceTeamName=self.source_team_name,
            destinationTeamName=self.destination_team_name,
            status=self.status,
            createdAt=self.created_at,
            resolvedAt=self.resolved_at,
            expiresAt=self.expires_at,
        )

    def _initiator(self) -> SubjectNames | None:
        names = (self.initiator_fingerprint, self.initiator_email, self.initiator_display_name)
        if names == (None, None, None):
            return None
        return SubjectNames(
            fingerprint=self.initiator_fingerprint,
            email=self.initiator_email,
            displayName=self.initiator_display_name,
        )

    def effective_status(self, now: datetime) -> TransferStatus:
        """`expired` as soon as the deadline passed, even before the workflow wrote it."""
        if self.status == "pending" and now >= self.expires_at:
            return "expired"
        return self.status


def record_from_row(row: Mapping[str, Any]) -> TransferRecord:
    return TransferRecord.model_validate(dict(row))


def already_resolved(status: str) -> DomainError:
    """A decision on a transfer that no longer waits for one (409, nothing written)."""
    return DiaryTransferAlreadyResolved(f"The transfer is {status}, not pending")


# --- workflow and activity payloads -----------------------------------------------------------


class TransferInput(Payload):
    """What the `DiaryTransfer` workflow starts with; the API chose the id."""

    transfer_id: UUID
    diary_id: UUID
    source_team_id: UUID
    destination_team_id: UUID
    initiated_by: UUID


class TransferInsert(Payload):
    """The pending row to store, with the deadline the workflow's timer also uses."""

    transfer: TransferInput
    workflow_id: str
    expires_at: datetime


class TransferDecision(Payload):
    """`TRANSFER_DECISION_EVENT`: a destination owner's answer (checked by the API)."""

    decision: Decision
    decided_by: UUID


class TransferResolve(Payload):
    """Resolve one pending transfer: accept (moving the diary), reject or expire it."""

    transfer_id: UUID
