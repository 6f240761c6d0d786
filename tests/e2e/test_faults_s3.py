"""S3 (rclone) down: uploads answer 503 with `Retry-After` and write nothing (no row, no
object); once S3 is back, the same upload succeeds and its bytes are stored."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from actors import Actor, Actors, new_diary, personal_team
from faultstack import FaultStack, fault_settings, fault_stack, http_session

from infra.devstack import RcloneS3, free_port
from infra.s3 import artifact_key
from schemas.kernel.cids import bytes_cid, json_cid
from schemas.kernel.task_types import input_schema_cid

MIB = 1024 * 1024
OCTETS = {"Content-Type": "application/octet-stream"}


@pytest.fixture(scope="module")
def own_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RcloneS3]:
    """An S3 endpoint of this module's own: the test stops it, which no other module may see."""
    root = tmp_path_factory.mktemp("faults-s3")
    server = RcloneS3(
        root=root / "data",
        access_key="fault-access",
        secret_key="fault-secret-key-0123456789",
        bucket="cairn-faults",
        port=free_port(),
        log_path=root / "s3.log",
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def s3_stack(
    database_url: str, temporal_address: str, own_s3: RcloneS3
) -> AsyncIterator[FaultStack]:
    async with fault_stack(fault_settings(database_url, temporal_address, own_s3)) as stack:
        yield stack


def stored_path(own_s3: RcloneS3, cid: str) -> Path:
    return own_s3.root / own_s3.bucket / artifact_key(cid)


async def running_attempt(db_pool: Any, agent: Actor, team_id: str, diary_id: str) -> uuid.UUID:
    """A task whose attempt 1 is running, claimed by `agent` (rows as the workflow projects)."""
    task_id = uuid.uuid4()
    await db_pool.execute(
        "INSERT INTO tasks (id, team_id, diary_id, task_type, input, input_cid, input_schema_cid,"
        " output_kind, dispatch_timeout_sec, running_timeout_sec, proposed_by_agent_id,"
        " workflow_id, status)"
        " VALUES ($1, $2, $3, 'freeform', $4, $5, $6, 'artifact', 300, 7200, $7, $8, 'running')",
        task_id,
        uuid.UUID(team_id),
        uuid.UUID(diary_id),
        {"brief": "x"},
        json_cid({"brief": "x"}),
        input_schema_cid("freeform"),
        agent.subject_id,
        f"task/{task_id}",
    )
    await db_pool.execute(
        "INSERT INTO task_attempts (id, task_id, attempt_n, workflow_id, lease_id,"
        " claimed_by_agent_id, status, lease_ttl_sec)"
        " VALUES ($1, $2, 1, $3, $4, $5, 'running', 300)",
        uuid.uuid4(),
        task_id,
        f"task/{task_id}",
        uuid.uuid4(),
        agent.subject_id,
    )
    return task_id


async def rows_naming(db_pool: Any, cid: str) -> dict[str, int]:
    return {
        table: await db_pool.fetchval(f"SELECT count(*) FROM {table} WHERE cid = $1", cid)
        for table in ("artifact_blobs", "staged_artifacts", "task_artifacts")
    }


async def test_uploads_answer_503_while_s3_is_down_and_succeed_when_it_returns(
    s3_stack: FaultStack, own_s3: RcloneS3, db_pool: Any
) -> None:
    async with http_session(s3_stack.base_url) as http:
        agent = await Actors(s3_stack, http).agent()
        team = await personal_team(agent)
        diary = await new_diary(agent)
        task_id = await running_attempt(db_pool, agent, team, diary["id"])
        staged, output = os.urandom(2 * MIB + 3), os.urandom(MIB + 5)
        uploads = [
            ("/task-artifacts/staged", {}, staged),
            (f"/tasks/{task_id}/attempts/1/artifacts", {"kind": "report", "title": "R"}, output),
        ]

        await asyncio.to_thread(own_s3.stop)
        for path, params, data in uploads:
            async with http.put(
                path,
                params=params,
                data=data,
                headers={**agent.auth, **OCTETS, "x-service-team-id": team},
            ) as response:
                body = await response.json(content_type=None)
                assert response.status == 503, body
                assert int(response.headers["Retry-After"]) >= 1
            assert await rows_naming(db_pool, bytes_cid(data)) == {
                "artifact_blobs": 0,
                "staged_artifacts": 0,
                "task_artifacts": 0,
            }
            assert not stored_path(own_s3, bytes_cid(data)).exists()

        await asyncio.to_thread(own_s3.start)
        for path, params, data in uploads:
            status, body = await agent.call(
                "PUT", path, params=params, data=data, headers=OCTETS, team=team
            )
            assert status == 200, body
            assert body["cid"] == bytes_cid(data)
            assert stored_path(own_s3, bytes_cid(data)).read_bytes() == data
        assert (await rows_naming(db_pool, bytes_cid(output)))["task_artifacts"] == 1
