"""`cairn api --processes 2`: two processes serve one port, none outlives its parent, and they
count rate limits in one shared state."""

from __future__ import annotations

import asyncio
import base64
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import psutil
import pytest
from nacl.signing import SigningKey
from processes import SMALL_RECOVERY_LIMIT, assert_one_shared_limit, service_env, wait_until

from infra.devstack import free_port
from workers.admin import issue_bootstrap_voucher


def listeners(process: psutil.Process, port: int) -> list[int]:
    """Pids of the process and its children that listen on `port`."""
    found = []
    for each in [process, *process.children(recursive=True)]:
        try:
            sockets = each.net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        if any(s.status == psutil.CONN_LISTEN and s.laddr.port == port for s in sockets):
            found.append(each.pid)
    return found


@pytest.fixture
async def api_pair(stack: Any) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    async with two_processes(stack, {}) as pair:
        yield pair


@asynccontextmanager
async def two_processes(
    stack: Any, settings: dict[str, str]
) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "cairn", "api", "--processes", "2"],
        env=service_env(stack.settings, port) | settings,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        parent = psutil.Process(process.pid)
        await wait_until(lambda: len(listeners(parent, port)) == 2)
        yield process, port
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_two_processes_share_the_port_and_serve_the_api(stack: Any, api_pair: Any) -> None:
    process, port = api_pair
    base = f"http://127.0.0.1:{port}"
    voucher = await issue_bootstrap_voucher(stack.temporal, stack.settings)
    public_key = "ed25519:" + base64.b64encode(bytes(SigningKey.generate().verify_key)).decode()
    # a new connection per request, so both processes take some of them
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        async with http.post(
            f"{base}/auth/register", json={"public_key": public_key, "voucher_code": voucher.code}
        ) as response:
            registered = await response.json()
            assert response.status == 200, registered
        auth = aiohttp.BasicAuth(registered["clientId"], registered["clientSecret"])
        async with http.post(
            f"{base}/oauth2/token", data={"grant_type": "client_credentials"}, auth=auth
        ) as response:
            token = (await response.json())["access_token"]
        for _ in range(20):
            async with http.get(
                f"{base}/agents/whoami", headers={"Authorization": f"Bearer {token}"}
            ) as response:
                assert response.status == 200
                assert (await response.json())["clientId"] == registered["clientId"]

    process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(process.wait(), timeout=30) == 0


async def test_the_children_stop_when_the_parent_is_killed(stack: Any, api_pair: Any) -> None:
    process, port = api_pair
    children = psutil.Process(process.pid).children(recursive=True)
    serving = [child for child in children if child.pid in listeners(child, port)]
    assert len(serving) == 1

    process.kill()
    await process.wait()
    _, alive = await asyncio.to_thread(psutil.wait_procs, serving, timeout=10)
    assert alive == []


async def test_two_processes_count_in_one_shared_limit(stack: Any) -> None:
    """Per process, five a window each would admit up to ten of these twelve calls; shared, the
    five places go once, in order, whichever process takes each call."""
    async with two_processes(stack, SMALL_RECOVERY_LIMIT) as (_, port):
        await assert_one_shared_limit([f"http://127.0.0.1:{port}"])
