"""The embedding activity with the real model: concurrent calls are micro-batched into one ONNX
run, and every caller gets the same vectors as when its texts are embedded one by one.

Once in-process (the batcher alone) and twice through the Temporal dev server: eight workflows
on the embedding task queue run `embedding.embed_passages` as a local activity at the same time,
as eight concurrent entry creations do, and share model runs through the worker process's one
batcher; and eight workflows of a service queue route it there as a regular activity (entry
runs started before the entry workflows moved to the embedding queue)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow

# The sandbox re-imports this module to run the workflow below: what it must not load twice
# (numpy, the model runtime) is passed through.
with workflow.unsafe.imports_passed_through():
    import numpy as np
    import pytest
    from numpy.typing import NDArray
    from payload_keys import CONVERTER
    from temporalio.client import Client
    from temporalio.worker import Worker
    from waiting import wait_until

    from activities.embedding import EmbeddingActivities, MicroBatcher
    from infra.embeddings import OnnxEmbedder
    from schemas.embedding import EmbedRequest
    from schemas.kernel.embedding_text import entry_embedding_text
    from schemas.queues import embedding_queue_for
    from workflows.common import embedding_task_queue

TOLERANCE = 1e-5
WRITERS = 8

# Eight entries of different lengths (so one batch needs padding), about 100 words or fewer.
TEXTS = [
    entry_embedding_text(
        f"Note {i}",
        " ".join(
            [
                "The deploy of the payments service failed on the health check and rolled back.",
                "Postgres vacuum fell behind on the orders table during the nightly import.",
                "The sourdough needed a longer proof because the kitchen was cold this week.",
                "Rotate the API key that leaked in the public repository before Friday.",
            ][i % 4].split()
            * (1 + i)
        ),
        [f"topic-{i % 3}"],
    )
    for i in range(WRITERS)
]


@pytest.fixture(scope="module")
def embedder() -> OnnxEmbedder:
    return OnnxEmbedder.load()


@pytest.fixture(scope="module")
def one_by_one(embedder: OnnxEmbedder) -> NDArray[np.float32]:
    return np.stack([embedder.embed_one(text) for text in TEXTS])


def assert_same_vectors(got: Sequence[Sequence[float]], expected: NDArray[np.float32]) -> None:
    array = np.asarray(got, dtype=np.float64)
    assert array.shape == expected.shape
    assert float(np.max(np.abs(array - expected))) <= TOLERANCE
    assert np.allclose(np.linalg.norm(array, axis=1), 1.0, atol=1e-5)


# --- the batcher in this process --------------------------------------------------------------


async def test_concurrent_calls_form_one_run_with_the_vectors_of_single_calls(
    embedder: OnnxEmbedder, one_by_one: NDArray[np.float32]
) -> None:
    activities = EmbeddingActivities(embedder)
    results = await asyncio.gather(
        *(activities.embed_passages(EmbedRequest(texts=[text])) for text in TEXTS)
    )
    assert_same_vectors([r.vectors[0] for r in results], one_by_one)
    assert activities.stats.calls == WRITERS
    assert activities.stats.runs == 1
    assert activities.stats.largest_run_calls == WRITERS
    assert activities.stats.texts == WRITERS


class GatedEmbedder:
    """The real model behind a gate: a run announces itself (`started`) and waits for
    `release`, so a test knows a run is under way, and queues calls beside it, without timing."""

    def __init__(self, model: OnnxEmbedder) -> None:
        self._model = model
        self.started = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.started.set()
        self.release.wait(timeout=60)  # a bound on a hang; the test releases at once
        return self._model.embed(texts)


async def gather_while_gated(
    gate: GatedEmbedder, activities: EmbeddingActivities, runs: list[Any]
) -> list[list[float]]:
    """The workflows' vectors, with the first run held at the gate until every call has
    reached the batcher: the calls meet there however far apart Temporal delivers them (a
    loaded machine spaced them past a run, and each then ran alone)."""
    pending = [asyncio.ensure_future(run) for run in runs]
    try:
        await wait_until(gate.started.is_set, what="the first run to be under way")
        await wait_until(lambda: activities.stats.calls == WRITERS, what="every call queued")
    finally:
        gate.release.set()
    return list(await asyncio.gather(*pending))


async def test_calls_arriving_during_a_run_join_the_next_run(
    embedder: OnnxEmbedder, one_by_one: NDArray[np.float32]
) -> None:
    gate = GatedEmbedder(embedder)
    batcher = MicroBatcher(gate)
    try:
        first = asyncio.create_task(batcher.embed(TEXTS[:1]))
        await wait_until(gate.started.is_set, what="the first run to be under way")
        later = [asyncio.create_task(batcher.embed([text])) for text in TEXTS[1:]]
        await wait_until(lambda: batcher.stats.calls == WRITERS, what="every later call queued")
    finally:
        gate.release.set()
    rows = await asyncio.gather(first, *later)
    assert_same_vectors([r[0] for r in rows], one_by_one)
    assert batcher.stats.runs == 2
    assert batcher.stats.largest_run_calls == WRITERS - 1


async def test_a_call_with_several_texts_gets_its_own_rows_in_order(
    embedder: OnnxEmbedder, one_by_one: NDArray[np.float32]
) -> None:
    batcher = MicroBatcher(embedder)
    a, b, empty = await asyncio.gather(
        batcher.embed(TEXTS[:5]), batcher.embed(TEXTS[5:]), batcher.embed([])
    )
    assert_same_vectors([*a, *b], one_by_one)
    assert empty == []
    assert batcher.stats.runs == 1


async def test_runs_are_capped_at_max_texts(
    embedder: OnnxEmbedder, one_by_one: NDArray[np.float32]
) -> None:
    batcher = MicroBatcher(embedder, max_texts=3)
    results = await asyncio.gather(*(batcher.embed([text]) for text in TEXTS))
    assert_same_vectors([rows[0] for rows in results], one_by_one)
    assert batcher.stats.runs == 3  # 3 + 3 + 2
    assert batcher.stats.largest_run_texts == 3


class RecordingEmbedder(GatedEmbedder):
    """The gated model that keeps the texts of each run, in the order of the runs."""

    def __init__(self, model: OnnxEmbedder) -> None:
        super().__init__(model)
        self.runs: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.runs.append(list(texts))
        return super().embed(texts)


async def test_a_quiet_teams_call_joins_the_next_run_before_a_flooding_teams_backlog(
    embedder: OnnxEmbedder,
) -> None:
    """Team A queues six calls and then team B one, while a run holds the model; runs hold
    three texts. In arrival order B's call would wait two runs; the teams take turns, so it is
    in the very next one (and A's calls keep their own order)."""
    gate = RecordingEmbedder(embedder)
    batcher = MicroBatcher(gate, max_texts=3)
    flooding, quiet = str(uuid.uuid4()), str(uuid.uuid4())
    try:
        blocker = asyncio.create_task(batcher.embed(["hold the model"], flooding))
        await wait_until(gate.started.is_set, what="the first run to be under way")
        a_calls = [asyncio.create_task(batcher.embed([text], flooding)) for text in TEXTS[:6]]
        await wait_until(lambda: batcher.stats.calls == 7, what="team A's calls queued")
        b_call = asyncio.create_task(batcher.embed([TEXTS[6]], quiet))
        await wait_until(lambda: batcher.stats.calls == 8, what="team B's call queued")
    finally:
        gate.release.set()
    await asyncio.gather(blocker, b_call, *a_calls)
    assert gate.runs[0] == ["hold the model"]
    assert TEXTS[6] in gate.runs[1]
    assert [text for run in gate.runs[1:] for text in run if text != TEXTS[6]] == TEXTS[:6]


class FailingEmbedder:
    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        raise RuntimeError("onnxruntime exploded")


async def test_a_failed_run_fails_every_caller_of_that_run() -> None:
    failing = FailingEmbedder()
    batcher = MicroBatcher(failing)
    outcomes = await asyncio.gather(
        *(batcher.embed([text]) for text in TEXTS), return_exceptions=True
    )
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    assert failing.calls == 1  # one run, every caller told
    assert batcher.stats.runs == 0


async def test_a_cancelled_caller_does_not_disturb_the_others(
    embedder: OnnxEmbedder, one_by_one: NDArray[np.float32]
) -> None:
    gate = GatedEmbedder(embedder)
    batcher = MicroBatcher(gate)
    try:  # a run under way holds the model, so the calls below all wait for the next run
        blocker = asyncio.create_task(batcher.embed(["hold the model"]))
        await wait_until(gate.started.is_set, what="the first run to be under way")
        doomed = asyncio.create_task(batcher.embed(["never mind"]))
        kept = [asyncio.create_task(batcher.embed([text])) for text in TEXTS]
        await wait_until(lambda: batcher.stats.calls == WRITERS + 2, what="every call queued")
        doomed.cancel()
    finally:
        gate.release.set()
    results = await asyncio.gather(*kept)
    await blocker
    assert_same_vectors([rows[0] for rows in results], one_by_one)
    # the blocker's run, then the kept texts: the cancelled one was left out of that run
    assert batcher.stats.texts == 1 + WRITERS


# --- through Temporal: the activity on the embedding task queue -------------------------------


@workflow.defn(name="TestEmbedLocal")
class EmbedLocalWorkflow:
    """Embeds one text the way the entry workflows do on the embedding queue: locally."""

    @workflow.run
    async def run(self, text: str) -> list[float]:
        result = await workflow.execute_local_activity_method(
            EmbeddingActivities.embed_passages,
            EmbedRequest(texts=[text]),
            start_to_close_timeout=timedelta(seconds=60),
        )
        return result.vectors[0]


async def test_concurrent_workflows_share_local_runs_in_one_worker(
    temporal_address: str, embedder: OnnxEmbedder, one_by_one: NDArray[np.float32]
) -> None:
    client = await Client.connect(temporal_address, data_converter=CONVERTER)
    queue = embedding_queue_for(f"embed-{uuid.uuid4().hex[:8]}")
    gate = GatedEmbedder(embedder)
    activities = EmbeddingActivities(gate)
    async with Worker(
        client,
        task_queue=queue,
        workflows=[EmbedLocalWorkflow],
        activities=[activities.embed_passages],
    ):
        vectors = await gather_while_gated(
            gate,
            activities,
            [
                client.execute_workflow(
                    EmbedLocalWorkflow.run, text, id=f"{queue}/{i}", task_queue=queue
                )
                for i, text in enumerate(TEXTS)
            ],
        )
    await activities.aclose()
    assert_same_vectors(vectors, one_by_one)
    # the eight workflows' local activities met in the process's batcher
    assert activities.stats.calls == WRITERS
    assert activities.stats.runs < WRITERS
    assert activities.stats.largest_run_calls > 1


@workflow.defn(name="TestEmbedOne")
class EmbedOneWorkflow:
    """Embeds one text the way entry runs of a service queue do (on the paired embedding queue)."""

    @workflow.run
    async def run(self, text: str) -> list[float]:
        result = await workflow.execute_activity_method(
            EmbeddingActivities.embed_passages,
            EmbedRequest(texts=[text]),
            task_queue=embedding_task_queue(),
            start_to_close_timeout=timedelta(seconds=60),
        )
        return result.vectors[0]


async def test_concurrent_workflows_share_runs_on_the_embedding_queue(
    temporal_address: str, embedder: OnnxEmbedder, one_by_one: NDArray[np.float32]
) -> None:
    client = await Client.connect(temporal_address, data_converter=CONVERTER)
    queue = f"embed-{uuid.uuid4().hex[:8]}"
    gate = GatedEmbedder(embedder)
    activities = EmbeddingActivities(gate)
    async with (
        Worker(client, task_queue=queue, workflows=[EmbedOneWorkflow]),
        Worker(
            client,
            task_queue=embedding_queue_for(queue),
            activities=[activities.embed_passages],
            max_concurrent_activities=64,
        ),
    ):
        vectors = await gather_while_gated(
            gate,
            activities,
            [
                client.execute_workflow(
                    EmbedOneWorkflow.run, text, id=f"{queue}/{i}", task_queue=queue
                )
                for i, text in enumerate(TEXTS)
            ],
        )
    await activities.aclose()
    assert_same_vectors(vectors, one_by_one)
    assert activities.stats.calls == WRITERS
    # the first run held, the seven calls behind it met in the next run
    assert activities.stats.runs < WRITERS
    assert activities.stats.largest_run_calls >= 2
