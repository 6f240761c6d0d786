"""Who may report on an attempt: its current claimant, once it has started (SPEC 3.1, 2.6).

Complete, fail, abort and an output upload obey the same rule, decided here once and asked by
the task workflow's validators, the attempt and artifact routes, and the repositories that
re-check it under the attempt's row lock. A streamed message is an observation, not a report:
its claimant may post from the claim on, before the first heartbeat (`message_refusal`;
DECISIONS "Trust at the edges"). The order is the spec's: who asks first (403), then the
attempt's state (409).

Pure: statuses and ids in, the reason for a refusal (or None) out; `schemas.task_attempts`
turns a reason into its problem.
"""

from __future__ import annotations

from typing import Literal
from uuid import UUID

StateRefusal = Literal["not-started", "finished"]
ReportRefusal = Literal["not-claimant", "not-started", "finished"]


def is_claimant(claimant: UUID | None, caller: UUID | None) -> bool:
    """Whether `caller` (an agent id; None for a human) holds the attempt."""
    return caller is not None and claimant == caller


def state_refusal(status: str) -> StateRefusal | None:
    """Why an attempt in `status` takes no report: `claimed` has not started (a heartbeat
    starts it), anything but `running` has finished."""
    if status == "claimed":
        return "not-started"
    if status != "running":
        return "finished"
    return None


def report_refusal(status: str, claimant: UUID | None, caller: UUID | None) -> ReportRefusal | None:
    """Why `caller` may not report on an attempt in `status` held by `claimant`; None if it may."""
    if not is_claimant(claimant, caller):
        return "not-claimant"
    return state_refusal(status)


def message_refusal(
    status: str, claimant: UUID | None, caller: UUID | None
) -> ReportRefusal | None:
    """Why `caller` may not post a message to an attempt in `status` held by `claimant`: like a
    report, except that a `claimed` attempt takes messages too (an executor logs while it
    starts up, before its first heartbeat)."""
    if not is_claimant(claimant, caller):
        return "not-claimant"
    return None if status == "claimed" else state_refusal(status)
