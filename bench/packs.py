"""Benchmark context packs: create a pack of 50 entries, and render it, each next to a no-op
Temporal workflow of the same run.

    .venv/bin/python bench/packs.py [--runs 40] [--entries 50] [--quick]

Starts the embedded stack (bench/_stack.py: Postgres + pgvector, the tuned Temporal dev server,
rclone S3, the API and the worker each in their own process), registers an agent, writes
`--entries` entries of about 120 words into one private diary through the API, then, one
request at a time (one client):

1. raw baselines: a no-op workflow round trip (`BenchNoop`: start → complete) and
   `GET /agents/whoami` (the API's own floor: auth, one read, HTTP);
2. `POST /diaries/{id}/packs` of all the entries with a token budget that compresses the tail
   (each run a new pack: its params carry the run number) — the whole `PackCreate` workflow:
   read the entries, fit, CID, insert pack + entries + tuple, then the read of the result;
3. `POST /packs/{id}/render` with `server:pack-to-docs-v1` on each pack made in 2 — the
   `PackRender` workflow: read the entries, render, hash, insert, then the read back.

p50/p95 of each, and the ratio of each p50 to the no-op workflow's. Targets (issue 13): pack
create p50 ≤ 100 ms and render p50 ≤ 100 ms at one client.

Writes JSON to bench/results/packs.json. About a minute with the defaults on 2 cores.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import (
    NOOP_TASK_QUEUE,
    NOOP_WORKFLOW,
    BenchAgent,
    BenchStack,
    register_agent,
    run_and_report,
)

RESULTS = Path(__file__).resolve().parent / "results" / "packs.json"
TARGETS = {"pack_create_c1_p50_ms": 100.0, "render_c1_p50_ms": 100.0}
WORDS = [
    "deploy",
    "rollback",
    "canary",
    "fleet",
    "balancer",
    "migration",
    "schema",
    "index",
    "vacuum",
    "replica",
    "cache",
    "token",
    "budget",
    "summary",
    "keyword",
    "entry",
    "diary",
    "pack",
    "render",
    "markdown",
    "workflow",
    "activity",
    "postgres",
    "temporal",
    "latency",
    "throughput",
    "queue",
    "lease",
    "heartbeat",
    "incident",
    "owner",
    "alert",
]


def log(message: str) -> None:
    print(f"[packs-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(latencies_ms: Sequence[float]) -> dict[str, Any]:
    return {
        "count": len(latencies_ms),
        "p50_ms": round(percentile(latencies_ms, 0.50), 2),
        "p95_ms": round(percentile(latencies_ms, 0.95), 2),
        "mean_ms": round(statistics.fmean(latencies_ms), 2),
        "max_ms": round(max(latencies_ms), 2),
    }


async def timed(fn: Callable[[int], Awaitable[Any]], runs: int, warmup: int = 3) -> list[float]:
    for i in range(warmup):
        await fn(-1 - i)
    samples = []
    for i in range(runs):
        start = time.perf_counter()
        await fn(i)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def entry_text(i: int) -> str:
    """About 120 words in 8 sentences, different per entry (the summary level has work)."""
    sentences = []
    for s in range(8):
        words = [WORDS[(i * 7 + s * 3 + w) % len(WORDS)] for w in range(15)]
        sentences.append(" ".join(words).capitalize() + f" number {i}-{s}.")
    return " ".join(sentences)


async def call(
    session: aiohttp.ClientSession, method: str, url: str, agent: BenchAgent, **kwargs: Any
) -> Any:
    async with session.request(method, url, headers=agent.headers, **kwargs) as response:
        body = await response.json(content_type=None)
        assert response.status in (200, 201), (response.status, body)
        return body


async def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "packs",
        "params": {"runs": args.runs, "entries": args.entries},
        "env": {"python": platform.python_version(), "machine": platform.machine()},
    }
    async with BenchStack(keep_dir=args.keep_dir) as stack:
        result["topology"] = stack.topology()
        base = stack.base_url
        client = await stack.temporal_client()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
            agent = await register_agent(session, stack)
            log(f"writing {args.entries} entries")
            diary_id, entry_ids = await setup(session, base, agent, args.entries)
            words = sum(len(entry_text(i).split()) for i in range(args.entries))
            budget = int(words / 0.75 * 0.6)  # ~60 % of the full size: the tail compresses

            log("baselines")

            async def noop(_: int) -> None:
                await client.execute_workflow(
                    NOOP_WORKFLOW, id=f"bench-noop/{uuid.uuid4()}", task_queue=NOOP_TASK_QUEUE
                )

            async def whoami(_: int) -> None:
                await call(session, "GET", base + "/agents/whoami", agent)

            noop_c1 = summary(await timed(noop, max(args.runs, 50)))
            whoami_c1 = summary(await timed(whoami, max(args.runs, 50)))

            log("pack create")
            packs: list[str] = []
            selection = [{"entryId": e, "rank": r + 1} for r, e in enumerate(entry_ids)]

            async def create(i: int) -> None:
                body = {"entries": selection, "tokenBudget": budget, "params": {"run": i}}
                made = await call(
                    session, "POST", f"{base}/diaries/{diary_id}/packs", agent, json=body
                )
                assert made["created"] is True and len(made["entries"]) == args.entries
                packs.append(made["packId"])

            create_c1 = summary(await timed(create, args.runs))
            compressed = await call(session, "GET", f"{base}/packs/{packs[-1]}", agent)

            log("render")

            async def render(i: int) -> None:
                # warm-up runs (i < 0) render the warm-up packs, measured runs the others
                pack_id = packs[i + 3] if i >= 0 else packs[-i - 1]
                rendered = await call(
                    session,
                    "POST",
                    f"{base}/packs/{pack_id}/render",
                    agent,
                    json={"renderMethod": "server:pack-to-docs-v1"},
                )
                assert rendered["created"] is True

            render_c1 = summary(await timed(render, args.runs))

    noop_p50 = noop_c1["p50_ms"]
    result["baselines"] = {"noop_workflow_c1": noop_c1, "whoami_c1": whoami_c1}
    result["pack_create_c1"] = {
        **create_c1,
        "entries": args.entries,
        "token_budget": budget,
        "total_tokens": compressed["totalTokens"],
        "over_noop_workflow_p50": round(create_c1["p50_ms"] / noop_p50, 2),
    }
    result["render_c1"] = {
        **render_c1,
        "over_noop_workflow_p50": round(render_c1["p50_ms"] / noop_p50, 2),
    }
    result["targets"] = {
        name: {
            "target_ms": target,
            "measured_ms": result[name.removesuffix("_p50_ms")]["p50_ms"],
            "met": result[name.removesuffix("_p50_ms")]["p50_ms"] <= target,
        }
        for name, target in TARGETS.items()
    }
    return result


async def setup(
    session: aiohttp.ClientSession, base: str, agent: BenchAgent, entries: int
) -> tuple[str, list[str]]:
    async with session.post(
        base + "/diaries",
        json={"name": "bench-packs", "visibility": "private"},
        headers={**agent.headers, "x-service-team-id": agent.team_id},
    ) as response:
        diary = await response.json(content_type=None)
        assert response.status == 201, diary
    ids = []
    for i in range(entries):
        entry = await call(
            session,
            "POST",
            f"{base}/diaries/{diary['id']}/entries",
            agent,
            json={"content": entry_text(i), "title": f"Note {i}"},
        )
        ids.append(entry["id"])
    return str(diary["id"]), ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--entries", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="10 runs")
    parser.add_argument("--keep-dir", action="store_true")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.runs = 10
    run_and_report(run(args), args.output)


if __name__ == "__main__":
    main()
