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

Writes JSON to bench/results/entry_create.json. About 3 minutes on 2 busy cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import REPO_ROOT, BenchStack, CpuMeter, register_agent, run_and_report
from bench.fairness import UNCAPPED_SLOTS
from bench.memory import entry_create_figures, entry_text, log, machine_info, sentences

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
        return {
            "workflow_task_slots": {
                "service": stack.settings.worker_workflow_task_slots,
                "embedding": stack.settings.embedding_workflow_task_slots,
            },
            **figures,
            "targets": targets(figures, args.writers),
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
