"""Benchmark what the shared rate limiter adds to a request, with its baseline from the same run.

    .venv/bin/python bench/ratelimit.py [--seconds 3] [--rounds 5] [--concurrency 16]

Starts the embedded stack (bench/_stack.py) with its API (`cairn api`, limits off) and a second
API process on the same database with limits on (every bucket set far above the load, so nothing
is refused and every request runs the limiter's statement), then measures:

- `direct`: the limiter's own call in this process (`RateLimiter.take` on a pool like the API's
  limiter pool, one bucket for a GET and two for a write) next to a bare `SELECT 1` on the same
  pool, at concurrency 1 and N, distinct keys per client. These buckets are large, so they are
  leased (most calls take no round trip); `take_strict` is a bucket below the lease threshold
  (one upsert per call, refused once full: the statement runs either way);
- `whoami`: `GET /agents/whoami` (JWT + one read) on the API with limits off and on, the two
  alternated in short rounds so drift of the shared machine hits both alike, at concurrency 1
  and N; `added_p50_ms` = p50 on - p50 off (target: at most 0.3 ms at concurrency 1).

Prints one JSON document and writes it to bench/results/ratelimit.json. About 2 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import (
    BenchStack,
    CpuMeter,
    _Child,
    _port_open,
    _tree_cpu,
    register_agent,
    run_and_report,
)

RESULTS = Path(__file__).resolve().parent / "results" / "ratelimit.json"
TARGET_ADDED_P50_MS = 0.3
HUGE = "100000000/minute"  # far above any load here: measured, never refused
BUCKETS = ("global_auth", "global_anon", "global_read", "signing")


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(samples_ms: list[float], elapsed_s: float) -> dict[str, Any]:
    return {
        "requests": len(samples_ms),
        "per_sec": round(len(samples_ms) / elapsed_s, 1),
        "p50_ms": round(statistics.median(samples_ms), 3),
        "p95_ms": round(percentile(samples_ms, 0.95), 3),
        "p99_ms": round(percentile(samples_ms, 0.99), 3),
    }


async def closed_loop(
    call: Callable[[int], Awaitable[None]], concurrency: int, seconds: float
) -> tuple[list[float], float]:
    """`concurrency` clients calling back to back for `seconds`; each client's latencies (ms)."""
    samples: list[float] = []
    deadline = time.perf_counter() + seconds

    async def client(n: int) -> None:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            await call(n)
            samples.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(concurrency)))
    return samples, time.perf_counter() - start


async def direct(stack: BenchStack, seconds: float, concurrency: int) -> dict[str, Any]:
    """The limiter's statement alone, against a `SELECT 1` on the same pool."""
    from api.ratelimit import RateLimiter
    from infra.db import create_pool
    from infra.settings import Rate
    from schemas.limits import RATE_LEASE_MIN_LIMIT

    pool = await create_pool(
        stack.settings.database_url,
        read_only=False,
        min_size=1,
        max_size=stack.settings.database_rate_pool_max,
        session={"synchronous_commit": "off"},
    )
    rates = {b: Rate.parse(HUGE) for b in BUCKETS}  # as the limited API's: never refused
    rates["strict"] = Rate(limit=RATE_LEASE_MIN_LIMIT - 1, period_sec=3600)
    limiter = RateLimiter(pool, rates)
    keys = [f"agent:{uuid.uuid4()}" for _ in range(concurrency)]

    async def select_one(n: int) -> None:
        await pool.fetchval("SELECT 1")

    async def take_read(n: int) -> None:
        assert await limiter.take(keys[n], ["global_read"]) is not None

    async def take_write(n: int) -> None:
        assert await limiter.take(keys[n], ["global_auth", "signing"]) is not None

    async def take_strict(n: int) -> None:
        assert await limiter.take(keys[n], ["strict"]) is not None

    phases = {
        "select_1": select_one,
        "take_1_bucket": take_read,
        "take_2_buckets": take_write,
        "take_strict": take_strict,
    }
    result: dict[str, Any] = {}
    try:
        for clients in (1, concurrency):
            for name, call in phases.items():
                await closed_loop(call, clients, 0.5)  # warm-up
                samples, elapsed = await closed_loop(call, clients, seconds)
                result[f"{name}_c{clients}"] = summary(samples, elapsed)
            base = result[f"select_1_c{clients}"]["p50_ms"]
            for name in ("take_1_bucket", "take_strict"):
                result[f"{name}_c{clients}"]["over_select_1_p50_ms"] = round(
                    result[f"{name}_c{clients}"]["p50_ms"] - base, 3
                )
    finally:
        await pool.close()
    return result


def cpu_seconds(pids: list[int]) -> float:
    """CPU time so far of these processes and their children."""
    return sum(_tree_cpu(pid) for pid in pids)


async def start_limited_api(stack: BenchStack) -> tuple[str, int]:
    """A second `cairn api` on the stack's database with limits on (and far above the load)."""
    from infra.devstack import free_port

    port = free_port()
    env = dict(stack.env)
    env.update(
        SERVICE_API_PORT=str(port),  # the base URL stays the first API's: the token issuer
        SERVICE_RATE_LIMIT_ENABLED="true",
        **{f"SERVICE_RATE_LIMIT_{bucket.upper()}": HUGE for bucket in BUCKETS},
    )
    child = _Child(
        "api-limited",
        [sys.executable, "-m", "bench._stack", "api"],
        stack.root / "api-limited.log",
        env=env,
    )
    stack._parts.append(child)
    child.start()
    deadline = time.monotonic() + 60
    while not _port_open(port):
        if not child.alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the limited API did not start:\n{child.log_tail()}")
        await asyncio.sleep(0.1)
    assert child.process is not None
    return f"http://127.0.0.1:{port}", child.process.pid


async def whoami(
    stack: BenchStack, limited: tuple[str, int], seconds: float, rounds: int, concurrency: int
) -> dict[str, Any]:
    """`GET /agents/whoami` with limits off and on, alternated round by round; with the CPU
    each request costs the API process and Postgres (steadier than latency on a shared
    machine)."""
    limited_url, limited_pid = limited
    postgres = [stack.pids()["postgres"]]
    assert stack.api is not None and stack.api.process is not None
    api_pids = {"off": [stack.api.process.pid], "on": [limited_pid]}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        agents = [await register_agent(http, stack) for _ in range(concurrency)]
        urls = {"off": stack.base_url, "on": limited_url}
        result: dict[str, Any] = {}
        for clients in (1, concurrency):
            samples: dict[str, list[float]] = {"off": [], "on": []}
            elapsed = {"off": 0.0, "on": 0.0}
            cpu = {"off": 0.0, "on": 0.0}
            api_cpu = {"off": 0.0, "on": 0.0}
            for round_n in range(rounds + 1):
                for mode, base in urls.items():

                    async def call(n: int, base: str = base) -> None:
                        async with http.get(
                            base + "/agents/whoami", headers=agents[n].headers
                        ) as response:
                            await response.read()
                            assert response.status == 200, response.status

                    pids = api_pids[mode] + postgres
                    before, api_before = cpu_seconds(pids), cpu_seconds(api_pids[mode])
                    taken, spent = await closed_loop(call, clients, seconds)
                    if round_n:  # round 0 warms both up
                        samples[mode] += taken
                        elapsed[mode] += spent
                        cpu[mode] += cpu_seconds(pids) - before
                        api_cpu[mode] += cpu_seconds(api_pids[mode]) - api_before
            off, on = summary(samples["off"], elapsed["off"]), summary(samples["on"], elapsed["on"])
            for mode, measured in (("off", off), ("on", on)):
                measured["api_and_postgres_cpu_ms_per_request"] = round(
                    1000 * cpu[mode] / len(samples[mode]), 3
                )
                measured["api_cpu_ms_per_request"] = round(
                    1000 * api_cpu[mode] / len(samples[mode]), 3
                )
            result[f"c{clients}"] = {
                "limits_off": off,
                "limits_on": on,
                "added_p50_ms": round(on["p50_ms"] - off["p50_ms"], 3),
                "added_cpu_ms_per_request": round(
                    on["api_and_postgres_cpu_ms_per_request"]
                    - off["api_and_postgres_cpu_ms_per_request"],
                    3,
                ),
            }
    return result


async def main(args: argparse.Namespace) -> dict[str, Any]:
    async with BenchStack(api_processes=1, keep_dir=args.keep_dir) as stack:
        limited = await start_limited_api(stack)
        meter = CpuMeter(stack.pids())
        meter.start()
        measured_direct = await direct(stack, args.seconds, args.concurrency)
        measured_whoami = await whoami(stack, limited, args.seconds, args.rounds, args.concurrency)
        cpu = meter.stop(0)
        added = measured_whoami["c1"]["added_p50_ms"]
        return {
            "bench": "ratelimit",
            "what": "cost of the shared (Postgres) rate limiter per request, same-run baselines",
            "settings": vars(args),
            "topology": stack.topology() | {"limited_api": "second `cairn api`, limits on"},
            "direct": measured_direct,
            "whoami": measured_whoami,
            "target": {
                "added_p50_ms_max": TARGET_ADDED_P50_MS,
                "added_p50_ms_c1": added,
                "met": added <= TARGET_ADDED_P50_MS,
            },
            "cpu": cpu,
        }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per phase and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--keep-dir", action="store_true", help="keep the stack's logs")
    run_and_report(main(parser.parse_args()), RESULTS)
