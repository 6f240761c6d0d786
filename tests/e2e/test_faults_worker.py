"""The worker killed with SIGKILL in the middle of registration, entry create, pack create and a
task attempt's completion: once a new worker starts, each completes exactly once (no lost and
no duplicated rows or tuples; the OAuth client registered once, and its secret gets a token).

The worker is a real `python -m cairn worker` process on a task queue only this module serves;
the API runs in the test's event loop. The moment an operation's first effect is visible in
Postgres the worker is frozen (SIGSTOP); if the run has not ended it is SIGKILLed, else let go
and the operation tried afresh. The workflow's history must then show the dead worker's task
timing out before the run completed: the new worker re-ran the rest, so every step already done
was run twice and is checked to be idempotent. None of these operations writes to S3 (uploads:
test_faults_s3.py and test_faults_disconnect.py).
"""

from __future__ import annotations

import asyncio
import base64
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nacl.signing
import pytest
from actors import Actor, Actors, personal_team
from faultstack import FaultStack, fault_settings, fault_stack, http_session
from processes import service_env, start_cairn
from temporalio.api.enums.v1 import EventType, PendingActivityState, PendingWorkflowTaskState
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus

from api.routes.packs import _request_cid as request_cid
from infra.devstack import free_port
from schemas.kernel.cids import json_cid
from schemas.kernel.crypto import fingerprint, parse_public_key
from schemas.packs import PackCreateRequest
from schemas.task_attempts import task_workflow_id
from workers.admin import issue_bootstrap_voucher
from workflows.packs import pack_workflow_id


class WorkerProcess:
    """`python -m cairn worker` on the module's queue; killed with SIGKILL, then replaced."""

    def __init__(self, settings: Any) -> None:
        self.env = service_env(settings, free_port())
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.process = await start_cairn("worker", self.env)

    def freeze(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    async def kill(self) -> None:
        assert self.process is not None and self.process.returncode is None, "worker not running"
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 20)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


@pytest.fixture(scope="module")
async def worker_stack(
    database_url: str, temporal_address: str, s3: Any
) -> AsyncIterator[tuple[FaultStack, WorkerProcess]]:
    settings = fault_settings(database_url, temporal_address, s3)
    worker = WorkerProcess(settings)
    await worker.start()
    try:
        async with fault_stack(settings, with_worker=False) as stack:
            yield stack, worker
    finally:
        await worker.stop()


@pytest.fixture(scope="module")
async def http(worker_stack: tuple[FaultStack, WorkerProcess]) -> AsyncIterator[Any]:
    async with http_session(worker_stack[0].base_url) as session:
        yield session


Operation = tuple["asyncio.Task[tuple[int, Any]]", Callable[[], Awaitable[str | None]]]
TRIES = 5
FIRST_EFFECT_LIMIT_S = 60  # a worker that never gets a task fails the test, not the run


async def killed_mid_run(
    stack: FaultStack, worker: WorkerProcess, begin: Callable[[], Awaitable[Operation]]
) -> tuple[int, Any]:
    """Begin an operation, and the moment its first effect shows (`first_effect` answers its
    workflow's id) freeze the worker; if the frozen worker holds one of the run's tasks, SIGKILL
    it, start a new one and return the operation's response once it completes. A run that had
    ended already (the effect was its last step), or that was between tasks at the freeze (a
    kill then leaves nothing to time out), is let go and the operation begun afresh."""
    for _ in range(TRIES):
        request, first_effect = await asyncio.wait_for(begin(), FIRST_EFFECT_LIMIT_S)
        deadline = asyncio.get_running_loop().time() + FIRST_EFFECT_LIMIT_S
        while (workflow_id := await first_effect()) is None:
            assert not request.done(), request.result()
            assert asyncio.get_running_loop().time() < deadline, "the worker took no task"
            await asyncio.sleep(0.001)
        worker.freeze()
        handle = stack.temporal.get_workflow_handle(workflow_id)
        if holds_a_task(await handle.describe()):
            await worker.kill()
            await worker.start()
            response = await asyncio.wait_for(request, 90)
            await assert_resumed_after_a_kill(handle)
            return response
        worker.thaw()
        await asyncio.wait_for(request, 30)
    raise AssertionError(f"no kill landed mid-run in {TRIES} tries")


def holds_a_task(described: WorkflowExecutionDescription) -> bool:
    """Whether the run is going and the worker (the only one, frozen now) holds one of its
    tasks: a workflow task, or an activity (the worker process runs every queue)."""
    if described.status != WorkflowExecutionStatus.RUNNING:
        return False
    raw = described.raw_description
    started_task = PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED
    started_activity = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
    return raw.pending_workflow_task.state == started_task or any(
        activity.state == started_activity for activity in raw.pending_activities
    )


async def assert_resumed_after_a_kill(handle: Any) -> None:
    """The run outlived its worker: a workflow task of the dead worker timed out (or its
    activity did), and the run went on to complete."""
    events = [event.event_type async for event in handle.fetch_history_events()]
    timed_out = {
        EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
        EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    }
    assert timed_out & set(events), [EventType.Name(e) for e in events]
    assert events[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED


async def until_task_taken(handle: Any, limit_s: float = 30) -> None:
    """Until the run's first workflow task is handed to a worker (its poll was open)."""
    deadline = asyncio.get_running_loop().time() + limit_s
    while True:
        try:
            events = [event.event_type async for event in handle.fetch_history_events()]
        except Exception:  # the run is not there yet
            events = []
        if EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED in events:
            return
        assert asyncio.get_running_loop().time() < deadline, "no worker took the task"
        await asyncio.sleep(0.05)


async def count(db: Any, sql: str, *args: Any) -> int:
    return int(await db.fetchval(sql, *args))


# --- registration -------------------------------------------------------------------------------


async def test_registration_survives_a_killed_worker(
    worker_stack: tuple[FaultStack, WorkerProcess], http: Any, db_pool: Any
) -> None:
    stack, worker = worker_stack
    voucher_code = ""

    async def begin() -> Operation:
        nonlocal voucher_code
        voucher = await issue_bootstrap_voucher(stack.temporal, stack.settings)
        voucher_code = voucher.code
        key = nacl.signing.SigningKey.generate()
        public_key = "ed25519:" + base64.b64encode(bytes(key.verify_key)).decode()

        async def register() -> tuple[int, Any]:
            body = {"public_key": public_key, "voucher_code": voucher.code}
            async with http.post("/auth/register", json=body) as response:
                return response.status, await response.json(content_type=None)

        async def identity_written() -> str | None:
            written = await count(
                db_pool,
                "SELECT count(*) FROM identities WHERE traits->>'public_key' = $1",
                public_key,
            )
            printed = fingerprint(parse_public_key(public_key))
            return f"registration/{printed}" if written else None

        return asyncio.create_task(register()), identity_written

    status, registered = await killed_mid_run(stack, worker, begin)
    assert status == 200, registered
    agent_id = await db_pool.fetchval(
        "SELECT id FROM agents WHERE fingerprint = $1", registered["fingerprint"]
    )
    assert (
        await count(
            db_pool,
            "SELECT count(*) FROM identities WHERE id = $1",
            uuid.UUID(registered["identityId"]),
        )
        == 1
    )
    assert (
        await count(
            db_pool, "SELECT count(*) FROM agents WHERE fingerprint = $1", registered["fingerprint"]
        )
        == 1
    )
    assert await count(db_pool, "SELECT count(*) FROM agents WHERE id = $1", agent_id) == 1
    assert (
        await count(
            db_pool,
            "SELECT count(*) FROM oauth_clients WHERE identity_id = $1",
            uuid.UUID(registered["identityId"]),
        )
        == 1
    )
    assert (
        await count(
            db_pool, "SELECT count(*) FROM teams WHERE name = $1", registered["fingerprint"]
        )
        == 1
    )
    self_tuples = await count(
        db_pool,
        "SELECT count(*) FROM relation_tuples WHERE namespace = 'Agent' AND object_id = $1"
        " AND relation = 'self'",
        str(agent_id),
    )
    assert self_tuples == 1
    # the client secret it answered is the one stored: a token is issued for it
    form = {
        "grant_type": "client_credentials",
        "client_id": registered["clientId"],
        "client_secret": registered["clientSecret"],
    }
    async with http.post("/oauth2/token", data=form) as response:
        assert response.status == 200, await response.text()
    # and the voucher is spent: a second registration with it is refused
    other = nacl.signing.SigningKey.generate()
    body = {
        "public_key": "ed25519:" + base64.b64encode(bytes(other.verify_key)).decode(),
        "voucher_code": voucher_code,
    }
    async with http.post("/auth/register", json=body) as response:
        refused = await response.json(content_type=None)
        assert response.status == 403 and refused["code"] == "voucher-rejected", refused


# --- entries, packs and attempts: one writer, its diary, a teammate who executes ---------------


class Crew:
    owner: Actor
    executor: Actor
    team_id: str
    diary_id: str


@pytest.fixture(scope="module")
async def crew(worker_stack: tuple[FaultStack, WorkerProcess], http: Any) -> Crew:
    actors = Actors(worker_stack[0], http)
    c = Crew()
    c.owner, c.executor = await actors.agent(), await actors.agent()
    c.team_id = await personal_team(c.owner)
    status, team = await c.owner.call("POST", "/teams", json={"name": "crew"})
    assert status == 201, team
    c.team_id = str(team["id"])
    status, invite = await c.owner.call(
        "POST", f"/teams/{c.team_id}/invites", json={"role": "executor"}
    )
    assert status == 201, invite
    status, joined = await c.executor.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 200, joined
    status, diary = await c.owner.call(
        "POST", "/diaries", json={"name": "work", "visibility": "private"}, team=c.team_id
    )
    assert status == 201, diary
    c.diary_id = str(diary["id"])
    return c


async def test_an_entry_create_survives_a_killed_worker(
    worker_stack: tuple[FaultStack, WorkerProcess], crew: Crew, db_pool: Any
) -> None:
    stack, worker = worker_stack
    diary = uuid.UUID(crew.diary_id)
    content = ""

    async def begin() -> Operation:
        nonlocal content
        content = f"written once {uuid.uuid4()}"
        body = {"content": content}
        request = asyncio.create_task(
            crew.owner.call("POST", f"/diaries/{crew.diary_id}/entries", json=body)
        )

        async def entry_written() -> str | None:
            entry_id = await db_pool.fetchval(
                "SELECT id FROM diary_entries WHERE diary_id = $1 AND content = $2",
                diary,
                content,
            )
            return None if entry_id is None else f"entries/{entry_id}/create"

        return request, entry_written

    status, entry = await killed_mid_run(stack, worker, begin)
    assert status == 201, entry
    rows = await count(
        db_pool,
        "SELECT count(*) FROM diary_entries WHERE diary_id = $1 AND content = $2",
        diary,
        content,
    )
    assert rows == 1
    tuples = await db_pool.fetch(
        "SELECT relation, subject_ns, subject_id FROM relation_tuples"
        " WHERE namespace = 'DiaryEntry' AND object_id = $1",
        entry["id"],
    )
    assert len(tuples) == len({tuple(row) for row in tuples})
    status, read = await crew.owner.call("GET", f"/entries/{entry['id']}")
    assert status == 200 and read["content"] == content, read


async def test_a_pack_create_survives_a_killed_worker(
    worker_stack: tuple[FaultStack, WorkerProcess], crew: Crew, db_pool: Any
) -> None:
    """Pack create is one step whose commit and the run's completion share a workflow task, so
    a freeze after its rows show almost never finds the run still open (on a quiet machine,
    never). Instead the worker is frozen first: its open poll takes the run's workflow task,
    and the worker that holds it is killed before it can act; a new worker then makes the
    pack, once."""
    stack, worker = worker_stack
    status, entry = await crew.owner.call(
        "POST", f"/diaries/{crew.diary_id}/entries", json={"content": f"p {uuid.uuid4()}"}
    )
    assert status == 201, entry
    entry_id = entry["id"]
    body = {"entries": [{"entryId": entry_id, "rank": 1}]}
    workflow_id = pack_workflow_id(
        uuid.UUID(crew.diary_id), request_cid(PackCreateRequest.model_validate(body))
    )
    worker.freeze()
    request = asyncio.create_task(
        crew.owner.call("POST", f"/diaries/{crew.diary_id}/packs", json=body)
    )
    handle = stack.temporal.get_workflow_handle(workflow_id)
    await until_task_taken(handle)
    await worker.kill()
    await worker.start()
    status, pack = await asyncio.wait_for(request, 90)
    await assert_resumed_after_a_kill(handle)
    assert status in (200, 201), pack
    packs = await db_pool.fetch(
        "SELECT DISTINCT pack_id FROM context_pack_entries WHERE entry_id = $1",
        uuid.UUID(entry_id),
    )
    assert [str(row["pack_id"]) for row in packs] == [pack["packId"]]
    members = await count(
        db_pool,
        "SELECT count(*) FROM context_pack_entries WHERE pack_id = $1",
        uuid.UUID(pack["packId"]),
    )
    assert members == 1
    assert (
        await count(
            db_pool, "SELECT count(*) FROM context_packs WHERE id = $1", uuid.UUID(pack["packId"])
        )
        == 1
    )


async def test_a_task_attempt_survives_a_killed_worker(
    worker_stack: tuple[FaultStack, WorkerProcess], crew: Crew, db_pool: Any
) -> None:
    stack, worker = worker_stack
    task_id = ""
    output = {"summary": "Three lines of verse"}

    async def begin() -> Operation:
        nonlocal task_id
        body = {
            "taskType": "freeform",
            "teamId": crew.team_id,
            "diaryId": crew.diary_id,
            "input": {"brief": "Write a haiku"},
        }
        status, task = await crew.owner.call("POST", "/tasks", json=body, team=crew.team_id)
        assert status == 201, task
        task_id = str(task["id"])
        status, claimed = await crew.executor.call("POST", f"/tasks/{task_id}/claim", json={})
        assert status == 200, claimed
        status, beat = await crew.executor.call(
            "POST", f"/tasks/{task_id}/attempts/1/heartbeat", json={}
        )
        assert status == 200, beat
        done = {"output": output, "outputCid": json_cid(output)}
        request = asyncio.create_task(
            crew.executor.call("POST", f"/tasks/{task_id}/attempts/1/complete", json=done)
        )

        async def completion_written() -> str | None:
            written = await count(
                db_pool,
                "SELECT count(*) FROM task_attempts WHERE task_id = $1 AND status = 'completed'",
                uuid.UUID(task_id),
            )
            return task_workflow_id(task_id) if written else None

        return request, completion_written

    status, done = await killed_mid_run(stack, worker, begin)
    assert status == 200, done
    attempts = await db_pool.fetch(
        "SELECT attempt_n, status FROM task_attempts WHERE task_id = $1", uuid.UUID(task_id)
    )
    assert [tuple(a) for a in attempts] == [(1, "completed")]
    row = await db_pool.fetchrow("SELECT status FROM tasks WHERE id = $1", uuid.UUID(task_id))
    assert row["status"] == "completed", dict(row)
    status, again = await crew.owner.call("GET", f"/tasks/{task_id}")
    assert status == 200 and again["status"] == "completed", again
