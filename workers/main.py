"""The worker process: every workflow and activity on the service's task queue, and (unless
`SERVICE_WORKER_QUEUES=service`) the embedding task queue: the entry workflows beside the model,
their embedding and writes as local activities.

At start it makes sure the token endpoint has a signing key (an idempotent workflow), so a
fresh stack can issue tokens as soon as the worker is up.

Workers are versioned (workers/versioning.py): each declares its deployment and build id, and
`SERVICE_WORKER_SET_CURRENT` says whether it makes that version current at start (a fresh
deployment's first worker does; later builds wait for an operator, except under `cairn dev`).
SIGTERM or SIGINT drains: polling stops on every queue at once, activities in flight get
`SERVICE_WORKER_SHUTDOWN_GRACE_S` to finish, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

import asyncpg
from opentelemetry import metrics
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion, WorkflowIDConflictPolicy
from temporalio.worker import Worker

from activities.embedding import EmbeddingActivities
from activities.heartbeats import HEARTBEAT_SEND_INTERVAL
from infra.db import create_pool, pool_options
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
from workers.sandbox import SandboxedWorkflows
from workers.schedules import ensure_schedules
from workers.telemetry import reporting_queue_depth
from workers.versioning import deployment_config, promote, worker_version
from workflows.signing_keys import SigningKeysWorkflow, signing_keys_workflow_id

log = logging.getLogger("cairn.worker")
SIGNING_KEYS_TIMEOUT = timedelta(minutes=1)


def build_worker(
    client: Client, settings: Settings, deps: ActivityDeps, version: WorkerDeploymentVersion
) -> Worker:
    return Worker(
        client,
        task_queue=settings.temporal_task_queue,
        workflows=list(WORKFLOWS),
        activities=activities(deps),
        # tracing comes with the client: a worker takes the client's interceptors first
        interceptors=[DomainErrorInterceptor()],
        workflow_runner=SandboxedWorkflows(),
        max_concurrent_activities=64,
        # a backlog beyond the slots waits in Temporal's queue, where teams take turns
        max_concurrent_workflow_tasks=settings.worker_workflow_task_slots,
        deployment_config=deployment_config(version),
        graceful_shutdown_timeout=_grace(settings),
        max_heartbeat_throttle_interval=HEARTBEAT_SEND_INTERVAL,
    )


def _grace(settings: Settings) -> timedelta:
    """How long activities in flight may run on after shutdown begins, before cancellation."""
    return timedelta(seconds=settings.worker_shutdown_grace_s)


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


async def polls_complete_on_shutdown(client: Client) -> bool:
    """Whether the namespace's server answers a stopping worker's outstanding polls, warning
    when it does not: the SDK then drops them, and a task the server handed to a poll as the
    worker stopped waits for its heartbeat or start-to-close timeout before another worker
    runs it."""
    described = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=client.namespace)
    )
    if described.namespace_info.capabilities.worker_poll_complete_on_shutdown:
        return True
    log.warning(
        "namespace %s does not complete a stopping worker's polls: a task handed to this worker"
        " as it drains runs only after its timeout, on another worker (Temporal's dynamic"
        " config frontend.enableCancelWorkerPollsOnShutdown=true turns it on)",
        client.namespace,
    )
    return False


async def worker_client(settings: Settings, client: Client | None) -> Client:
    """The worker's client (`client`, else a new connection), once it has said whether a drain
    can strand a task, so an operator learns it at start rather than from a late retry."""
    client = client or await connect(settings)
    await polls_complete_on_shutdown(client)
    return client


async def worker_pool(settings: Settings) -> asyncpg.Pool:
    """The one pool of a worker process, shared by the service and embedding queues."""
    return await create_pool(
        settings.database_url,
        read_only=False,
        min_size=settings.database_pool_min,
        max_size=settings.database_pool_max,
        **pool_options(settings),
    )


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
    client: Client,
    settings: Settings,
    pool: asyncpg.Pool,
    version: WorkerDeploymentVersion,
    embedder: OnnxEmbedder | None = None,
) -> EmbeddingWorker:
    """Load the model once for this process (in a thread) and serve `settings.embedding_task_queue`:
    the entry workflows, whose embedding (micro-batched across the process's concurrent runs)
    and row writes are local activities, and `embedding.*` as a regular activity for runs that
    started on the service queue; enough concurrent slots that callers can batch, and at
    most `settings.embedding_workflow_task_slots` entry writes at once."""
    if embedder is None:
        embedder = await asyncio.to_thread(OnnxEmbedder.load)
    activities = EmbeddingActivities(embedder)
    worker = Worker(
        client,
        task_queue=settings.embedding_task_queue,
        workflows=list(EMBEDDING_WORKFLOWS),
        activities=embedding_activities(activities, pool),
        interceptors=[DomainErrorInterceptor()],  # tracing comes with the client
        workflow_runner=SandboxedWorkflows(),
        max_concurrent_activities=limits.EMBEDDING_MICROBATCH_MAX_TEXTS,
        # the entry writes (their embedding and insert are local activities inside the
        # workflow task): a backlog beyond these waits in Temporal's queue, where teams take
        # turns, rather than in the batcher, where every write waits for the whole run
        max_concurrent_workflow_tasks=settings.embedding_workflow_task_slots,
        deployment_config=deployment_config(version),
        graceful_shutdown_timeout=_grace(settings),
        max_heartbeat_throttle_interval=HEARTBEAT_SEND_INTERVAL,
    )
    return EmbeddingWorker(worker, activities, asyncio.create_task(worker.run()))


@contextlib.asynccontextmanager
async def running_embedding_worker(
    settings: Settings, client: Client | None = None
) -> AsyncIterator[EmbeddingWorker]:
    """Only the embedding queue (`SERVICE_WORKER_QUEUES=embeddings`): the model, Temporal and
    Postgres (the entry rows), no S3 or secret, so these processes scale with the model's CPU
    apart from the service workers."""
    client = await worker_client(settings, client)
    pool = await worker_pool(settings)
    try:
        version = worker_version(settings)
        embedding = await start_embedding_worker(client, settings, pool, version)
        try:
            await promote(client, version, settings)
            yield embedding
        finally:
            await embedding.stop()
    finally:
        await pool.close()


@contextlib.asynccontextmanager
async def running_worker(settings: Settings, client: Client | None = None) -> AsyncIterator[Worker]:
    """A worker running in this event loop until the block ends; the embedding queue too unless
    `settings.worker_queues` is `service`."""
    client = await worker_client(settings, client)
    pool = await worker_pool(settings)
    version = worker_version(settings)
    embedding = None
    if settings.worker_queues == "all":
        try:
            embedding = await start_embedding_worker(client, settings, pool, version)
        except BaseException:
            await pool.close()
            raise
    blobs = BlobStore.from_settings(settings)
    deps = ActivityDeps(pool, settings.secret_ring, blobs)
    worker = build_worker(client, settings, deps, version)
    task = asyncio.create_task(worker.run())
    queue_depth = (
        reporting_queue_depth(pool, metrics.get_meter("cairn.worker"), export_interval())
        if metering()
        else contextlib.nullcontext()
    )
    try:
        async with queue_depth:
            await promote(client, version, settings)
            await ensure_signing_key(client, settings)
            await ensure_schedules(
                client, settings.temporal_task_queue, settings.task_artifact_orphan_grace_sec
            )
            yield worker
    finally:
        # both queues stop polling at once and drain side by side, within one grace period
        stopping = [worker.shutdown()]
        if embedding is not None:
            stopping.append(embedding.stop())
        await asyncio.gather(*stopping)
        with contextlib.suppress(Exception):
            await task
        await pool.close()
        blobs.close()


async def run_worker(settings: Settings) -> None:
    # before anything starts: a signal during start-up (the worker may already hold an
    # activity) drains as soon as the worker is up, instead of killing the process
    stop = _stop_signals()
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
            await _until_stopped(stop, settings)
        return
    async with running_worker(settings):
        log.info("worker running on task queue %s", settings.temporal_task_queue)
        await _until_stopped(stop, settings)


def _stop_signals() -> asyncio.Future[signal.Signals]:
    """Resolved by the first SIGTERM or SIGINT; later ones change nothing (the grace period
    already bounds the drain)."""
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[signal.Signals] = loop.create_future()

    def received(sig: signal.Signals) -> None:
        if not stop.done():
            stop.set_result(sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, received, sig)
    return stop


async def _until_stopped(stop: asyncio.Future[signal.Signals], settings: Settings) -> None:
    """Until a stop signal; leaving the worker's block then drains it."""
    signalled = await stop
    log.info(
        "%s: draining; activities in flight get %s s to finish",
        signalled.name,
        settings.worker_shutdown_grace_s,
    )
