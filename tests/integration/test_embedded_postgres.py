"""The embedded database (infra/devstack.py, infra/pgdata.py).

- It is PostgreSQL 18 with pgvector 0.8, its settings applied from the first start, and
  pg_stat_statements loaded.
- Production's floor still works: the schema builds from zero on PostgreSQL 16 with pgvector 0.6
  (the `pgserver` wheel, a dev extra) and a hybrid search runs through the repository, on both
  vector plans.
- A data directory that wheel made (`.cairn/pg` of an older `cairn dev`) is upgraded with
  pg_upgrade, its rows intact and the original kept; one that cannot be upgraded is refused,
  untouched, with a message that says how to proceed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from fixtures.search_corpus import corpus
from test_search import insert_entry

from infra.db import create_pool, migrate
from infra.devstack import Postgres, free_port
from infra.embeddings import OnnxEmbedder
from infra.pgdata import DataDirectoryRefused, aside_path
from infra.repos.search import SearchRepo, iterative_scan
from schemas import limits
from schemas.embedding import SearchFilters
from schemas.kernel.embedding_text import entry_embedding_text

REPO = Path(__file__).resolve().parents[2]
QUERY = "revert a failed deploy"  # a paraphrase: only the vector arm finds its entry first
TARGET = "paraphrase-undo-release"


@pytest.fixture(scope="module")
def embedder() -> OnnxEmbedder:
    return OnnxEmbedder.load()


@dataclass(frozen=True)
class Seeded:
    """One diary of the search corpus, with real embeddings, and the entry the query is after."""

    diary: uuid.UUID
    target: uuid.UUID


@pytest.fixture
def pg16(tmp_path: Path) -> Iterator[Any]:
    """PostgreSQL 16 + pgvector 0.6 from the `pgserver` wheel, in `tmp_path/pg`."""
    import pgserver

    server = pgserver.get_server(tmp_path / "pg", cleanup_mode="stop")
    server.psql("CREATE DATABASE cairn;")
    yield server
    server.cleanup()


async def seed(dsn: str, embedder: OnnxEmbedder) -> Seeded:
    entries = corpus()
    vectors = embedder.embed(
        [entry_embedding_text(e.title, e.content, e.all_tags) for e in entries]
    )
    team, author, diary = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    ids = [uuid.uuid4() for _ in entries]
    pool = await create_pool(dsn, read_only=False)
    try:
        await pool.execute(
            "INSERT INTO teams (id, name, created_by, created_by_ns, status)"
            " VALUES ($1, 'corpus', $2, 'Agent', 'active')",
            team,
            author,
        )
        await pool.execute(
            "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
            " VALUES ($1, $2, $3, 'corpus', 'private')",
            diary,
            author,
            team,
        )
        now = datetime.now(UTC)
        for entry_id, entry, vector in zip(ids, entries, vectors, strict=True):
            await insert_entry(pool, entry_id, diary, entry, vector, now, author)
        await pool.execute("VACUUM ANALYZE diary_entries")
    finally:
        await pool.close()
    target = next(i for i, e in zip(ids, entries, strict=True) if e.key == TARGET)
    return Seeded(diary, target)


@pytest.fixture
async def read_pool_of(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """Read-only pools, as the API reads, closed after the test."""
    pools: list[asyncpg.Pool] = []

    async def opened(dsn: str) -> asyncpg.Pool:
        pools.append(await create_pool(dsn, read_only=True))
        return pools[-1]

    yield opened
    for pool in pools:
        await pool.close()


async def hybrid_ids(pool: asyncpg.Pool, embedder: OnnxEmbedder, diary: uuid.UUID) -> list[Any]:
    outcome = await SearchRepo(pool).search(
        QUERY, embedder.embed_one(QUERY), SearchFilters(diary_ids=(diary,), limit=10)
    )
    assert outcome.search_type == "hybrid"
    return [hit.row["id"] for hit in outcome.hits]


async def server_facts(dsn: str) -> dict[str, str]:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT current_setting('server_version_num') AS version,"
            " (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS vector,"
            " current_setting('shared_preload_libraries') AS preloaded,"
            " current_setting('max_connections') AS max_connections"
        )
    finally:
        await conn.close()
    assert row is not None
    return dict(row)


# --- the server -------------------------------------------------------------------------------


async def test_the_embedded_server_is_postgresql_18_with_pgvector_08_and_its_settings(
    postgres: Postgres, database_url: str
) -> None:
    facts = await server_facts(database_url)

    assert int(facts["version"]) // 10000 == 18 == Postgres.major_version()
    assert facts["vector"].startswith("0.8.")
    # applied on the session's new directory too, which needs the one restart
    assert facts["preloaded"] == "pg_stat_statements"
    assert facts["max_connections"] == "200"
    assert Postgres.binary("pg_basebackup").is_file()
    with pytest.raises(FileNotFoundError):
        Postgres.binary("no_such_tool")


# --- production's floor: PostgreSQL 16, pgvector 0.6 ------------------------------------------


async def test_the_schema_and_hybrid_search_work_on_postgresql_16_with_pgvector_06(
    pg16: Any, embedder: OnnxEmbedder, read_pool_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = pg16.get_uri("cairn")
    applied = await migrate(dsn)  # every migration, from zero
    seeded = await seed(dsn, embedder)
    facts = await server_facts(dsn)
    pool = await read_pool_of(dsn)

    assert applied and int(facts["version"]) // 10000 == 16 and facts["vector"] == "0.6.2"
    assert seeded.target in (await hybrid_ids(pool, embedder, seeded.diary))[:3]
    # the HNSW plan too (a corpus this small is otherwise searched exactly), and a scope too
    # thin a share for it, which pgvector 0.6 (no iterative scan) searches exactly
    monkeypatch.setattr(limits, "SEARCH_EXACT_SCOPE_MAX_ROWS", 0)
    vector = embedder.embed_one(QUERY)
    scope = SearchFilters(diary_ids=(seeded.diary,), limit=10, mode="vector")
    hnsw = await SearchRepo(pool).search(QUERY, vector, scope)
    monkeypatch.setattr(limits, "SEARCH_HNSW_EF_MAX", 10)
    thin = await SearchRepo(pool).search(QUERY, vector, scope)
    assert not await iterative_scan(pool)
    assert hnsw.vector_plan is not None and hnsw.vector_plan.method == "hnsw"
    assert thin.vector_plan is not None and thin.vector_plan.method == "exact"
    assert hnsw.vector_ids and thin.vector_ids
    assert hnsw.vector_ids[0] == thin.vector_ids[0] == seeded.target


# --- an old data directory --------------------------------------------------------------------


async def test_a_postgresql_16_directory_is_upgraded_with_its_rows_and_the_original_kept(
    pg16: Any, tmp_path: Path, embedder: OnnxEmbedder, read_pool_of: Any
) -> None:
    dsn = pg16.get_uri("cairn")
    migrations = await migrate(dsn)
    seeded = await seed(dsn, embedder)
    before = await hybrid_ids(await read_pool_of(dsn), embedder, seeded.diary)
    pg16.cleanup()  # as an older `cairn dev` leaves `.cairn/pg`: stopped

    upgraded = Postgres(tmp_path / "pg")
    upgraded.start()
    try:
        new_dsn = upgraded.dsn("cairn")
        facts = await server_facts(new_dsn)
        after = await hybrid_ids(await read_pool_of(new_dsn), embedder, seeded.diary)
        assert await migrate(new_dsn) == []  # the schema came along: nothing left to apply
    finally:
        upgraded.stop()

    assert int(facts["version"]) // 10000 == 18
    assert facts["vector"].startswith("0.8.")  # the extension brought up to the new library
    assert after == before and seeded.target in after[:3]
    assert migrations
    kept = aside_path(tmp_path / "pg", 16)
    assert (kept / "PG_VERSION").read_text().strip() == "16"
    assert (tmp_path / "pg" / "PG_VERSION").read_text().strip() == "18"


def cairn_dev(data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SERVICE_")}
    env["SERVICE_DATA_DIR"] = str(data_dir)
    ports = ["--ui-port", str(free_port()), "--s3-port", str(free_port())]
    return subprocess.run(
        [sys.executable, "-m", "cairn", "dev", *ports],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def files_of(pg: Path) -> dict[str, str]:
    return {str(path.relative_to(pg)): path.read_text() for path in pg.rglob("*") if path.is_file()}


def old_directory(data_dir: Path, major: int) -> dict[str, str]:
    """A data directory of `major` as far as the check reads one (no server of that major is
    installed to make a real one): it decides before anything starts or moves."""
    pg = data_dir / "pg"
    (pg / "base").mkdir(parents=True)
    (pg / "PG_VERSION").write_text(f"{major}\n")
    (pg / "base" / "16384").write_text("rows")
    return files_of(pg)


def test_cairn_dev_refuses_a_directory_it_cannot_upgrade_and_says_how(tmp_path: Path) -> None:
    before = old_directory(tmp_path, 15)

    result = cairn_dev(tmp_path)

    assert result.returncode == 1
    assert "PostgreSQL 15 data directory" in result.stderr
    assert "pgserver" in result.stderr and f"mv {tmp_path / 'pg'} " in result.stderr
    assert files_of(tmp_path / "pg") == before
    assert not aside_path(tmp_path / "pg", 15).exists()


def test_a_directory_of_a_newer_major_is_refused_untouched(tmp_path: Path) -> None:
    before = old_directory(tmp_path, Postgres.major_version() + 1)

    with pytest.raises(DataDirectoryRefused, match="newer than this build"):
        Postgres(tmp_path / "pg").start()

    assert files_of(tmp_path / "pg") == before
