"""Benchmark the bundled daemon on the real stack, next to the direct-HTTP lifecycle.

    .venv/bin/python bench/daemon.py [--tasks 400] [--slots 16] [--idle 16] [--quick]

Starts the embedded stack (bench/_stack.py), makes a team with an owner and executors, then:
1. baseline, same run: the direct-HTTP lifecycle of bench/tasks.py without its create (tasks are
   made beforehand): 16 loops of claim → heartbeat → 3 messages → complete: tasks/s;
2. the real `cairn daemon` process with one team agent key, `--slots 16`, and a no-op executor
   (`/bin/sh`: reads the task, prints three progress lines and an output) over the same number
   of pre-made tasks: tasks/s over the middle 80 % of completions (by the attempts'
   `completedAt`, so the daemon's start-up is not counted), and claim → first heartbeat p50
   (the attempts' `claimedAt` → `startedAt`);
3. idle: 16 daemon processes on an empty queue; the cores the API and Postgres use over the
   measured window (after their polling has backed off, and from their start).
Writes JSON to bench/results/daemon.json. Targets (issue 12): daemon ≥ 0.8 × direct; idle API +
Postgres ≤ 5 % of one core.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import BenchStack, CpuMeter, run_and_report
from bench.tasks import Crew, claim, complete, create_task, crew, heartbeat, message, percentile

RESULTS = Path(__file__).resolve().parent / "results" / "daemon.json"
NOOP_EXECUTOR = (
    'cat >/dev/null; for i in 1 2 3; do echo \'{"kind": "progress", "payload": {"step": 1}}\';'
    ' done; echo \'{"output": {"summary": "benchmarked"}}\''
)


def log(text: str) -> None:
    print(f"[daemon-bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


async def direct(c: Crew, tasks: list[str], concurrency: int) -> dict[str, Any]:
    """claim → heartbeat → 3 messages → complete over pre-made tasks, `concurrency` loops."""
    pending = list(tasks)

    async def loop(i: int) -> None:
        daemon = c.daemons[i % len(c.daemons)]
        while pending:
            task_id = pending.pop()
            n = await claim(daemon, task_id)
            await heartbeat(daemon, task_id, n)
            for k in range(3):
                await message(daemon, task_id, k, n)
            await complete(daemon, task_id, n)

    start = time.perf_counter()
    await asyncio.gather(*(loop(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {
        "tasks": len(tasks),
        "seconds": round(elapsed, 2),
        "tasks_per_s": round(len(tasks) / elapsed, 2),
    }


async def team_key(c: Crew) -> str:
    executor = c.daemons[0]
    key = await executor.call(
        "POST",
        "/agent-keys",
        {"agentId": executor.agent_id, "name": "bench-daemon"},
        **{"x-service-team-id": c.team_id, "Idempotency-Key": uuid.uuid4().hex},
    )
    return str(key["secret"])


def start_daemon(stack: BenchStack, c: Crew, key: str, slots: int) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(SERVICE_AGENT_KEY=key, SERVICE_API_URL=stack.base_url, LOG_LEVEL="WARNING")
    return asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cairn",
        "daemon",
        "--team",
        c.team_id,
        "--slots",
        str(slots),
        "--",
        "/bin/sh",
        "-c",
        NOOP_EXECUTOR,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def open_tasks(c: Crew) -> int:
    page = await c.owner.call(
        "GET",
        "/tasks?statuses=queued,dispatched,running&limit=100",
        **{"x-service-team-id": c.team_id},
    )
    return len(page["items"])


async def attempts_of(c: Crew, task_ids: list[str]) -> list[dict[str, Any]]:
    found = []
    for task_id in task_ids:
        page = await c.owner.call(
            "GET", f"/tasks/{task_id}/attempts", **{"x-service-team-id": c.team_id}
        )
        found.extend(page["items"])
    return found


def _at(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


async def daemon_run(
    stack: BenchStack, c: Crew, tasks: list[str], key: str, slots: int
) -> dict[str, Any]:
    process = await start_daemon(stack, c, key, slots)
    try:
        deadline = time.monotonic() + 600
        while await open_tasks(c) > 0:
            assert time.monotonic() < deadline, "the daemon did not finish the queue"
            await asyncio.sleep(0.5)
    finally:
        process.terminate()
        await process.wait()
    attempts = await attempts_of(c, tasks)
    done = sorted(_at(a["finishedAt"]) for a in attempts if a["status"] == "completed")
    low, high = done[len(done) // 10], done[(len(done) * 9) // 10]
    middle = (len(done) * 9) // 10 - len(done) // 10
    waits = [
        1000 * (_at(a["startedAt"]) - _at(a["claimedAt"]))
        for a in attempts
        if a.get("startedAt") and a.get("claimedAt")
    ]
    return {
        "tasks": len(tasks),
        "completed": len(done),
        "tasks_per_s": round(middle / (high - low), 2) if high > low else None,
        "claim_to_first_heartbeat_ms": {
            "p50": round(percentile(waits, 0.5), 1),
            "p95": round(percentile(waits, 0.95), 1),
        },
    }


async def idle(
    stack: BenchStack, c: Crew, key: str, daemons: int, settle: float, window: float
) -> dict[str, Any]:
    meter = CpuMeter(
        {name: pid for name, pid in stack.pids().items() if name in ("api", "postgres")}
    )
    processes = [await start_daemon(stack, c, key, 1) for _ in range(daemons)]
    try:
        meter.start()
        await asyncio.sleep(settle)
        from_start = meter.stop(1)
        meter.start()
        await asyncio.sleep(window)
        steady = meter.stop(1)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            await process.wait()
    return {
        "daemons": daemons,
        "first_seconds": settle,
        "cores_from_start": from_start["cores"],
        "window_seconds": window,
        "cores_steady": steady["cores"],
        "api_plus_postgres_cores_steady": round(
            steady["cores"].get("api", 0) + steady["cores"].get("postgres", 0), 3
        ),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"benchmark": "daemon", "slots": args.slots}
    async with BenchStack() as stack, aiohttp.ClientSession() as session:
        temporal = await stack.temporal_client()
        c = await crew(session, stack, temporal, 4)
        key = await team_key(c)
        log(f"direct lifecycle over {args.tasks} tasks, {args.slots} loops")
        made = [await create_task(c.owner, c) for _ in range(args.tasks)]
        result["direct"] = await direct(c, made, args.slots)
        log(f"daemon over {args.tasks} tasks, {args.slots} slots")
        made = [await create_task(c.owner, c) for _ in range(args.tasks)]
        result["daemon"] = await daemon_run(stack, c, made, key, args.slots)
        log(f"{args.idle} idle daemons")
        result["idle"] = await idle(stack, c, key, args.idle, args.settle, args.window)
        result["topology"] = stack.topology()
    direct_rate, daemon_rate = result["direct"]["tasks_per_s"], result["daemon"]["tasks_per_s"]
    result["daemon_over_direct"] = round(daemon_rate / direct_rate, 2) if daemon_rate else None
    result["targets"] = {
        "daemon_over_direct_min": 0.8,
        "daemon_over_direct_ok": bool(daemon_rate and daemon_rate / direct_rate >= 0.8),
        "idle_api_plus_postgres_cores_max": 0.05,
        "idle_ok": result["idle"]["api_plus_postgres_cores_steady"] <= 0.05,
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=400)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--idle", type=int, default=16, help="idle daemons")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds before the idle window")
    parser.add_argument("--window", type=float, default=60.0, help="seconds of the idle window")
    parser.add_argument("--quick", action="store_true", help="100 tasks, 20 s idle phases")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.settle, args.window = 100, 20.0, 20.0
    run_and_report(run(args), args.output)


if __name__ == "__main__":
    main()
