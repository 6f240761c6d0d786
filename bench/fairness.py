"""Benchmark fairness between teams (issue 30 §5): a quiet team's latency while another floods.

    .venv/bin/python bench/fairness.py [--runs 20] [--flood-writes 500] [--flood-tasks 200]
                                       [--flood-concurrency 16] [--quick]

Runs the embedded stack (bench/_stack.py) twice in the same run: once with the Temporal dev
server as shipped (fairness on, `infra.devstack.FAIRNESS_TEMPORAL_FLAGS`) and once without it
(the before figure: one FIFO per task queue). In each:

1. two teams through the API: team A (an owner) and team B (an owner and one executor), each
   with a diary; B's tasks are created beforehand, so a claim is timed alone;
2. idle: B's single entry write (`POST /diaries/{id}/entries`) and single claim
   (`POST /tasks/{id}/claim` on a queued task), one at a time, `--runs` each: p50/p95;
3. flood: team A sends `--flood-writes` entry writes and `--flood-tasks` task creates through the
   API, `--flood-concurrency` at a time; meanwhile B writes and claims one at a time, as in 2,
   until the flood ends (at most `--runs` each): p50/p95, and A's throughput;
4. the ratio flood p50 / idle p50 for each, against the issue's target (≤ 2×);
5. Temporal's queue alone (`--backlog`): A's no-op runs, then five of B's, queued with their
   teams' priorities before a two-slot worker drains them: the places B's runs closed at.

`reading` in the result says what limited the run (where the flood waited, other CPU load).

The rate limiter is off (BenchStack's default), and here on purpose: as shipped it lets one
identity send 100 requests a minute and registers 5 agents a minute per address, so a flood of
700 runs at once is a team of many agents over minutes, which the bench cannot assemble in a
run; the limiter bounds each identity, fairness shares the queue between teams, and the flood
must reach the queue to measure the latter.

Writes JSON to bench/results/fairness.json. About 9 minutes with the defaults on 2 busy cores.
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
# the service worker's and the embedding worker's workflow-task slots (temporalio's default)
WORKER_WORKFLOW_TASK_SLOTS = 100


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

    async def write(self, rng: random.Random) -> None:
        await self.owner.call(
            "POST", f"/diaries/{self.crew.diary_id}/entries", {"content": note(rng)}
        )

    async def create_task(self) -> str:
        return await create_task(self.owner, self.crew)


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    began = time.perf_counter()
    await fn()
    return (time.perf_counter() - began) * 1000


async def idle(b: Team, tasks: list[str], runs: int, rng: random.Random) -> dict[str, Any]:
    """B alone: `runs` writes, then `runs` claims, one at a time."""
    for _ in range(3):  # warm-up
        await b.write(rng)
    writes = [await timed(lambda: b.write(rng)) for _ in range(runs)]
    executor = b.crew.daemons[0]
    claims = [await timed(partial(claim, executor, task)) for task in tasks[:runs]]
    del tasks[:runs]
    return {"write": stats(writes), "claim": stats(claims)}


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
    a: Team, b: Team, tasks: list[str], args: argparse.Namespace
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
    while not flooding.done() and len(writes) < args.runs:
        writes.append(await timed(lambda: b.write(rng)))
        if flooding.done():
            break
        claims.append(await timed(partial(claim, executor, tasks.pop())))
    a_flood = await flooding
    return {
        "write": stats(writes) if writes else None,
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


async def one_server(args: argparse.Namespace, *, fairness: bool) -> dict[str, Any]:
    async with BenchStack(keep_dir=args.keep_dir, temporal_fairness=fairness) as stack:
        meter = CpuMeter(stack.pids())
        temporal = await stack.temporal_client()
        connector = aiohttp.TCPConnector(limit=4 * args.flood_concurrency, limit_per_host=0)
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            log(f"fairness {'on' if fairness else 'off'}: registering teams A and B")
            a = Team(await crew(session, stack, temporal, 0))
            b = Team(await crew(session, stack, temporal, 1))
            b_tasks = [await b.create_task() for _ in range(2 * args.runs)]
            quiet = await wait_quiet(meter, args.wait_quiet)
            log("idle: B writes and claims alone")
            alone = await idle(b, b_tasks, args.runs, random.Random(3))
            log(f"flood: A sends {args.flood_writes} writes and {args.flood_tasks} tasks")
            meter.start()
            flooded = await during_flood(a, b, b_tasks, args)
            cpu = meter.stop(args.flood_writes + args.flood_tasks)
            log(f"backlog: {args.backlog} of A's runs, then 5 of B's, in Temporal's queue alone")
            queued = await backlog(temporal, args.backlog, 5)
        result: dict[str, Any] = {
            "temporal_command_flags": stack.topology()["temporal_command_flags"],
            "quiet_check": quiet,
            "idle": alone,
            "flood": flooded,
            "flood_cpu": cpu,
            "noisy": cpu["cores"]["others"] > QUIET_CORES,
            "temporal_backlog": queued,
        }
    result["ratio_flood_over_idle_p50"] = {
        kind: ratio(flooded[kind], alone[kind]) for kind in ("write", "claim")
    }
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
    result["fairness_on"] = await one_server(args, fairness=True)
    result["fairness_off"] = await one_server(args, fairness=False)
    result["targets"] = {
        f"{kind}_flood_over_idle_p50_max": {
            "target": TARGET_RATIO,
            "fairness_on": (on := result["fairness_on"]["ratio_flood_over_idle_p50"][kind]),
            "fairness_off": result["fairness_off"]["ratio_flood_over_idle_p50"][kind],
            "met": on is not None and on <= TARGET_RATIO,
        }
        for kind in ("write", "claim")
    }
    result["reading"] = reading(result)
    return result


def reading(result: dict[str, Any]) -> list[str]:
    """What limits the figures, stated from the run itself."""
    settings = result["settings"]
    said = []
    if settings["flood_concurrency"] <= WORKER_WORKFLOW_TASK_SLOTS:
        said.append(
            f"A's {settings['flood_concurrency']} requests in flight fit in the worker's "
            f"{WORKER_WORKFLOW_TASK_SLOTS} workflow-task slots: the worker polls them all, no "
            "backlog waits in Temporal's queue, and fairness (which orders that backlog) has "
            "nothing to reorder; B's run waits behind A's inside the worker (CPU, the embedding "
            "micro-batch, local-activity slots) and in the API process, in either mode"
        )
    on, off = (result[mode].get("temporal_backlog") for mode in ("fairness_on", "fairness_off"))
    if on and off:
        said.append(
            f"in Temporal's queue alone, B's {on['team_b_runs']} runs queued after A's "
            f"{on['team_a_runs']} closed at places {on['team_b_closed_at']} with fairness and "
            f"{off['team_b_closed_at']} without: fairness acts where work waits in Temporal"
        )
    noisy = [mode for mode in ("fairness_on", "fairness_off") if result[mode]["noisy"]]
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
    parser.add_argument("--keep-dir", action="store_true", help="keep the stacks' temp dirs")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.runs, args.flood_writes, args.flood_tasks = 10, 150, 60
    os.chdir(REPO_ROOT)
    run_and_report(run(args), args.output)


if __name__ == "__main__":
    main()
