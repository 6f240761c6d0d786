"""The bundled daemon (`cairn daemon`): claims a team's tasks with an agent key and runs the
operator's executor command for each (DECISIONS "Agent keys and the daemon"; spec 3.1, 5).

Start-up, before any claim: the credential is an agent key (never OAuth2 client credentials),
`whoami` accepts it, names an agent, and a team-bound key is bound to the team asked for. With a
runtime profile (`--profile`), the profile is readable in that team; the daemon then lists the
queue as the profile sees it and names the profile in every claim.

The loop: while a slot is free, list the team's claimable tasks of the served types, claim one
(a lost race, 409, moves on to the next), and run it in that slot. When nothing is claimable the
next poll waits longer (doubling up to `poll_max_sec`, with jitter), so idle daemons cost the
server little; any claim resets the wait.

One attempt (`Attempt.run`): the first heartbeat starts it; heartbeats follow at a third of the
lease; executor messages are sent in batches (every 200 ms or 50 messages); artifacts are
uploaded as they are announced; the output's CID is computed here (the server recomputes it) and
signed with the agent's Ed25519 key, then the attempt is completed. An executor that exits
without output, breaks the protocol or exceeds the local byte limit fails the attempt. A
heartbeat answering `cancelled` stops the child (SIGTERM, then SIGKILL) and the heartbeats.

An API that cannot answer for a while (restarting, a network blip: a refused or dropped
connection, a timeout, a 5xx or 429) stops neither the polling nor the heartbeats: the poll
claims nothing and comes again after the usual wait, a lost heartbeat leaves the lease to the
next one. Only an answer about the key or the request ends the daemon.

Shutdown is a ladder: the first SIGTERM/SIGINT stops claiming and lets running attempts finish;
the second aborts them (the tasks requeue); the third exits at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import random
import shutil
import signal
import socket
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import aiohttp
import nacl.signing

from client.executor import (
    Executor,
    ExecutorArtifact,
    ExecutorFailure,
    ExecutorMessage,
    ExecutorOutput,
)
from client.rest import (
    IDEMPOTENCY_HEADER,
    PASSING_STATUSES,
    RESEND_MAX_WAIT_SEC,
    ApiError,
    CairnClient,
)
from schemas import limits
from schemas.identity import TeamBinding, Whoami
from schemas.kernel.cids import json_cid
from schemas.runtime_profiles import RuntimeProfile
from schemas.task_api import Task, TaskList
from schemas.task_attempts import ClaimResponse, HeartbeatResponse

log = logging.getLogger("cairn.daemon")
T = TypeVar("T")

MESSAGE_BATCH = 50
MESSAGE_FLUSH_SEC = 0.2


# A call that failed only because the API could not answer now (its connection refused or
# dropped, or no answer in time): an API restarting or a network blip, which must stop neither
# the daemon's polling nor an attempt's heartbeats.
UNREACHABLE = (aiohttp.ClientError, TimeoutError)
# A claim or a report refused with a passing status (`client.rest.PASSING_STATUSES`: the
# client's own few resends did not outlast it) is sent again, with waits growing from
# RESEND_FIRST_SEC up to the client's longest wait, until its deadline.
RESEND_FIRST_SEC = 0.5


async def resend_while_passing(
    send: Callable[[], Awaitable[T]],
    *,
    for_sec: float,
    what: str,
    unless: Callable[[], bool] = lambda: False,
) -> T:
    """`send()`, again while the API is unreachable or answers 502/503/504 (an API between
    replicas or restarting, a worker outage), with growing waits, until `for_sec` from now or
    until `unless()` says to stop (the last failure is raised then)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + for_sec
    wait = RESEND_FIRST_SEC
    while True:
        try:
            return await send()
        except ApiError as exc:
            if exc.status not in PASSING_STATUSES or unless() or loop.time() + wait > deadline:
                raise
            failure: Exception = exc
        except UNREACHABLE as exc:
            if unless() or loop.time() + wait > deadline:
                raise
            failure = exc
        log.warning("%s failed, sending again: %s", what, failure)
        await asyncio.sleep(wait)
        wait = min(wait * 2, RESEND_MAX_WAIT_SEC)


class DaemonRefused(Exception):
    """The daemon will not start (a credential or binding rule); the message says why."""


@dataclass(frozen=True)
class DaemonConfig:
    team_id: UUID
    command: list[str]
    task_types: tuple[str, ...] = ()
    slots: int = 1
    once: bool = False
    lease_ttl_sec: int = limits.TASK_LEASE_DEFAULT_SEC
    poll_min_sec: float = 1.0
    poll_max_sec: float = 30.0
    grace_sec: float = 10.0
    byte_limit: int = limits.DAEMON_LOCAL_BYTE_LIMIT
    # where each attempt's working directory is made (and removed when the attempt ends)
    workdir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))
    # the daemon's stable id, kept on each attempt it claims (`runtimeId`)
    runtime_id: str = field(default_factory=lambda: f"cairn-daemon@{socket.gethostname()}")
    # the runtime profile it claims under (`runtimeProfileId`; DECISIONS "Runtime profiles")
    runtime_profile_id: UUID | None = None

    @property
    def heartbeat_every_sec(self) -> float:
        return max(1.0, self.lease_ttl_sec / 3)


@dataclass
class Daemon:
    api: CairnClient
    config: DaemonConfig
    signing_key: nacl.signing.SigningKey | None = None
    sleep: Callable[[float], Any] = asyncio.sleep
    _draining: asyncio.Event = field(default_factory=asyncio.Event)
    _running: dict[asyncio.Task[None], Attempt] = field(default_factory=dict)
    _signals: int = 0
    completed: int = 0

    async def check_credential(self) -> None:
        """Spec 5: whoami before any claim; abort on a rejected key, a non-agent, or a team key
        bound to another team than the one requested."""
        try:
            me = Whoami.model_validate(
                await self.api.request("GET", "/agents/whoami", headers=self._team())
            )
        except ApiError as exc:
            if exc.code == "key-team-mismatch":
                raise DaemonRefused(
                    f"The agent key is bound to another team than {self.config.team_id}"
                ) from None
            raise DaemonRefused(f"The agent key was rejected: {exc}") from None
        if me.subjectType != "agent":
            raise DaemonRefused("The credential does not belong to an agent")
        binding = me.credentialBinding
        if binding is None:
            raise DaemonRefused("The credential is not an agent key")
        if isinstance(binding, TeamBinding) and binding.boundTeamId != self.config.team_id:
            raise DaemonRefused(
                f"The agent key is bound to team {binding.boundTeamId}, not {self.config.team_id}"
            )
        await self._check_profile()

    async def _check_profile(self) -> None:
        """The profile it claims under is one of the team's (read with `runtime:read`), so a
        typo stops the daemon at start instead of refusing every claim."""
        profile_id = self.config.runtime_profile_id
        if profile_id is None:
            return
        try:
            body = await self.api.request(
                "GET", f"/runtime-profiles/{profile_id}", headers=self._team()
            )
        except ApiError as exc:
            raise DaemonRefused(f"The runtime profile {profile_id} cannot be read: {exc}") from None
        profile = RuntimeProfile.model_validate(body)
        log.info("claiming under runtime profile %s (revision %d)", profile.name, profile.revision)

    async def run(self) -> None:
        await self.check_credential()
        self._install_signals()
        wait = self.config.poll_min_sec
        try:
            while not self._draining.is_set():
                claimed = await self._poll()
                if self.config.once and claimed:
                    self._draining.set()
                    break
                wait = (
                    self.config.poll_min_sec if claimed else min(wait * 2, self.config.poll_max_sec)
                )
                await self._idle(wait if not claimed else 0)
            await self._finish_running()
        finally:
            self._remove_signals()

    async def _idle(self, seconds: float) -> None:
        """Wait for the next poll, a free slot, or the drain, whichever comes first."""
        if seconds <= 0 and len(self._running) < self.config.slots:
            return
        waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._draining.wait())}
        if seconds > 0:
            jitter = random.uniform(0.8, 1.2)
            waiters.add(asyncio.ensure_future(self.sleep(seconds * jitter)))
        if len(self._running) >= self.config.slots:
            waiters |= set(self._running)
        _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for waiter in pending:
            if waiter not in self._running:
                waiter.cancel()

    async def _poll(self) -> int:
        """Fill the free slots; a poll the API could not answer claims nothing, and the next
        one comes after the usual (growing) wait."""
        try:
            return await self._fill_slots()
        except ApiError as exc:
            if exc.status < 500 and exc.status != 429:  # the key or the request: not passing
                raise
            log.warning("poll refused for now, polling again: %s", exc)
        except UNREACHABLE as exc:
            log.warning("poll failed, polling again: %s", exc)
        return 0

    async def _fill_slots(self) -> int:
        """Claim up to the free slots' worth of tasks, concurrently: one claim is a round trip
        through the workflow, so claiming one at a time would cap the daemon at one task per
        claim latency. A lost race (None) leaves its slot for the next poll."""
        slots = 1 if self.config.once else self.config.slots
        free = slots - len(self._running)
        if free <= 0 or self._draining.is_set():
            return 0
        candidates = await self._claimable(limit=max(free * 2, 5))
        claims = await asyncio.gather(*(self._claim(task) for task in candidates[:free]))
        granted = [claim for claim in claims if claim is not None]
        for claim in granted:
            self._start(claim)
        return len(granted)

    async def _claimable(self, *, limit: int) -> list[Task]:
        params = {"claimable": "true", "limit": str(limit)}
        if self.config.runtime_profile_id is not None:
            params["runtimeProfileId"] = str(self.config.runtime_profile_id)
        if self.config.task_types:
            params["taskTypes"] = ",".join(self.config.task_types)
        body = await self.api.request("GET", "/tasks", params=params, headers=self._team())
        return TaskList.model_validate(body).items

    async def _claim(self, task: Task) -> ClaimResponse | None:
        """Claim `task`, sent again with the same Idempotency-Key while the API cannot answer
        (a worker outage: the claim may be granted after the API gave up waiting), so that a
        granted claim reaches this daemon instead of waiting out the task's dispatch timeout
        unclaimed by anyone running it."""
        headers = {**self._team(), IDEMPOTENCY_HEADER: uuid.uuid4().hex}

        async def send() -> Any:
            return await self.api.request(
                "POST", f"/tasks/{task.id}/claim", json=self._claim_body(), headers=headers
            )

        try:
            body = await resend_while_passing(
                send,
                for_sec=task.dispatchTimeoutSec,
                what=f"claim of {task.id}",
                unless=self._draining.is_set,  # a draining daemon claims nothing more
            )
        except ApiError as exc:
            if exc.status in (403, 404, 409):  # lost the race, or not ours to claim
                log.debug("claim of %s refused: %s", task.id, exc.code)
                return None
            raise
        return ClaimResponse.model_validate(body)

    def _claim_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "leaseTtlSec": self.config.lease_ttl_sec,
            "runtimeId": self.config.runtime_id,
        }
        if self.config.runtime_profile_id is not None:
            body["runtimeProfileId"] = str(self.config.runtime_profile_id)
        return body

    def _start(self, claim: ClaimResponse) -> None:
        attempt = Attempt(self, claim)
        worker = asyncio.create_task(attempt.run(), name=f"task {claim.task.id}")
        self._running[worker] = attempt
        worker.add_done_callback(self._finished)

    def _finished(self, worker: asyncio.Task[None]) -> None:
        self._running.pop(worker, None)
        if not worker.cancelled() and worker.exception() is not None:
            log.error("attempt crashed", exc_info=worker.exception())

    async def _finish_running(self) -> None:
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    def _team(self) -> dict[str, str]:
        return {"x-service-team-id": str(self.config.team_id)}

    # --- the shutdown ladder -------------------------------------------------------------

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.shutdown_step)

    def _remove_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)

    def shutdown_step(self) -> None:
        """One rung: stop claiming; then abort the running attempts; then exit now."""
        self._signals += 1
        if self._signals == 1:
            log.info("stopping: no new claims; %d attempt(s) finish", len(self._running))
            self._draining.set()
        elif self._signals == 2:
            log.info("aborting %d running attempt(s); their tasks requeue", len(self._running))
            for attempt in self._running.values():
                attempt.abort_requested.set()
        else:
            raise SystemExit(130)


class Attempt:
    """One claimed attempt, from the first heartbeat to complete, fail or abort."""

    def __init__(self, daemon: Daemon, claim: ClaimResponse) -> None:
        self.daemon = daemon
        self.claim = claim
        self.task_id = claim.task.id
        self.n = claim.attemptN
        self.abort_requested = asyncio.Event()
        self.cancelled = asyncio.Event()
        self._messages: list[dict[str, Any]] = []
        self._output: ExecutorOutput | None = None
        config = daemon.config
        self._dir = Path(
            tempfile.mkdtemp(prefix=f"attempt-{self.task_id}-{self.n}-", dir=config.workdir)
        )
        self.executor = Executor(
            config.command,
            workdir=self._dir,
            byte_limit=config.byte_limit,
            grace_sec=config.grace_sec,
            env=self._child_env(),
        )

    def _child_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_AGENT_KEY")}
        env["TRACEPARENT"] = self.claim.traceparent  # the executor's spans join the task's trace
        return env

    @property
    def _path(self) -> str:
        return f"/tasks/{self.task_id}/attempts/{self.n}"

    def _headers(self) -> dict[str, str]:
        return {**self.daemon._team(), "traceparent": self.claim.traceparent}

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            # the attempt's working directory is the executor's scratch space: what it made that
            # matters was uploaded (artifacts) or reported (output); a daemon that runs for
            # months must not fill its disk with finished attempts
            await asyncio.to_thread(shutil.rmtree, self._dir, ignore_errors=True)

    async def _run(self) -> None:
        if (await self._heartbeat()).cancelled:
            return
        await self.executor.start(self.claim.model_dump(mode="json"))
        beats = asyncio.create_task(self._heartbeats())
        flusher = asyncio.create_task(self._flush_periodically())
        abort = asyncio.create_task(self.abort_requested.wait())
        cancelled = asyncio.create_task(self.cancelled.wait())
        work = asyncio.create_task(self._consume())
        try:
            await asyncio.wait({work, abort, cancelled}, return_when=asyncio.FIRST_COMPLETED)
            await self._settle(work)
        finally:
            for helper in (beats, flusher, abort, cancelled, work):
                helper.cancel()
            await self.executor.stop()

    async def _settle(self, work: asyncio.Task[int]) -> None:
        if self.cancelled.is_set():
            log.info("task %s cancelled; executor stopped", self.task_id)
            return
        if self.abort_requested.is_set() and not work.done():
            await self.executor.stop()
            await self._flush(settling=True)
            await self._report("abort", {"reason": "daemon shutdown"})
            return
        try:
            exit_code = work.result()
        except ExecutorFailure as failure:
            await self.executor.stop()
            await self._flush(settling=True)
            await self._fail(failure.as_error())
            return
        await self._flush(settling=True)
        if self._output is None:
            await self._fail(
                {
                    "code": "executor-no-output",
                    "message": f"The executor exited with code {exit_code} without an output line",
                    "retryable": False,
                }
            )
            return
        await self._complete(self._output.output)

    async def _consume(self) -> int:
        async for event in self.executor.events():
            if isinstance(event, ExecutorMessage):
                self._messages.append(event.model_dump(mode="json"))
                if len(self._messages) >= MESSAGE_BATCH:
                    await self._flush()
            elif isinstance(event, ExecutorArtifact):
                await self._upload(event)
            else:
                self._output = event
        return await self.executor.wait()

    async def _heartbeat(self) -> HeartbeatResponse:
        body = await self._post("heartbeat", {"leaseTtlSec": self.daemon.config.lease_ttl_sec})
        answer = HeartbeatResponse.model_validate(body)
        if answer.cancelled:
            self.cancelled.set()
        return answer

    async def _heartbeats(self) -> None:
        while not self.cancelled.is_set():
            await asyncio.sleep(self.daemon.config.heartbeat_every_sec)
            try:
                await self._heartbeat()
            except ApiError as exc:
                if exc.status == 409:  # the attempt ended (timed out, or settled elsewhere)
                    self.cancelled.set()
                    return
                log.warning("heartbeat of %s failed: %s", self.task_id, exc)
            except UNREACHABLE as exc:
                # the lease may well outlive the outage: the next beat renews it
                log.warning("heartbeat of %s failed: %s", self.task_id, exc)

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(MESSAGE_FLUSH_SEC)
            await self._flush()

    async def _flush(self, *, settling: bool = False) -> None:
        """Send the batched messages; the last batch before the attempt's report is sent again
        through an outage of the API, like the report (an attempt's end is not lost to it)."""
        if not self._messages:
            return
        batch, self._messages = self._messages, []
        if settling:
            await self._report("messages", {"messages": batch})
        else:
            await self._post("messages", {"messages": batch})

    async def _upload(self, artifact: ExecutorArtifact) -> None:
        spec = artifact.spec
        params = {
            "kind": spec.kind,
            "title": spec.title or artifact.path.name,
            "contentType": spec.contentType,
        }
        with artifact.path.open("rb") as data:
            await self.daemon.api.upload(
                f"{self._path}/artifacts", data, params=params, headers=self._headers()
            )

    async def _complete(self, output: Any) -> None:
        output_cid = json_cid(output)
        body: dict[str, Any] = {
            "output": output,
            "outputCid": output_cid,
            # this slot holds no resumable session once the attempt is over
            "daemonState": {"reportedAt": datetime.now(UTC).isoformat()},
        }
        if self.daemon.signing_key is not None:
            signature = self.daemon.signing_key.sign(output_cid.encode()).signature
            body["contentSignature"] = base64.b64encode(signature).decode()
        try:
            if not await self._report("complete", body):
                return
        except ApiError as exc:
            if exc.status != 400:
                raise
            # the server refused the output (schema, CID, a type rule): the attempt fails
            await self._fail(
                {
                    "code": exc.code or "output-rejected",
                    "message": str(exc.body.get("detail", exc))[:2000],
                    "retryable": False,
                }
            )
            return
        self.daemon.completed += 1

    async def _fail(self, error: dict[str, Any]) -> None:
        await self._report("fail", {"error": error})

    async def _report(self, action: str, body: dict[str, Any]) -> bool:
        """Settle the attempt (complete, fail, abort), sent again while the API cannot answer,
        for as long as the lease the heartbeats keep renewing could last. Whether this send
        settled it: a 409 after an earlier send means that send landed (or the attempt ended
        otherwise); either way there is nothing left to report."""
        sends = 0

        async def send() -> Any:
            nonlocal sends
            sends += 1
            return await self._post(action, body)

        try:
            await resend_while_passing(
                send, for_sec=self.daemon.config.lease_ttl_sec, what=f"{action} of {self.task_id}"
            )
        except ApiError as exc:
            if exc.status == 409 and sends > 1:
                log.info("%s of %s: the attempt had already ended", action, self.task_id)
                return False
            raise
        return True

    async def _post(self, action: str, body: dict[str, Any]) -> Any:
        return await self.daemon.api.request(
            "POST", f"{self._path}/{action}", json=body, headers=self._headers()
        )
