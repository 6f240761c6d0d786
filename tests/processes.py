"""What the end-to-end tests need to run the service's own commands as processes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from waiting import wait_until

__all__ = ["alive", "service_env", "start_cairn", "stop_cairn", "wait_until"]
STOP_GRACE_S = 20


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
