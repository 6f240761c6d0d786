"""Reads of the two interactive apps (spec 4.7) for the REST API: the diary map (its version
and its laid-out entries) and the task queue view's counts by status.

Functions take a pool or a connection first; the API passes its read-only pool.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, get_args
from uuid import UUID

import numpy as np
from pydantic import ConfigDict

from infra.db import Q
from infra.projection import METHOD, project
from infra.repos.rows import Db, Row, fetch_one
from schemas import limits
from schemas.apps import EntryMap, TaskCounts
from schemas.kernel.compression import estimate_tokens
from schemas.tasks import TaskStatus

MAP_TITLE_CHARS = 120  # what the map shows of a title (a zone's list, a tooltip)


class DiaryVersion(Row):
    """The diary's state as the map sees it: `tag` changes whenever an entry is added,
    deleted, edited or embedded, so a projection cached under it is never stale."""

    entries: int
    embedded: int
    changed_at: datetime | None

    @property
    def tag(self) -> str:
        stamp = int(self.changed_at.timestamp() * 1_000_000) if self.changed_at else 0
        return f"{self.entries}.{self.embedded}.{stamp}"


async def diary_version(db: Db, diary_id: UUID) -> DiaryVersion:
    version = await fetch_one(db, DiaryVersion, Q.apps_diary_version, diary_id)
    assert version is not None  # an aggregate without GROUP BY always answers one row
    return version


class MapSource(Row):
    """What the map is computed from: the newest entries' columns, and the embeddings of
    those that have one (`embedded[k]` is the row of `vectors[k]`)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    ids: list[UUID]
    titles: list[str]
    entry_types: list[str]
    tags: list[list[str]]
    word_counts: list[int]
    flagged: list[bool]
    embedded: list[int]
    vectors: Any  # float32 ndarray, len(embedded) × 384


async def map_source(db: Db, diary_id: UUID) -> MapSource:
    """The diary's newest entries (at most `ENTRY_MAP_MAX_ENTRIES`) and their embeddings."""
    rows = await db.fetch(Q.apps_diary_map_rows, diary_id, limits.ENTRY_MAP_MAX_ENTRIES)
    embedded = [i for i, row in enumerate(rows) if row["embedding"] is not None]
    vectors = _vectors([rows[i]["embedding"] for i in embedded])
    return MapSource(
        ids=[row["id"] for row in rows],
        titles=[(row["title"] or "")[:MAP_TITLE_CHARS] for row in rows],
        entry_types=[row["entry_type"] for row in rows],
        tags=[list(row["tags"]) for row in rows],
        word_counts=[len(row["content"].split()) for row in rows],
        flagged=[bool(row["injection_risk"]) for row in rows],
        embedded=embedded,
        vectors=vectors,
    )


def lay_out(source: MapSource, diary_id: UUID, version: str, total: int) -> EntryMap:
    """The entries with their 2D positions (see `infra.projection`); entries not embedded
    yet are listed without coordinates."""
    count = len(source.ids)
    x: list[float | None] = [None] * count
    y: list[float | None] = [None] * count
    if source.embedded:
        points = np.round(project(source.vectors), 5)
        for index, (px, py) in zip(source.embedded, points.tolist(), strict=True):
            x[index], y[index] = px, py
    return EntryMap(
        diaryId=diary_id,
        version=version,
        method=METHOD,
        count=count,
        total=total,
        ids=source.ids,
        x=x,
        y=y,
        titles=source.titles,
        entryTypes=source.entry_types,
        tags=source.tags,
        tokens=_token_estimates(source.word_counts),
        flagged=source.flagged,
    )


async def task_counts(
    db: Db, team_id: UUID, task_type: str | None, general_only: bool, project_id: UUID | None
) -> TaskCounts:
    """The team's tasks by status under the filters; every status present, zero included."""
    rows = await db.fetch(Q.apps_task_counts, team_id, task_type, general_only, project_id)
    found = {row["status"]: int(row["tasks"]) for row in rows}
    counts = {status: found.get(status, 0) for status in get_args(TaskStatus)}
    return TaskCounts(teamId=team_id, counts=counts, total=sum(counts.values()))


def _vectors(sent: list[bytes]) -> Any:
    """pgvector's binary form (`vector_send`: dimension and a reserved word as big-endian
    uint16, then big-endian float32s) of each embedding, as one float32 matrix."""
    width = 4 + 4 * limits.EMBEDDING_DIMENSIONS
    matrix = np.frombuffer(b"".join(sent), dtype=np.uint8).reshape(len(sent), width)
    return np.ascontiguousarray(matrix[:, 4:]).view(">f4").astype(np.float32)


def _token_estimates(word_counts: list[int]) -> list[int]:
    """`estimate_tokens` of each entry from its word count, computed once per distinct count
    (the kernel's exact arithmetic is slow × 10 000)."""
    by_words: dict[int, int] = {}
    estimates = []
    for words in word_counts:
        if words not in by_words:
            by_words[words] = estimate_tokens(" ".join(["w"] * words))
        estimates.append(by_words[words])
    return estimates
