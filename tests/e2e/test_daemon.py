"""The bundled daemon end to end: the real `cairn daemon` process, with an executor's team agent
key, claims a freeform task on the real stack, runs a small executor script, and completes the
task with the right output CID and a valid content signature. Then cancel, a killed daemon and
the shutdown ladder, each against the real API and workflow."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import signal
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import rfc8785
from actors import Actor, daemon_secrets, join_team
from aiohttp import web
from processes import alive, wait_until
from replicas import Relay

from infra.devstack import free_port
from schemas.kernel.cids import json_cid

OUTPUT = {"summary": "Three lines of verse"}


@dataclass
class Team:
    owner: Actor
    executor: Actor
    team_id: str
    diary_id: str
    secret_root: Path
    stack: Any


@pytest.fixture(scope="module")
async def pair(actors: Any) -> tuple[Actor, Actor]:
    return await actors.agent(), await actors.agent()


@pytest.fixture
async def team(stack: Any, pair: tuple[Actor, Actor], tmp_path: Path) -> Team:
    """A fresh team per test (so no test claims another's task), the executor's team key and
    signing seed as secret files."""
    owner, executor = pair
    status, body = await owner.call("POST", "/teams", json={"name": "daemons"})
    assert status == 201, body
    team_id = str(body["id"])
    await join_team(owner, team_id, executor, "executor")
    status, diary = await owner.call(
        "POST", "/diaries", json={"name": "work", "visibility": "private"}, team=team_id
    )
    assert status == 201, diary
    root = await daemon_secrets(executor, team_id, tmp_path / "secrets")
    return Team(owner, executor, team_id, str(diary["id"]), root, stack)


EXECUTOR = """
import json, os, sys, time
task = json.load(sys.stdin)
for step in range(3):
    print(json.dumps({"kind": "progress", "payload": {"step": step}}), flush=True)
if os.environ.get("EXECUTOR_ARTIFACT", "1") == "1":
    open("notes.md", "w").write("# notes\\n")
    print(json.dumps({"artifact": {"path": "notes.md", "kind": "notes", "title": "Notes",
                                    "contentType": "text/markdown"}}), flush=True)
open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
time.sleep(float(os.environ.get("EXECUTOR_SLEEP", "0")))
print(json.dumps({"output": {"summary": "Three lines of verse"}}), flush=True)
"""


@dataclass
class RunningDaemon:
    process: asyncio.subprocess.Process
    pid_file: Path
    log: Path

    async def executor_pid(self) -> int:
        await wait_until(lambda: self.pid_file.exists() and self.pid_file.read_text() != "")
        return int(self.pid_file.read_text())

    async def exit_code(self, limit_s: float = 60) -> int:
        try:
            return await asyncio.wait_for(self.process.wait(), limit_s)
        except TimeoutError:
            raise AssertionError(f"the daemon did not exit:\n{self.log.read_text()}") from None


@pytest.fixture
async def daemons(team: Team, tmp_path: Path) -> AsyncIterator[Any]:
    started: list[RunningDaemon] = []

    async def start(
        *args: str,
        sleep: float = 0,
        lease: int = 30,
        api_url: str | None = None,
        artifact: bool = True,
    ) -> RunningDaemon:
        script = tmp_path / "executor.py"
        script.write_text(textwrap.dedent(EXECUTOR))
        config = tmp_path / "daemon.toml"
        (tmp_path / "attempts").mkdir(exist_ok=True)
        config.write_text(
            f"grace_sec = 1.0\npoll_max_sec = 1.0\nworkdir = '{tmp_path / 'attempts'}'\n"
        )
        pid_file = tmp_path / f"executor-{len(started)}.pid"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
        env.update(
            SERVICE_API_URL=api_url or team.stack.base_url,
            SERVICE_SECRET_ROOT=str(team.secret_root),
            SERVICE_AGENT_KEY_REF="file:daemon.key",
            SERVICE_SIGNING_KEY_REF="file:agent.seed",
            PID_FILE=str(pid_file),
            EXECUTOR_SLEEP=str(sleep),
            EXECUTOR_ARTIFACT="1" if artifact else "0",
        )
        log = tmp_path / f"daemon-{len(started)}.log"
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "cairn",
            "daemon",
            "--team",
            team.team_id,
            "--config",
            str(config),
            "--lease-ttl-sec",
            str(lease),
            *args,
            "--",
            sys.executable,
            str(script),
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log.open("w"),
            cwd=tmp_path,
        )
        running = RunningDaemon(process, pid_file, log)
        started.append(running)
        return running

    yield start
    for running in started:
        if running.process.returncode is None:
            running.process.kill()
            await running.process.wait()
        if running.pid_file.exists() and running.pid_file.read_text():
            _kill_quietly(int(running.pid_file.read_text()))


async def create_task(team: Team, **extra: Any) -> str:
    body = {
        "taskType": "freeform",
        "teamId": team.team_id,
        "diaryId": team.diary_id,
        "input": {"brief": "Write a haiku"},
        **extra,
    }
    status, task = await team.owner.call("POST", "/tasks", json=body, team=team.team_id)
    assert status == 201, task
    return str(task["id"])


async def task_status(team: Team, task_id: str) -> str:
    status, task = await team.owner.call("GET", f"/tasks/{task_id}", team=team.team_id)
    assert status == 200, task
    return str(task["status"])


async def until_status(team: Team, task_id: str, wanted: str, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while (current := await task_status(team, task_id)) != wanted:
        assert time.monotonic() < deadline, f"task is {current}, not {wanted}"
        await asyncio.sleep(0.2)


def _kill_quietly(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def test_a_daemon_claims_runs_and_completes_a_task(
    team: Team, daemons: Any, tmp_path: Path
) -> None:
    task_id = await create_task(team)
    daemon = await daemons("--once", "--runtime-id", "rack-7/slot-a")
    assert await daemon.exit_code() == 0, daemon.log.read_text()
    assert await task_status(team, task_id) == "completed"

    status, attempts = await team.owner.call("GET", f"/tasks/{task_id}/attempts", team=team.team_id)
    assert status == 200, attempts
    [attempt] = attempts["items"]
    assert attempt["output"] == OUTPUT
    assert attempt["outputCid"] == json_cid(OUTPUT)
    assert attempt["runtimeId"] == "rack-7/slot-a"
    assert attempt["daemonState"]["reportedAt"]
    signature = base64.b64decode(attempt["contentSignature"])
    assert team.executor.signing_key is not None
    team.executor.signing_key.verify_key.verify(attempt["outputCid"].encode(), signature)

    status, messages = await team.owner.call(
        "GET", f"/tasks/{task_id}/attempts/1/messages", team=team.team_id
    )
    assert status == 200, messages
    progress = [m["payload"] for m in messages["items"] if m["kind"] == "progress"]
    assert progress == [{"step": 0}, {"step": 1}, {"step": 2}]

    status, artifacts = await team.owner.call(
        "GET", f"/tasks/{task_id}/artifacts", team=team.team_id
    )
    assert status == 200, artifacts
    assert [(a["title"], a["kind"]) for a in artifacts["artifacts"]] == [("Notes", "notes")]
    # the attempt's working directory (where the executor wrote its notes) went with it
    assert list((tmp_path / "attempts").iterdir()) == []


async def new_profile(team: Team, **policy: Any) -> dict[str, Any]:
    body = {"teamId": team.team_id, "name": f"p-{uuid.uuid4().hex[:8]}", "policy": policy}
    status, profile = await team.owner.call(
        "POST", "/runtime-profiles", json=body, team=team.team_id
    )
    assert status == 201, profile
    return dict(profile)


async def test_a_daemon_with_a_profile_claims_a_pinned_task_under_it(
    team: Team, daemons: Any
) -> None:
    mine = await new_profile(team, taskTypes=["freeform"])
    theirs = await new_profile(team)
    # created first, so a daemon ignoring its profile would try it before the other
    elsewhere = await create_task(team, allowedProfiles=[{"profileId": theirs["id"]}])
    task_id = await create_task(team, allowedProfiles=[{"profileId": mine["id"]}])
    daemon = await daemons("--once", "--profile", mine["id"])
    assert await daemon.exit_code() == 0, daemon.log.read_text()
    assert await task_status(team, task_id) == "completed"
    assert await task_status(team, elsewhere) == "queued"

    status, attempts = await team.owner.call("GET", f"/tasks/{task_id}/attempts", team=team.team_id)
    assert status == 200, attempts
    [attempt] = attempts["items"]
    assert attempt["runtimeProfileId"] == mine["id"]
    assert attempt["runtimeProfileRevision"] == mine["revision"] == 1
    assert (
        attempt["policySnapshotHash"]
        == hashlib.sha256(rfc8785.dumps({"taskTypes": ["freeform"]})).hexdigest()
    )


async def test_a_daemon_refuses_a_profile_it_cannot_read(team: Team, daemons: Any) -> None:
    daemon = await daemons("--once", "--profile", str(uuid.uuid4()))
    assert await daemon.exit_code() == 2
    assert "runtime profile" in daemon.log.read_text()


async def test_cancel_stops_the_executor_within_the_grace_period(team: Team, daemons: Any) -> None:
    task_id = await create_task(team)
    daemon = await daemons(sleep=120, lease=3)  # a heartbeat every second
    pid = await daemon.executor_pid()
    status, body = await team.owner.call(
        "POST", f"/tasks/{task_id}/cancel", json={"reason": "changed my mind"}, team=team.team_id
    )
    assert status == 200, body
    await wait_until(lambda: not alive(pid), limit_s=15)
    assert await task_status(team, task_id) == "cancelled"
    daemon.process.send_signal(signal.SIGTERM)
    assert await daemon.exit_code() == 0, daemon.log.read_text()


async def test_a_killed_daemons_attempt_times_out_and_the_task_requeues(
    team: Team, daemons: Any
) -> None:
    task_id = await create_task(team, maxAttempts=2)
    daemon = await daemons(sleep=120, lease=3)
    pid = await daemon.executor_pid()
    await until_status(team, task_id, "running")
    daemon.process.kill()
    await daemon.process.wait()
    await wait_until(lambda: not alive(pid), limit_s=5)  # the executor dies with its daemon
    await until_status(team, task_id, "queued", limit_s=30)  # the 3 s lease runs out
    _, attempts = await team.owner.call("GET", f"/tasks/{task_id}/attempts", team=team.team_id)
    assert [a["status"] for a in attempts["items"]] == ["timed_out"]


async def test_one_sigterm_finishes_the_running_task_then_exits(team: Team, daemons: Any) -> None:
    task_id = await create_task(team)
    daemon = await daemons(sleep=3)
    await daemon.executor_pid()
    daemon.process.send_signal(signal.SIGTERM)
    second = await create_task(team)  # not claimed: the daemon is draining
    assert await daemon.exit_code() == 0, daemon.log.read_text()
    assert await task_status(team, task_id) == "completed"
    assert await task_status(team, second) == "queued"


async def test_a_second_sigterm_aborts_the_running_task_so_it_requeues(
    team: Team, daemons: Any
) -> None:
    task_id = await create_task(team, maxAttempts=2)
    daemon = await daemons(sleep=120)
    pid = await daemon.executor_pid()
    await until_status(team, task_id, "running")
    daemon.process.send_signal(signal.SIGTERM)
    # the second signal is the second rung only once the first was taken (draining)
    await wait_until(lambda: "stopping: no new claims" in daemon.log.read_text())
    daemon.process.send_signal(signal.SIGTERM)
    assert await daemon.exit_code() == 0, daemon.log.read_text()
    assert not alive(pid)
    assert await task_status(team, task_id) == "queued"
    _, attempts = await team.owner.call("GET", f"/tasks/{task_id}/attempts", team=team.team_id)
    assert [a["status"] for a in attempts["items"]] == ["aborted"]


async def test_a_daemon_refuses_a_key_bound_to_another_team(team: Team, daemons: Any) -> None:
    status, other = await team.owner.call("POST", "/teams", json={"name": "elsewhere"})
    assert status == 201, other
    team.team_id = str(other["id"])  # the key stays bound to the first team
    daemon = await daemons("--once")
    assert await daemon.exit_code() == 2
    assert "bound to another team" in daemon.log.read_text()


# --- an API that goes away for a while (restarting, or a network blip) ----------------------


@pytest.fixture
async def relay(team: Team) -> AsyncIterator[Relay]:
    """The daemons' way to the API, which the test closes (connections dropped, new ones
    refused) and opens again on the same port."""
    async with Relay("127.0.0.1", team.stack.base_url.removeprefix("http://")) as opened:
        yield opened


async def test_a_daemon_polls_on_while_its_api_is_away(
    team: Team, daemons: Any, relay: Relay
) -> None:
    daemon = await daemons(api_url=f"http://{relay.address}")
    await until_status(team, await create_task(team), "completed")  # it polls
    await relay.close()
    await wait_until(lambda: "poll failed" in daemon.log.read_text(), what="a failed poll")
    assert daemon.process.returncode is None, daemon.log.read_text()
    await relay.open()
    task_id = await create_task(team)
    await until_status(team, task_id, "completed")
    assert daemon.process.returncode is None, daemon.log.read_text()


async def test_heartbeats_go_on_after_the_api_was_away(
    team: Team, daemons: Any, relay: Relay
) -> None:
    """A heartbeat lost while the API is away leaves the lease to the next one: the attempt
    runs to its end, once (the lease would have run out long before the executor ends)."""
    task_id = await create_task(team, maxAttempts=2)
    daemon = await daemons(api_url=f"http://{relay.address}", sleep=20, lease=10, artifact=False)
    await daemon.executor_pid()  # it sleeps now: only heartbeats go to the API
    await relay.close()
    await wait_until(lambda: "heartbeat of" in daemon.log.read_text(), what="a failed beat")
    await relay.open()
    await until_status(team, task_id, "completed", limit_s=90)
    _, attempts = await team.owner.call("GET", f"/tasks/{task_id}/attempts", team=team.team_id)
    assert [a["status"] for a in attempts["items"]] == ["completed"]


async def test_an_attempts_report_is_sent_again_once_the_api_is_back(
    team: Team, daemons: Any, relay: Relay
) -> None:
    """The executor ends while the API is away: the daemon's report (its last messages, then
    the completion) is sent again until the API answers, so the attempt completes, once, instead
    of waiting out its lease and running again."""
    task_id = await create_task(team, maxAttempts=2)
    daemon = await daemons(api_url=f"http://{relay.address}", sleep=3, lease=30, artifact=False)
    await daemon.executor_pid()
    await relay.close()
    await wait_until(lambda: "sending again" in daemon.log.read_text(), what="a report re-sent")
    await relay.open()
    await until_status(team, task_id, "completed", limit_s=60)
    _, attempts = await team.owner.call("GET", f"/tasks/{task_id}/attempts", team=team.team_id)
    assert [a["status"] for a in attempts["items"]] == ["completed"]
    assert daemon.process.returncode is None, daemon.log.read_text()


# --- a claim granted after the API gave up waiting on it ------------------------------------


@dataclass
class LostClaimAnswer:
    """An HTTP proxy to the API that carries the first claim through, then answers it 503 (what
    the API answers when no worker decided within SERVICE_REQUEST_WAIT_S, while the claim is
    granted later) instead of the API's answer. Every claim's Idempotency-Key is kept."""

    upstream: str
    session: aiohttp.ClientSession
    claim_keys: list[str]
    url: str = ""

    async def forward(self, request: web.Request) -> web.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        async with self.session.request(
            request.method,
            self.upstream + request.rel_url.path_qs,
            headers=headers,
            data=await request.read(),
        ) as answer:
            body = await answer.read()
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS}
        if request.method == "POST" and request.path.endswith("/claim"):
            self.claim_keys.append(request.headers.get("Idempotency-Key", ""))
            if len(self.claim_keys) == 1:
                unavailable = {"type": "about:blank", "status": 503, "title": "Unavailable"}
                return web.json_response(
                    unavailable,
                    status=503,
                    headers={"Retry-After": "1"},
                    content_type="application/problem+json",
                )
        return web.Response(status=answer.status, body=body, headers=kept)


HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


@pytest.fixture
async def lost_claim_answer(team: Team) -> AsyncIterator[LostClaimAnswer]:
    async with aiohttp.ClientSession() as session:
        proxy = LostClaimAnswer(team.stack.base_url, session, [])
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", proxy.forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        proxy.url = f"http://127.0.0.1:{port}"
        try:
            yield proxy
        finally:
            await runner.cleanup()


async def test_a_claim_answered_503_is_sent_again_and_its_attempt_runs(
    team: Team, daemons: Any, lost_claim_answer: LostClaimAnswer
) -> None:
    """The first claim is granted but its answer is a 503: the daemon sends the claim again
    with the same Idempotency-Key, gets the attempt it was granted and runs it, instead of
    leaving it claimed by nobody until the task's dispatch timeout (300 s) requeues it."""
    task_id = await create_task(team)
    await daemons(api_url=lost_claim_answer.url)
    await until_status(team, task_id, "completed", limit_s=60)
    keys = lost_claim_answer.claim_keys
    assert len(keys) >= 2 and keys[0] and keys[1] == keys[0], keys
    _, attempts = await team.owner.call("GET", f"/tasks/{task_id}/attempts", team=team.team_id)
    assert [a["status"] for a in attempts["items"]] == ["completed"]
