"""Migration 0022 on a database that holds identities from before it: every human keeps no
display name until they give one, the `subject_names` view names agents by fingerprint and
humans by email (a human not yet onboarded has no identity to name them by), and an empty
display name cannot be stored."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from migration_support import database_before

from infra.db import migrate
from infra.devstack import Postgres

DISPLAY_NAME_MIGRATION = 22


@pytest.fixture
async def before_0022(postgres: Postgres) -> AsyncIterator[str]:
    """A database migrated up to, not including, 0022 (the way a deployed one was)."""
    name, dsn = await database_before(postgres, DISPLAY_NAME_MIGRATION)
    yield dsn
    postgres.drop_database(name)


async def identity(conn: asyncpg.Connection, schema_id: str, email: str | None) -> uuid.UUID:
    identity_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO identities (id, schema_id, traits, password_hash, email)"
        " VALUES ($1, $2, '{}', 'x', $3)",
        identity_id,
        schema_id,
        email,
    )
    return identity_id


async def test_existing_subjects_are_named_after_0022(before_0022: str) -> None:
    conn = await asyncpg.connect(before_0022)
    try:
        email = f"{uuid.uuid4().hex[:8]}@example.org"
        human_identity = await identity(conn, "human", email)
        human, newcomer, agent = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        await conn.execute(
            "INSERT INTO humans (id, identity_id) VALUES ($1, $2), ($3, NULL)",
            human,
            human_identity,
            newcomer,
        )
        await conn.execute(
            "INSERT INTO agents (id, identity_id, public_key, fingerprint)"
            " VALUES ($1, $2, $3, 'A1B2-C3D4-E5F6-0718')",
            agent,
            await identity(conn, "agent", None),
            f"ed25519:{agent.hex}",
        )

        applied = await migrate(before_0022)
        assert applied[0] == "0022_display_names"  # later migrations follow it

        named = {
            row["subject_id"]: (row["subject_ns"], row["fingerprint"], row["email"])
            for row in await conn.fetch(
                "SELECT subject_ns, subject_id, fingerprint, email, display_name"
                " FROM subject_names WHERE display_name IS NULL"
            )
        }
        assert named[human] == ("Human", None, email)
        assert named[newcomer] == ("Human", None, None)
        assert named[agent] == ("Agent", "A1B2-C3D4-E5F6-0718", None)

        await conn.execute(
            "UPDATE identities SET display_name = 'Ada' WHERE id = $1", human_identity
        )
        assert (
            await conn.fetchval(
                "SELECT display_name FROM subject_names WHERE subject_id = $1", human
            )
            == "Ada"
        )
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute(
                "UPDATE identities SET display_name = '' WHERE id = $1", human_identity
            )
        with pytest.raises(asyncpg.StringDataRightTruncationError):
            await conn.execute(
                "UPDATE identities SET display_name = $2 WHERE id = $1", human_identity, "x" * 101
            )
    finally:
        await conn.close()
