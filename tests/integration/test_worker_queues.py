"""`SERVICE_WORKER_QUEUES`: `cairn worker` polls the service queue, the embedding queue (the
entry workflows and the model) or both, so embedding workers scale apart (infra/deploy/).
Checked on the dev server by the pollers Temporal records for each queue while `run_worker`
(what `cairn worker` runs) is up."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from infra.settings import Settings
from workers.main import run_worker

POLL_WAIT_SEC = 60.0


def _settings(queues: str, temporal_address: str, **extra: object) -> Settings:
    return Settings(
        temporal_address=temporal_address,
        temporal_task_queue=f"queues-{uuid.uuid4().hex[:8]}",
        worker_queues=queues,  # type: ignore[arg-type]
        **extra,  # type: ignore[arg-type]
    )


def _service_settings(queues: str, temporal_address: str, database_url: str, s3: Any) -> Settings:
    return _settings(
        queues,
        temporal_address,
        database_url=database_url,
        s3_endpoint=s3.endpoint,
        s3_bucket=s3.bucket,
        s3_access_key=s3.access_key,
        s3_secret_key=s3.secret_key,
        secret_key="test-server-secret-0123456789abcdef-xyz",
    )


async def _activity_pollers(client: Client, queue: str) -> int:
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        )
    )
    return len(described.pollers)


@contextlib.asynccontextmanager
async def _worker_process(settings: Settings) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(run_worker(settings))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _until_polled(client: Client, queue: str, worker: asyncio.Task[None]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + POLL_WAIT_SEC
    while await _activity_pollers(client, queue) == 0:
        if worker.done():
            worker.result()  # the worker's own failure, if it stopped
        assert loop.time() < deadline, f"nothing polled {queue}"
        await asyncio.sleep(0.2)


async def test_an_embedding_worker_polls_only_its_queue_without_s3(
    temporal_address: str, database_url: str
) -> None:
    # no S3 endpoint or secret: an embedding worker must not need them (Postgres it needs, for
    # the entry rows its workflows write beside the model)
    settings = _settings("embeddings", temporal_address, database_url=database_url)
    client = await Client.connect(temporal_address)
    async with _worker_process(settings) as worker:
        await _until_polled(client, settings.embedding_task_queue, worker)
        assert await _activity_pollers(client, settings.temporal_task_queue) == 0
        assert not worker.done()


async def test_a_service_worker_leaves_the_embedding_queue_alone(
    temporal_address: str, database_url: str, s3: Any
) -> None:
    settings = _service_settings("service", temporal_address, database_url, s3)
    client = await Client.connect(temporal_address)
    async with _worker_process(settings) as worker:
        await _until_polled(client, settings.temporal_task_queue, worker)
        assert await _activity_pollers(client, settings.embedding_task_queue) == 0


async def test_the_default_worker_polls_both_queues(
    temporal_address: str, database_url: str, s3: Any
) -> None:
    settings = _service_settings("all", temporal_address, database_url, s3)
    assert Settings.model_fields["worker_queues"].default == "all"
    client = await Client.connect(temporal_address)
    async with _worker_process(settings) as worker:
        await _until_polled(client, settings.temporal_task_queue, worker)
        await _until_polled(client, settings.embedding_task_queue, worker)
