"""Ranking metrics of `bench/quality.py` over graded judgments (0..3; unjudged = 0).

A result is *relevant* when its grade is at least 1. `ranked` is the search's answer, best
first; `judgments` maps entry keys to grades.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

METRICS = ("recall@5", "recall@10", "mrr", "ndcg@10")


def relevant(judgments: Mapping[str, int]) -> set[str]:
    return {key for key, grade in judgments.items() if grade >= 1}


def recall_at(ranked: Sequence[str], judgments: Mapping[str, int], k: int) -> float:
    """Share of the relevant entries found in the first k results."""
    wanted = relevant(judgments)
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0


def reciprocal_rank(ranked: Sequence[str], judgments: Mapping[str, int]) -> float:
    """1 / the rank of the first relevant result (0 when none is returned)."""
    wanted = relevant(judgments)
    return next((1.0 / rank for rank, key in enumerate(ranked, 1) if key in wanted), 0.0)


def dcg(grades: Sequence[int]) -> float:
    """Discounted cumulative gain with exponential gain: Σ (2^g − 1) / log2(rank + 1)."""
    return float(sum((2**grade - 1) / math.log2(rank + 1) for rank, grade in enumerate(grades, 1)))


def ndcg_at(ranked: Sequence[str], judgments: Mapping[str, int], k: int) -> float:
    """DCG of the first k results over the DCG of the ideal ranking of the judged entries."""
    ideal = dcg(sorted(judgments.values(), reverse=True)[:k])
    return dcg([judgments.get(key, 0) for key in ranked[:k]]) / ideal if ideal else 0.0


def query_metrics(ranked: Sequence[str], judgments: Mapping[str, int]) -> dict[str, float]:
    return {
        "recall@5": recall_at(ranked, judgments, 5),
        "recall@10": recall_at(ranked, judgments, 10),
        "mrr": reciprocal_rank(ranked, judgments),
        "ndcg@10": ndcg_at(ranked, judgments, 10),
    }


def mean_metrics(per_query: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean of each metric over the queries (4 decimals), and how many queries."""
    means = {
        name: round(statistics.fmean(m[name] for m in per_query), 4) if per_query else 0.0
        for name in METRICS
    }
    return {**means, "queries": len(per_query)}
