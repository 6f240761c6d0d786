"""What the end-to-end tests need to run the service's own commands as processes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

import aiohttp
from waiting import wait_until

__all__ = [
    "alive",
    "assert_one_shared_limit",
    "service_env",
    "start_cairn",
    "stop_cairn",
    "wait_until",
]
STOP_GRACE_S = 20

# `SERVICE_RATE_LIMIT_*` of a deployment whose recovery bucket is small enough to count
SMALL_RECOVERY_LIMIT = {
    "SERVICE_RATE_LIMIT_ENABLED": "true",
    "SERVICE_RATE_LIMIT_RECOVERY": "5/hour",
}


def service_env(settings: Any, port: int) -> dict[str, str]:
    """The stack's settings as the `SERVICE_*` variables a deployment would set."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SERVICE_")}
    env.update(
        SERVICE_API_PORT=str(port),
        SERVICE_BASE_URL=f"http://127.0.0.1:{port}",
        SERVICE_DATABASE_URL=settings.database_url,
        SERVICE_TEMPORAL_ADDRESS=settings.temporal_address,
        SERVICE_TEMPORAL_TASK_QUEUE=settings.temporal_task_queue,
        SERVICE_S3_ENDPOINT=settings.s3_endpoint,
        SERVICE_S3_BUCKET=settings.s3_bucket,
        SERVICE_S3_ACCESS_KEY=settings.s3_access_key,
        SERVICE_S3_SECRET_KEY=settings.s3_secret_key.get_secret_value(),
        SERVICE_SECRET_KEY=settings.secret_key.get_secret_value(),
        SERVICE_PAYLOAD_KEYS=settings.payload_keys.get_secret_value(),
        SERVICE_RATE_LIMIT_ENABLED="false",
    )
    return env


def alive(pid: int) -> bool:
    """Whether the process runs; an exited one not yet reaped (a zombie) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


async def start_cairn(command: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    """`cairn <command>` as a process of its own (this worktree's code), output discarded."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cairn",
        command,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def stop_cairn(process: asyncio.subprocess.Process) -> None:
    """SIGTERM (a drain), then a kill if it outlasts the grace period."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_GRACE_S)
        except TimeoutError:
            process.kill()
            await process.wait()


async def assert_one_shared_limit(base_urls: list[str]) -> None:
    """Twelve anonymous recovery calls from one address, taken in turn by `base_urls` (each
    on a new connection, so every process behind one port takes some): with the bucket at
    five an hour (`SMALL_RECOVERY_LIMIT`) counted in one shared state, the five places go once,
    in order, whichever process takes each call, and the other seven are refused."""
    statuses, remaining = [], []
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:
        for n in range(12):
            async with http.post(
                f"{base_urls[n % len(base_urls)]}/recovery/challenge", json={"publicKey": "nope"}
            ) as response:
                statuses.append(response.status)
                remaining.append(response.headers["x-ratelimit-remaining"])
    assert statuses.count(429) == 7, statuses
    admitted = [left for status, left in zip(statuses, remaining, strict=True) if status != 429]
    assert admitted == ["4", "3", "2", "1", "0"]
