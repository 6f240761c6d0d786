"""Soak: minutes of mixed traffic at a steady rate on the whole stack, watching for errors, memory
growth and unbounded Temporal histories.

    .venv/bin/python bench/soak.py [--minutes 10] [--rate-scale 1.0] [--warmup 2]
                                   [--api-processes 1]

Starts the embedded stack (bench/_stack.py: Postgres, the tuned Temporal dev server, rclone S3,
the API and the worker each in their own process), `cairn mcp` as its own process, and two
`cairn daemon` processes (a team agent key, a no-op executor). Then an open-loop scheduler
starts every operation at its own steady rate whatever the previous ones are doing (a latency
counts from the moment the operation was due, so a stall shows in the numbers instead of
slowing the load down):

- `register`: a bootstrap voucher (the voucher workflow), `POST /auth/register`, a token;
- `entry_create` and `search` (REST, `POST /diary/search`) on one diary that keeps growing;
- `task_create`: a freeform task for the daemons' team; the daemons claim, heartbeat, report and
  complete each (checked at the end: every one completed);
- `task_heartbeat`, `task_message`, `artifact_upload` (32 KiB) and `artifact_download` on two
  long attempts held open for the whole run by a direct-HTTP executor of a second team (the
  task workflows that live longest, so the ones whose history must stay bounded);
- `mcp_search` (`entries_search` over MCP) and `mcp_tools_list`.

Recorded: p50/p99 and errors per operation per minute; the RSS of every process of the stack
every 5 s (for Postgres, whose backends' RSS counts the shared buffers each has touched, its
USS too); the history length of every open workflow and of a sample of closed ones per type, at
the end of the warm-up and at the end. Verdict: zero errors; every process that lives through
the run within 10 % of its RSS after the warm-up (Postgres as a whole: the sum of its processes'
USS); every history within the task workflow's continue-as-new bound. JSON to
bench/results/soak-<minutes>min.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil

# Run as a script, this file's folder comes first on sys.path and bench/mcp.py would shadow the
# `mcp` SDK: look up modules from the repository root instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench._stack import BenchStack, _Child, run_and_report  # noqa: E402
from bench.daemon import start_daemon, team_key  # noqa: E402
from bench.mcp import Agent, mcp_call, mcp_search, register, rest_search, wait_for  # noqa: E402
from bench.tasks import Caller, Crew, claim, crew, heartbeat  # noqa: E402

RESULTS = _HERE / "results"
MIB = 1024 * 1024
ARTIFACT_BYTES = 32 * 1024
RSS_EVERY_S = 5.0
RSS_GROWTH_MAX = 0.10
LONG_ATTEMPTS = 2
DAEMONS, DAEMON_SLOTS = 2, 4
IN_FLIGHT_MAX = 64  # per operation: beyond it the stack is not keeping up (counted as errors)
# operations per second at --rate-scale 1 (about 7/s in all: a steady load two shared cores
# carry with room to spare, so what grows is a leak and not a queue)
RATES = {
    "register": 0.1,
    "entry_create": 1.0,
    "search": 1.0,
    "task_create": 0.5,
    "task_heartbeat": 2.0,  # one a second per long attempt: their histories must roll over
    "task_message": 1.0,
    "artifact_upload": 0.25,
    "artifact_download": 0.25,
    "mcp_search": 0.5,
    "mcp_tools_list": 0.25,
}
TOPICS = [
    "The deploy pipeline runs database migrations before the API starts serving",
    "Postgres vacuum reclaims space held by dead tuples after updates",
    "Temporal workflows must be deterministic; side effects belong in activities",
    "Agents sign entries with Ed25519 keys that never leave them",
]


def log(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- what the operations act on -----------------------------------------------------------------


@dataclass
class LongAttempt:
    task_id: str
    attempt_n: int
    workflow_id: str
    cids: list[str] = field(default_factory=list)


@dataclass
class World:
    """Everything set up before the load starts."""

    http: aiohttp.ClientSession
    stack: BenchStack
    temporal: Any
    mcp_url: str
    writer: Agent  # owns the diary that entries go to and searches read, over REST and MCP
    diary_id: str
    daemon_team: Crew
    long_team: Crew
    long_attempts: list[LongAttempt]
    counter: int = 0

    def next(self) -> int:
        self.counter += 1
        return self.counter


async def expect(response: aiohttp.ClientResponse, status: int) -> Any:
    body = await response.read()
    if response.status != status:
        raise RuntimeError(
            f"{response.method} {response.url.path}: {response.status} {body[:300]!r}"
        )
    return body


def operations(w: World) -> dict[str, Callable[[], Awaitable[None]]]:
    base = w.stack.base_url
    executor = w.long_team.daemons[0]
    search = rest_search(w.http, base, w.writer, w.diary_id)
    via_mcp = mcp_search(w.http, w.mcp_url, w.writer, w.diary_id)
    tools_list = mcp_call(w.http, w.mcp_url, w.writer, "tools/list", {})

    turns: dict[str, itertools.cycle[LongAttempt]] = defaultdict(
        lambda: itertools.cycle(w.long_attempts)
    )

    def attempt(op: str) -> LongAttempt:
        """The long attempts in turn, per operation (each gets its share of every kind)."""
        return next(turns[op])

    async def register_agent() -> None:
        await register(w.http, w.stack, w.temporal)

    async def entry_create() -> None:
        i = w.next()
        body = {"content": f"{TOPICS[i % len(TOPICS)]} (soak {i})", "tags": ["soak"]}
        url = f"{base}/diaries/{w.diary_id}/entries"
        async with w.http.post(url, json=body, headers=w.writer.bearer) as response:
            await expect(response, 201)

    async def task_create() -> None:
        c = w.daemon_team
        await c.owner.call("POST", "/tasks", c.task_body(), **{"x-service-team-id": c.team_id})

    async def task_heartbeat() -> None:
        held = attempt("task_heartbeat")
        await heartbeat(executor, held.task_id, held.attempt_n)

    async def task_message() -> None:
        held = attempt("task_message")
        body = {"kind": "progress", "payload": {"step": w.next()}}
        path = f"/tasks/{held.task_id}/attempts/{held.attempt_n}/messages"
        await executor.call("POST", path, body)

    async def artifact_upload() -> None:
        held = attempt("artifact_upload")
        url = (
            f"{base}/tasks/{held.task_id}/attempts/{held.attempt_n}/artifacts"
            f"?kind=report&title=soak-{w.next()}"
        )
        headers = {**executor.headers, "Content-Type": "application/octet-stream"}
        async with w.http.put(url, data=os.urandom(ARTIFACT_BYTES), headers=headers) as response:
            body = await response.json(content_type=None)
            if response.status != 200:
                raise RuntimeError(f"artifact upload: {response.status} {body}")
        held.cids.append(str(body["cid"]))

    async def artifact_download() -> None:
        held = attempt("artifact_download")
        if not held.cids:  # nothing uploaded to this one yet: the other one, or none
            held = next((a for a in w.long_attempts if a.cids), held)
            if not held.cids:
                return
        cid = held.cids[w.next() % len(held.cids)]
        url = f"{base}/tasks/{held.task_id}/attempts/{held.attempt_n}/artifacts/{cid}/content"
        async with w.http.get(url, headers=executor.headers) as response:
            body = await expect(response, 200)
        if len(body) != ARTIFACT_BYTES:
            raise RuntimeError(f"artifact download: {len(body)} bytes")

    return {
        "register": register_agent,
        "entry_create": entry_create,
        "search": search,
        "task_create": task_create,
        "task_heartbeat": task_heartbeat,
        "task_message": task_message,
        "artifact_upload": artifact_upload,
        "artifact_download": artifact_download,
        "mcp_search": via_mcp,
        "mcp_tools_list": tools_list,
    }


# --- the open-loop scheduler --------------------------------------------------------------------


@dataclass
class Sample:
    op: str
    due: float  # seconds since the load began
    ms: float
    error: str | None


@dataclass
class Load:
    t0: float
    samples: list[Sample] = field(default_factory=list)
    in_flight: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    running: set[asyncio.Task[None]] = field(default_factory=set)

    async def _one(self, op: str, call: Callable[[], Awaitable[None]], due: float) -> None:
        self.in_flight[op] += 1
        error = None
        try:
            await call()
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            self.in_flight[op] -= 1
        ms = (time.perf_counter() - (self.t0 + due)) * 1000
        self.samples.append(Sample(op, due, ms, error))

    async def steady(
        self, op: str, call: Callable[[], Awaitable[None]], rate: float, seconds: float
    ) -> None:
        """Start `call` every 1/rate seconds (a random phase per operation) until `seconds`."""
        phase = (hash(op) % 1000) / 1000 / rate
        i = 0
        while (due := phase + i / rate) < seconds:
            i += 1
            await asyncio.sleep(max(0.0, self.t0 + due - time.perf_counter()))
            if self.in_flight[op] >= IN_FLIGHT_MAX:
                self.samples.append(Sample(op, due, 0.0, "overloaded: too many in flight"))
                continue
            task = asyncio.create_task(self._one(op, call, due))
            self.running.add(task)
            task.add_done_callback(self.running.discard)

    async def drain(self, limit_s: float = 120) -> None:
        if self.running:
            await asyncio.wait(set(self.running), timeout=limit_s)


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def per_minute(samples: list[Sample]) -> dict[str, list[dict[str, Any]]]:
    table: dict[str, dict[int, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    for sample in samples:
        table[sample.op][int(sample.due // 60)].append(sample)
    result: dict[str, list[dict[str, Any]]] = {}
    for op, minutes in sorted(table.items()):
        rows = []
        for minute, found in sorted(minutes.items()):
            ok = sorted(s.ms for s in found if s.error is None)
            rows.append(
                {
                    "minute": minute + 1,
                    "ops": len(found),
                    "errors": len(found) - len(ok),
                    "p50_ms": round(percentile(ok, 0.5), 1) if ok else None,
                    "p99_ms": round(percentile(ok, 0.99), 1) if ok else None,
                }
            )
        result[op] = rows
    return result


# --- memory of every process --------------------------------------------------------------------


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


@dataclass
class MemoryWatch:
    """RSS (and for Postgres USS) of every process of each component, every few seconds."""

    roots: dict[str, int]
    t0: float
    # (component, pid, name) → [(seconds since the load began, bytes)]
    rss: dict[tuple[str, int, str], list[tuple[float, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    uss: dict[tuple[str, int, str], list[tuple[float, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def sample(self) -> None:
        now = time.perf_counter() - self.t0
        for component, root in self.roots.items():
            procs = _tree(root) if component != "loadgen" else [psutil.Process(root)]
            for proc in procs:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    key = (component, proc.pid, proc.name())
                    # read first: a process gone meanwhile leaves no empty series behind
                    if component == "postgres":
                        info = proc.memory_full_info()
                        self.uss[key].append((now, info.uss))
                    else:
                        info = proc.memory_info()
                    self.rss[key].append((now, info.rss))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.to_thread(self.sample)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), RSS_EVERY_S)

    def report(self, warmup_s: float, end_s: float) -> dict[str, Any]:
        """Per process: MiB at the start of the measured window and at its end (medians over a
        window of a quarter of it, at most a minute), and the growth."""
        span = min(60.0, (end_s - warmup_s) / 4)
        processes = []
        for key, series in sorted(self.rss.items()):
            if not series:
                continue
            measured = self.uss.get(key, series)  # Postgres: USS; every other process: RSS
            first = [b for t, b in measured if warmup_s <= t < warmup_s + span]
            last = [b for t, b in measured if end_s - span <= t <= end_s]
            component, pid, name = key
            entry: dict[str, Any] = {
                "component": component,
                "pid": pid,
                "name": name,
                "measure": "uss" if key in self.uss else "rss",
                "rss_mib_max": round(max(b for _, b in series) / MIB, 1),
            }
            if first and last:
                start, end = statistics.median(first), statistics.median(last)
                entry.update(
                    start_mib=round(start / MIB, 1),
                    end_mib=round(end / MIB, 1),
                    growth=round(end / start - 1, 4) if start else None,
                )
            else:
                entry["lived_through_run"] = False
            processes.append(entry)
        totals: dict[str, dict[str, float | None]] = {}
        for component in self.roots:
            members = [p for p in processes if p["component"] == component and "end_mib" in p]
            start = sum(p["start_mib"] for p in members)
            end = sum(p["end_mib"] for p in members)
            totals[component] = {
                "start_mib": round(start, 1),
                "end_mib": round(end, 1),
                "growth": round(end / start - 1, 4) if start else None,
            }
        return {
            "window_s": round(span, 1),
            "processes": processes,
            "component_totals": totals,
            "component_rss_mib_per_minute": self._per_minute(),
        }

    def _per_minute(self) -> dict[str, list[float]]:
        """Each component's total RSS (all its processes at one sampling), median per minute."""
        at: dict[str, dict[float, int]] = defaultdict(lambda: defaultdict(int))
        for (component, _, _), series in self.rss.items():
            for t, rss in series:
                at[component][t] += rss
        found = {}
        for component, totals in sorted(at.items()):
            minutes: dict[int, list[int]] = defaultdict(list)
            for t, total in totals.items():
                minutes[int(t // 60)].append(total)
            found[component] = [
                round(statistics.median(minutes[m]) / MIB, 1) for m in sorted(minutes) if m >= 0
            ]
        return found


# --- Temporal histories -------------------------------------------------------------------------


async def histories(temporal: Any, long_ids: list[str], closed_per_type: int) -> dict[str, Any]:
    """History length of every open workflow (describe) and of a sample of closed ones per type
    (the visibility record), with the long attempts' workflows named."""
    by_type: dict[str, list[int]] = defaultdict(list)
    open_runs: list[dict[str, Any]] = []
    async for execution in temporal.list_workflows():
        kind = execution.workflow_type
        if execution.close_time is None:
            described = await temporal.get_workflow_handle(execution.id).describe()
            info = described.raw_description.workflow_execution_info
            open_runs.append(
                {
                    "id": execution.id,
                    "type": kind,
                    "history_length": described.history_length,
                    "history_size_bytes": info.history_size_bytes,
                }
            )
        elif len(by_type[kind]) < closed_per_type:
            by_type[kind].append(execution.history_length)
    closed = {
        kind: {"sampled": len(lengths), "max": max(lengths), "p50": statistics.median(lengths)}
        for kind, lengths in sorted(by_type.items())
    }
    long_runs = {}
    for workflow_id in long_ids:
        runs = [e async for e in temporal.list_workflows(f"WorkflowId = '{workflow_id}'")]
        described = await temporal.get_workflow_handle(workflow_id).describe()
        info = described.raw_description.workflow_execution_info
        long_runs[workflow_id] = {
            "runs": len(runs),  # continued-as-new runs included
            "history_length": described.history_length,
            "history_size_bytes": info.history_size_bytes,
        }
    return {
        "open": sorted(open_runs, key=lambda run: -run["history_length"])[:20],
        "open_count": len(open_runs),
        "closed_by_type": closed,
        "long_attempts": long_runs,
    }


# --- setting up ---------------------------------------------------------------------------------


async def start_mcp(stack: BenchStack) -> str:
    from infra.devstack import free_port

    port = free_port()
    env = {**stack.env, "SERVICE_MCP_PORT": str(port), "SERVICE_MCP_HOST": "127.0.0.1"}
    child = _Child(
        "mcp",
        [sys.executable, "-c", "from cairn import main; main(['mcp'])"],
        stack.root / "mcp.log",
        env=env,
    )
    stack._parts.append(child)
    child.start()
    await wait_for(f"http://127.0.0.1:{port}/healthz", child)
    stack.mcp = child  # type: ignore[attr-defined]
    return f"http://127.0.0.1:{port}/mcp"


async def hold_attempt(c: Crew, executor: Caller) -> LongAttempt:
    """A task of `c`'s team claimed and started by `executor`, left running."""
    from schemas.task_attempts import task_workflow_id

    task = await c.owner.call("POST", "/tasks", c.task_body(), **{"x-service-team-id": c.team_id})
    for _ in range(50):  # the claim waits for the task's row
        with contextlib.suppress(RuntimeError):
            n = await claim(executor, str(task["id"]))
            break
        await asyncio.sleep(0.2)
    else:
        raise RuntimeError("could not claim the long task")
    await heartbeat(executor, str(task["id"]), n)
    return LongAttempt(str(task["id"]), n, task_workflow_id(uuid.UUID(str(task["id"]))))


async def seed(http: aiohttp.ClientSession, base: str, writer: Agent) -> str:
    headers = {**writer.bearer, "x-service-team-id": writer.team_id}
    body: dict[str, Any] = {"name": "soak", "visibility": "private"}
    async with http.post(base + "/diaries", json=body, headers=headers) as response:
        diary = str((await response.json(content_type=None))["id"])
    for i, topic in enumerate(TOPICS * 3):
        body = {"content": f"{topic} (seed {i})", "tags": ["soak"]}
        url = f"{base}/diaries/{diary}/entries"
        async with http.post(url, json=body, headers=writer.bearer) as response:
            await expect(response, 201)
    return diary


async def unfinished_tasks(c: Crew) -> dict[str, int]:
    counts = {}
    for status in ("queued", "dispatched", "running", "failed", "expired", "cancelled"):
        page = await c.owner.call(
            "GET", f"/tasks?statuses={status}&limit=100", **{"x-service-team-id": c.team_id}
        )
        counts[status] = len(page["items"])
    return counts


async def drained(c: Crew, limit_s: float) -> dict[str, int]:
    """The team's task counts once nothing is open any more (or `limit_s` passed)."""
    deadline = time.monotonic() + limit_s
    while True:
        left = await unfinished_tasks(c)
        if not (left["queued"] + left["dispatched"] + left["running"]):
            return left
        if time.monotonic() > deadline:
            return left
        await asyncio.sleep(1)


# --- the run ------------------------------------------------------------------------------------


def verdict(
    errors: int, tasks_left: dict[str, int], memory: dict[str, Any], history: dict[str, Any]
) -> dict[str, Any]:
    from schemas import limits

    # Every process on its own RSS, but Postgres as one: the private memory (USS) of all its
    # processes together. A backend holds 2-7 MiB of its own, so a query's sort buffer alone
    # moves one by more than 10 %; a leak shows in the sum all the same.
    grown = [
        f"{p['component']}/{p['name']}[{p['pid']}] {p['growth']:+.1%}"
        for p in memory["processes"]
        if p["component"] not in ("loadgen", "postgres")  # loadgen keeps every sample
        and p.get("growth") is not None
        and p["growth"] > RSS_GROWTH_MAX
    ]
    postgres = memory["component_totals"].get("postgres", {}).get("growth")
    if postgres is not None and postgres > RSS_GROWTH_MAX:
        grown.append(f"postgres (USS of all its processes) {postgres:+.1%}")
    bound = int(limits.TASK_WORKFLOW_HISTORY_MAX_EVENTS * 1.1)  # the check runs between events
    longest = max(
        [run["history_length"] for run in history["open"]]
        + [kind["max"] for kind in history["closed_by_type"].values()]
        + [0]
    )
    return {
        "errors": errors,
        "errors_ok": errors == 0,
        "daemon_tasks_not_completed": tasks_left,
        "tasks_ok": not any(tasks_left.values()),
        "rss_growth_max": RSS_GROWTH_MAX,
        "rss_grown_beyond": grown,
        "rss_ok": not grown,
        "history_length_bound": bound,
        "history_length_max": longest,
        "history_ok": longest <= bound,
        "ok": errors == 0 and not any(tasks_left.values()) and not grown and longest <= bound,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    seconds = args.minutes * 60
    warmup_s = min(args.warmup * 60, seconds / 2)
    rates = {op: rate * args.rate_scale for op, rate in RATES.items()}
    result: dict[str, Any] = {
        "benchmark": "soak",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "minutes": args.minutes,
        "warmup_minutes": round(warmup_s / 60, 2),
        "rates_per_s": rates,
        "api_processes": args.api_processes,
        "machine": {"cores": os.cpu_count(), "load_avg_at_start": os.getloadavg()},
    }
    async with (
        BenchStack(api_processes=args.api_processes) as stack,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256)) as http,
    ):
        temporal = await stack.temporal_client()
        mcp_url = await start_mcp(stack)
        log("setting up: agents, teams, a diary, long attempts, daemons")
        writer = await register(http, stack, temporal)
        diary = await seed(http, stack.base_url, writer)
        daemon_team = await crew(http, stack, temporal, 1)
        long_team = await crew(http, stack, temporal, 1)
        long_attempts = [
            await hold_attempt(long_team, long_team.daemons[0]) for _ in range(LONG_ATTEMPTS)
        ]
        key = await team_key(daemon_team)
        daemons = [
            await start_daemon(stack, daemon_team, key, DAEMON_SLOTS) for _ in range(DAEMONS)
        ]
        world = World(
            http, stack, temporal, mcp_url, writer, diary, daemon_team, long_team, long_attempts
        )
        calls = operations(world)
        roots = {**stack.pids(), "mcp": stack.mcp.process.pid}  # type: ignore[attr-defined]
        roots.update({f"daemon{i}": d.pid for i, d in enumerate(daemons)})
        for part in stack._parts:
            if type(part).__name__ == "RcloneS3":
                roots["rclone"] = part.child.process.pid

        load = Load(t0=time.perf_counter() + 1.0)
        memory = MemoryWatch(roots, load.t0)
        stop = asyncio.Event()
        watcher = asyncio.create_task(memory.run(stop))
        long_ids = [a.workflow_id for a in long_attempts]
        log(f"load: {sum(rates.values()):.2f} ops/s for {args.minutes} min")
        try:
            schedulers = [
                asyncio.create_task(load.steady(op, calls[op], rate, seconds))
                for op, rate in rates.items()
            ]
            await asyncio.sleep(warmup_s + 1.0)
            history_start = await histories(temporal, long_ids, args.closed_sample)
            log(f"warm-up over; {len(load.samples)} operations so far")
            await asyncio.gather(*schedulers)
            end_s = time.perf_counter() - load.t0
            await load.drain()
            log("load over; waiting for the daemons to finish the queue")
            left = await drained(daemon_team, limit_s=120)
            history_end = await histories(temporal, long_ids, args.closed_sample)
        finally:
            stop.set()
            await watcher
            for daemon in daemons:
                daemon.terminate()
            for daemon in daemons:
                await daemon.wait()

        errors = [s for s in load.samples if s.error]
        first_errors: dict[str, list[str]] = defaultdict(list)
        for sample in errors:
            if len(first_errors[sample.op]) < 5:
                first_errors[sample.op].append(f"{sample.due:.1f}s {sample.error}")
        totals = {
            op: {
                "ops": sum(1 for s in load.samples if s.op == op),
                "errors": sum(1 for s in errors if s.op == op),
            }
            for op in rates
        }
        memory_report = memory.report(warmup_s, end_s)
        result.update(
            operations=totals,
            per_minute=per_minute(load.samples),
            first_errors=dict(first_errors),
            memory=memory_report,
            temporal_history={"after_warmup": history_start, "end": history_end},
            topology={
                **stack.topology(),
                "mcp": "separate process: `cairn mcp`",
                "daemons": f"{DAEMONS} `cairn daemon` processes, --slots {DAEMON_SLOTS}, "
                "a team agent key, a no-op /bin/sh executor",
                "long_attempts": f"{LONG_ATTEMPTS} attempts of a second team held running "
                "by a direct-HTTP executor: heartbeats, messages, artifacts",
            },
        )
        result["verdict"] = verdict(len(errors), left, memory_report, history_end)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0, help="minutes before RSS baseline")
    parser.add_argument("--rate-scale", type=float, default=1.0, help="multiplies every rate")
    parser.add_argument("--api-processes", type=int, default=1)
    parser.add_argument("--closed-sample", type=int, default=50, help="closed runs per type")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    output = args.output or RESULTS / f"soak-{args.minutes:g}min.json"
    run_and_report(run(args), output)


if __name__ == "__main__":
    main()
