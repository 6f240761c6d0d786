"""Waiting on a condition, the one way tests synchronise with anything asynchronous.

A test never sleeps a fixed time hoping something happened by then: it polls the condition
itself. The limit only bounds a hang (a failure says what never held); it is no timing
assertion, so a slow machine makes a test slower, never red."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

POLL_S = 0.05


async def wait_until(
    predicate: Callable[[], bool | Awaitable[bool]], limit_s: float = 60.0, what: str = ""
) -> None:
    """Return as soon as `predicate()` (plain or async) is true; fail after `limit_s` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while True:
        held = predicate()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        assert loop.time() < deadline, f"timed out waiting for {what or predicate}"
        await asyncio.sleep(POLL_S)


async def db_clock_past(db: Any, moment: datetime) -> bool:
    """Whether the database's clock, the one leases and expiries are dated by, has passed
    `moment`: what a test waits on when time passing is the behaviour under test."""
    return bool(await db.fetchval("SELECT now() > $1", moment))
