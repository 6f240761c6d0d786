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
4. the ratio flood p50 / idle p50 for each, against the issue's target (≤ 2×).

The rate limiter is off (as in every bench but bench/ratelimit.py): as shipped it lets one
identity send 100 requests a minute and registers 5 agents a minute per address, so a flood of
700 runs at once is a team of many agents over minutes, which the bench cannot assemble in a
run; the limiter bounds each identity, fairness shares the queue between teams, and the flood
must reach the queue to measure the latter.

Writes JSON to bench/results/fairness.json. About 4 minutes with the defaults on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import string
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
        result: dict[str, Any] = {
            "temporal_command_flags": stack.topology()["temporal_command_flags"],
            "quiet_check": quiet,
            "idle": alone,
            "flood": flooded,
            "flood_cpu": cpu,
            "noisy": cpu["cores"]["others"] > QUIET_CORES,
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
