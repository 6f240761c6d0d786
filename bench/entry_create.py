"""Benchmark the entry write path alone (issue 32 §3): `POST /diaries/{id}/entries` p50 with one
writer, and entries/s of N concurrent writers against the raw batched embedding throughput of
the same moment, without bench/memory.py's search corpus.

    .venv/bin/python bench/entry_create.py [--writers 8] [--duration 20]

For each stack of `--modes`, back to back: the embedded stack (bench/_stack.py) with the
workers' workflow-task slots as shipped (`shipped`: `SERVICE_EMBEDDING_WORKFLOW_TASK_SLOTS`
and `SERVICE_WORKER_WORKFLOW_TASK_SLOTS` at their defaults) and with temporalio's 100
(`uncapped_slots`, before they were settings); one agent writes 100-word entries to a diary of
its team, measured by `bench.memory.entry_create_figures` (the same code as memory.json's
`entry_create`). The targets: c1 p50 ≤ 45 ms; writers/raw batched ≥ 0.6.

The design's floor, in the same stack (`floor`): the skeleton of an entry create
(`BenchEntrySkeleton`, bench/_stack.py: one workflow task with two local no-op activities, started
and awaited through the Temporal client as the API does) one at a time and with N loops, plus
the raw embedding: its c1 p50 plus one text's embedding is the least a c1 create can take; the
skeleton's Temporal and worker CPU per run, plus the embedding's CPU per text (batched) and our
API's and Postgres' per entry, is the least CPU an entry costs, and the cores divided by it the
most entries/s this machine allows (`ceiling_over_raw_batched`: that next to the raw rate).

Writes JSON to bench/results/entry_create.json. About 3 minutes on 2 busy cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import (
    ENTRY_SKELETON_WORKFLOW,
    NOOP_TASK_QUEUE,
    REPO_ROOT,
    BenchStack,
    CpuMeter,
    register_agent,
    run_and_report,
)
from bench.auth import closed_loop
from bench.fairness import UNCAPPED_SLOTS
from bench.memory import (
    entry_create_figures,
    entry_text,
    log,
    machine_info,
    sentences,
    summary,
    timed,
)

RESULTS = Path(__file__).resolve().parent / "results" / "entry_create.json"
MODES: dict[str, dict[str, str]] = {"shipped": {}, "uncapped_slots": UNCAPPED_SLOTS}
TARGET_C1_P50_MS = 45.0
TARGET_WRITERS_OVER_RAW = 0.6


def texts(count: int = 64) -> list[str]:
    """`count` 100-word entries of generated sentences (bench/memory.py's corpus)."""
    base = [sentence for topic in sentences(40).values() for sentence in topic]
    rng = np.random.default_rng(3)
    return [entry_text(rng, base) for _ in range(count)]


async def one_stack(args: argparse.Namespace, mode: str, embedder: Any) -> dict[str, Any]:
    async with BenchStack(keep_dir=args.keep_dir, settings=MODES[mode]) as stack:
        meter = CpuMeter(stack.pids())
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
            caller = await register_agent(session, stack)
            async with session.post(
                f"{stack.base_url}/diaries",
                json={"name": "bench", "visibility": "private"},
                headers={**caller.headers, "x-service-team-id": caller.team_id},
            ) as response:
                diary = await response.json(content_type=None)
                assert response.status == 201, diary
            log(f"{mode}: entry creation through the API")
            figures = await entry_create_figures(
                session,
                stack,
                caller,
                diary["id"],
                texts(),
                writers=args.writers,
                duration=args.duration,
                meter=meter,
                embedder=embedder,
                quiet_wait=args.wait_quiet,
            )
            log(f"{mode}: the skeleton of an entry create (the design's floor)")
            bare = await skeleton(stack, args, meter)
        return {
            "workflow_task_slots": {
                "service": stack.settings.worker_workflow_task_slots,
                "embedding": stack.settings.embedding_workflow_task_slots,
            },
            **figures,
            "skeleton": bare,
            "floor": floor(figures, bare, args.writers, embedding_cpu_ms(embedder)),
            "targets": targets(figures, args.writers),
        }


async def skeleton(stack: BenchStack, args: argparse.Namespace, meter: CpuMeter) -> dict[str, Any]:
    """`BenchEntrySkeleton` started and awaited as the API starts `EntryCreate`: p50 one at a
    time, then runs/s of `--writers` loops with each part's CPU per run."""
    temporal = await stack.temporal_client()

    async def one(_: int) -> bool:
        await temporal.execute_workflow(
            ENTRY_SKELETON_WORKFLOW,
            id=f"bench-entry-skeleton/{uuid.uuid4()}",
            task_queue=NOOP_TASK_QUEUE,
        )
        return True

    single = summary(await timed(one, 40))
    loaded = await closed_loop(
        one,
        concurrency=args.writers,
        duration=args.duration / 2,
        warmup=1.0,
        meter=meter,
        quiet_wait=args.wait_quiet,
    )
    return {"c1": single, f"c{args.writers}": loaded}


def embedding_cpu_ms(embedder: Any, repeats: int = 3) -> float:
    """CPU (every thread of this process) the raw embedder spends per text in one batched run
    of `texts()`: the model's part of an entry, however many cores it spreads over."""
    batch = texts()
    spent = []
    for _ in range(repeats):
        start = time.process_time()
        embedder.embed(batch)
        spent.append(1000 * (time.process_time() - start) / len(batch))
    return round(sorted(spent)[len(spent) // 2], 2)


def floor(
    figures: dict[str, Any], bare: dict[str, Any], writers: int, embed_cpu_ms: float
) -> dict[str, Any]:
    """The least an entry create can cost on this machine with this design (see the module)."""
    ours = figures[f"c{writers}"]
    raw = (ours["raw_batched_texts_per_s_before"] + ours["raw_batched_texts_per_s_after"]) / 2
    ours_cpu = ours["cpu"]["cpu_ms_per_op"]
    bare_cpu = bare[f"c{writers}"]["cpu"]["cpu_ms_per_op"]
    per_entry = {
        "temporal_as_skeleton": bare_cpu.get("temporal", 0.0),
        "worker_as_skeleton": bare_cpu.get("worker", 0.0),
        "embedding_batched": embed_cpu_ms,
        "api_ours": ours_cpu.get("api", 0.0),
        "postgres_ours": ours_cpu.get("postgres", 0.0),
    }
    least_cpu = sum(per_entry.values())
    cores = os.cpu_count() or 1
    ceiling = 1000 * cores / least_cpu if least_cpu else None
    return {
        "c1_p50_ms": round(
            bare["c1"]["p50_ms"] + figures["c1"]["raw_embedding_one_at_a_time_p50_ms"], 1
        ),
        "cpu_ms_per_entry": {k: round(v, 1) for k, v in per_entry.items()},
        "least_cpu_ms_per_entry": round(least_cpu, 1),
        "ours_cpu_ms_per_entry": round(sum(ours_cpu.values()), 1),
        "cores": cores,
        "ceiling_entries_per_s": None if ceiling is None else round(ceiling, 1),
        "ceiling_over_raw_batched": None if ceiling is None or not raw else round(ceiling / raw, 2),
    }


def targets(figures: dict[str, Any], writers: int) -> dict[str, Any]:
    """The issue's two targets, the raw rate taken around the writers (the same load)."""
    c1 = figures["c1"]["p50_ms"]
    cn = figures[f"c{writers}"]
    raw = (cn["raw_batched_texts_per_s_before"] + cn["raw_batched_texts_per_s_after"]) / 2
    share = round(cn["entries_per_s"] / raw, 2) if raw else None
    return {
        "c1_p50_ms": {"value": c1, "target": TARGET_C1_P50_MS, "met": c1 <= TARGET_C1_P50_MS},
        "writers_over_raw_batched": {
            "value": share,
            "target": TARGET_WRITERS_OVER_RAW,
            "met": share is not None and share >= TARGET_WRITERS_OVER_RAW,
        },
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from infra.embeddings import OnnxEmbedder

    result: dict[str, Any] = {
        "benchmark": "entry_create",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": {"writers": args.writers, "write_duration_s": args.duration},
        "env": machine_info(),
    }
    embedder = OnnxEmbedder.load()
    for mode in args.modes:
        result[mode] = await one_stack(args, mode, embedder)
    result["loadavg_at_end"] = list(os.getloadavg())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of N writers")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=30.0,
        help="before each phase, wait up to this long for other CPU load to drop",
    )
    parser.add_argument("--keep-dir", action="store_true", help="keep the stacks' temp dirs")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    os.chdir(REPO_ROOT)
    run_and_report(run(args), args.output)


if __name__ == "__main__":
    main()
