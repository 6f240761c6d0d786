"""Migration 0021 on a database that holds relations from before it: an accepted relation is
accepted from its last status change (`updated_at`), any other has no `accepted_at`, and
`superseded_by_as_of` reads supersession at an instant from them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from migration_support import database_before

from infra.db import migrate
from infra.devstack import Postgres

ACCEPTED_AT_MIGRATION = 21
DECIDED = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def before_0021(postgres: Postgres) -> AsyncIterator[str]:
    """A database migrated up to, not including, 0021 (the way a deployed one was)."""
    name, dsn = await database_before(postgres, ACCEPTED_AT_MIGRATION)
    yield dsn
    postgres.drop_database(name)


async def entries_of_a_diary(conn: asyncpg.Connection, count: int) -> list[uuid.UUID]:
    owner, team, diary = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await conn.execute(
        "INSERT INTO teams (id, name, created_by, created_by_ns, status)"
        " VALUES ($1, 'crew', $2, 'Agent', 'active')",
        team,
        owner,
    )
    await conn.execute(
        "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
        " VALUES ($1, $2, $3, 'notes', 'private')",
        diary,
        owner,
        team,
    )
    ids = [uuid.uuid4() for _ in range(count)]
    for n, entry_id in enumerate(ids):
        await conn.execute(
            "INSERT INTO diary_entries (id, diary_id, content, cid, created_by, created_at)"
            " VALUES ($1, $2, $3, $4, $5, $6)",
            entry_id,
            diary,
            f"fact {n}",
            f"bafy{n}",
            owner,
            DECIDED - timedelta(days=10 - n),
        )
    return ids


async def relation(
    conn: asyncpg.Connection, source: uuid.UUID, target: uuid.UUID, status: str
) -> uuid.UUID:
    relation_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO entry_relations (id, source_id, target_id, relation, status,"
        " source_cid_snapshot, target_cid_snapshot, created_at, updated_at)"
        " VALUES ($1, $2, $3, 'supersedes', $4, 's', 't', $5, $6)",
        relation_id,
        source,
        target,
        status,
        DECIDED - timedelta(days=1),
        DECIDED,
    )
    return relation_id


async def test_0021_backfills_accepted_at_from_the_last_status_change(before_0021: str) -> None:
    conn = await asyncpg.connect(before_0021)
    try:
        old, new, other, third = await entries_of_a_diary(conn, 4)
        accepted = await relation(conn, new, old, "accepted")
        proposed = await relation(conn, other, old, "proposed")
        rejected = await relation(conn, third, other, "rejected")

        applied = await migrate(before_0021)
        assert applied[0] == "0021_relation_accepted_at"

        stored = {
            row["id"]: row["accepted_at"]
            for row in await conn.fetch("SELECT id, accepted_at FROM entry_relations")
        }
        assert stored == {accepted: DECIDED, proposed: None, rejected: None}
        then = "SELECT superseded_by_as_of($1, $2)"
        assert await conn.fetchval(then, old, DECIDED - timedelta(microseconds=1)) is None
        assert await conn.fetchval(then, old, DECIDED) == new
        assert await conn.fetchval(then, other, DECIDED) is None
        with pytest.raises(asyncpg.CheckViolationError):  # a backfill the trigger cannot repair
            await conn.execute(
                "ALTER TABLE entry_relations DISABLE TRIGGER entry_relations_accepted_at;"
                f"UPDATE entry_relations SET accepted_at = NULL WHERE id = '{accepted}'"
            )
    finally:
        await conn.close()
