"""The message writer: the one write the API makes itself (ARCHITECTURE "How a mutation flows").

Task messages are append-only observations of a running attempt (log lines, progress, text
deltas): no workflow decides anything about them, so routing each through Temporal would only
add latency. They go through their own small writable pool (`keys.MESSAGE_WRITER`), never the
API's read-only one.

`seq` is gapless per attempt under concurrency: one transaction locks the attempt row
(`FOR NO KEY UPDATE`, which also holds off a concurrent terminal transition), then inserts the
batch at `max(seq) + 1 ...` read after the lock. The claimant and the attempt's state are
checked on the locked row, so the decision and the write see the same attempt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

import asyncpg

from infra.db import Q
from schemas.errors import InvalidPayload, ValidationFailed
from schemas.kernel.attempts import ReportRefusal, message_refusal

Refusal = Literal["no-attempt", "profile-scope-denied"] | ReportRefusal
# Whether the runtime policy frozen on the attempt (None: no profile) lets the caller append.
PolicyCheck = Callable[[Mapping[str, Any] | None], bool]


@dataclass(frozen=True)
class Appended:
    count: int
    first_seq: int
    last_seq: int


@dataclass(frozen=True)
class AppendRefused:
    reason: Refusal
    status: str | None = None
    policy: Mapping[str, Any] | None = None


async def append_messages(
    pool: asyncpg.Pool,
    task_id: UUID,
    attempt_n: int,
    claimant_id: UUID,
    messages: list[dict[str, Any]],
    policy_allows: PolicyCheck | None = None,
) -> Appended | AppendRefused:
    """Append `messages` (`{kind, payload}` each, in order) to the attempt, if `claimant_id`
    holds it, the attempt's runtime policy allows it (`policy_allows`) and it is claimed or
    running (`message_refusal`); else say why nothing was written."""
    try:
        batch = json.dumps(messages, allow_nan=False, ensure_ascii=False)
    except ValueError:
        raise _not_json("NaN and Infinity are not JSON") from None
    # text jsonb cannot store (a NUL, a lone surrogate) never gets here: the request models
    # refuse it with its pointer (schemas/text.py)
    async with pool.acquire() as conn, conn.transaction():
        attempt = await conn.fetchrow(Q.task_msg_lock_attempt, task_id, attempt_n)
        refusal = _refusal(attempt, claimant_id, policy_allows)
        if refusal is not None:
            return refusal
        assert attempt is not None
        row = await conn.fetchrow(Q.task_msg_append, attempt["id"], batch)
    return Appended(count=row["count"], first_seq=row["first_seq"], last_seq=row["last_seq"])


def _not_json(why: str) -> ValidationFailed:
    return InvalidPayload(f"A message payload cannot be stored: {why}")


def _refusal(
    attempt: asyncpg.Record | None, claimant_id: UUID, policy_allows: PolicyCheck | None
) -> AppendRefused | None:
    if attempt is None:
        return AppendRefused("no-attempt")
    policy = attempt["policy_snapshot"]
    claimant = attempt["claimed_by_agent_id"] == claimant_id
    if claimant and policy_allows is not None and not policy_allows(policy):
        return AppendRefused("profile-scope-denied", attempt["status"], policy)
    refusal = message_refusal(attempt["status"], attempt["claimed_by_agent_id"], claimant_id)
    return None if refusal is None else AppendRefused(refusal, attempt["status"])
