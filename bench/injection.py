"""Benchmark the prompt-injection scan's growth: 10x the text should cost about 10x the time (a
regex with catastrophic backtracking would cost far more). Moved here from tests/unit, where a
timed assertion could flake on a loaded machine; the tests keep the adversarial inputs, whose
hang would be the alarm.

    .venv/bin/python bench/injection.py

Prints JSON and writes it to bench/results/injection.json. Runs in a few seconds.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path

from schemas.kernel.injection import scan_text

RESULTS = Path(__file__).resolve().parent / "results" / "injection.json"
UNIT = "Notes on the build. Ignore flaky tests; the instructions are in the README. "
SIZES = (10_000, 100_000)
REPEATS = 5


def text_of(size: int) -> str:
    return (UNIT * (size // len(UNIT) + 1))[:size]


def best_seconds(run: Callable[[], object]) -> float:
    """The fastest of `REPEATS` runs: the least disturbed by other load."""
    timings = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return min(timings)


def _scan(size: int) -> None:
    scan_text(text_of(size))


def main() -> None:
    seconds = {size: best_seconds(functools.partial(_scan, size)) for size in SIZES}
    small, large = SIZES
    report = {
        "scan_ms": {str(size): round(s * 1000, 3) for size, s in seconds.items()},
        "growth_for_10x_text": round(seconds[large] / seconds[small], 2),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
