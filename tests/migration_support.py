"""A database as a deployment left it before a migration: every earlier one applied and recorded,
so a test can write rows in the old shape and then run `infra.db.migrate` over them."""

from __future__ import annotations

import uuid

import asyncpg

from infra.db import migration_files
from infra.devstack import Postgres


async def database_before(postgres: Postgres, version: int) -> tuple[str, str]:
    """A new database migrated up to, not including, `version`: (its name, its DSN)."""
    name = f"t_mig{version:04d}_{uuid.uuid4().hex[:8]}"
    dsn = postgres.ensure_database(name)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for number, label, sql in migration_files():
            if number < version:
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", number, label
                )
    finally:
        await conn.close()
    return name, dsn
