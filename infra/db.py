"""asyncpg pools, named SQL and forward-only migrations.

SQL lives in `infra/sql/*.sql` as named statements (`-- name: get_agent` then the statement);
`Q.get_agent` is the text. Migrations are numbered files in `infra/migrations/`, applied once
each under an advisory lock and recorded in `schema_migrations`.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_MIGRATION_LOCK = 0x0CA1_2A11


class NamedQueries:
    """Every named statement of `infra/sql/`, loaded once."""

    def __init__(self, statements: dict[str, str]) -> None:
        self._statements = statements

    def __getattr__(self, name: str) -> str:
        try:
            return self._statements[name]
        except KeyError as exc:
            raise AttributeError(f"no SQL statement named {name!r}") from exc

    @classmethod
    def load(cls) -> NamedQueries:
        statements: dict[str, str] = {}
        folder = resources.files("infra") / "sql"
        for item in sorted(folder.iterdir(), key=lambda p: p.name):
            if item.name.endswith(".sql"):
                named = parse_named_sql(item.read_text())
                if clash := statements.keys() & named.keys():
                    raise ValueError(f"{item.name} repeats SQL statement names {sorted(clash)}")
                statements.update(named)
        return cls(statements)


def parse_named_sql(text: str) -> dict[str, str]:
    parts = _NAME.split(text)
    named = {}
    for i in range(1, len(parts), 2):
        name, body = parts[i], parts[i + 1].strip()
        if name in named:
            raise ValueError(f"duplicate SQL statement name {name!r}")
        named[name] = body
    return named


Q = NamedQueries.load()


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    # the vector extension is created by the first migration; a pool opened on an
    # empty database runs without the codec
    with contextlib.suppress(ValueError):
        await register_vector(conn)


async def _rollback_if_open(conn: asyncpg.Connection) -> None:
    """Release hook of every pool. asyncpg's default reset (unlock, close cursors, unlisten,
    RESET ALL) costs a round trip on every release. Nothing here sets session state: advisory
    locks are `pg_advisory_xact_lock` and settings `set_config(..., true)`, both scoped to the
    transaction, so only a transaction left open needs undoing."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


async def create_pool(
    dsn: str,
    *,
    read_only: bool,
    min_size: int = 2,
    max_size: int = 10,
    application_name: str | None = None,
    session: Mapping[str, str] | None = None,
) -> asyncpg.Pool:
    """The API pool is read-only (`default_transaction_read_only`): it cannot write by accident.
    `session`: more settings of every connection (`synchronous_commit`, ...)."""
    default_name = "cairn-api" if read_only else "cairn-worker"
    server_settings = {"application_name": application_name or default_name, **(session or {})}
    if read_only:
        server_settings["default_transaction_read_only"] = "on"
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        reset=_rollback_if_open,
        server_settings=server_settings,
    )
    assert pool is not None
    return pool


def migration_files() -> list[tuple[int, str, str]]:
    folder = resources.files("infra") / "migrations"
    found = []
    for item in folder.iterdir():
        match = re.match(r"^(\d{4})_([a-z0-9_]+)\.sql$", item.name)
        if match:
            found.append((int(match.group(1)), match.group(2), item.read_text()))
    return sorted(found)


async def migrate(dsn: str) -> list[str]:
    """Apply every migration not yet recorded; returns the names applied now."""
    conn = await asyncpg.connect(dsn)
    applied_now: list[str] = []
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, name, sql in migration_files():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            applied_now.append(f"{version:04d}_{name}")
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK)
        await conn.close()
    return applied_now


def record(row: asyncpg.Record | None) -> dict[str, Any] | None:
    return dict(row) if row is not None else None
