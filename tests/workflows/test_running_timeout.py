"""`runningTimeoutSec` overrides the running default (SPEC 3.1, 8) on the time-skipping server: a
running attempt of a task created with `runningTimeoutSec: 60` times out 60 s after it started,
while one of a task without it is still running then (its deadline is 7200 s). The API hands the
value to the workflow (tests/integration/test_spec_rules.py); here its timer."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from temporalio.testing import WorkflowEnvironment
from test_task_workflow import Run, new_worker, register_search_attributes, seconds

from infra.db import create_pool
from schemas import limits
from schemas.task_api import CreateTaskRequest


@pytest.fixture(scope="module")
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    opened = await create_pool(database_url, read_only=False)
    yield opened
    await opened.close()


@pytest.fixture(scope="module")
async def queue(time_skipping_env: WorkflowEnvironment, pool: asyncpg.Pool) -> AsyncIterator[str]:
    await register_search_attributes(time_skipping_env)
    name = f"wf-{uuid.uuid4().hex[:8]}"
    async with new_worker(time_skipping_env, name, pool):
        yield name


def running_timeout(body_extra: dict[str, int]) -> int:
    """What the create route passes on for a request body (`effective_running_timeout_sec`)."""
    body = CreateTaskRequest.model_validate(
        {
            "taskType": "freeform",
            "teamId": str(uuid.uuid4()),
            "diaryId": str(uuid.uuid4()),
            "input": {"brief": "b"},
            **body_extra,
        }
    )
    return body.effective_running_timeout_sec()


async def test_running_timeout_sec_60_times_out_at_60_s_not_7200(
    time_skipping_env: WorkflowEnvironment, queue: str, pool: asyncpg.Pool
) -> None:
    short = await Run(time_skipping_env, queue, pool).create(
        running_timeout_sec=running_timeout({"runningTimeoutSec": 60})
    )
    default = await Run(time_skipping_env, queue, pool).create(
        running_timeout_sec=running_timeout({})
    )
    assert short.start is not None and short.start.running_timeout_sec == 60
    assert default.start is not None
    assert default.start.running_timeout_sec == limits.ATTEMPT_RESULT_DEADLINE_SEC
    for run in (short, default):
        await run.claim()
        await run.heartbeat()
    started = (await short.attempts())[0]["started_at"]

    await time_skipping_env.sleep(50)
    assert (await short.task())["status"] == "running"  # not yet: 50 s < 60 s
    await time_skipping_env.sleep(15)  # past 60 s; the 300 s lease is far off
    await short.until_status("failed")
    (attempt,) = await short.attempts()
    assert attempt["status"] == "timed_out"
    assert attempt["timeout_reason"] == "running_total_exceeded"
    assert seconds(attempt["finished_at"], started) == 60

    await default.liveness()  # a heartbeat keeps the default one's lease alive
    assert (await default.task())["status"] == "running"
    assert (await default.attempts())[0]["status"] == "running"
