"""asyncpg pools, named SQL and forward-only migrations.

SQL lives in `infra/sql/*.sql` as named statements (`-- name: get_agent` then the statement);
`Q.get_agent` is the text. Migrations are numbered files in `infra/migrations/`, applied once
each under an advisory lock and recorded in `schema_migrations`.

Every pool's acquire waits at most `SERVICE_DATABASE_ACQUIRE_TIMEOUT_S` (`PoolExhausted`, the
API's 503). Behind a transaction pooler (`SERVICE_DATABASE_TRANSACTION_POOLER`, pgbouncer in
`pool_mode=transaction`) a server connection is ours for one transaction only: no statement
cache, no session settings at startup; what a pool sets per session in the direct mode
(read-only, `synchronous_commit`) is set at the start of each transaction instead.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypedDict

import asyncpg
from asyncpg.transaction import Transaction
from pgvector.asyncpg import register_vector

from infra.settings import Settings
from schemas import limits

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


class StatementTally:
    """How many statements the connections of one pool have sent, each `BEGIN`, `COMMIT` and
    `set_config` included: a round trip is a round trip. Tests hold the hot paths to a number of
    statements per request with it (tests/integration/test_query_budget.py): a new query on
    one is then a visible choice. One integer addition a statement; nothing else reads it."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = 0


class CountingConnection(asyncpg.Connection):  # type: ignore[misc]  # asyncpg is untyped
    """A connection that adds each statement it sends to its pool's `StatementTally`."""

    tally: StatementTally | None = None  # set by the pool's init

    def _count(self) -> None:
        if self.tally is not None:
            self.tally.sent += 1

    async def execute(self, query: str, *args: Any, **options: Any) -> str:
        if not args:  # with arguments it goes through `_execute`, which counts
            self._count()
        return await super().execute(query, *args, **options)  # type: ignore[no-any-return]

    async def _execute(self, *args: Any, **options: Any) -> Any:
        # fetch, fetchrow, fetchval and execute with arguments all come through here
        self._count()
        return await super()._execute(*args, **options)

    async def _executemany(self, *args: Any, **options: Any) -> Any:
        self._count()
        return await super()._executemany(*args, **options)


class PoolExhausted(TimeoutError):
    """No pooled connection came free within the acquire timeout. The API answers 503 with
    Retry-After; in a worker it is an ordinary (retried) activity failure."""


class Pool(asyncpg.Pool):  # type: ignore[misc]  # asyncpg is untyped
    """asyncpg's pool, every acquire bounded by `acquire_timeout_s` (a caller's own timeout
    wins). A burst larger than the pool fails fast instead of queueing without end behind it.

    This and `PerTransactionConnection` extend asyncpg's internals (`Pool._acquire`,
    `Connection._execute`, `_top_xact`, as of 0.32); tests/integration/test_db_pools.py walks
    every path they change."""

    def __init__(
        self, *args: Any, acquire_timeout_s: float, tally: StatementTally, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._acquire_timeout_s = acquire_timeout_s
        self.tally = tally

    async def _acquire(self, given_s: float | None) -> Any:
        # the one path of both `async with pool.acquire()` and the pool's fetch/execute helpers
        wait = self._acquire_timeout_s if given_s is None else given_s
        try:
            return await super()._acquire(wait)
        except TimeoutError as exc:
            raise PoolExhausted(f"no database connection came free within {wait} s") from exc


@dataclass(frozen=True)
class TransactionScope:
    """What a pool behind a transaction pooler sets in each transaction: `BEGIN READ ONLY`,
    and `set_config(name, value, true)` (SET LOCAL) for each setting."""

    read_only: bool
    settings: tuple[tuple[str, str], ...]


class PerTransactionConnection(CountingConnection):
    """A connection whose session state lives in each transaction: behind pgbouncer in
    transaction mode the server connection changes between transactions, and a setting made
    once per session would leak to other clients or be missing. A statement outside any
    transaction runs in one of its own, so it gets the settings too."""

    scope: TransactionScope | None = None  # set by the pool's init

    def transaction(
        self, *, isolation: str | None = None, readonly: bool = False, deferrable: bool = False
    ) -> Transaction:
        if self.scope is None:
            return super().transaction(
                isolation=isolation, readonly=readonly, deferrable=deferrable
            )
        return _ScopedTransaction(self, isolation, readonly or self.scope.read_only, deferrable)

    def _needs_own_transaction(self) -> bool:
        # `_top_xact` is set while a transaction starts: its own BEGIN is no bare statement
        return self.scope is not None and self._top_xact is None and not self.is_in_transaction()

    async def execute(self, query: str, *args: Any, **options: Any) -> str:
        if self._needs_own_transaction():
            async with self.transaction():
                return await super().execute(query, *args, **options)
        return await super().execute(query, *args, **options)

    async def _execute(self, *args: Any, **options: Any) -> Any:
        # fetch, fetchrow, fetchval and execute with arguments all come through here
        if self._needs_own_transaction():
            async with self.transaction():
                return await super()._execute(*args, **options)
        return await super()._execute(*args, **options)


class _ScopedTransaction(Transaction):  # type: ignore[misc]
    __slots__ = ()

    async def start(self) -> None:
        connection = self._connection
        top_level = not connection.is_in_transaction()
        await super().start()
        if top_level:
            for name, value in connection.scope.settings:
                await connection.execute("SELECT set_config($1, $2, true)", name, value)


class PoolOptions(TypedDict):
    """What every pool of a process takes from the settings (`pool_options`)."""

    acquire_timeout_s: float
    transaction_pooler: bool


def pool_options(settings: Settings) -> PoolOptions:
    return PoolOptions(
        acquire_timeout_s=settings.database_acquire_timeout_s,
        transaction_pooler=settings.database_transaction_pooler,
    )


async def create_pool(
    dsn: str,
    *,
    read_only: bool,
    min_size: int = 2,
    max_size: int = 10,
    acquire_timeout_s: float = limits.DATABASE_ACQUIRE_TIMEOUT_SEC,
    transaction_pooler: bool = False,
    application_name: str | None = None,
    session: Mapping[str, str] | None = None,
) -> asyncpg.Pool:
    """The API pool is read-only (`default_transaction_read_only`): it cannot write by accident.
    `session`: more settings of every connection (`synchronous_commit`, ...). With
    `transaction_pooler` both are set per transaction (`PerTransactionConnection`) and only the
    application name, which pgbouncer keeps per client, goes in the startup packet."""
    default_name = "cairn-api" if read_only else "cairn-worker"
    server_settings = {"application_name": application_name or default_name}
    tally = StatementTally()
    scope: TransactionScope | None = None
    connection_class: type[CountingConnection] = CountingConnection
    connect_options: dict[str, Any] = {}
    if not transaction_pooler:
        server_settings |= dict(session or {})
        if read_only:
            server_settings["default_transaction_read_only"] = "on"
    else:
        # no named statements: asyncpg then sends each one unnamed, parsed again in the round
        # trip of its execution, which any pgbouncer passes through
        connect_options["statement_cache_size"] = 0
        if read_only or session:
            scope = TransactionScope(read_only, tuple((session or {}).items()))
            connection_class = PerTransactionConnection
    pool = Pool(
        dsn,
        min_size=min(min_size, max_size),
        max_size=max_size,
        max_queries=50_000,  # asyncpg's defaults, which its create_pool would pass
        max_inactive_connection_lifetime=300.0,
        loop=None,
        record_class=asyncpg.Record,
        connection_class=connection_class,
        acquire_timeout_s=acquire_timeout_s,
        tally=tally,
        init=_counting_init(tally, scope),
        reset=_rollback_if_open,
        server_settings=server_settings,
        **connect_options,
    )
    await pool
    return pool


def _counting_init(
    tally: StatementTally, scope: TransactionScope | None
) -> Callable[[CountingConnection], Awaitable[None]]:
    async def init(conn: CountingConnection) -> None:
        conn.tally = tally
        if scope is not None:
            assert isinstance(conn, PerTransactionConnection)
            conn.scope = scope
        await _init_connection(conn)

    return init


def connection_budget(settings: Settings, command: str) -> int:
    """The most connections one replica (pod) of `cairn <command>` holds on the primary, from
    its settings: the formula of docs/deployment.md "Connection budget". An API process has
    its main (read) pool, the task-message writer and the rate limiter's pool (when limits
    are on); a worker one pool (the embedding queue shares it); `migrate` one connection. The
    replica pool (`SERVICE_DATABASE_READ_URL`) counts against the replica."""
    if command == "api":
        per_process = settings.database_pool_max + settings.database_message_pool_max
        if settings.rate_limit_enabled:
            per_process += settings.database_rate_pool_max
        return settings.api_processes * per_process
    if command == "worker":
        return settings.database_pool_max
    if command == "migrate":
        return 1
    return 0  # mcp, daemon: no database


def migration_files() -> list[tuple[int, str, str]]:
    folder = resources.files("infra") / "migrations"
    found = []
    for item in folder.iterdir():
        match = re.match(r"^(\d{4})_([a-z0-9_]+)\.sql$", item.name)
        if match:
            found.append((int(match.group(1)), match.group(2), item.read_text()))
    return sorted(found)


async def migrate(dsn: str) -> list[str]:
    """Apply every migration not yet recorded; returns the names applied now.

    Each migration runs in its own transaction under a transaction-scoped advisory lock and is
    applied only if not recorded by then, so concurrent runs apply each exactly once, and the
    lock holds behind a transaction pooler too (a session lock would stay on whichever server
    connection pgbouncer lent, or be released on another)."""
    conn = await asyncpg.connect(dsn, statement_cache_size=0)
    applied_now: list[str] = []
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
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
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
                if await conn.fetchval(
                    "SELECT 1 FROM schema_migrations WHERE version = $1", version
                ):
                    continue  # another run applied it while this one waited for the lock
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            applied_now.append(f"{version:04d}_{name}")
    finally:
        await conn.close()
    return applied_now


def record(row: asyncpg.Record | None) -> dict[str, Any] | None:
    return dict(row) if row is not None else None
