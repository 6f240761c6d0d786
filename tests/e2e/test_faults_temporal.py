"""The Temporal dev server restarted while attempts run: the API answers 503 with `Retry-After`
while it is down, the attempts resume afterwards (heartbeat, complete), and a lease that ran
out during the outage still times its attempt out on schedule."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import pytest
from actors import Actor, Actors
from faultstack import FaultStack, fault_settings, fault_stack, http_session
from waiting import db_clock_past, wait_until

from infra.devstack import TemporalDevServer, free_port
from schemas.kernel.cids import json_cid

OUTPUT = {"summary": "done"}
LEASE_SEC = 2  # runs out while the server is down (its restart takes longer)


@pytest.fixture(scope="module")
def own_temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalDevServer]:
    """A Temporal of this module's own, on a file so its state survives the restart."""
    root = tmp_path_factory.mktemp("faults-temporal")
    server = TemporalDevServer(
        db_file=root / "temporal.db", port=free_port(), ui_port=None, log_path=root / "t.log"
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def temporal_stack(
    database_url: str, own_temporal: TemporalDevServer, s3: Any
) -> AsyncIterator[FaultStack]:
    settings = fault_settings(database_url, own_temporal.address, s3)
    async with fault_stack(settings) as stack:
        yield stack


async def crew(actors: Actors) -> tuple[Actor, Actor, str, str]:
    owner, executor = await actors.agent(), await actors.agent()
    status, team = await owner.call("POST", "/teams", json={"name": "crew"})
    assert status == 201, team
    team_id = str(team["id"])
    status, invite = await owner.call(
        "POST", f"/teams/{team_id}/invites", json={"role": "executor"}
    )
    assert status == 201, invite
    status, joined = await executor.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 200, joined
    body = {"name": "work", "visibility": "private"}
    status, diary = await owner.call("POST", "/diaries", json=body, team=team_id)
    assert status == 201, diary
    return owner, executor, team_id, str(diary["id"])


async def running_attempt(
    owner: Actor, executor: Actor, team_id: str, diary_id: str, lease_sec: int
) -> str:
    body = {
        "taskType": "freeform",
        "teamId": team_id,
        "diaryId": diary_id,
        "input": {"brief": "Write a haiku"},
    }
    status, task = await owner.call("POST", "/tasks", json=body, team=team_id)
    assert status == 201, task
    task_id = str(task["id"])
    claim = {"leaseTtlSec": lease_sec}
    status, claimed = await executor.call("POST", f"/tasks/{task_id}/claim", json=claim)
    assert status == 200, claimed
    status, beat = await executor.call("POST", f"/tasks/{task_id}/attempts/1/heartbeat", json={})
    assert status == 200, beat
    return task_id


async def attempt(db_pool: Any, task_id: str) -> Any:
    return await db_pool.fetchrow(
        "SELECT * FROM task_attempts WHERE task_id = $1 AND attempt_n = 1", uuid.UUID(task_id)
    )


async def test_attempts_resume_and_leases_run_out_on_schedule_across_a_temporal_restart(
    temporal_stack: FaultStack, own_temporal: TemporalDevServer, db_pool: Any
) -> None:
    async with http_session(temporal_stack.base_url) as http:
        owner, executor, team_id, diary_id = await crew(Actors(temporal_stack, http))
        working = await running_attempt(owner, executor, team_id, diary_id, lease_sec=120)
        lapsing = await running_attempt(owner, executor, team_id, diary_id, lease_sec=LEASE_SEC)
        lapsing_beat = (await attempt(db_pool, lapsing))["last_heartbeat_at"]

        await asyncio.to_thread(own_temporal.stop)
        heartbeat = f"/tasks/{working}/attempts/1/heartbeat"
        async with http.post(heartbeat, json={}, headers=executor.auth) as response:
            problem = await response.json(content_type=None)
            assert response.status == 503, problem
            assert int(response.headers["Retry-After"]) >= 1
        # the short lease runs out while the server is down (the behaviour under test)
        lapsed = lapsing_beat + timedelta(seconds=LEASE_SEC)
        await wait_until(lambda: db_clock_past(db_pool, lapsed))
        assert (await attempt(db_pool, lapsing))["status"] == "running"  # nothing could time it
        await asyncio.to_thread(own_temporal.start)

        # the running attempt goes on: a heartbeat (once the clients have reconnected), then done
        deadline = time.monotonic() + 60
        while True:
            status, beat = await executor.call("POST", heartbeat, json={})
            if status == 200:
                break
            assert status == 503 and time.monotonic() < deadline, beat
            await asyncio.sleep(0.5)
        assert beat["cancelled"] is False, beat
        done = {"output": OUTPUT, "outputCid": json_cid(OUTPUT)}
        status, body = await executor.call(
            "POST", f"/tasks/{working}/attempts/1/complete", json=done
        )
        assert status == 200, body
        assert (await attempt(db_pool, working))["status"] == "completed"

        # the lapsed lease times its attempt out, dated when the lease ran out
        deadline = time.monotonic() + 60
        while (row := await attempt(db_pool, lapsing))["status"] != "timed_out":
            assert row["status"] == "running" and time.monotonic() < deadline, dict(row)
            await asyncio.sleep(0.2)
        assert row["timeout_reason"] == "lease_expired"
        assert (row["finished_at"] - lapsing_beat).total_seconds() == LEASE_SEC
