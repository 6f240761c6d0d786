"""Entry creation when the embedding service is down (DECISIONS "Memory"): the entry is stored
at once without a vector, and a background workflow keeps retrying the embedding with backoff
(time skipped) until it succeeds and stores the vector. The real memory activities write to
Postgres; only the embedding activity is replaced, by one that fails its first calls. An update
that changes the text embeds again, on either route."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from histories import keep
from payload_keys import CONVERTER
from temporalio import activity
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.memory import MemoryActivities
from infra.db import create_pool
from infra.devstack import venv_binary
from infra.repos.memory import MemoryRepo
from schemas.embedding import EmbedRequest, EmbedResult
from schemas.memory import (
    DiaryCreateInput,
    EntryChange,
    EntryDraft,
    EntryEmbedding,
    EntryInserted,
    EntryUpdateInput,
)
from schemas.queues import embedding_queue_for
from workers.interceptors import DomainErrorInterceptor
from workflows.diaries import DiaryCreateWorkflow, diary_create_workflow_id
from workflows.entries import (
    EntryEmbeddingWorkflow,
    EntryUpdateWorkflow,
    entry_create_workflow_id,
    entry_embedding_workflow_id,
    entry_update_workflow_id,
)
from workflows.entry_create import EntryCreateWorkflow


@dataclass
class FlakyEmbedder:
    """Fails the first `failures` calls, then answers a fixed unit vector."""

    failures: int
    calls: int = 0

    @activity.defn(name="embedding.embed_passages")
    async def embed_passages(self, inp: EmbedRequest) -> EmbedResult:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError("embedding service unavailable")
        return EmbedResult(vectors=[[1.0] + [0.0] * 383 for _ in inp.texts])


@dataclass
class Rig:
    env: WorkflowEnvironment
    queue: str
    pool: object
    embedder: FlakyEmbedder
    local: bool  # on the embedding queue: the runs embed with a local activity
    started: list[str] = field(default_factory=list)

    async def stop_leftovers(self) -> None:
        """Terminate background retries this test left running, before its workers stop."""
        for workflow_id in self.started:
            with contextlib.suppress(RPCError):
                await self.env.client.get_workflow_handle(workflow_id).terminate("test over")


@pytest.fixture
async def own_time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """A test server of each test's own: a background retry a test leaves keeps the server's
    clock from skipping for later tests, even after it is terminated (sharing one per module,
    each back-off test waited out 30 s of real time; a server starts in about 2 s)."""
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=CONVERTER,
        test_server_existing_path=str(venv_binary("temporal-test-server")),
    )
    yield env
    await env.shutdown()


@pytest.fixture(params=["embedding-queue", "service-queue"])
async def rig(
    request: pytest.FixtureRequest, own_time_skipping_env: WorkflowEnvironment, database_url: str
) -> AsyncIterator[Rig]:
    """The entry workflows where the API starts them (the embedding queue: the embedding is a
    local activity beside the model), and where runs from before that move live on (the service
    queue: the embedding is a regular activity routed to the embedding queue)."""
    time_skipping_env = own_time_skipping_env
    pool = await create_pool(database_url, read_only=False)
    service_queue = f"entries-{uuid.uuid4().hex[:8]}"
    embedder = FlakyEmbedder(failures=4)
    memory = MemoryActivities(MemoryRepo(pool))
    client = time_skipping_env.client
    workflows = [
        DiaryCreateWorkflow,
        EntryCreateWorkflow,
        EntryUpdateWorkflow,
        EntryEmbeddingWorkflow,
    ]
    writes = [memory.create_diary, memory.insert_entry, memory.rewrite_entry, memory.set_embedding]
    if request.param == "embedding-queue":
        queue = embedding_queue_for(service_queue)
        workers = [
            Worker(
                client,
                task_queue=queue,
                workflows=workflows,
                activities=[*writes, embedder.embed_passages],
                interceptors=[DomainErrorInterceptor()],
            )
        ]
    else:
        queue = service_queue
        workers = [
            Worker(
                client,
                task_queue=queue,
                workflows=workflows,
                activities=writes,
                interceptors=[DomainErrorInterceptor()],
            ),
            Worker(
                client, task_queue=embedding_queue_for(queue), activities=[embedder.embed_passages]
            ),
        ]
    async with contextlib.AsyncExitStack() as stack:
        for worker in workers:
            await stack.enter_async_context(worker)
        rig = Rig(time_skipping_env, queue, pool, embedder, local=queue != service_queue)
        try:
            yield rig
        finally:
            await rig.stop_leftovers()
    await pool.close()


async def _diary(rig: Rig) -> uuid.UUID:
    team_id, diary_id, agent_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await rig.pool.execute(  # type: ignore[attr-defined]
        "INSERT INTO teams (id, name, personal, created_by, created_by_ns, status) "
        "VALUES ($1, 'wf', false, $2, 'Agent', 'active')",
        team_id,
        agent_id,
    )
    await rig.env.client.execute_workflow(
        DiaryCreateWorkflow.run,
        DiaryCreateInput(
            diary_id=diary_id,
            team_id=team_id,
            name="wf",
            visibility="private",
            signed=False,
            created_by=agent_id,
            created_by_ns="Agent",
        ),
        id=diary_create_workflow_id(diary_id),
        task_queue=rig.queue,
    )
    return diary_id


async def _create(rig: Rig) -> tuple[uuid.UUID, str]:
    draft, inserted = await _create_draft(rig, "remember this")
    return draft.entry_id, inserted.cid


async def _create_draft(rig: Rig, content: str) -> tuple[EntryDraft, EntryInserted]:
    entry_id = uuid.uuid4()
    draft = EntryDraft(
        entry_id=entry_id,
        diary_id=await _diary(rig),
        content=content,
        created_by=uuid.uuid4(),
        embed_locally=rig.local,
    )
    inserted = await rig.env.client.execute_workflow(
        EntryCreateWorkflow.run, draft, id=entry_create_workflow_id(entry_id), task_queue=rig.queue
    )
    rig.started.append(entry_embedding_workflow_id(entry_id, inserted.cid))
    return draft, inserted


async def test_entry_is_stored_without_vector_and_a_retry_is_left_running(rig: Rig) -> None:
    entry_id, cid = await _create(rig)
    row = await rig.pool.fetchrow(  # type: ignore[attr-defined]
        "SELECT cid, embedding IS NULL AS missing FROM diary_entries WHERE id = $1", entry_id
    )
    assert row["cid"] == cid and row["missing"] is True
    assert rig.embedder.calls >= 2  # the write gave up after two quick tries
    late = rig.env.client.get_workflow_handle(entry_embedding_workflow_id(entry_id, cid))
    description = await late.describe()
    assert description.workflow_type == "EntryEmbedding"


async def test_the_retry_backs_off_then_stores_the_vector(rig: Rig) -> None:
    entry_id, cid = await _create(rig)
    # Run the retry workflow on its own (started here so the test server skips its timers).
    calls_before = rig.embedder.calls
    rig.embedder.failures = calls_before + 3
    handle = await rig.env.client.start_workflow(
        EntryEmbeddingWorkflow.run,
        EntryEmbedding(entry_id=entry_id, text="remember this", cid=cid, embed_locally=rig.local),
        id=f"entries/{entry_id}/embedding-test",
        task_queue=rig.queue,
    )
    await handle.result()
    dims = await rig.pool.fetchval(  # type: ignore[attr-defined]
        "SELECT vector_dims(embedding) FROM diary_entries WHERE id = $1", entry_id
    )
    assert dims == 384
    history = await handle.fetch_history()
    timers = [e for e in history.events if e.HasField("timer_started_event_attributes")]
    assert timers  # the failed tries waited on durable timers (the abandoned child shares
    # the flaky embedder, so how many of the failures this run saw varies)
    await keep(handle, f"entry_embedding_{route(rig)}")


def route(rig: Rig) -> str:
    """Where the run was started: beside the model (a local embedding) or on the service queue
    (routed to the embedding queue). Names apart from `entry_create_local.json` and
    `entry_create_activity.json`: the latter was recorded by the code before the move."""
    return "embedding_queue" if rig.local else "service_queue"


async def test_on_the_embedding_queue_the_embedding_is_a_local_activity(rig: Rig) -> None:
    rig.embedder.failures = 0
    diary_id = await _diary(rig)
    entry_id = uuid.uuid4()
    draft = EntryDraft(
        entry_id=entry_id,
        diary_id=diary_id,
        content="x",
        created_by=uuid.uuid4(),
        embed_locally=rig.local,
    )
    handle = await rig.env.client.start_workflow(
        EntryCreateWorkflow.run, draft, id=entry_create_workflow_id(entry_id), task_queue=rig.queue
    )
    await handle.result()
    history = await handle.fetch_history()
    events = history.events
    scheduled = [e for e in events if e.HasField("activity_task_scheduled_event_attributes")]
    markers = [e for e in events if e.HasField("marker_recorded_event_attributes")]
    if rig.local:
        assert scheduled == [] and len(markers) == 2  # the embedding and the insert
    else:
        assert len(scheduled) == 1 and len(markers) == 1  # the embedding went to its queue
    dims = await rig.pool.fetchval(  # type: ignore[attr-defined]
        "SELECT vector_dims(embedding) FROM diary_entries WHERE id = $1", entry_id
    )
    assert dims == 384
    await keep(handle, f"entry_create_{route(rig)}")


async def test_an_update_that_changes_the_text_embeds_it_again(rig: Rig) -> None:
    rig.embedder.failures = 0
    draft, created = await _create_draft(rig, "first words")
    entry_id = draft.entry_id
    calls = rig.embedder.calls
    change = EntryChange(entry_id=entry_id, content="second words")
    handle = await rig.env.client.start_workflow(
        EntryUpdateWorkflow.run,
        EntryUpdateInput(
            change=change,
            merged=draft.model_copy(update={"content": "second words"}),
            text_changed=True,
        ),
        id=entry_update_workflow_id(entry_id),
        task_queue=rig.queue,
    )
    await handle.result()
    row = await rig.pool.fetchrow(  # type: ignore[attr-defined]
        "SELECT content, cid, vector_dims(embedding) AS dims FROM diary_entries WHERE id = $1",
        entry_id,
    )
    assert row["content"] == "second words" and row["cid"] != created.cid and row["dims"] == 384
    assert rig.embedder.calls == calls + 1  # embedded again, once
    await keep(handle, f"entry_update_{route(rig)}")
