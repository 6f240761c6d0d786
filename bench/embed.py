"""Benchmark the server-side embedder: cold start, single-text latency, batched throughput.

    .venv/bin/python bench/embed.py [--threads 2]

Prints JSON and writes it to bench/results/embed.json. Runs in well under a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import onnxruntime as ort
from tokenizers import Tokenizer

from infra.embeddings import MINILM_L6_V2_SHA256, OnnxEmbedder, bundled_model_dir
from infra.embeddings.embedder import DEFAULT_MODEL_NAME, TOKENIZER_FILE, create_session
from infra.embeddings.onnx_builder import (
    BertConfig,
    build_bert_embedding_model,
    read_safetensors_index,
    verify_sha256,
)

BATCH_SIZE = 16  # the embedder's default: on 2 cores 16 is as fast as 32 with half the memory
RESULTS = Path(__file__).resolve().parent / "results" / "embed.json"

# Plain English sentences, shuffled with a fixed seed into texts of a chosen word count.
_SENTENCES = (
    "The agent wrote a short note about the failing deployment and the rollback plan.",
    "Tomorrow the team will review the queue latency and decide whether to add workers.",
    "Memory entries are signed by their authors so that later readers can trust them.",
    "A careful summary keeps the important facts and drops the repeated details.",
    "The search endpoint fuses vector candidates with full text matches by rank.",
    "Every task moves from queued to claimed to completed or back to queued on timeout.",
    "Quarterly revenue grew by eight percent while costs stayed almost flat.",
    "The cat slept on the warm windowsill for most of the quiet afternoon.",
    "Backups run nightly and are restored once a month to prove they still work.",
    "Good logs carry a trace id and never carry secrets or personal data.",
)


def _text(rng: random.Random, words: int) -> str:
    pool: list[str] = []
    while len(pool) < words:
        pool.extend(rng.choice(_SENTENCES).split())
    return " ".join(pool[:words])


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _cold_start(model_dir: Path, threads: int) -> tuple[OnnxEmbedder, dict[str, float]]:
    """The steps of `OnnxEmbedder.load`, timed one by one."""
    marks = [time.perf_counter()]
    verify_sha256(model_dir / "model.safetensors", MINILM_L6_V2_SHA256)
    marks.append(time.perf_counter())
    config = BertConfig.from_file(model_dir / "config.json")
    model_bytes = build_bert_embedding_model(
        config, read_safetensors_index(model_dir / "model.safetensors")
    ).SerializeToString()
    marks.append(time.perf_counter())
    session = create_session(model_bytes, model_dir, threads=threads)
    marks.append(time.perf_counter())
    tokenizer = Tokenizer.from_file(str(model_dir / TOKENIZER_FILE))
    embedder = OnnxEmbedder(
        session,
        tokenizer,
        model_name=DEFAULT_MODEL_NAME,
        dimension=config.hidden_size,
        batch_size=BATCH_SIZE,
    )
    marks.append(time.perf_counter())
    embedder.embed_one("first call")
    marks.append(time.perf_counter())
    steps = ("sha256_s", "build_graph_s", "session_s", "tokenizer_s", "first_embed_s")
    timings: dict[str, float] = {
        name: round(end - start, 4)
        for name, (start, end) in zip(steps, pairwise(marks), strict=True)
    }
    timings["total_s"] = round(marks[-1] - marks[0], 4)
    timings["graph_bytes"] = len(model_bytes)
    return embedder, timings


def _latency(embedder: OnnxEmbedder, text: str, runs: int) -> dict[str, float]:
    for _ in range(5):
        embedder.embed_one(text)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        embedder.embed_one(text)
        samples.append((time.perf_counter() - start) * 1000)
    return {
        "runs": runs,
        "p50_ms": round(statistics.median(samples), 2),
        "p95_ms": round(_percentile(samples, 0.95), 2),
        "min_ms": round(min(samples), 2),
    }


def _throughput(embedder: OnnxEmbedder, texts: list[str], repeats: int) -> dict[str, float]:
    embedder.embed(texts[:8])
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        embedder.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - start))
    return {
        "texts": len(texts),
        "repeats": repeats,
        "median_texts_per_s": round(statistics.median(rates), 1),
        "best_texts_per_s": round(max(rates), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    rng = random.Random(20240601)
    model_dir = bundled_model_dir()
    embedder, cold = _cold_start(model_dir, args.threads)

    counter = Tokenizer.from_file(str(model_dir / TOKENIZER_FILE))
    counter.no_padding()
    counter.enable_truncation(max_length=embedder.max_length)

    def tokens(text: str) -> int:
        return len(counter.encode(text).ids)

    single = _text(rng, 100)
    batch_texts = [_text(rng, 113) for _ in range(64)]
    lengths = [tokens(t) for t in batch_texts]
    long_text = _text(rng, 190)

    result: dict[str, Any] = {
        "model": embedder.model_name,
        "threads": args.threads,
        "cold_start": cold,
        "single_100_words": {"tokens": tokens(single), **_latency(embedder, single, runs=50)},
        "single_long": {"tokens": tokens(long_text), **_latency(embedder, long_text, runs=20)},
        "throughput": {
            "mean_tokens": round(statistics.mean(lengths), 1),
            "batch_size": BATCH_SIZE,
            **_throughput(embedder, batch_texts, repeats=5),
        },
        "env": {
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "onnxruntime": ort.__version__,
            "machine": platform.machine(),
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
