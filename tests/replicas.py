"""Many replicas of the service as processes, and what a test needs to hurt them.

- `ServiceProcess`: one `python -m cairn …` process (api, worker, daemon) with its output in a
  log file; SIGKILLed, SIGTERMed and started again by the test, optionally inside a network
  namespace (`ip netns exec`).
- `Failover`: an agent's calls spread over several API replicas; a call lost to a connection
  error, a 5xx or a timeout is sent again, with the same headers (its `Idempotency-Key`), to
  the next replica.
- `NetworkNamespace` and `Relay`: a namespace joined to this one by a veth pair in a private
  /30, and TCP relays on the host end of the pair to the stack's loopback (or Unix socket)
  servers, so a process in the namespace reaches Temporal, Postgres and S3 only through a link
  the test can cut. Traffic stays on this machine: the relays listen on the veth's own address
  and connect to loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import psutil
from processes import alive

# --- processes -----------------------------------------------------------------------------------


class ServiceProcess:
    """`python -m cairn <args>` with `env`, its stdout and stderr appended to `log`; `prefix`
    runs it under another command (`ip netns exec NAME`, which execs it: the pid is cairn's)."""

    def __init__(
        self, args: Sequence[str], env: dict[str, str], log: Path, prefix: Sequence[str] = ()
    ) -> None:
        self.args = list(args)
        self.env = env
        self.log = log
        self.prefix = list(prefix)
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        assert not self.running, "already running"
        with self.log.open("a") as out:
            self.process = await asyncio.create_subprocess_exec(
                *self.prefix,
                sys.executable,
                "-m",
                "cairn",
                *self.args,
                env=self.env,
                stdout=out,
                stderr=out,
            )

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None and alive(self.pid)

    async def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is flushed or finished."""
        assert self.running, f"{self.args[0]} is not running"
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    def terminate(self) -> None:
        assert self.process is not None and self.running
        self.process.send_signal(signal.SIGTERM)

    async def exit_code(self, limit_s: float) -> int | None:
        """The exit code once the process ends within `limit_s`; None if it is still running."""
        assert self.process is not None
        try:
            return await asyncio.wait_for(self.process.wait(), limit_s)
        except TimeoutError:
            return None

    async def stop(self) -> None:
        """The test's clean-up: SIGTERM, then SIGKILL after a while."""
        if self.process is None or self.process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        if await self.exit_code(20) is None:
            self.process.kill()
            await self.process.wait()

    def connected_to(self, port: int) -> bool:
        """Whether the process holds an open TCP connection to `port` (a client that got past
        its start-up and keeps its connection alive)."""
        assert self.running, self.tail()
        return any(
            c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED
            for c in psutil.Process(self.pid).net_connections(kind="tcp")
        )

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def worker_identity(process: ServiceProcess) -> str:
    """The identity Temporal records for the process's worker (the SDK's default `pid@host`);
    a process in a network namespace keeps the host's name (the UTS namespace is shared)."""
    return f"{process.pid}@{os.uname().nodename}"


# --- an agent's calls over several replicas -----------------------------------------------------

RESENT_STATUSES = frozenset({500, 502, 503, 504})


@dataclass
class Sent:
    """What happened to one call: the replicas it went to, in order, and why each was left."""

    replicas: list[int] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


@dataclass
class Failover:
    """Calls of one caller over `bases`: `start` names the replica tried first; a connection
    error, a 5xx or a timeout (`attempt_s`) sends the same request again to the next one, up to
    `sends` times in all."""

    bases: list[str]
    http: aiohttp.ClientSession
    auth: dict[str, str]
    attempt_s: float = 20.0
    sends: int = 8
    backoff_s: float = 0.25

    async def call(
        self,
        method: str,
        path: str,
        *,
        start: int = 0,
        json: Any = None,
        headers: dict[str, str] | None = None,
        data: Any = None,
    ) -> tuple[int, Any, Sent]:
        sent = Sent()
        request_headers = {**self.auth, **(headers or {})}
        for n in range(self.sends):
            replica = (start + n) % len(self.bases)
            sent.replicas.append(replica)
            try:
                async with asyncio.timeout(self.attempt_s):
                    status, body = await self._once(
                        method, self.bases[replica] + path, request_headers, json, data
                    )
            except (aiohttp.ClientConnectionError, TimeoutError) as lost:
                sent.lost.append(type(lost).__name__)
            else:
                if status not in RESENT_STATUSES:
                    return status, body, sent
                sent.lost.append(str(status))
            await asyncio.sleep(self.backoff_s)
        raise AssertionError(f"{method} {path} was never answered: {sent}")

    async def _once(
        self, method: str, url: str, headers: dict[str, str], json: Any, data: Any
    ) -> tuple[int, Any]:
        async with self.http.request(
            method, url, headers=headers, json=json, data=data
        ) as response:
            if response.content_type in ("application/json", "application/problem+json"):
                return response.status, await response.json(content_type=None)
            return response.status, await response.read()


# --- a network namespace and relays into it ------------------------------------------------------


def can_make_namespaces() -> str | None:
    """Why this process cannot make network namespaces, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@dataclass(frozen=True)
class NetworkNamespace:
    """`name`, joined to this namespace by the veth pair `host_link` (here, `host_address`)
    and its peer inside (`inner_address`), a /30 of 10.200.0.0/16 of their own."""

    name: str
    host_link: str
    host_address: str
    inner_address: str

    @property
    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def cut(self) -> None:
        """Take the link down: packets either way are dropped, connections hang (no reset)."""
        _ip("link", "set", self.host_link, "down")

    def mend(self) -> None:
        _ip("link", "set", self.host_link, "up")


def _free_subnet() -> int:
    """A /30 index of 10.200.0.0/16 no interface of this machine uses (pid-based first guess,
    so concurrent sessions pick different ones)."""
    used = subprocess.run(
        ["ip", "-o", "-4", "addr", "show"], check=True, capture_output=True, text=True
    ).stdout
    for offset in range(16384):
        index = (os.getpid() + offset) % 16384
        third, fourth = divmod(index * 4, 256)
        if f" 10.200.{third}.{fourth + 1}/" not in used:
            return index
    raise AssertionError("no free /30 in 10.200.0.0/16")


@contextlib.contextmanager
def network_namespace() -> Iterator[NetworkNamespace]:
    """A fresh namespace and veth pair, removed again whatever happens."""
    index = _free_subnet()
    third, fourth = divmod(index * 4, 256)
    tag = f"cairn{index}"
    namespace = NetworkNamespace(
        name=f"{tag}-ns",
        host_link=f"{tag}h",
        host_address=f"10.200.{third}.{fourth + 1}",
        inner_address=f"10.200.{third}.{fourth + 2}",
    )
    inner_link = f"{tag}n"
    try:
        _ip("netns", "add", namespace.name)
        _ip("link", "add", namespace.host_link, "type", "veth", "peer", "name", inner_link)
        _ip("link", "set", inner_link, "netns", namespace.name)
        _ip("addr", "add", f"{namespace.host_address}/30", "dev", namespace.host_link)
        _ip("link", "set", namespace.host_link, "up")
        inside = ["netns", "exec", namespace.name, "ip"]
        _ip(*inside, "addr", "add", f"{namespace.inner_address}/30", "dev", inner_link)
        _ip(*inside, "link", "set", inner_link, "up")
        _ip(*inside, "link", "set", "lo", "up")
        yield namespace
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", namespace.host_link)  # its peer goes with it
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("netns", "del", namespace.name)


@dataclass
class Relay:
    """Accepts TCP connections on `host` (a free port, kept across `close` and `open`) and
    pipes each to `upstream`: `host:port` over TCP, or the path of a Unix socket."""

    host: str
    upstream: str
    server: asyncio.Server | None = None
    pipes: set[asyncio.Task[None]] = field(default_factory=set)
    bound_port: int = 0

    @property
    def port(self) -> int:
        return self.bound_port

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self.upstream.startswith("/"):
                up_reader, up_writer = await asyncio.open_unix_connection(self.upstream)
            else:
                host, _, port = self.upstream.rpartition(":")
                up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        pipes = {
            asyncio.create_task(_pipe(reader, up_writer)),
            asyncio.create_task(_pipe(up_reader, writer)),
        }
        self.pipes |= pipes
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
            self.pipes -= pipes
            writer.close()
            up_writer.close()

    async def open(self) -> None:
        """Listen (again, on the same port after a `close`)."""
        self.server = await asyncio.start_server(self._serve, self.host, self.bound_port)
        self.bound_port = int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening and close every relayed connection: the upstream is gone, as far as
        its clients can tell."""
        assert self.server is not None
        self.server.close()
        for pipe in list(self.pipes):
            pipe.cancel()
        await asyncio.gather(*self.pipes, return_exceptions=True)

    async def __aenter__(self) -> Relay:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()


def postgres_upstream(dsn: str) -> tuple[str, str, str]:
    """Where a Postgres DSN connects (a Unix socket's path, or host:port), its user and its
    database."""
    parts = urlsplit(dsn)
    socket_dir = parse_qs(parts.query).get("host", [""])[0]
    user = parts.username or "postgres"
    database = parts.path.lstrip("/")
    if socket_dir.startswith("/"):
        sockets = sorted(
            p for p in Path(socket_dir).glob(".s.PGSQL.*") if not p.name.endswith(".lock")
        )
        assert sockets, f"no Postgres socket in {socket_dir}"
        return str(sockets[0]), user, database
    return f"{parts.hostname}:{parts.port or 5432}", user, database


@dataclass
class RelayedStack:
    """The stack's servers as a process in `namespace` reaches them: through relays."""

    database_url: str
    temporal_address: str
    s3_endpoint: str


@contextlib.asynccontextmanager
async def relays_into(
    namespace: NetworkNamespace, database_url: str, temporal_address: str, s3_endpoint: str
) -> AsyncIterator[RelayedStack]:
    host = namespace.host_address
    upstream, user, database = postgres_upstream(database_url)
    s3 = urlsplit(s3_endpoint)
    async with (
        Relay(host, upstream) as postgres,
        Relay(host, temporal_address) as temporal,
        Relay(host, f"{s3.hostname}:{s3.port}") as s3_relay,
    ):
        yield RelayedStack(
            database_url=f"postgresql://{user}@{postgres.address}/{database}?sslmode=disable",
            temporal_address=temporal.address,
            s3_endpoint=f"{s3.scheme}://{s3_relay.address}",
        )
