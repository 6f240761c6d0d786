"""Which work Temporal dispatches first, and whose turn it is (issue 30 §5, DECISIONS "Production
beyond one machine": work carries `Priority` with `fairness_key` = owning team).

Temporal orders a backlogged task queue by priority key first (1 goes before 5; work that names
none is 3), then, within one key, shares dispatch between fairness keys in proportion to their
weight (every team weighs 1). So a team that floods the queue with writes waits behind its own
backlog, not in front of another team's single write, and a caller waiting on a request is never
queued behind a sweep. The table is written once here; `workflows.common.work_priority` turns a
row of it and a team into the `temporalio.common.Priority` each start site passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final
from uuid import UUID


class WorkKind(StrEnum):
    """The kinds of work, from the most to the least urgent."""

    REQUEST = "request"  # a caller waits on it: entry writes, task create/claim, every route's run
    FOLLOW_UP = "follow-up"  # after an answer: a write's consolidation, retrieval counts
    SWEEP = "sweep"  # scheduled housekeeping: purges, reconciles, artifact and pack sweeps


# Lower goes first. The server's range is 1..5 (`matching.priorityLevels` is left at its 5).
PRIORITY_KEYS: Final[Mapping[WorkKind, int]] = MappingProxyType(
    {WorkKind.REQUEST: 1, WorkKind.FOLLOW_UP: 3, WorkKind.SWEEP: 5}
)


def fairness_key(team_id: UUID | None) -> str | None:
    """The owning team's fairness key (its id: 36 bytes, within Temporal's 64); None for work
    that belongs to no one team, which shares the unnamed key."""
    return None if team_id is None else str(team_id)
