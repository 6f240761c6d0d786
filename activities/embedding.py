"""Sentence embeddings as an activity, on its own task queue, micro-batched across callers.

One ONNX run over 8 texts costs far less than 8 runs of one text (the model's fixed costs and
the two cores are shared), so `EmbeddingActivities` does not run the model per call: calls that
arrive within a few milliseconds of each other, or while a run is in progress, wait for one
combined run (in a thread, so the worker's event loop keeps serving Temporal). Each caller gets
exactly the rows of its own texts. With one writer the window adds ~3 ms; with 8 concurrent
writers their entries are embedded together. Each run's size (texts) is recorded on the
`cairn.embedding.batch.size` histogram of the meter the worker passes in.

A run takes the waiting calls team by team in turn (each call's fairness key, the team of the
run that asked: `schemas.priorities`), not in arrival order: when more wait than one run holds,
a team that floods the worker fills the runs after one with another team's single write, not
the ones before it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from opentelemetry import metrics
from opentelemetry.metrics import Meter
from temporalio import activity

from schemas import limits
from schemas.embedding import EmbedRequest, EmbedResult

BATCH_SIZE = "cairn.embedding.batch.size"
# powers of two up to the largest run (`EMBEDDING_MICROBATCH_MAX_TEXTS`)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


class TextEmbedder(Protocol):
    """What the activity needs of the model (`infra.embeddings.OnnxEmbedder` is one)."""

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


@dataclass
class BatchStats:
    """Counters of one batcher, for tests and benchmarks: runs < calls means batches formed."""

    calls: int = 0
    texts: int = 0
    runs: int = 0
    largest_run_calls: int = 0
    largest_run_texts: int = 0


@dataclass
class _Waiting:
    texts: list[str]
    result: asyncio.Future[list[list[float]]]


class MicroBatcher:
    """Merges concurrent `embed` calls into as few model runs as possible, one run at a time.

    The first call of a burst starts a drain task that sleeps `window_s`, then runs everything
    queued by then (up to `max_texts` texts per run, the keys taking turns, each key's calls in
    arrival order) and keeps going while calls keep queueing.
    Runs never overlap: on two cores one run already uses both, and a queued call is better off
    joining the next run than competing with the current one.
    """

    def __init__(
        self,
        embedder: TextEmbedder,
        *,
        window_s: float = limits.EMBEDDING_MICROBATCH_WINDOW_MS / 1000,
        max_texts: int = limits.EMBEDDING_MICROBATCH_MAX_TEXTS,
        meter: Meter | None = None,
    ) -> None:
        self._embedder = embedder
        self._window_s = window_s
        self._max_texts = max_texts
        # per fairness key, its calls in arrival order; the key served longest ago comes first
        self._queues: OrderedDict[str | None, deque[_Waiting]] = OrderedDict()
        self._drain_task: asyncio.Task[None] | None = None
        self.stats = BatchStats()
        self._batch_sizes = (meter or metrics.get_meter("cairn.embedding")).create_histogram(
            BATCH_SIZE,
            unit="{text}",
            description="Texts per model run of the embedding micro-batcher.",
            explicit_bucket_boundaries_advisory=BATCH_BUCKETS,
        )

    async def embed(self, texts: Sequence[str], key: str | None = None) -> list[list[float]]:
        """The vectors of `texts`; `key` is the caller's fairness key (its team)."""
        if not texts:
            return []
        waiting = _Waiting(list(texts), asyncio.get_running_loop().create_future())
        self._queues.setdefault(key, deque()).append(waiting)
        self.stats.calls += 1
        if self._drain_task is None or self._drain_task.done():
            self._drain_task = asyncio.create_task(self._drain())
        return await waiting.result

    async def aclose(self) -> None:
        """Stop draining; callers still waiting get a CancelledError."""
        if self._drain_task is not None:
            self._drain_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain_task

    async def _drain(self) -> None:
        try:
            await asyncio.sleep(self._window_s)
            while self._queues:
                await self._run(self._next_batch())
        finally:
            # Cancelled (worker shutdown): nobody will run what is still queued.
            for queue in self._queues.values():
                for waiting in queue:
                    waiting.result.cancel()
            self._queues.clear()

    def _next_batch(self) -> list[_Waiting]:
        """Queued calls, one key's oldest after another's in turn, up to `max_texts` texts
        (always at least one call)."""
        batch: list[_Waiting] = []
        size = 0
        while self._queues:
            key, queue = next(iter(self._queues.items()))
            if batch and size + len(queue[0].texts) > self._max_texts:
                break
            batch.append(queue.popleft())
            size += len(batch[-1].texts)
            if queue:
                self._queues.move_to_end(key)  # its next call waits for the others' turns
            else:
                del self._queues[key]
        return batch

    async def _run(self, batch: list[_Waiting]) -> None:
        live = [w for w in batch if not w.result.done()]  # a cancelled caller drops out
        if not live:
            return
        texts = [text for waiting in live for text in waiting.texts]
        try:
            vectors = await asyncio.to_thread(self._embedder.embed, texts)
        except Exception as exc:  # every caller of this run fails the same way (and retries)
            for waiting in live:
                if not waiting.result.done():
                    waiting.result.set_exception(exc)
            return
        self._count(len(live), len(texts))
        start = 0
        for waiting in live:
            rows = vectors[start : start + len(waiting.texts)]
            start += len(waiting.texts)
            if not waiting.result.done():
                waiting.result.set_result(rows.tolist())

    def _count(self, calls: int, texts: int) -> None:
        self.stats.runs += 1
        self.stats.texts += texts
        self.stats.largest_run_calls = max(self.stats.largest_run_calls, calls)
        self.stats.largest_run_texts = max(self.stats.largest_run_texts, texts)
        self._batch_sizes.record(texts)


class EmbeddingActivities:
    """The embedding activities of one worker process, sharing one loaded model."""

    def __init__(
        self,
        embedder: TextEmbedder,
        *,
        batcher: MicroBatcher | None = None,
        meter: Meter | None = None,
    ) -> None:
        self._batcher = batcher or MicroBatcher(embedder, meter=meter)

    @property
    def stats(self) -> BatchStats:
        return self._batcher.stats

    async def aclose(self) -> None:
        await self._batcher.aclose()

    @activity.defn(name="embedding.embed_passages")
    async def embed_passages(self, request: EmbedRequest) -> EmbedResult:
        """One vector per text (`[title\\n]content[\\ntag:<t>…]`), batched with concurrent calls."""
        return EmbedResult(vectors=await self._batcher.embed(request.texts, request.fairness_key))
