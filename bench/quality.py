"""Benchmark retrieval quality: the labelled set of `bench/quality_set.py` through the real search.

    .venv/bin/python bench/quality.py [--sweep]

Starts the embedded stack (bench/_stack.py), then:

1. loads the set (bench/data/quality_set.json.gz: ~2 000 entries in 4 diaries, 250 queries with
   graded judgments, 100 accepted supersessions): each entry embedded by the real model from
   `entry_embedding_text`, scanned by the real injection scanner, and copied in with its age;
   each `supersedes` relation inserted `accepted` and `superseded_by` set by the named SQL that
   accepting a relation runs (`memory_sync_superseded_by`);
2. runs every query through `POST /diary/search` as the agent (limit 10; `diaryId` unless the
   query is cross-diary) in each mode: `hybrid`, `vector`, `fulltext`;
3. reports recall@5, recall@10, MRR and nDCG@10 (bench/quality_metrics.py) per mode on the
   held-out half (the targets) and on the tuning half, overall and per category; the share of
   supersession queries whose current fact ranks first; how often an injection-flagged entry
   reaches the first five results; each mode's search latency (p50, p95; one at a time); and,
   searching `asOf` just before each supersession, the share where the superseded fact (then
   current) ranks first; and per split, the share of the unanswerable queries (their answer is
   in no diary) that return anything at all.

`--sweep` also ranks the two arms' candidate lists of the *tuning* queries again offline through
`schemas.ranking` (the function the search ranks with: the same lists the search fused and
linked, the same rules and tie-break) over a grid of the RRF constant and the vector arm's
weight, of the relevance floor (with the tuning half's unanswerable queries), and of the flagged
entries' factor: how those constants in `schemas/limits.py` were chosen; and the tuning metrics
with each ranking rule switched off (its share). Prints one JSON document and writes it to
bench/results/quality.json (~3 minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import BenchAgent, BenchStack, register_agent, run_and_report
from bench.memory import machine_info
from bench.quality_metrics import mean_metrics, query_metrics
from bench.quality_set import CATEGORIES, SPLITS, QualitySet, SetQuery, load
from schemas import limits, ranking
from schemas.embedding import SearchWeights
from schemas.ranking import RULES, RankingRules

RESULTS = Path(__file__).resolve().parent / "results" / "quality.json"
MODES = ("hybrid", "vector", "fulltext")
LIMIT = 10
TARGETS = {
    "hybrid_ndcg_over_best_single": 0.05,
    "hybrid_recall_at_10": 0.90,
    "supersession_current_first": 0.95,
}
UNANSWERED_AT_MOST = 0.10  # the share of unanswerable queries that may return anything
ANSWER_DISTANCES = (0.55, 0.6, 0.625, 0.65, 0.675, 0.7, 0.725, 0.75, 0.8)
FLAGGED_FACTORS = (1.0, 0.8, 0.6, 0.5, 0.4, 0.3)


def log(message: str) -> None:
    print(f"[quality-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- loading the set --------------------------------------------------------------------------


class Loaded:
    """Entry ids by key and back, diary ids by name, and which entries are flagged."""

    def __init__(self, quality_set: QualitySet) -> None:
        self.ids = {entry.key: uuid.uuid4() for entry in quality_set.entries}
        self.keys = {entry_id: key for key, entry_id in self.ids.items()}
        self.diaries = {name: uuid.uuid4() for name in quality_set.diaries}
        self.flagged: set[str] = set()
        self.superseded_by: dict[uuid.UUID, uuid.UUID] = {}
        self.created_at: dict[str, datetime] = {}


async def load_set(pool: Any, quality_set: QualitySet, caller: BenchAgent) -> Loaded:
    from infra.db import Q
    from infra.embeddings import OnnxEmbedder
    from schemas.kernel.embedding_text import entry_embedding_text
    from schemas.kernel.injection import scan

    loaded = Loaded(quality_set)
    entries = quality_set.entries
    log(f"embedding {len(entries)} entries with the real model")
    embedder = OnnxEmbedder.load()
    vectors = embedder.embed([entry_embedding_text(e.title, e.content, e.tags) for e in entries])
    team = uuid.uuid4()
    await pool.execute(
        "INSERT INTO teams (id, name, created_by, created_by_ns, status)"
        " VALUES ($1, 'quality team', $2, 'Agent', 'active')",
        team,
        caller.agent_id,
    )
    await pool.executemany(
        "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
        " VALUES ($1, $2, $3, $4, 'private')",
        [(d, caller.agent_id, team, name) for name, d in loaded.diaries.items()],
    )
    await pool.executemany(
        "INSERT INTO relation_tuples (namespace, object_id, relation, subject_ns, subject_id)"
        " VALUES ($1, $2, $3, $4, $5)",
        [("Team", str(team), "owners", "Agent", str(caller.agent_id))]
        + [("Diary", str(d), "team", "Team", str(team)) for d in loaded.diaries.values()],
    )
    now = datetime.now(UTC)
    loaded.created_at = {entry.key: now - timedelta(days=entry.age_days) for entry in entries}
    rows = []
    for entry, vector in zip(entries, vectors, strict=True):
        verdict = scan(entry.title, entry.content)
        if verdict.risk:
            loaded.flagged.add(entry.key)
        rows.append((
            loaded.ids[entry.key], loaded.diaries[entry.diary], entry.title, entry.content,
            vector, entry.tags, entry.importance, entry.entry_type, verdict.risk,
            [t.model_dump(mode="json") for t in verdict.threats], f"bafyquality{entry.key}",
            caller.agent_id, loaded.created_at[entry.key],
        ))  # fmt: skip
    await pool.executemany(
        "INSERT INTO diary_entries (id, diary_id, title, content, embedding, tags, importance,"
        " entry_type, injection_risk, injection_threats, cid, created_by, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        rows,
    )
    for relation in quality_set.relations:
        source, target = loaded.ids[relation.source], loaded.ids[relation.target]
        # accepted the moment the newer fact was written: `asOf` before it sees the old fact alone
        await pool.execute(
            "INSERT INTO entry_relations (id, source_id, target_id, relation, status,"
            " source_cid_snapshot, target_cid_snapshot, accepted_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            uuid.uuid4(),
            source,
            target,
            relation.relation,
            relation.status,
            f"bafyquality{relation.source}",
            f"bafyquality{relation.target}",
            loaded.created_at[relation.source] if relation.status == "accepted" else None,
        )
        await pool.execute(Q.memory_sync_superseded_by, target)
        loaded.superseded_by[target] = source
    await pool.execute("VACUUM ANALYZE diary_entries")
    return loaded


# --- searching --------------------------------------------------------------------------------


async def search_all(
    session: aiohttp.ClientSession,
    stack: BenchStack,
    caller: BenchAgent,
    queries: Sequence[SetQuery],
    loaded: Loaded,
    mode: str,
    latencies_ms: list[float],
    as_of: dict[str, datetime] | None = None,
) -> dict[str, list[str]]:
    """Every query through `POST /diary/search` in one mode (`as_of`: at that instant, by query
    key): the entry keys returned, best first (and each request's latency appended to
    `latencies_ms`)."""
    rankings: dict[str, list[str]] = {}
    for query in queries:
        mark = time.perf_counter()
        body: dict[str, Any] = {"query": query.text, "limit": LIMIT, "mode": mode}
        if as_of is not None:
            body["asOf"] = as_of[query.key].isoformat()
        if query.diary is not None:
            body["diaryId"] = str(loaded.diaries[query.diary])
        async with session.post(
            stack.base_url + "/diary/search", json=body, headers=caller.headers
        ) as response:
            data = await response.json(content_type=None)
            if response.status != 200:
                raise RuntimeError(f"search {query.key} answered {response.status}: {data}")
        latencies_ms.append((time.perf_counter() - mark) * 1000)
        rankings[query.key] = [loaded.keys[uuid.UUID(hit["id"])] for hit in data["results"]]
    return rankings


def evaluate(
    queries: Sequence[SetQuery], rankings: dict[str, list[str]], flagged: set[str]
) -> dict[str, Any]:
    """Per split: the metrics over all its queries and per category, supersession's current
    fact first, and the share of queries with a flagged entry in the first five."""
    report: dict[str, Any] = {}
    for split in SPLITS:
        chosen = [q for q in queries if q.split == split]
        per_query = {q.key: query_metrics(rankings[q.key], q.judgments) for q in chosen}
        supersession = [q for q in chosen if q.current is not None]
        report[split] = {
            "all": mean_metrics([per_query[q.key] for q in chosen]),
            "by_category": {
                category: mean_metrics([per_query[q.key] for q in chosen if q.category == category])
                for category in CATEGORIES
            },
            # diagnostic: the entry graded 3 (the answer) among the first ten, per category
            "answer_in_top10": {
                category: round(
                    sum(_answer(q) in rankings[q.key] for q in of_category) / len(of_category), 4
                )
                for category in CATEGORIES
                if (of_category := [q for q in chosen if q.category == category])
            },
            "supersession_current_first": round(
                sum(rankings[q.key][:1] == [q.current] for q in supersession) / len(supersession),
                4,
            ),
            "supersession_current_first_by_form": {
                form: round(
                    sum(rankings[q.key][:1] == [q.current] for q in of_form) / len(of_form), 4
                )
                for form in sorted({q.form for q in supersession})
                if (of_form := [q for q in supersession if q.form == form])
            },
            "supersession_current_in_top10": round(
                sum(q.current in rankings[q.key] for q in supersession) / len(supersession), 4
            ),
            "supersession_superseded_above_current": sum(
                _above(rankings[q.key], q.superseded, q.current) for q in supersession
            ),
            "flagged_in_top5_share": round(
                sum(bool(flagged & set(rankings[q.key][:5])) for q in chosen) / len(chosen), 4
            ),
        }
    return report


def any_hit_share(queries: Sequence[SetQuery], rankings: dict[str, list[str]]) -> dict[str, Any]:
    """Per split, the share of the (unanswerable) queries that returned anything."""
    return {
        split: round(sum(bool(rankings[q.key]) for q in of_split) / len(of_split), 4)
        for split in SPLITS
        if (of_split := [q for q in queries if q.split == split])
    }


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    """p50 and p95 of the searches of one mode, in milliseconds (one request at a time)."""
    ordered = sorted(latencies_ms)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
    }


def _answer(query: SetQuery) -> str:
    return next(key for key, grade in query.judgments.items() if grade == 3)


def _above(ranked: list[str], first: str | None, second: str | None) -> bool:
    if first not in ranked:
        return False
    return second not in ranked or ranked.index(first) < ranked.index(second)


async def as_of_before_supersession(
    session: aiohttp.ClientSession,
    stack: BenchStack,
    caller: BenchAgent,
    queries: Sequence[SetQuery],
    loaded: Loaded,
) -> dict[str, float]:
    """Per split, the share of supersession queries whose *superseded* fact ranks first in a
    hybrid search `asOf` just before the current fact was written (and its relation accepted):
    what an agent knew then wins then."""
    supersession = [q for q in queries if q.current is not None and q.superseded is not None]
    before = {
        q.key: loaded.created_at[q.current] - timedelta(microseconds=1)
        for q in supersession
        if q.current is not None
    }
    rankings = await search_all(
        session, stack, caller, supersession, loaded, "hybrid", [], as_of=before
    )
    return {
        split: round(
            sum(rankings[q.key][:1] == [q.superseded] for q in of_split) / len(of_split), 4
        )
        for split in SPLITS
        if (of_split := [q for q in supersession if q.split == split])
    }


# --- the ranking sweep (tuning half only) -------------------------------------------------------


Arms = tuple[list[tuple[uuid.UUID, float]], list[uuid.UUID], dict[uuid.UUID, uuid.UUID]]


async def ranking_sweep(read_pool: Any, quality_set: QualitySet, loaded: Loaded) -> dict[str, Any]:
    """The tuning queries ranked again offline through `schemas.ranking` from the candidates the
    repository found (the route's scope, limit 10: each arm's list, the vector arm's distances,
    the identifier links with their seed): nDCG@10 and recall@10 for each (k, vector weight);
    recall, nDCG and the unanswerable queries answered for each relevance floor; the flagged
    entries in the first five for each flagged factor; and each rule's share at the shipped
    constants (the metrics with that rule off). A link counts only while its seed is still the
    best candidate: links from another seed are not known offline."""
    from infra.embeddings import OnnxEmbedder
    from infra.repos.search import SearchRepo
    from schemas.embedding import SearchFilters

    embedder = OnnxEmbedder.load()
    repo = SearchRepo(read_pool)
    tune = [q for q in quality_set.queries if q.split == "tune"]
    unanswerable = [q for q in quality_set.unanswerable if q.split == "tune"]
    every_diary = tuple(sorted(loaded.diaries.values()))
    arms: dict[str, Arms] = {}
    for query in [*tune, *unanswerable]:
        scope = every_diary if query.diary is None else (loaded.diaries[query.diary],)
        outcome = await repo.search(
            query.text, embedder.embed_one(query.text), SearchFilters(diary_ids=scope, limit=LIMIT)
        )
        arms[query.key] = (outcome.vector or [], outcome.fulltext_ids or [], outcome.linked)
    facts = {
        entry_id: ranking.EntryFacts(
            superseded_by=loaded.superseded_by.get(entry_id), flagged=key in loaded.flagged
        )
        for key, entry_id in loaded.ids.items()
    }

    def ranked(key: str, rules: RankingRules = RULES, links: bool = True) -> list[str]:
        vector, fulltext, linked = arms[key]
        relevance = ranking.fuse(vector, fulltext, rules)
        seeds = ranking.link_seeds(relevance)
        kept = {i: seed for i, seed in linked.items() if links and seed in seeds}
        joined = ranking.with_links(relevance, kept, rules)
        hits = ranking.rank(joined, facts, SearchWeights(), LIMIT, rules)
        return [loaded.keys[hit.entry_id] for hit in hits]

    def measured(rules: RankingRules = RULES, links: bool = True) -> dict[str, Any]:
        rankings = {q.key: ranked(q.key, rules, links) for q in [*tune, *unanswerable]}
        means = mean_metrics([query_metrics(rankings[q.key], q.judgments) for q in tune])
        supersession = [q for q in tune if q.current is not None]
        return {
            "recall@10": means["recall@10"],
            "ndcg@10": means["ndcg@10"],
            "current_first": round(
                sum(rankings[q.key][:1] == [q.current] for q in supersession) / len(supersession),
                4,
            ),
            "flagged_in_top5_share": round(
                sum(bool(loaded.flagged & set(rankings[q.key][:5])) for q in tune) / len(tune), 4
            ),
            "unanswerable_any_hit_share": any_hit_share(unanswerable, rankings)["tune"],
        }

    grid = []
    for k in (5, 10, 20, 40, 60, 100):
        for w_vector in (0.2, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7):
            rules = replace(RULES, rrf_k=k, weight_vector=w_vector, weight_fulltext=1 - w_vector)
            means = mean_metrics([query_metrics(ranked(q.key, rules), q.judgments) for q in tune])
            grid.append({"k": k, "w_vector": w_vector, **means})
    floors = [
        {"answer": a, **measured(replace(RULES, answer_distance=a))} for a in ANSWER_DISTANCES
    ]
    passing = [row for row in floors if row["unanswerable_any_hit_share"] <= UNANSWERED_AT_MOST]
    flagged = [{"factor": f, **measured(replace(RULES, flagged_factor=f))} for f in FLAGGED_FACTORS]
    rules_off = {
        "all rules": measured(),
        "without links": measured(links=False),
        "without inheritance": measured(replace(RULES, inherit=False)),
        "without successors_first": measured(replace(RULES, successors_first=False)),
        "without the floor": measured(
            replace(RULES, answer_distance=limits.SEARCH_MAX_COSINE_DISTANCE)
        ),
        "without the flagged demotion": measured(replace(RULES, flagged_factor=1.0)),
    }
    return {
        "queries": len(tune),
        "unanswerable_queries": len(unanswerable),
        "fusion": {"best": max(grid, key=lambda row: (row["ndcg@10"], row["recall@10"]))},
        "floor": {
            # the best recall@10 that answers at most UNANSWERED_AT_MOST of the unanswerable
            "chosen": max(
                passing,
                key=lambda r: (r["recall@10"], r["ndcg@10"], -r["unanswerable_any_hit_share"]),
            )
            if passing
            else None,
            "sweep": floors,
        },
        "flagged_factor": flagged,
        "rules": rules_off,
        "grid": grid,
    }


# --- the run ----------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from infra.db import create_pool

    quality_set = load()
    result: dict[str, Any] = {
        "benchmark": "quality",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "set": {
            "file": "bench/data/quality_set.json.gz (bench/quality_set.py)",
            "diaries": len(quality_set.diaries),
            "entries": len(quality_set.entries),
            "queries": {
                split: {
                    c: sum(q.split == split and q.category == c for q in quality_set.queries)
                    for c in CATEGORIES
                }
                for split in SPLITS
            },
            "supersessions": len(quality_set.relations),
            "unanswerable": {
                split: sum(q.split == split for q in quality_set.unanswerable) for split in SPLITS
            },
        },
        "fusion": {
            "rrf_k": limits.SEARCH_RRF_K,
            "weight_vector": limits.SEARCH_RRF_WEIGHT_VECTOR,
            "weight_fulltext": limits.SEARCH_RRF_WEIGHT_FULLTEXT,
            "candidates_per_arm": limits.SEARCH_CANDIDATE_FACTOR * LIMIT,
            "max_cosine_distance": limits.SEARCH_MAX_COSINE_DISTANCE,
            "link_seeds": limits.SEARCH_LINK_SEEDS,
            "link_max_shared": limits.SEARCH_LINK_MAX_SHARED,
            "link_relevance": limits.SEARCH_LINK_RELEVANCE,
            "answer_max_distance": limits.SEARCH_ANSWER_MAX_DISTANCE,
            "flagged_relevance_factor": limits.SEARCH_FLAGGED_RELEVANCE_FACTOR,
            "limit": LIMIT,
        },
        "env": machine_info(),
    }
    async with BenchStack(keep_dir=args.keep_dir) as stack:
        result["startup_s"] = stack.startup_s
        dsn = stack.settings.database_url
        pool = await create_pool(dsn, read_only=False, max_size=4)
        read_pool = await create_pool(dsn, read_only=True, max_size=4)
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
                caller = await register_agent(session, stack)
                mark = time.perf_counter()
                loaded = await load_set(pool, quality_set, caller)
                result["set"]["load_s"] = round(time.perf_counter() - mark, 1)
                result["set"]["flagged_entries"] = len(loaded.flagged)
                result["modes"] = {}
                for mode in MODES:
                    log(f"{len(quality_set.queries)} queries, mode {mode}")
                    mark = time.perf_counter()
                    latencies: list[float] = []
                    rankings = await search_all(
                        session, stack, caller, quality_set.queries, loaded, mode, latencies
                    )
                    result["modes"][mode] = {
                        "seconds": round(time.perf_counter() - mark, 1),
                        "search_ms": latency_summary(latencies),
                        **evaluate(quality_set.queries, rankings, loaded.flagged),
                    }
                unanswered = await search_all(
                    session, stack, caller, quality_set.unanswerable, loaded, "hybrid", []
                )
                result["unanswerable_any_hit_share"] = any_hit_share(
                    quality_set.unanswerable, unanswered
                )
                log("supersession queries asOf before the supersession")
                result[
                    "as_of_superseded_first_before_supersession"
                ] = await as_of_before_supersession(
                    session, stack, caller, quality_set.queries, loaded
                )
            if args.sweep:
                log("ranking sweep on the tuning half")
                result["ranking_sweep"] = await ranking_sweep(read_pool, quality_set, loaded)
        finally:
            await pool.close()
            await read_pool.close()
    result["targets"] = targets(result)
    return result


def targets(result: dict[str, Any]) -> dict[str, Any]:
    """The targets on the held-out half."""
    held = {mode: result["modes"][mode]["heldout"] for mode in MODES}
    ndcg = {mode: held[mode]["all"]["ndcg@10"] for mode in MODES}
    values = {
        "hybrid_ndcg_over_best_single": round(
            ndcg["hybrid"] - max(ndcg["vector"], ndcg["fulltext"]), 4
        ),
        "hybrid_recall_at_10": held["hybrid"]["all"]["recall@10"],
        "supersession_current_first": held["hybrid"]["supersession_current_first"],
    }
    return {
        name: {"value": value, "target": f">= {TARGETS[name]}", "met": value >= TARGETS[name]}
        for name, value in values.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sweep", action="store_true", help="the fusion grid on the tuning half")
    parser.add_argument("--keep-dir", action="store_true", help="keep the stack's temp dir")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    run_and_report(run(args), args.output)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
