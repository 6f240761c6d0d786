"""Benchmark fairness between teams (issue 30 §5): a quiet team's latency while another floods.

    .venv/bin/python bench/fairness.py [--runs 20] [--flood-writes 500] [--flood-tasks 200]
                                       [--flood-concurrency 16] [--quick]

Runs the embedded stack (bench/_stack.py) three times in the same run (`--modes`): as shipped
(`fairness_on`: the Temporal dev server with fairness, `infra.devstack.FAIRNESS_TEMPORAL_FLAGS`,
and the workers' workflow-task slots at their defaults, `SERVICE_WORKER_WORKFLOW_TASK_SLOTS` and
`SERVICE_EMBEDDING_WORKFLOW_TASK_SLOTS`); with temporalio's 100 slots instead
(`fairness_on_uncapped_slots`, the before figure of the slots); and without fairness
(`fairness_off`: one FIFO per task queue). In each:

1. two teams through the API: team A (an owner) and team B (an owner and one executor), each
   with a diary; B's tasks are created beforehand, so a claim is timed alone;
2. idle: B's single entry write (`POST /diaries/{id}/entries`) and single claim
   (`POST /tasks/{id}/claim` on a queued task), one at a time, `--runs` each: p50/p95;
3. flood: team A sends `--flood-writes` entry writes and `--flood-tasks` task creates through the
   API, `--flood-concurrency` at a time; meanwhile B writes and claims one at a time, as in 2,
   until the flood ends (at most `--runs` each): p50/p95, and A's throughput;
   B's writes are split into stages from their runs' histories (`write_stages`: the API until
   Temporal recorded the start, the first workflow task queued in Temporal, the worker, the
   close until the answer);
4. the machine's floor (`cpu_only_floor`): B's writes while plain processes burn as many cores
   as A's flood cost the stack, with no request of A's: what sharing the CPU alone costs B;
5. the ratio flood p50 / idle p50 for each, against the issue's target (≤ 2×);
6. Temporal's queue alone (`--backlog`): A's no-op runs, then five of B's, queued with their
   teams' priorities before a two-slot worker drains them: the places B's runs closed at.

`reading` in the result says what limited the run (where the flood waited, other CPU load).

The rate limiter is off (BenchStack's default), and here on purpose: as shipped it lets one
identity send 100 requests a minute and registers 5 agents a minute per address, so a flood of
700 runs at once is a team of many agents over minutes, which the bench cannot assemble in a
run; the limiter bounds each identity, fairness shares the queue between teams, and the flood
must reach the queue to measure the latter.

Writes JSON to bench/results/fairness.json. About 15 minutes with the defaults on 2 busy cores,
10 with `--quick`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import string
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import REPO_ROOT, BenchStack, CpuMeter, machine_info, run_and_report
from bench.auth import QUIET_CORES, wait_quiet
from bench.tasks import Caller, Crew, claim, create_task, crew, stats

RESULTS = Path(__file__).resolve().parent / "results" / "fairness.json"
TARGET_RATIO = 2.0
# The workers' workflow-task slots before they were settings: temporalio's default, more than a
# flood's runs in flight, so the flood queued inside the worker instead of in Temporal.
UNCAPPED_SLOTS = {"worker_workflow_task_slots": "100", "embedding_workflow_task_slots": "100"}
# The stacks compared in one run: (name, Temporal's fairness on, settings over the defaults).
MODES: dict[str, tuple[bool, dict[str, str]]] = {
    "fairness_on": (True, {}),
    "fairness_on_uncapped_slots": (True, UNCAPPED_SLOTS),
    "fairness_off": (False, {}),
}
SPIN_PERIOD_S = 0.01


def log(message: str) -> None:
    print(f"[fairness-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def note(rng: random.Random) -> str:
    """A unique entry of thirty words (no two are duplicates, which answer early)."""
    words = ("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(30))
    return f"{uuid.uuid4()} " + " ".join(words)


@dataclass
class Team:
    crew: Crew

    @property
    def owner(self) -> Caller:
        return self.crew.owner

    async def write(self, rng: random.Random) -> str:
        """The new entry's id."""
        entry = await self.owner.call(
            "POST", f"/diaries/{self.crew.diary_id}/entries", {"content": note(rng)}
        )
        return str(entry["id"])

    async def create_task(self) -> str:
        return await create_task(self.owner, self.crew)


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    began = time.perf_counter()
    await fn()
    return (time.perf_counter() - began) * 1000


@dataclass
class TimedWrite:
    """One of B's writes: its entry and the wall-clock instants it was sent and answered."""

    entry_id: str
    sent: datetime
    answered: datetime


async def timed_write(b: Team, rng: random.Random, log: list[TimedWrite]) -> float:
    sent = datetime.now(UTC)
    began = time.perf_counter()
    entry_id = await b.write(rng)
    elapsed = (time.perf_counter() - began) * 1000
    log.append(TimedWrite(entry_id, sent, datetime.now(UTC)))
    return elapsed


async def write_stages(temporal: Any, writes: list[TimedWrite]) -> dict[str, Any]:
    """Where B's writes spent their time, from each run's history (server-side instants, the
    same machine's clock): the API until Temporal recorded the start; the run's first workflow
    task waiting in Temporal's queue; the worker (the embedding and the insert, local
    activities inside the workflow task, plus the task's own round trips); Temporal closing the
    run and the API answering."""
    from temporalio.api.enums.v1 import EventType

    from workflows.entries import entry_create_workflow_id

    stages: dict[str, list[float]] = {
        "api_to_started": [],
        "queued_in_temporal": [],
        "in_worker": [],
        "closed_to_answered": [],
    }
    for write in writes:
        handle = temporal.get_workflow_handle(entry_create_workflow_id(uuid.UUID(write.entry_id)))
        events = (await handle.fetch_history()).events
        at: dict[int, list[datetime]] = {}
        for event in events:
            at.setdefault(event.event_type, []).append(event.event_time.ToDatetime(tzinfo=UTC))
        started = at[EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED][0]
        task_scheduled = at[EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED][0]
        task_started = at[EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED][0]
        task_completed = at[EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED][-1]
        closed = at[EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED][0]
        for stage, span in (
            ("api_to_started", started - write.sent),
            ("queued_in_temporal", task_started - task_scheduled),
            ("in_worker", task_completed - task_started),
            ("closed_to_answered", write.answered - closed),
        ):
            stages[stage].append(span.total_seconds() * 1000)
    return {stage: stats(spans) for stage, spans in stages.items() if spans}


async def idle(
    b: Team, tasks: list[str], runs: int, rng: random.Random, temporal: Any
) -> dict[str, Any]:
    """B alone: `runs` writes, then `runs` claims, one at a time."""
    for _ in range(3):  # warm-up
        await b.write(rng)
    logged: list[TimedWrite] = []
    writes = [await timed_write(b, rng, logged) for _ in range(runs)]
    executor = b.crew.daemons[0]
    claims = [await timed(partial(claim, executor, task)) for task in tasks[:runs]]
    del tasks[:runs]
    return {
        "write": stats(writes),
        "write_stages": await write_stages(temporal, logged),
        "claim": stats(claims),
    }


async def flood(a: Team, writes: int, tasks: int, concurrency: int) -> dict[str, Any]:
    """A's writes and task creates, interleaved, `concurrency` in flight."""
    rng = random.Random(11)
    work: list[Callable[[], Awaitable[Any]]] = [lambda: a.write(rng)] * writes
    work += [a.create_task] * tasks
    random.Random(7).shuffle(work)
    pending = iter(work)
    errors = [0]

    async def client() -> None:
        for step in pending:
            try:
                await step()
            except (RuntimeError, TimeoutError, aiohttp.ClientError):
                errors[0] += 1

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - began
    return {
        "writes": writes,
        "tasks": tasks,
        "concurrency": concurrency,
        "errors": errors[0],
        "elapsed_s": round(elapsed, 2),
        "per_s": round((writes + tasks) / elapsed, 1),
    }


async def during_flood(
    a: Team, b: Team, tasks: list[str], args: argparse.Namespace, temporal: Any
) -> dict[str, Any]:
    """B writes and claims one at a time, alternating, while A floods."""
    rng = random.Random(5)
    executor = b.crew.daemons[0]
    flooding = asyncio.create_task(
        flood(a, args.flood_writes, args.flood_tasks, args.flood_concurrency)
    )
    await asyncio.sleep(1.0)  # let A's backlog build before B's first request
    writes: list[float] = []
    claims: list[float] = []
    logged: list[TimedWrite] = []
    while not flooding.done() and len(writes) < args.runs:
        writes.append(await timed_write(b, rng, logged))
        if flooding.done():
            break
        claims.append(await timed(partial(claim, executor, tasks.pop())))
    a_flood = await flooding
    return {
        "write": stats(writes) if writes else None,
        "write_stages": await write_stages(temporal, logged),
        "claim": stats(claims) if claims else None,
        "team_a_flood": a_flood,
    }


def ratio(flooded: dict[str, Any] | None, quiet: dict[str, Any]) -> float | None:
    return None if flooded is None else round(flooded["p50_ms"] / quiet["p50_ms"], 2)


async def backlog(temporal: Any, a_runs: int, b_runs: int) -> dict[str, Any]:
    """Temporal's queue alone, where fairness acts: A's `a_runs` no-op runs and then B's `b_runs`
    wait in a task queue no worker polls yet, each under its team's priority (as the API starts
    them); then a worker with two workflow-task slots drains it. B's places in the order the
    runs closed: near the end with one FIFO, near the front when teams take turns."""
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    from bench._stack import BenchNoopWorkflow
    from schemas.priorities import WorkKind
    from workflows.common import work_priority

    queue = f"bench-fairness-{uuid.uuid4().hex[:8]}"
    teams = {"A": uuid.uuid4(), "B": uuid.uuid4()}
    handles = []
    for team, runs in (("A", a_runs), ("B", b_runs)):
        for _ in range(runs):
            handle = await temporal.start_workflow(
                BenchNoopWorkflow.run,
                id=f"{queue}/{team}/{uuid.uuid4()}",
                task_queue=queue,
                priority=work_priority(WorkKind.REQUEST, teams[team]),
            )
            handles.append((team, handle))
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("bench", "bench._stack")
    )
    async with Worker(
        temporal,
        task_queue=queue,
        workflows=[BenchNoopWorkflow],
        workflow_runner=runner,
        max_concurrent_workflow_tasks=2,
    ):
        await asyncio.gather(*(handle.result() for _, handle in handles))
    closed = [
        (await handle.describe()).close_time or datetime.max.replace(tzinfo=UTC)
        for _, handle in handles
    ]
    order = sorted(range(len(handles)), key=lambda i: closed[i])
    places = [place + 1 for place, i in enumerate(order) if handles[i][0] == "B"]
    return {
        "team_a_runs": a_runs,
        "team_b_runs": b_runs,
        "team_b_enqueued_at": list(range(a_runs + 1, a_runs + b_runs + 1)),
        "team_b_closed_at": places,
        "team_b_median_place": statistics.median(places),
    }


def spin(share: float, stop: Any) -> None:
    """Burn `share` of one core (busy for that part of each period) until `stop` is set."""
    while not stop.is_set():
        began = time.perf_counter()
        while time.perf_counter() - began < share * SPIN_PERIOD_S:
            pass
        time.sleep((1 - share) * SPIN_PERIOD_S)


async def cpu_floor(b: Team, cores: float, runs: int, rng: random.Random) -> dict[str, Any]:
    """B's writes while plain processes burn `cores` (what A's flood cost the stack), with no
    request of A's anywhere: what B's write costs when it only shares the CPU, the floor that
    no ordering of ours can go below."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    count = max(1, round(cores + 0.49))
    spinners = [context.Process(target=spin, args=(cores / count, stop)) for _ in range(count)]
    for spinner in spinners:
        spinner.start()
    try:
        writes = [await timed(lambda: b.write(rng)) for _ in range(runs)]
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join()
    return {"burned_cores": round(cores, 2), "spinners": count, "write": stats(writes)}


def flood_cores(cpu: dict[str, Any]) -> float:
    """The cores the stack and the load generator used during the flood (not other processes)."""
    return float(sum(used for part, used in cpu["cores"].items() if part != "others"))


async def one_server(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    fairness, overrides = MODES[mode]
    async with BenchStack(
        keep_dir=args.keep_dir, temporal_fairness=fairness, settings=overrides
    ) as stack:
        meter = CpuMeter(stack.pids())
        temporal = await stack.temporal_client()
        connector = aiohttp.TCPConnector(limit=4 * args.flood_concurrency, limit_per_host=0)
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            log(f"{mode}: registering teams A and B")
            a = Team(await crew(session, stack, temporal, 0))
            b = Team(await crew(session, stack, temporal, 1))
            b_tasks = [await b.create_task() for _ in range(2 * args.runs)]
            quiet = await wait_quiet(meter, args.wait_quiet)
            log("idle: B writes and claims alone")
            alone = await idle(b, b_tasks, args.runs, random.Random(3), temporal)
            log(f"flood: A sends {args.flood_writes} writes and {args.flood_tasks} tasks")
            meter.start()
            flooded = await during_flood(a, b, b_tasks, args, temporal)
            cpu = meter.stop(args.flood_writes + args.flood_tasks)
            log(f"floor: B writes while plain processes burn the {flood_cores(cpu):.2f} cores")
            floor = await cpu_floor(b, flood_cores(cpu), args.runs, random.Random(9))
            log(f"backlog: {args.backlog} of A's runs, then 5 of B's, in Temporal's queue alone")
            queued = await backlog(temporal, args.backlog, 5)
        result: dict[str, Any] = {
            "temporal_command_flags": stack.topology()["temporal_command_flags"],
            "workflow_task_slots": {
                "service": stack.settings.worker_workflow_task_slots,
                "embedding": stack.settings.embedding_workflow_task_slots,
            },
            "quiet_check": quiet,
            "idle": alone,
            "flood": flooded,
            "flood_cpu": cpu,
            "cpu_only_floor": floor,
            "noisy": cpu["cores"]["others"] > QUIET_CORES,
            "temporal_backlog": queued,
        }
    result["ratio_flood_over_idle_p50"] = {
        kind: ratio(flooded[kind], alone[kind]) for kind in ("write", "claim")
    }
    result["ratio_cpu_only_floor_over_idle_p50"] = {"write": ratio(floor["write"], alone["write"])}
    return result


async def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "fairness",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": {
            "runs": args.runs,
            "flood_writes": args.flood_writes,
            "flood_tasks": args.flood_tasks,
            "flood_concurrency": args.flood_concurrency,
            "backlog": args.backlog,
            "rate_limit_enabled": False,
            "quiet_cores": QUIET_CORES,
        },
        "env": machine_info(),
    }
    for mode in args.modes:
        result[mode] = await one_server(args, mode)
    result["targets"] = {
        f"{kind}_flood_over_idle_p50_max": target(result, args.modes, kind)
        for kind in ("write", "claim")
    }
    result["reading"] = reading(result)
    return result


def target(result: dict[str, Any], modes: list[str], kind: str) -> dict[str, Any]:
    """Each mode's flood/idle ratio of `kind`; met when the shipped stack's is within it."""
    ratios = {mode: result[mode]["ratio_flood_over_idle_p50"][kind] for mode in modes}
    shipped = ratios.get("fairness_on")
    return {
        "target": TARGET_RATIO,
        **ratios,
        "met": shipped is not None and shipped <= TARGET_RATIO,
    }


def reading(result: dict[str, Any]) -> list[str]:
    """What limits the figures, stated from the run itself."""
    settings = result["settings"]
    modes = [mode for mode in MODES if mode in result]
    said = []
    for mode in modes:
        slots = result[mode]["workflow_task_slots"]
        fits = settings["flood_concurrency"] <= min(slots.values())
        said.append(
            f"{mode}: A's {settings['flood_concurrency']} requests in flight "
            + (
                f"fit in the workers' workflow-task slots {slots}: no backlog waits in "
                "Temporal's queue, fairness has nothing to reorder, B waits behind A inside "
                "the worker"
                if fits
                else f"exceed the workers' workflow-task slots {slots}: the rest wait in "
                "Temporal's queue, where B's run is dispatched in its team's turn"
            )
        )
        stages = result[mode]["flood"]["write_stages"]
        if stages:
            where = max(stages, key=lambda stage: stages[stage]["p50_ms"])
            said.append(
                f"{mode}: B's write under the flood spent most in {where} "
                f"(p50 {stages[where]['p50_ms']} ms of {result[mode]['flood']['write']['p50_ms']})"
            )
        floor = result[mode]["cpu_only_floor"]
        said.append(
            f"{mode}: with the flood's {floor['burned_cores']} cores burnt by plain processes "
            f"instead, B's write p50 was {floor['write']['p50_ms']} ms "
            f"({result[mode]['ratio_cpu_only_floor_over_idle_p50']['write']}x idle): the "
            "machine's floor under that load"
        )
    on, off = (
        result.get(mode, {}).get("temporal_backlog") for mode in ("fairness_on", "fairness_off")
    )
    if on and off:
        said.append(
            f"in Temporal's queue alone, B's {on['team_b_runs']} runs queued after A's "
            f"{on['team_a_runs']} closed at places {on['team_b_closed_at']} with fairness and "
            f"{off['team_b_closed_at']} without: fairness acts where work waits in Temporal"
        )
    noisy = [mode for mode in modes if result[mode]["noisy"]]
    if noisy:
        cores = {mode: result[mode]["flood_cpu"]["cores"]["others"] for mode in noisy}
        said.append(
            f"other processes on the machine used {cores} cores (of "
            f"{result['env']['nproc']}) during the flood: the stack ran CPU-starved"
        )
    return said


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20, help="B's writes and claims per phase")
    parser.add_argument("--flood-writes", type=int, default=500)
    parser.add_argument("--flood-tasks", type=int, default=200)
    parser.add_argument(
        "--flood-concurrency",
        type=int,
        default=16,
        help="A's requests in flight (above the worker's 100 workflow-task slots, a backlog "
        "forms in Temporal's queue, where fairness acts; on 2 shared cores 64 already drives "
        "the embedding worker into workflow-task timeouts)",
    )
    parser.add_argument(
        "--backlog", type=int, default=200, help="A's runs queued in Temporal before B's five"
    )
    parser.add_argument("--quick", action="store_true", help="10 runs, a flood of 150 + 60")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=30.0,
        help="before the idle phase, wait up to this long for other CPU load to drop",
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=list(MODES),
        default=list(MODES),
        help="the stacks to compare: fairness on with the shipped workflow-task slots, on with "
        "temporalio's 100 slots (before the slots were settings), off",
    )
    parser.add_argument("--keep-dir", action="store_true", help="keep the stacks' temp dirs")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.runs, args.flood_writes, args.flood_tasks = 10, 150, 60
    os.chdir(REPO_ROOT)
    run_and_report(run(args), args.output)


if __name__ == "__main__":
    main()
