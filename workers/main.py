"""The worker process: every workflow and activity on the service's task queue, and (unless
`SERVICE_WORKER_QUEUES=service`) the embedding task queue: the entry workflows beside the model,
their embedding and writes as local activities.

At start it makes sure the token endpoint has a signing key (an idempotent workflow), so a
fresh stack can issue tokens as soon as the worker is up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

import asyncpg
from opentelemetry import metrics
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.worker import Worker

from activities.embedding import EmbeddingActivities
from infra.db import create_pool
from infra.embeddings import OnnxEmbedder
from infra.s3 import BlobStore
from infra.settings import Settings
from infra.telemetry import (
    export_interval,
    exporting,
    metering,
    setup_metrics,
    setup_tracing,
)
from infra.temporal import connect
from schemas import limits
from schemas.identity import SigningKeyEnsure
from workers.interceptors import DomainErrorInterceptor
from workers.registry import (
    EMBEDDING_WORKFLOWS,
    WORKFLOWS,
    ActivityDeps,
    activities,
    embedding_activities,
)
from workers.schedules import ensure_schedules
from workers.telemetry import reporting_queue_depth
from workflows.signing_keys import SigningKeysWorkflow, signing_keys_workflow_id

log = logging.getLogger("cairn.worker")
SIGNING_KEYS_TIMEOUT = timedelta(minutes=1)


def build_worker(client: Client, settings: Settings, deps: ActivityDeps) -> Worker:
    return Worker(
        client,
        task_queue=settings.temporal_task_queue,
        workflows=list(WORKFLOWS),
        activities=activities(deps),
        # tracing comes with the client: a worker takes the client's interceptors first
        interceptors=[DomainErrorInterceptor()],
        max_concurrent_activities=64,
    )


async def ensure_signing_key(client: Client, settings: Settings, *, rotate: bool = False) -> str:
    state = await client.execute_workflow(
        SigningKeysWorkflow.run,
        SigningKeyEnsure(rotate=rotate),
        id=signing_keys_workflow_id(settings.temporal_task_queue),
        task_queue=settings.temporal_task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        # a run whose workers are gone ends instead of holding every later start-up forever
        execution_timeout=SIGNING_KEYS_TIMEOUT,
    )
    return state.kid


@dataclass
class EmbeddingWorker:
    """The worker of the embedding task queue and the activities it serves (their `stats`)."""

    worker: Worker
    activities: EmbeddingActivities
    task: asyncio.Task[None]

    async def stop(self) -> None:
        await self.worker.shutdown()
        with contextlib.suppress(Exception):
            await self.task
        await self.activities.aclose()


async def start_embedding_worker(
    client: Client, settings: Settings, pool: asyncpg.Pool, embedder: OnnxEmbedder | None = None
) -> EmbeddingWorker:
    """Load the model once for this process (in a thread) and serve `settings.embedding_task_queue`:
    the entry workflows, whose embedding (micro-batched across the process's concurrent runs)
    and row writes are local activities, and `embedding.*` as a regular activity for runs that
    started on the service queue; enough concurrent slots that callers can batch."""
    if embedder is None:
        embedder = await asyncio.to_thread(OnnxEmbedder.load)
    activities = EmbeddingActivities(embedder)
    worker = Worker(
        client,
        task_queue=settings.embedding_task_queue,
        workflows=list(EMBEDDING_WORKFLOWS),
        activities=embedding_activities(activities, pool),
        interceptors=[DomainErrorInterceptor()],  # tracing comes with the client
        max_concurrent_activities=limits.EMBEDDING_MICROBATCH_MAX_TEXTS,
    )
    return EmbeddingWorker(worker, activities, asyncio.create_task(worker.run()))


@contextlib.asynccontextmanager
async def running_embedding_worker(
    settings: Settings, client: Client | None = None
) -> AsyncIterator[EmbeddingWorker]:
    """Only the embedding queue (`SERVICE_WORKER_QUEUES=embeddings`): the model, Temporal and
    Postgres (the entry rows), no S3 or secret, so these processes scale with the model's CPU
    apart from the service workers."""
    client = client or await connect(settings)
    pool = await create_pool(
        settings.database_url, read_only=False, max_size=settings.database_pool_max
    )
    try:
        embedding = await start_embedding_worker(client, settings, pool)
        try:
            yield embedding
        finally:
            await embedding.stop()
    finally:
        await pool.close()


@contextlib.asynccontextmanager
async def running_worker(settings: Settings, client: Client | None = None) -> AsyncIterator[Worker]:
    """A worker running in this event loop until the block ends; the embedding queue too unless
    `settings.worker_queues` is `service`."""
    client = client or await connect(settings)
    pool = await create_pool(
        settings.database_url, read_only=False, max_size=settings.database_pool_max
    )
    embedding = None
    if settings.worker_queues == "all":
        try:
            embedding = await start_embedding_worker(client, settings, pool)
        except BaseException:
            await pool.close()
            raise
    blobs = BlobStore.from_settings(settings)
    worker = build_worker(client, settings, ActivityDeps(pool, settings.secret_ring, blobs))
    task = asyncio.create_task(worker.run())
    queue_depth = (
        reporting_queue_depth(pool, metrics.get_meter("cairn.worker"), export_interval())
        if metering()
        else contextlib.nullcontext()
    )
    try:
        async with queue_depth:
            await ensure_signing_key(client, settings)
            await ensure_schedules(
                client, settings.temporal_task_queue, settings.task_artifact_orphan_grace_sec
            )
            yield worker
    finally:
        if embedding is not None:
            await embedding.stop()
        await worker.shutdown()
        with contextlib.suppress(Exception):
            await task
        await pool.close()
        blobs.close()


async def run_worker(settings: Settings) -> None:
    if exporting():  # the workflow and activity spans of a trace the API began
        setup_tracing(settings.otel_service_name)
    # before connecting: the SDK's metrics too
    setup_metrics(
        settings.otel_service_name,
        scrape_port=settings.metrics_port,
        scrape_host=settings.metrics_host,
    )
    if settings.worker_queues == "embeddings":
        async with running_embedding_worker(settings):
            log.info("embedding worker running on task queue %s", settings.embedding_task_queue)
            await asyncio.Event().wait()
        return
    async with running_worker(settings):
        log.info("worker running on task queue %s", settings.temporal_task_queue)
        await asyncio.Event().wait()
