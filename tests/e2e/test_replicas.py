"""Many processes, proven (issue 30 §1): against one Temporal, one Postgres and one S3, two
`cairn api` processes on their own ports (one `SERVICE_BASE_URL`), two `cairn worker` processes
serving every queue and two `cairn daemon` processes, one against each API.

Under load from several agents (keyed entry creates alternating between the APIs, sent again
to the other one on a connection error, a 5xx or a timeout; tasks claimed and completed by the
daemons) one worker is SIGKILLed, then one API; the worker is started again, and the other
worker is SIGTERMed while an activity of its is in flight (an entry insert waiting on a row
lock the test holds). Then: every entry exactly once (rows, permission tuples), every key one
id on both replicas, every task completed once by one attempt with no overlapping leases and
its artifact stored once in S3, no workflow Failed or TimedOut, the schedules and the signing
key made once, a token minted on one API accepted by the other, the shared rate limit counted
across both, and the SIGTERMed worker drained (exit 0).

Where network namespaces can be made (root, iproute2: CI), the first worker runs in its own
namespace and reaches the stack through relays on a veth pair; the second test cuts that link
for 20 s while the worker holds a workflow task: its lease expires, the other worker takes the
work, and nothing is written twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import asyncpg
import pytest
from actors import Actor, Actors, daemon_secrets, join_team, new_diary
from faultstack import fault_settings
from processes import SMALL_RECOVERY_LIMIT, assert_one_shared_limit, service_env
from replicas import (
    Failover,
    NetworkNamespace,
    RelayedStack,
    Sent,
    ServiceProcess,
    can_make_namespaces,
    network_namespace,
    relays_into,
    worker_identity,
)
from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from waiting import wait_until

from infra.devstack import free_port
from infra.s3 import BlobStore, artifact_key
from workflows import artifacts, consolidation, maintenance, packs
from workflows.entries import entry_create_workflow_id

WRITERS = 3
LOAD_S = 60  # the first test's load lasts about this long (and until its faults are over)
WRITE_PACE_S = 0.3  # between one writer's creates
TASK_PACE_S = 1.5  # between task creates
REPLAY_EVERY = 4  # every n-th keyed create is sent again, on purpose, to the other API
# the daemons' claim lease (a heartbeat every 5 s): long enough that a loaded machine's slow
# heartbeat does not lose it, short enough that a lost daemon's task is taken over soon
LEASE_S = 15
DRAIN_LIMIT_S = 45  # SERVICE_WORKER_SHUTDOWN_GRACE_S (30) and some
CUT_S = 20  # how long the namespaced worker's link is down
# Bounds on waits that end on a condition: they only stop a hang, they time nothing.
SETTLE_LIMIT_S = 180
RATE_LIMITS = {
    # the load stays far below these; only the recovery bucket is small, to count it
    "SERVICE_RATE_LIMIT_GLOBAL_AUTH": "100000/minute",
    "SERVICE_RATE_LIMIT_GLOBAL_ANON": "100000/minute",
    "SERVICE_RATE_LIMIT_GLOBAL_READ": "100000/minute",
    "SERVICE_RATE_LIMIT_REGISTRATION": "1000/minute",
    "SERVICE_RATE_LIMIT_ARTIFACT_UPLOAD": "100000/minute",
    "SERVICE_RATE_LIMIT_AGENT_KEY": "1000/minute",
} | SMALL_RECOVERY_LIMIT


# --- the processes ------------------------------------------------------------------------------


@dataclass
class Replicas:
    settings: Any
    temporal: Client
    db: Any
    logs: Path
    apis: list[ServiceProcess]
    workers: list[ServiceProcess]  # workers[0] runs in `namespace` when there is one
    namespace: NetworkNamespace | None
    daemons: list[ServiceProcess] = field(default_factory=list)

    @property
    def api_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{api.env['SERVICE_API_PORT']}" for api in self.apis]

    @property
    def queues(self) -> tuple[str, str]:
        return self.settings.temporal_task_queue, self.settings.embedding_task_queue

    async def ready(self, api: ServiceProcess) -> bool:
        url = f"http://127.0.0.1:{api.env['SERVICE_API_PORT']}/health/ready"
        try:
            async with aiohttp.ClientSession() as http, http.get(url) as response:
                return response.status == 200
        except aiohttp.ClientConnectionError:
            return False

    async def pollers(self) -> set[str]:
        """Identities of the workers polling both queues for workflow tasks."""
        polling: list[set[str]] = []
        for queue in self.queues:
            described = await self.temporal.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=self.temporal.namespace,
                    task_queue=TaskQueue(name=queue),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
                )
            )
            polling.append({poller.identity for poller in described.pollers})
        return polling[0] & polling[1]

    async def until_serving(self, worker: ServiceProcess) -> None:
        """Until the worker polls both queues (a killed one's old polls linger a while, so it
        is its own identity that counts)."""
        identity = worker_identity(worker)

        async def polling() -> bool:
            assert worker.running, worker.tail()
            return identity in await self.pollers()

        await wait_until(polling, limit_s=120, what=f"worker {identity} to poll")

    async def until_ready(self, api: ServiceProcess) -> None:
        async def answering() -> bool:
            assert api.running, api.tail()
            return await self.ready(api)

        await wait_until(answering, limit_s=60, what=f"API {api.env['SERVICE_API_PORT']}")


def api_port(daemon: ServiceProcess) -> int:
    return int(daemon.env["SERVICE_API_URL"].rsplit(":", 1)[1])


def api_env(settings: Any, port: int) -> dict[str, str]:
    """One deployment's settings; every API has the same public base URL (the first's)."""
    return service_env(settings, port) | RATE_LIMITS | {"SERVICE_BASE_URL": settings.base_url}


def worker_env(settings: Any, relayed: RelayedStack | None) -> dict[str, str]:
    env = service_env(settings, free_port())
    if relayed is not None:  # inside the namespace the stack is behind the relays
        env |= {
            "SERVICE_DATABASE_URL": relayed.database_url,
            "SERVICE_TEMPORAL_ADDRESS": relayed.temporal_address,
            "SERVICE_S3_ENDPOINT": relayed.s3_endpoint,
        }
    return env


@pytest.fixture(scope="module")
async def replicas(
    database_url: str,
    temporal_address: str,
    s3: Any,
    db_pool: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Replicas]:
    from infra.temporal import connect

    settings = fault_settings(database_url, temporal_address, s3)
    logs = tmp_path_factory.mktemp("replicas")
    async with contextlib.AsyncExitStack() as stack:
        namespace: NetworkNamespace | None = None
        relayed: RelayedStack | None = None
        if can_make_namespaces() is None:
            namespace = stack.enter_context(network_namespace())
            relayed = await stack.enter_async_context(
                relays_into(namespace, database_url, temporal_address, s3.endpoint)
            )
        workers = [
            ServiceProcess(
                ["worker"],
                worker_env(settings, relayed),
                logs / "worker-1.log",
                prefix=namespace.exec_prefix if namespace is not None else (),
            ),
            ServiceProcess(["worker"], worker_env(settings, None), logs / "worker-2.log"),
        ]
        ports = [settings.api_port, free_port()]
        apis = [
            ServiceProcess(["api"], api_env(settings, port), logs / f"api-{n}.log")
            for n, port in enumerate(ports, 1)
        ]
        r = Replicas(settings, await connect(settings), db_pool, logs, apis, workers, namespace)
        try:
            for process in [*workers, *apis]:
                await process.start()
            for worker in workers:
                await r.until_serving(worker)
            for api in apis:
                await r.until_ready(api)
            yield r
        finally:
            for process in [*r.daemons, *apis, *workers]:
                await process.stop()


# --- who works: writers, a team whose tasks the daemons run -------------------------------------

EXECUTOR = """
import json, os, sys, time
task = json.load(sys.stdin)
open("report.txt", "w").write("the report of task " + task["task"]["id"] + "\\n")
print(json.dumps({"artifact": {"path": "report.txt", "kind": "report", "title": "Report",
                                "contentType": "text/plain"}}), flush=True)
time.sleep(1.0)
print(json.dumps({"output": {"summary": "done " + task["task"]["id"]}}), flush=True)
"""


@dataclass
class Crew:
    owner: Actor
    writers: list[tuple[Actor, str]]  # each with its own diary
    held_diaries: list[str]  # diaries the test locks, one per held write
    team_id: str
    diary_id: str


@pytest.fixture(scope="module")
async def crew(replicas: Replicas, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Crew]:
    async with aiohttp.ClientSession(
        base_url=replicas.api_urls[0], cookie_jar=aiohttp.DummyCookieJar()
    ) as http:
        actors = Actors(
            SimpleNamespace(temporal=replicas.temporal, settings=replicas.settings), http
        )
        owner, executor = await actors.agent(), await actors.agent()
        writers = []
        for _ in range(WRITERS):
            writer = await actors.agent()
            writers.append((writer, str((await new_diary(writer))["id"])))
        held = [str((await new_diary(owner))["id"]) for _ in range(2)]
        status, team = await owner.call("POST", "/teams", json={"name": "replicas"})
        assert status == 201, team
        team_id = str(team["id"])
        await join_team(owner, team_id, executor, "executor")
        status, diary = await owner.call(
            "POST", "/diaries", json={"name": "work", "visibility": "private"}, team=team_id
        )
        assert status == 201, diary
        await start_daemons(replicas, executor, team_id, tmp_path_factory.mktemp("daemons"))
        yield Crew(owner, writers, held, team_id, str(diary["id"]))


async def start_daemons(r: Replicas, executor: Actor, team_id: str, root: Path) -> None:
    """One `cairn daemon` against each API, with the executor's team key."""
    secrets = await daemon_secrets(executor, team_id, root / "secrets")
    (root / "executor.py").write_text(textwrap.dedent(EXECUTOR))
    (root / "daemon.toml").write_text("grace_sec = 1.0\npoll_max_sec = 1.0\n")
    for n, url in enumerate(r.api_urls, 1):
        env = {k: v for k, v in r.workers[1].env.items() if not k.startswith("SERVICE_")}
        env |= {
            "SERVICE_API_URL": url,
            "SERVICE_SECRET_ROOT": str(secrets),
            "SERVICE_AGENT_KEY_REF": "file:daemon.key",
            "SERVICE_SIGNING_KEY_REF": "file:agent.seed",
        }
        args = ["daemon", "--team", team_id, "--config", str(root / "daemon.toml")]
        args += ["--lease-ttl-sec", str(LEASE_S), "--slots", "2", "--runtime-id", f"daemon-{n}"]
        args += ["--", sys.executable, str(root / "executor.py")]
        daemon = ServiceProcess(args, env, r.logs / f"daemon-{n}.log")
        await daemon.start()
        r.daemons.append(daemon)
    for daemon in r.daemons:  # past its start-up checks (whoami) before any fault
        await wait_until(partial(daemon.connected_to, api_port(daemon)), what="a daemon to poll")


# --- the load and what it was answered ----------------------------------------------------------


@dataclass
class Write:
    """One keyed create and every answer it got (resends and replays included)."""

    key: str
    body: Any
    answers: list[tuple[int, str]] = field(default_factory=list)  # (status, id)
    sends: list[Sent] = field(default_factory=list)


@dataclass
class Ledger:
    entries: list[Write] = field(default_factory=list)
    tasks: list[Write] = field(default_factory=list)

    def resent(self) -> int:
        return sum(len(sent.lost) for w in [*self.entries, *self.tasks] for sent in w.sends)

    def answered_entries(self) -> int:
        return sum(1 for w in self.entries if w.answers)


async def keyed(
    client: Failover, write: Write, path: str, n: int, headers: dict[str, str] | None = None
) -> None:
    """Send the create (replica n mod 2 first); every REPLAY_EVERY-th is sent again, on
    purpose, to the other replica, which must answer the same id."""
    sent_headers = {"Idempotency-Key": write.key, **(headers or {})}
    sends = 2 if n % REPLAY_EVERY == 0 else 1
    for replay in range(sends):
        status, body, sent = await client.call(
            "POST", path, start=n + replay, json=write.body, headers=sent_headers
        )
        write.answers.append((status, str(body.get("id")) if isinstance(body, dict) else ""))
        write.sends.append(sent)


async def write_entries(
    client: Failover, diary_id: str, tag: str, ledger: Ledger, stop: asyncio.Event
) -> None:
    n = 0
    while not stop.is_set():
        key = uuid.uuid4().hex
        write = Write(key, {"content": f"{tag} wrote {n} under {key}"})
        ledger.entries.append(write)
        await keyed(client, write, f"/diaries/{diary_id}/entries", n)
        n += 1
        await asyncio.sleep(WRITE_PACE_S)


async def create_tasks(client: Failover, crew: Crew, ledger: Ledger, stop: asyncio.Event) -> None:
    n = 0
    while not stop.is_set():
        key = uuid.uuid4().hex
        body = {
            "taskType": "freeform",
            "teamId": crew.team_id,
            "diaryId": crew.diary_id,
            "input": {"brief": f"task {n} under {key}"},
            "maxAttempts": 10,
        }
        write = Write(key, body)
        ledger.tasks.append(write)
        await keyed(client, write, "/tasks", n, {"x-service-team-id": crew.team_id})
        n += 1
        await asyncio.sleep(TASK_PACE_S)


@contextlib.asynccontextmanager
async def load(r: Replicas, crew: Crew, http: aiohttp.ClientSession) -> AsyncIterator[Ledger]:
    """The writers and the task creator run until the block ends; then the block waits for
    their last calls to be answered."""
    ledger, stop = Ledger(), asyncio.Event()
    runs = [
        asyncio.create_task(
            write_entries(
                Failover(r.api_urls, http, agent.auth), diary, f"writer-{n}", ledger, stop
            )
        )
        for n, (agent, diary) in enumerate(crew.writers)
    ]
    runs.append(
        asyncio.create_task(
            create_tasks(Failover(r.api_urls, http, crew.owner.auth), crew, ledger, stop)
        )
    )
    try:
        yield ledger
    finally:
        stop.set()
        done, _ = await asyncio.wait(runs, timeout=SETTLE_LIMIT_S)
        for run in runs:
            if run not in done:
                run.cancel()
        for run in done:
            run.result()  # a writer that failed fails the test with its reason
        assert len(done) == len(runs), "the load's last calls were never answered"


async def until_more_entries(ledger: Ledger, more: int) -> None:
    """Until `more` further creates have been answered (the load goes on after a fault)."""
    target = ledger.answered_entries() + more
    await wait_until(
        lambda: ledger.answered_entries() >= target, limit_s=SETTLE_LIMIT_S, what="more entries"
    )


# --- a write held in flight ---------------------------------------------------------------------


@dataclass
class HeldWrite:
    """A keyed entry create whose insert waits on a row lock the test holds (the diary's): the
    worker that runs it has it in flight until the lock is let go."""

    write: Write
    request: asyncio.Task[None]
    lock: asyncpg.Connection

    @property
    def entry_workflow_id(self) -> str:
        return entry_create_workflow_id(uuid.UUID(self.write.answers[0][1]))

    async def let_go(self) -> None:
        if not self.lock.is_closed():
            await self.lock.close()  # rolls the locking transaction back

    async def answered(self) -> None:
        await asyncio.wait_for(self.request, SETTLE_LIMIT_S)


@contextlib.asynccontextmanager
async def held_write(
    r: Replicas, client: Failover, diary_id: str, ledger: Ledger
) -> AsyncIterator[HeldWrite]:
    lock = await asyncpg.connect(r.settings.database_url)
    try:
        locking = lock.transaction()
        await locking.start()
        await lock.execute("SELECT 1 FROM diaries WHERE id = $1 FOR UPDATE", uuid.UUID(diary_id))
        key = uuid.uuid4().hex
        write = Write(key, {"content": f"held in flight under {key}"})
        ledger.entries.append(write)
        request = asyncio.create_task(keyed(client, write, f"/diaries/{diary_id}/entries", 1))
        blocker = lock.get_server_pid()

        async def waiting_on_the_lock() -> bool:
            assert not request.done(), request
            return bool(
                await r.db.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                    blocker,
                )
            )

        await wait_until(waiting_on_the_lock, limit_s=60, what="the insert to wait on the lock")
        yield HeldWrite(write, request, lock)
    finally:
        if not lock.is_closed():
            await lock.close()


# --- what must hold after the load --------------------------------------------------------------


async def assert_each_entry_once(r: Replicas, ledger: Ledger) -> None:
    ids: dict[str, str] = {}
    for write in ledger.entries:
        statuses = {status for status, _ in write.answers}
        assert statuses == {201}, (write.body, write.answers, write.sends)
        [entry_id] = {entry_id for _, entry_id in write.answers}  # one id, whichever replica
        ids[entry_id] = write.body["content"]
    rows = await r.db.fetch(
        "SELECT id::text, content FROM diary_entries WHERE content = ANY($1::text[])",
        list(ids.values()),
    )
    assert sorted((row["id"], row["content"]) for row in rows) == sorted(ids.items())
    tuples = await r.db.fetch(
        "SELECT object_id, count(*) AS n FROM relation_tuples"
        " WHERE namespace = 'DiaryEntry' AND object_id = ANY($1::text[]) GROUP BY object_id",
        list(ids),
    )
    assert {row["object_id"]: row["n"] for row in tuples} == dict.fromkeys(ids, 1)


async def assert_each_task_once(r: Replicas, ledger: Ledger, blobs: BlobStore) -> None:
    task_ids = set()
    for write in ledger.tasks:
        assert {status for status, _ in write.answers} == {201}, (write.answers, write.sends)
        [task_id] = {task_id for _, task_id in write.answers}
        task_ids.add(task_id)
    briefs = [write.body["input"]["brief"] for write in ledger.tasks]
    created = await r.db.fetch(
        "SELECT input->>'brief' AS brief, count(*) AS n FROM tasks"
        " WHERE input->>'brief' = ANY($1::text[]) GROUP BY 1",
        briefs,
    )
    # no task created twice under another id
    assert {row["brief"]: row["n"] for row in created} == dict.fromkeys(briefs, 1)

    async def left() -> list[Any]:
        return list(
            await r.db.fetch(
                "SELECT t.id, t.status, array_agg(a.status ORDER BY a.attempt_n) AS attempts"
                " FROM tasks t LEFT JOIN task_attempts a ON a.task_id = t.id"
                " WHERE t.id = ANY($1::uuid[]) AND t.status <> 'completed' GROUP BY t.id",
                list(task_ids),
            )
        )

    async def all_completed() -> bool:
        return not await left()

    try:
        await wait_until(all_completed, limit_s=SETTLE_LIMIT_S)
    except AssertionError:
        daemons = "\n".join(daemon.tail() for daemon in r.daemons)
        raise AssertionError(
            f"not completed: {[dict(t) for t in await left()]}\n{daemons}"
        ) from None
    attempts = await r.db.fetch(
        "SELECT task_id::text, attempt_n, status, claimed_at,"
        " coalesce(finished_at, claim_expires_at) AS lease_end"
        " FROM task_attempts WHERE task_id = ANY($1::uuid[]) ORDER BY task_id, attempt_n",
        list(task_ids),
    )
    by_task: dict[str, list[Any]] = {}
    for attempt in attempts:
        by_task.setdefault(attempt["task_id"], []).append(attempt)
    for task_id, its in by_task.items():
        assert [a["status"] for a in its].count("completed") == 1, [dict(a) for a in its]
        for earlier, later in itertools.pairwise(its):
            assert earlier["lease_end"] <= later["claimed_at"], (
                task_id,
                dict(earlier),
                dict(later),
            )
    assert set(by_task) == task_ids
    stored = await r.db.fetch(
        "SELECT a.task_id::text, a.attempt_n, a.cid, count(*) AS n FROM task_artifacts a"
        " JOIN task_attempts t ON t.task_id = a.task_id AND t.attempt_n = a.attempt_n"
        " WHERE a.task_id = ANY($1::uuid[]) AND t.status = 'completed'"
        " GROUP BY a.task_id, a.attempt_n, a.cid",
        list(task_ids),
    )
    assert {row["task_id"] for row in stored} == task_ids
    assert {row["n"] for row in stored} == {1}, [dict(row) for row in stored]
    assert len(stored) == len(task_ids)  # one artifact each, the accepted attempt's
    for row in stored:
        assert await blobs.exists(artifact_key(row["cid"])), row["cid"]


async def assert_no_workflow_failed(r: Replicas) -> None:
    queues = " OR ".join(f"TaskQueue = '{queue}'" for queue in r.queues)
    failed = [
        f"{run.id} {run.status}"
        async for run in r.temporal.list_workflows(
            f"({queues}) AND (ExecutionStatus = 'Failed' OR ExecutionStatus = 'TimedOut')"
        )
    ]
    assert failed == []


async def assert_made_once(r: Replicas) -> None:
    """The signing key and the schedules: every worker start ensures them, one exists."""
    assert await r.db.fetchval("SELECT count(*) FROM jwt_signing_keys") == 1
    queue = r.settings.temporal_task_queue
    expected = {
        artifacts.sweep_schedule_id(queue),
        packs.sweep_schedule_id(queue),
        maintenance.purge_schedule_id(queue),
        maintenance.stale_tasks_schedule_id(queue),
        consolidation.consolidation_schedule_id(queue),
    }
    listed = [s.id async for s in await r.temporal.list_schedules() if s.id.endswith(f"/{queue}")]
    assert sorted(listed) == sorted(expected)


async def assert_tokens_cross(r: Replicas, owner: Actor, http: aiohttp.ClientSession) -> None:
    """A token minted on either API is accepted by the other (one signing key, one issuer)."""
    form = {
        "grant_type": "client_credentials",
        "client_id": owner.client_id,
        "client_secret": owner.client_secret,
    }
    for minted, asked in ((0, 1), (1, 0)):
        async with http.post(f"{r.api_urls[minted]}/oauth2/token", data=form) as response:
            token = await response.json(content_type=None)
            assert response.status == 200, token
        bearer = {"Authorization": f"Bearer {token['access_token']}"}
        async with http.get(f"{r.api_urls[asked]}/agents/whoami", headers=bearer) as response:
            assert response.status == 200, await response.text()


async def history(r: Replicas, workflow_id: str) -> list[Any]:
    handle = r.temporal.get_workflow_handle(workflow_id)
    return [event async for event in handle.fetch_history_events()]


@pytest.fixture(scope="module")
async def blobs(replicas: Replicas) -> AsyncIterator[BlobStore]:
    store = BlobStore.from_settings(replicas.settings)
    yield store
    store.close()


@pytest.fixture(scope="module")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
        yield session


async def restarted(
    process: ServiceProcess, ready: Callable[[ServiceProcess], Awaitable[None]]
) -> None:
    await process.start()
    await ready(process)


# --- the tests ----------------------------------------------------------------------------------


async def test_many_processes_under_faults_write_everything_once(
    replicas: Replicas, crew: Crew, blobs: BlobStore, http: aiohttp.ClientSession
) -> None:
    r = replicas
    first, other = r.workers
    api = r.apis[1]
    started = time.monotonic()
    async with load(r, crew, http) as ledger:
        await until_more_entries(ledger, 10)
        await first.kill()
        held_client = Failover(r.api_urls, http, crew.owner.auth)
        async with held_write(r, held_client, crew.held_diaries[0], ledger) as held:
            # the only worker left runs the held insert: it is `other`'s activity in flight
            await api.kill()
            await first.start()
            other.terminate()
            # the lock is kept a moment into the drain, so the activity is still running then
            await asyncio.sleep(1.0)
            await held.let_go()
            drained = await other.exit_code(DRAIN_LIMIT_S)
            await held.answered()
        await other.start()  # the deploy's new process in its place
        await r.until_serving(first)
        await r.until_serving(other)
        await restarted(api, r.until_ready)
        await until_more_entries(ledger, 20)
        await asyncio.sleep(max(0.0, LOAD_S - (time.monotonic() - started)))
    load_s = time.monotonic() - started

    assert ledger.resent() > 0  # the faults were felt: some calls went to the other API
    await assert_each_entry_once(r, ledger)
    await assert_each_task_once(r, ledger, blobs)
    await assert_no_workflow_failed(r)
    await assert_made_once(r)
    await assert_tokens_cross(r, crew.owner, http)
    await assert_one_shared_limit(r.api_urls)  # five an hour, counted across both APIs
    for daemon in r.daemons:  # each outlived its API's going away
        assert daemon.running, daemon.tail(200)
    print(
        f"\nload {load_s:.0f} s: {len(ledger.entries)} entries, {len(ledger.tasks)} tasks,"
        f" {ledger.resent()} calls sent again"
    )
    # last, so that every other rule is checked on a worker that does not drain yet
    assert drained == 0, f"the SIGTERMed worker ended with {drained}:\n{other.tail()}"


async def test_a_worker_cut_off_from_the_network_does_nothing_twice(
    replicas: Replicas, crew: Crew, blobs: BlobStore, http: aiohttp.ClientSession
) -> None:
    # .ci/run installs iproute2 and CI runs as root: a machine that cannot cut a worker off
    # fails here, rather than passing without the check
    reason = can_make_namespaces()
    assert reason is None, f"this test needs network namespaces: {reason}"
    r = replicas
    cut_off, other = r.workers
    assert r.namespace is not None
    async with load(r, crew, http) as ledger:
        await until_more_entries(ledger, 10)
        await other.kill()  # the namespaced worker is the one left to take the held insert
        held_client = Failover(r.api_urls, http, crew.owner.auth)
        async with held_write(r, held_client, crew.held_diaries[1], ledger) as held:
            r.namespace.cut()
            cut_at = time.monotonic()
            try:
                await restarted(other, r.until_serving)
                # the link stays down CUT_S in all, whatever the restart took
                await asyncio.sleep(max(0.0, CUT_S - (time.monotonic() - cut_at)))
            finally:
                r.namespace.mend()
            await held.let_go()
            await held.answered()
        await r.until_serving(cut_off)
        await until_more_entries(ledger, 10)

    events = [event.event_type for event in await history(r, held.entry_workflow_id)]
    # the cut-off worker's workflow task timed out; the other worker ran the run to its end
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT in events, events
    assert events[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    await assert_each_entry_once(r, ledger)
    await assert_each_task_once(r, ledger, blobs)
    await assert_no_workflow_failed(r)
    await assert_made_once(r)
