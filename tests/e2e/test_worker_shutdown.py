"""A deploy replaces `cairn worker` processes while work is in flight (issue 30 section 2).

Two real `python -m cairn worker` processes serve a task queue only this module uses; the API
runs in the test's event loop. The long activity under test is a batch of a diary import's
embedding (`diary_archive.embed_entries`: 32 long entries through the model, then 32 row
writes). The moment a batch is running, the worker holding it (named by the activity's
`last_worker_identity`) is

- sent SIGTERM: it stops polling, the batch finishes there on its first attempt, and the
  process exits 0 within `SERVICE_WORKER_SHUTDOWN_GRACE_S`; the other worker runs the rest;
- sent SIGKILL: its heartbeats stop, so the batch is retried on the other worker after the
  heartbeat timeout (a second attempt whose last failure is a heartbeat timeout, not the
  start-to-close one), and every entry is embedded once.
"""

from __future__ import annotations

import asyncio
import io
import signal
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from actors import Actor, Actors, personal_team
from faultstack import FaultStack, fault_settings, fault_stack, http_session
from processes import service_env, start_cairn, wait_until
from temporalio.api.enums.v1 import EventType, PendingActivityState, TimeoutType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHandle

from infra.devstack import free_port
from infra.s3 import BlobStore
from schemas import limits
from schemas.diary_archive import DiaryImported, DiaryImportInput, staged_archive_key
from schemas.kernel.cids import bytes_cid
from schemas.kernel.diary_car import ArchivedEntry, DiaryArchive, encode_archive
from workflows.diary_archive import DiaryImportWorkflow, diary_import_workflow_id

GRACE_S = 60  # a busy machine's batch finishes well inside it
BATCH = "diary_archive.embed_entries"
ENTRIES = 2 * limits.DIARY_IMPORT_EMBED_BATCH  # two batches: one in flight, one after it
TRIES = 5


class WorkerProcess:
    """One `python -m cairn worker`; its Temporal identity is the SDK's `pid@host`."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> WorkerProcess:
        self.process = await start_cairn("worker", self.env)
        return self

    @property
    def identity(self) -> str:
        assert self.process is not None
        return f"{self.process.pid}@{socket.gethostname()}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    async def stop(self) -> None:
        if self.running:
            self.signal(signal.SIGKILL)
            assert self.process is not None
            await self.process.wait()


@dataclass
class Crew:
    stack: FaultStack
    workers: list[WorkerProcess]
    owner: Actor
    team_id: uuid.UUID
    blobs: BlobStore

    async def replace_stopped(self) -> None:
        for n, worker in enumerate(self.workers):
            if not worker.running:
                self.workers[n] = await WorkerProcess(worker.env).start()

    def holding(self, identity: str) -> WorkerProcess:
        (worker,) = [w for w in self.workers if w.identity == identity]
        return worker


@pytest.fixture(scope="module")
async def crew(database_url: str, temporal_address: str, s3: Any) -> AsyncIterator[Crew]:
    settings = fault_settings(database_url, temporal_address, s3)
    env = service_env(settings, free_port()) | {"SERVICE_WORKER_SHUTDOWN_GRACE_S": str(GRACE_S)}
    workers = [await WorkerProcess(env).start(), await WorkerProcess(env).start()]
    blobs = BlobStore.from_settings(settings)
    try:
        async with (
            fault_stack(settings, with_worker=False) as stack,
            http_session(stack.base_url) as http,
        ):
            owner = await Actors(stack, http).agent()
            team_id = uuid.UUID(await personal_team(owner))
            yield Crew(stack, workers, owner, team_id, blobs)
    finally:
        for worker in workers:
            await worker.stop()
        blobs.close()


def archive(tag: str) -> bytes:
    """A diary of `ENTRIES` long entries (the model reads each to its token limit)."""
    at = datetime(2026, 1, 2, tzinfo=UTC)
    text = " ".join(f"deploy{n} drains its workers before the {tag} rollout" for n in range(15))
    entries = tuple(
        ArchivedEntry(f"{n}: {text}", None, ("ops",), "semantic", 5, at) for n in range(ENTRIES)
    )
    return encode_archive(DiaryArchive(uuid.uuid4(), f"deploy {tag}", "private", False, entries))


async def start_import(crew: Crew, tag: str) -> tuple[uuid.UUID, WorkflowHandle[Any, Any]]:
    """Stage an archive as the API does and start its import; the diary's id and the run."""
    data, diary_id = archive(tag), uuid.uuid4()
    key = staged_archive_key(diary_id, bytes_cid(data))
    await crew.blobs.put_file(key, io.BytesIO(data), len(data))
    handle = await crew.stack.temporal.start_workflow(
        DiaryImportWorkflow.run,
        DiaryImportInput(
            diary_id=diary_id,
            team_id=crew.team_id,
            created_by=crew.owner.subject_id,
            archive_key=key,
        ),
        id=diary_import_workflow_id(diary_id),
        task_queue=crew.stack.settings.temporal_task_queue,
    )
    return diary_id, handle


@dataclass(frozen=True)
class InFlight:
    activity_id: str
    identity: str  # of the worker running it


async def batch_in_flight(handle: WorkflowHandle[Any, Any]) -> InFlight | None:
    """An embedding batch of the import and the worker running it, once one runs; None if
    the run ended first."""
    started = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
    while True:
        described = await handle.describe()
        if described.close_time is not None:
            return None
        for pending in described.raw_description.pending_activities:
            if pending.activity_type.name == BATCH and pending.state == started:
                return InFlight(pending.activity_id, pending.last_worker_identity)
        await asyncio.sleep(0.01)


async def batch_caught(
    crew: Crew, tag: str
) -> tuple[uuid.UUID, WorkflowHandle[Any, Any], InFlight, WorkerProcess]:
    """An import with an embedding batch running now, and the worker that runs it."""
    for n in range(TRIES):
        diary_id, handle = await start_import(crew, f"{tag}-{n}")
        caught = await batch_in_flight(handle)
        if caught is not None:
            return diary_id, handle, caught, crew.holding(caught.identity)
    raise AssertionError(f"no embedding batch caught in flight in {TRIES} imports")


async def started(handle: WorkflowHandle[Any, Any], activity_id: str) -> HistoryEvent:
    """The started event of one activity: written once, when it ends, with the attempt that
    ended it, that attempt's worker and the failure of the attempt before."""
    scheduled = None
    async for event in handle.fetch_history_events():
        kind = event.event_type
        if (
            kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and event.activity_task_scheduled_event_attributes.activity_id == activity_id
        ):
            scheduled = event.event_id
        elif (
            kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
            and event.activity_task_started_event_attributes.scheduled_event_id == scheduled
        ):
            return event
    raise AssertionError(f"activity {activity_id} never started")


async def embedded(db: Any, diary_id: uuid.UUID) -> tuple[int, int]:
    """The diary's entries, and how many of them have their vector."""
    row = await db.fetchrow(
        "SELECT count(*) AS entries, count(embedding) AS vectors FROM diary_entries"
        " WHERE diary_id = $1",
        diary_id,
    )
    return int(row["entries"]), int(row["vectors"])


async def test_sigterm_lets_the_batch_in_flight_finish_and_exits_0(
    crew: Crew, db_pool: Any
) -> None:
    await crew.replace_stopped()
    diary_id, handle, caught, holder = await batch_caught(crew, "drain")
    holder.signal(signal.SIGTERM)
    assert holder.process is not None
    # a bound on a hang, not a timing: the grace period and the process's own exit
    assert await asyncio.wait_for(holder.process.wait(), GRACE_S + 30) == 0
    done: DiaryImported = await asyncio.wait_for(handle.result(), 120)
    assert done.entries == ENTRIES
    assert await embedded(db_pool, diary_id) == (ENTRIES, ENTRIES)
    drained = (await started(handle, caught.activity_id)).activity_task_started_event_attributes
    assert (drained.identity, drained.attempt) == (holder.identity, 1), drained.last_failure


async def test_a_killed_workers_batch_is_retried_on_the_other_after_its_heartbeats_stop(
    crew: Crew, db_pool: Any
) -> None:
    await crew.replace_stopped()
    diary_id, handle, caught, holder = await batch_caught(crew, "kill")
    await holder.stop()  # SIGKILL: no drain, no last heartbeat
    done: DiaryImported = await asyncio.wait_for(handle.result(), 120)
    assert done.entries == ENTRIES
    assert await embedded(db_pool, diary_id) == (ENTRIES, ENTRIES)
    retried = (await started(handle, caught.activity_id)).activity_task_started_event_attributes
    assert retried.attempt == 2 and retried.identity != holder.identity
    timeout = retried.last_failure.timeout_failure_info.timeout_type
    assert timeout == TimeoutType.TIMEOUT_TYPE_HEARTBEAT, retried.last_failure
    await wait_until(lambda: not holder.running, what="the killed worker reaped")
