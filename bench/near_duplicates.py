"""How the consolidation's near-duplicate threshold was chosen, from the labelled set.

    .venv/bin/python bench/near_duplicates.py     # writes bench/results/near_duplicates.json

Each entry of `bench/data` is embedded by the real model (`entry_embedding_text`, as the write
path does). The consolidation proposes, for an entry, its nearest older live entry of the same
diary when their cosine similarity reaches the threshold (`schemas.limits`
`NEAR_DUPLICATE_MIN_SIMILARITY`); this replays exactly that, oldest entry first. A proposal is
right when the pair is one of the set's 100 accepted supersessions (the newer restating the
older's configuration fact); every other proposal is wrong (`precision`). A looser reading
(`precision_same_event`) also counts a pair two of the set's queries judge about the same
event (the answer graded 3 and its follow-up graded 2): a restatement a principal may accept
as `elaborates`. Recall is over the supersession pairs. Entries are split in two halves by
`key // 2` (a supersession pair's two entries have consecutive keys, so a pair stays in one
half): the threshold is picked on the tuning half (best F1) and checked on the held-out one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.quality_set import load

THRESHOLDS = [round(0.80 + 0.01 * i, 2) for i in range(20)]
RESULTS = Path(__file__).parent / "results" / "near_duplicates.json"


def _half(key: str) -> int:
    return (int(key[1:]) // 2) % 2


def main() -> None:
    from infra.embeddings import OnnxEmbedder
    from schemas.kernel.embedding_text import entry_embedding_text

    qs = load()
    entries = qs.entries
    vectors = np.asarray(
        OnnxEmbedder.load().embed(
            [entry_embedding_text(e.title, e.content, e.tags) for e in entries]
        ),
        dtype=np.float32,
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    pairs = {(r.source, r.target) for r in qs.relations if r.relation == "supersedes"}
    same_event: set[frozenset[str]] = set()
    for query in qs.queries:
        top = [k for k, grade in query.judgments.items() if grade == 3]
        near = [k for k, grade in query.judgments.items() if grade == 2]
        same_event.update(frozenset((a, b)) for a in top for b in near)
    keys = [e.key for e in entries]
    # oldest first: a larger age is an earlier creation
    order = sorted(range(len(entries)), key=lambda i: -entries[i].age_days)
    nearest: list[tuple[str, str, float]] = []
    for position, i in enumerate(order):
        older = [j for j in order[:position] if entries[j].diary == entries[i].diary]
        if not older:
            continue
        sims = vectors[older] @ vectors[i]
        best = int(np.argmax(sims))
        nearest.append((keys[i], keys[older[best]], float(sims[best])))
    report: dict[str, Any] = {"entries": len(entries), "supersession_pairs": len(pairs)}
    for half, parity in (("tune", 0), ("heldout", 1)):
        mine = [n for n in nearest if _half(n[0]) == parity]
        wanted = {p for p in pairs if _half(p[0]) == parity}
        rows = []
        for threshold in THRESHOLDS:
            proposed = [(s, t) for s, t, sim in mine if sim >= threshold]
            right = sum(1 for p in proposed if p in wanted)
            loose = sum(1 for p in proposed if p in wanted or frozenset(p) in same_event)
            precision = right / len(proposed) if proposed else 0.0
            recall = right / len(wanted) if wanted else 0.0
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            rows.append(
                {
                    "threshold": threshold,
                    "proposed": len(proposed),
                    "precision": round(precision, 3),
                    "precision_same_event": round(loose / len(proposed), 3) if proposed else 0.0,
                    "recall": round(recall, 3),
                    "f1": round(f1, 3),
                }
            )
        report[half] = rows
    best = max(report["tune"], key=lambda row: row["f1"])
    report["chosen_on_tune"] = best
    report["chosen_on_heldout"] = next(
        row for row in report["heldout"] if row["threshold"] == best["threshold"]
    )
    supersession_sims = sorted(sim for s, t, sim in nearest if (s, t) in pairs)
    report["supersession_pair_similarity_quartiles"] = (
        [round(float(q), 3) for q in np.quantile(supersession_sims, [0, 0.25, 0.5, 0.75, 1])]
        if supersession_sims
        else []
    )
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
