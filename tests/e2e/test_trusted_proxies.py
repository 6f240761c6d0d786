"""Behind a real reverse proxy (nginx from Debian) in front of two `cairn api` processes on one
Postgres: the anonymous rate-limit key is the client's address, not the proxy's; a client that
forges `X-Forwarded-For` gains nothing, through the proxy or straight at an API, whose peer is
not a trusted proxy (SERVICE_TRUSTED_PROXIES).

The clients bind distinct loopback addresses (127.0.0.2, 127.0.0.3, 127.0.0.4); nginx and the
API processes listen on 127.0.0.1, the one trusted proxy."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from processes import service_env

from infra.devstack import ChildProcess, free_port, port_open, wait_for_port

ANON_LIMIT = 3
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
NGINX_CONF = """
daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    upstream cairn {{
        server 127.0.0.1:{api_a};
        server 127.0.0.1:{api_b};
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://cairn;
            proxy_buffering off;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }}
    }}
}}
"""


@pytest.fixture(scope="module")
async def api_ports(stack: Any) -> AsyncIterator[tuple[int, int]]:
    """Two `cairn api` processes, each on its own port, counting in the one Postgres."""
    ports = free_port(), free_port()
    limited = {
        "SERVICE_RATE_LIMIT_ENABLED": "true",
        "SERVICE_RATE_LIMIT_GLOBAL_ANON": f"{ANON_LIMIT}/hour",
        "SERVICE_TRUSTED_PROXIES": "127.0.0.1/32",
    }
    processes = [
        await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "cairn", "api"],
            env=service_env(stack.settings, port) | limited,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for port in ports
    ]
    try:
        for port, process in zip(ports, processes, strict=True):
            while not port_open(port):
                assert process.returncode is None, f"the API on {port} exited"
                await asyncio.sleep(0.05)
        yield ports
    finally:
        for process in processes:
            if process.returncode is None:
                process.terminate()
        for process in processes:
            await process.wait()


@pytest.fixture(scope="module")
def proxy(api_ports: tuple[int, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """nginx in front of both APIs (round robin), appending the peer to X-Forwarded-For."""
    tmp = tmp_path_factory.mktemp("nginx")
    port = free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(tmp=tmp, port=port, api_a=api_ports[0], api_b=api_ports[1]))
    # -e: the error log before the configuration is read (else a path under /var/log)
    args = [NGINX, "-p", str(tmp), "-e", str(tmp / "error.log"), "-c", str(conf)]
    nginx = ChildProcess("nginx", args, Path(tmp / "stdout.log"))
    nginx.start()
    try:
        wait_for_port(port, timeout=30, process=nginx.process)
        yield port
    finally:
        nginx.stop()


async def _statuses(
    url: str, source: str, count: int, forged: bool = False
) -> list[tuple[int, str | None]]:
    """`count` anonymous GETs from the loopback address `source`, each on a new connection (so
    both APIs behind the proxy take some); with `forged`, each claims another X-Forwarded-For."""
    connector = aiohttp.TCPConnector(local_addr=(source, 0), force_close=True)
    answers = []
    async with aiohttp.ClientSession(connector=connector) as http:
        for n in range(count):
            headers = {"X-Forwarded-For": f"198.51.100.{n + 1}"} if forged else {}
            async with http.get(url, headers=headers) as response:
                answers.append((response.status, response.headers.get("x-ratelimit-remaining")))
    return answers


async def test_clients_behind_the_proxy_get_their_own_anonymous_buckets(proxy: int) -> None:
    url = f"http://127.0.0.1:{proxy}/problems"
    first = await _statuses(url, "127.0.0.2", ANON_LIMIT + 1, forged=True)
    assert first == [(200, "2"), (200, "1"), (200, "0"), (429, "0")]
    second = await _statuses(url, "127.0.0.3", ANON_LIMIT + 1)
    assert second == [(200, "2"), (200, "1"), (200, "0"), (429, "0")]


async def test_a_forged_header_sent_straight_to_an_api_is_keyed_by_the_socket(
    api_ports: tuple[int, int],
) -> None:
    """127.0.0.4 is no trusted proxy: its X-Forwarded-For, another address each time, is not
    read, and every call counts against 127.0.0.4."""
    url = f"http://127.0.0.1:{api_ports[0]}/problems"
    answers = await _statuses(url, "127.0.0.4", ANON_LIMIT + 1, forged=True)
    assert [status for status, _ in answers] == [200] * ANON_LIMIT + [429]
