"""Migration 0025 on a database written before it: the retrieval dates move to
`entry_retrievals` (and off `diary_entries`), each signed diary gets its chain head from its
entries, and every entry with a vector waits for its first consolidation sweep, oldest first."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from migration_support import database_before

from infra.db import migrate
from infra.devstack import Postgres
from schemas.kernel.cids import entry_cid

WRITE_PACE_MIGRATION = 25
START = datetime(2026, 1, 1, tzinfo=UTC)
VECTOR = "[" + ",".join(["1"] + ["0"] * 383) + "]"  # a bare connection: the text form


@pytest.fixture
async def before_0025(postgres: Postgres) -> AsyncIterator[str]:
    """A database migrated up to, not including, 0025 (the way a deployed one was)."""
    name, dsn = await database_before(postgres, WRITE_PACE_MIGRATION)
    yield dsn
    postgres.drop_database(name)


async def diary(conn: asyncpg.Connection, owner: uuid.UUID, *, signed: bool) -> uuid.UUID:
    team_id, diary_id = uuid.uuid4(), uuid.uuid4()
    await conn.execute(
        "INSERT INTO teams (id, name, personal, created_by, created_by_ns, status)"
        " VALUES ($1, 'crew', false, $2, 'Agent', 'active')",
        team_id,
        owner,
    )
    await conn.execute(
        "INSERT INTO diaries (id, created_by, team_id, name, visibility, signed)"
        " VALUES ($1, $2, $3, 'notes', 'private', $4)",
        diary_id,
        owner,
        team_id,
        signed,
    )
    return diary_id


async def entry(
    conn: asyncpg.Connection,
    diary_id: uuid.UUID,
    n: int,
    *,
    prev: str | None = None,
    embedded: bool = True,
    retrieved_at: datetime | None = None,
) -> tuple[uuid.UUID, str]:
    entry_id, content = uuid.uuid4(), f"Note {n} of {diary_id}."
    cid = entry_cid(content, None, [], "semantic", prev)
    await conn.execute(
        "INSERT INTO diary_entries (id, diary_id, content, cid, prev_cid, created_by, embedding,"
        " created_at, last_retrieved_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        entry_id,
        diary_id,
        content,
        cid,
        prev,
        uuid.uuid4(),
        VECTOR if embedded else None,
        START + timedelta(minutes=n),
        retrieved_at,
    )
    return entry_id, cid


async def test_existing_entries_and_diaries_after_0025(before_0025: str) -> None:
    conn = await asyncpg.connect(before_0025)
    try:
        owner = uuid.uuid4()
        signed, plain, empty = (
            await diary(conn, owner, signed=True),
            await diary(conn, owner, signed=False),
            await diary(conn, owner, signed=True),
        )
        prev, chain = "", []
        for n in range(3):  # inserted out of chain order: the head is found by the links
            chain.append(await entry(conn, signed, 10 - n, prev=prev))
            prev = chain[-1][1]
        retrieved = START + timedelta(days=3)
        seen, _ = await entry(conn, plain, 1, retrieved_at=retrieved)
        unembedded, _ = await entry(conn, plain, 0, embedded=False)

        applied = await migrate(before_0025)
        assert applied[0] == "0025_write_pace"  # later migrations follow it

        assert await conn.fetch("SELECT entry_id, last_retrieved_at FROM entry_retrievals") == [
            (seen, retrieved)
        ]
        columns = await conn.fetch(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_name = 'diary_entries' AND column_name = 'last_retrieved_at'"
        )
        assert columns == []

        heads = dict(await conn.fetch("SELECT id, chain_head FROM diaries"))
        assert heads == {signed: chain[-1][1], plain: "", empty: ""}

        pending = [
            row["entry_id"]
            for row in await conn.fetch("SELECT entry_id FROM consolidation_pending ORDER BY seq")
        ]
        # oldest first by creation: the chain was written at minutes 10, 9, 8
        assert pending == [seen, chain[2][0], chain[1][0], chain[0][0]]
        assert unembedded not in pending
    finally:
        await conn.close()
