"""Task artifacts on the real stack (SPEC 2.6 "Task artifacts", 4.5, 8): staging, attempt
outputs, listing, downloads, and the sweep's schedule.

Every refusal is checked to have stored nothing: no `artifact_blobs`/`staged_artifacts`/
`task_artifacts` row and no S3 object. Attempts are rows inserted with `db_pool` in the states
the attempt workflow projects (claimed, running, completed), so the upload rules are tested
whatever state the workflow is in; input binding goes through `POST /tasks`.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from actors import Actor

from infra.s3 import BlobStore, artifact_key
from schemas import limits
from schemas.kernel.cids import bytes_cid, json_cid
from schemas.kernel.task_types import input_schema_cid
from schemas.task_attempts import task_workflow_id
from workflows.artifacts import sweep_schedule_id

MIB = 1024 * 1024

# --- the world: a team with an owner, an executor (the claimant), a member, and an outsider ---


class World:
    owner: Actor
    executor: Actor
    member: Actor
    outsider: Actor
    team_id: str
    diary_id: str
    outsider_team_id: str
    blobs: BlobStore


async def _new_team(owner: Actor) -> str:
    status, body = await owner.call("POST", "/teams", json={"name": f"t-{uuid.uuid4().hex[:6]}"})
    assert status == 201, body
    return str(body["id"])


async def _add_member(owner: Actor, team_id: str, actor: Actor, role: str) -> None:
    status, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"role": role})
    assert status == 201, invite
    status, joined = await actor.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 200, joined


@pytest.fixture(scope="module")
async def world(actors: Any, stack: Any) -> AsyncIterator[World]:
    w = World()
    w.owner, w.executor = await actors.agent(), await actors.agent()
    w.member, w.outsider = await actors.agent(), await actors.agent()
    w.team_id = await _new_team(w.owner)
    await _add_member(w.owner, w.team_id, w.executor, "executor")
    await _add_member(w.owner, w.team_id, w.member, "member")
    w.outsider_team_id = await _new_team(w.outsider)
    body = {"name": f"d-{uuid.uuid4().hex[:6]}", "visibility": "private"}
    status, diary = await w.owner.call("POST", "/diaries", json=body, team=w.team_id)
    assert status == 201, diary
    w.diary_id = str(diary["id"])
    w.blobs = BlobStore.from_settings(stack.settings)
    yield w
    w.blobs.close()


async def insert_task(db_pool: Any, world: World) -> uuid.UUID:
    """A task row as the attempt workflow projects it."""
    task_id = uuid.uuid4()
    await db_pool.execute(
        "INSERT INTO tasks (id, team_id, diary_id, task_type, input, input_cid, input_schema_cid,"
        " output_kind, dispatch_timeout_sec, running_timeout_sec, proposed_by_agent_id,"
        " workflow_id, status)"
        " VALUES ($1, $2, $3, 'freeform', $4, $5, $6, 'artifact', 300, 7200, $7, $8, 'running')",
        task_id,
        uuid.UUID(world.team_id),
        uuid.UUID(world.diary_id),
        {"brief": "x"},
        json_cid({"brief": "x"}),
        input_schema_cid("freeform"),
        world.owner.subject_id,
        task_workflow_id(task_id),
    )
    return task_id


async def insert_attempt(
    db_pool: Any, task_id: uuid.UUID, attempt_n: int, agent: Actor, status: str = "running"
) -> None:
    await db_pool.execute(
        "INSERT INTO task_attempts (id, task_id, attempt_n, workflow_id, lease_id,"
        " claimed_by_agent_id, status, lease_ttl_sec) VALUES ($1, $2, $3, $4, $5, $6, $7, 300)",
        uuid.uuid4(),
        task_id,
        attempt_n,
        task_workflow_id(task_id),
        uuid.uuid4(),
        agent.subject_id,
        status,
    )


async def running_task(db_pool: Any, world: World) -> uuid.UUID:
    """A task whose attempt 1 is running, claimed by the executor."""
    task_id = await insert_task(db_pool, world)
    await insert_attempt(db_pool, task_id, 1, world.executor)
    return task_id


async def stage(actor: Actor, team: str, data: bytes, **params: str) -> tuple[int, dict[str, Any]]:
    status, body = await actor.call(
        "PUT",
        "/task-artifacts/staged",
        team=team,
        params=params or None,
        data=data,
        headers={"Content-Type": "application/octet-stream"},
    )
    return status, body


async def upload(
    actor: Actor, task_id: uuid.UUID, attempt_n: int, data: bytes, **params: str
) -> tuple[int, Any]:
    query = {"kind": "report", "title": "The report", **params}
    return await actor.call(
        "PUT",
        f"/tasks/{task_id}/attempts/{attempt_n}/artifacts",
        params=query,
        data=data,
        headers={"Content-Type": "application/octet-stream"},
    )


async def download(actor: Actor, path: str) -> tuple[int, Any, Any]:
    async with actor.http.get(path, headers=actor.auth) as response:
        body: Any = await response.read()
        if response.content_type == "application/problem+json":
            body = await response.json(content_type=None)
        return response.status, body, response.headers.copy()  # case-insensitive


async def stored_object(world: World, cid: str) -> bytes | None:
    reader = await world.blobs.open(artifact_key(cid))
    if reader is None:
        return None
    return b"".join([chunk async for chunk in reader.chunks(MIB)])


async def rows_naming(db_pool: Any, cid: str) -> dict[str, int]:
    counts = {}
    for table in ("artifact_blobs", "staged_artifacts", "task_artifacts"):
        counts[table] = await db_pool.fetchval(f"SELECT count(*) FROM {table} WHERE cid = $1", cid)
    return counts


NOTHING = {"artifact_blobs": 0, "staged_artifacts": 0, "task_artifacts": 0}


# --- staging ------------------------------------------------------------------------------------


async def test_staging_returns_the_cid_of_the_exact_bytes(world: World, db_pool: Any) -> None:
    data = os.urandom(3 * MIB + 7)  # several spool blocks and a ragged end
    status, body = await stage(world.owner, world.team_id, data, contentType="text/csv")
    assert status == 200, body
    assert body == {"cid": bytes_cid(data), "sizeBytes": len(data), "contentType": "text/csv"}
    staged = await db_pool.fetchrow(
        "SELECT content_type, content_encoding FROM staged_artifacts WHERE team_id = $1"
        " AND cid = $2",
        uuid.UUID(world.team_id),
        body["cid"],
    )
    assert dict(staged) == {"content_type": "text/csv", "content_encoding": None}
    size = await db_pool.fetchval(
        "SELECT size_bytes FROM artifact_blobs WHERE cid = $1", body["cid"]
    )
    assert size == len(data)
    assert await stored_object(world, body["cid"]) == data


async def test_staging_defaults_the_content_type_and_keeps_the_encoding(world: World) -> None:
    status, body = await stage(world.owner, world.team_id, b"\x1f\x8b...", contentEncoding="gzip")
    assert status == 200, body
    assert body["contentType"] == "application/octet-stream"


async def test_an_empty_body_is_an_artifact_too(world: World) -> None:
    status, body = await stage(world.owner, world.team_id, b"")
    assert status == 200, body
    assert body["cid"] == bytes_cid(b"")
    assert body["sizeBytes"] == 0


async def test_identical_bytes_are_stored_once(world: World, db_pool: Any) -> None:
    data = os.urandom(MIB)
    cid = bytes_cid(data)
    for content_type in ("text/plain", "application/pdf"):
        status, body = await stage(world.owner, world.team_id, data, contentType=content_type)
        assert status == 200, body
        assert body["cid"] == cid
    # and the same bytes as an attempt's output
    task_id = await running_task(db_pool, world)
    status, artifact = await upload(world.executor, task_id, 1, data)
    assert status == 200, artifact
    assert await rows_naming(db_pool, cid) == {
        "artifact_blobs": 1,
        "staged_artifacts": 1,
        "task_artifacts": 1,
    }
    listed = await asyncio.to_thread(
        world.blobs.client.list_objects_v2, Bucket=world.blobs.bucket, Prefix=artifact_key(cid)
    )
    assert [o["Key"] for o in listed.get("Contents", [])] == [artifact_key(cid)]
    # re-staging took the latest labels
    content_type = await db_pool.fetchval(
        "SELECT content_type FROM staged_artifacts WHERE cid = $1", cid
    )
    assert content_type == "application/pdf"


async def test_identical_uploads_at_once_make_one_blob(world: World, db_pool: Any) -> None:
    """Concurrent stagings of the same bytes share one workflow run (its id is the CID's)."""
    data = os.urandom(2 * MIB)
    answers = await asyncio.gather(*(stage(world.owner, world.team_id, data) for _ in range(4)))
    assert [status for status, _ in answers] == [200] * 4, answers
    assert {body["cid"] for _, body in answers} == {bytes_cid(data)}
    assert await rows_naming(db_pool, bytes_cid(data)) == {
        "artifact_blobs": 1,
        "staged_artifacts": 1,
        "task_artifacts": 0,
    }
    assert await stored_object(world, bytes_cid(data)) == data


async def test_26_mib_is_413_and_nothing_is_stored(world: World, db_pool: Any) -> None:
    data = os.urandom(26 * MIB)
    cid = bytes_cid(data)
    status, body = await stage(world.owner, world.team_id, data)
    assert status == 413, body
    assert body["code"] == "payload-too-large"
    assert await rows_naming(db_pool, cid) == NOTHING
    assert await stored_object(world, cid) is None


async def test_a_chunked_body_is_cut_off_at_the_limit(world: World, db_pool: Any) -> None:
    """No Content-Length: the limit is enforced while streaming, at 25 MiB + 1 byte."""
    block = os.urandom(MIB)
    data_len = limits.ARTIFACT_MAX_BYTES + 1

    async def body() -> AsyncIterator[bytes]:
        sent = 0
        while sent < data_len:
            piece = block[: min(MIB, data_len - sent)]
            sent += len(piece)
            yield piece

    headers = {**world.owner.auth, "x-service-team-id": world.team_id}
    async with world.owner.http.put(
        "/task-artifacts/staged", data=body(), headers=headers
    ) as response:
        problem = await response.json(content_type=None)
        assert response.status == 413, problem
    full = (block * 26)[:data_len]
    assert await rows_naming(db_pool, bytes_cid(full)) == NOTHING
    assert await stored_object(world, bytes_cid(full)) is None


async def test_exactly_25_mib_is_accepted(world: World) -> None:
    data = os.urandom(limits.ARTIFACT_MAX_BYTES)
    status, body = await stage(world.owner, world.team_id, data)
    assert status == 200, body
    assert body["sizeBytes"] == limits.ARTIFACT_MAX_BYTES
    assert await stored_object(world, body["cid"]) == data


async def test_staging_needs_the_team_header(world: World) -> None:
    status, body = await world.owner.call("PUT", "/task-artifacts/staged", data=b"x")
    assert status == 400, body
    assert body["code"] == "team-required"


@pytest.mark.parametrize("who", ["outsider", "unknown-team"])
async def test_staging_outside_ones_teams_is_404(world: World, db_pool: Any, who: str) -> None:
    team = world.team_id if who == "outsider" else str(uuid.uuid4())
    actor = world.outsider if who == "outsider" else world.owner
    data = os.urandom(64)
    status, body = await stage(actor, team, data)
    assert status == 404, body
    assert body["code"] == "team-not-found"
    assert await rows_naming(db_pool, bytes_cid(data)) == NOTHING


async def test_staging_needs_propose_tasks(world: World, db_pool: Any) -> None:
    """A plain member may not propose tasks, so it may not stage; an executor (agent) may."""
    data = os.urandom(64)
    status, body = await stage(world.member, world.team_id, data)
    assert status == 403, body
    assert body["code"] == "task-propose-forbidden"
    assert await rows_naming(db_pool, bytes_cid(data)) == NOTHING
    status, body = await stage(world.executor, world.team_id, data)
    assert status == 200, body


async def test_staging_needs_the_task_write_scope(world: World, db_pool: Any) -> None:
    form = {
        "grant_type": "client_credentials",
        "client_id": world.owner.client_id,
        "client_secret": world.owner.client_secret,
        "scope": "task:read task:execute",
    }
    async with world.owner.http.post("/oauth2/token", data=form) as response:
        token = (await response.json(content_type=None))["access_token"]
    data = os.urandom(64)
    headers = {"Authorization": f"Bearer {token}", "x-service-team-id": world.team_id}
    async with world.owner.http.put(
        "/task-artifacts/staged", data=data, headers=headers
    ) as response:
        assert response.status == 403
        assert (await response.json(content_type=None))["code"] == "missing-scope"
    assert await rows_naming(db_pool, bytes_cid(data)) == NOTHING


async def test_a_non_binary_body_is_415(world: World, db_pool: Any) -> None:
    status, body = await world.owner.call(
        "PUT", "/task-artifacts/staged", team=world.team_id, json={"not": "bytes"}
    )
    assert (status, body["code"]) == (415, "unsupported-media-type"), body
    assert await rows_naming(db_pool, json_cid({"not": "bytes"})) == NOTHING


async def test_bad_labels_are_400(world: World) -> None:
    for params in ({"contentType": "not a type"}, {"contentEncoding": "gzip\r\nx: y"}):
        status, body = await stage(world.owner, world.team_id, b"x", **params)
        assert (status, body["code"]) == (400, "validation-failed"), (params, body)


async def test_a_staged_cid_is_not_downloadable(world: World, db_pool: Any) -> None:
    data = os.urandom(128)
    status, staged = await stage(world.owner, world.team_id, data)
    assert status == 200, staged
    task_id = await running_task(db_pool, world)
    status, body, _ = await download(
        world.owner, f"/tasks/{task_id}/artifacts/{staged['cid']}/content"
    )
    assert status == 404, body
    assert body["code"] == "artifact-not-found"
    status, listing = await world.owner.call("GET", f"/tasks/{task_id}/artifacts")
    assert status == 200, listing
    assert listing == {"artifacts": [], "nextCursor": None}


# --- attempt outputs ----------------------------------------------------------------------------


async def test_the_claimant_uploads_to_its_running_attempt(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    data = os.urandom(2 * MIB)
    status, artifact = await upload(
        world.executor, task_id, 1, data, contentType="text/markdown", contentEncoding="identity"
    )
    assert status == 200, artifact
    assert artifact["cid"] == bytes_cid(data)
    assert {k: artifact[k] for k in ("teamId", "taskId", "attemptN", "kind", "title")} == {
        "teamId": world.team_id,
        "taskId": str(task_id),
        "attemptN": 1,
        "kind": "report",
        "title": "The report",
    }
    assert artifact["contentType"] == "text/markdown"
    assert artifact["contentEncoding"] == "identity"
    assert artifact["sizeBytes"] == len(data)
    assert artifact["createdByAgentId"] == str(world.executor.subject_id)
    assert await stored_object(world, artifact["cid"]) == data


async def test_the_same_upload_twice_is_idempotent(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    data = os.urandom(1000)
    status, first = await upload(world.executor, task_id, 1, data)
    assert status == 200, first
    status, again = await upload(world.executor, task_id, 1, data)
    assert status == 200, again
    assert again == first
    status, other = await upload(world.executor, task_id, 1, data, title="Another title")
    assert status == 409, other
    assert other["code"] == "artifact-metadata-conflict"
    count = await db_pool.fetchval(
        "SELECT count(*) FROM task_artifacts WHERE task_id = $1", task_id
    )
    assert count == 1


async def test_only_the_claimant_uploads(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    data = os.urandom(256)
    for actor in (world.owner, world.member):
        status, body = await upload(actor, task_id, 1, data)
        assert status == 403, body
        assert body["code"] == "not-claimant"
    assert await rows_naming(db_pool, bytes_cid(data)) == NOTHING
    assert await stored_object(world, bytes_cid(data)) is None


async def test_an_outsider_uploading_is_404(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    data = os.urandom(256)
    status, body = await upload(world.outsider, task_id, 1, data)
    assert (status, body["code"]) == (404, "task-not-found"), body
    assert await rows_naming(db_pool, bytes_cid(data)) == NOTHING


@pytest.mark.parametrize(
    ("attempt_status", "code"),
    [
        ("claimed", "attempt-not-started"),
        ("completed", "attempt-finished"),
        ("aborted", "attempt-finished"),
        ("timed_out", "attempt-finished"),
    ],
)
async def test_an_attempt_that_is_not_running_refuses_uploads(
    world: World, db_pool: Any, attempt_status: str, code: str
) -> None:
    task_id = await insert_task(db_pool, world)
    await insert_attempt(db_pool, task_id, 1, world.executor, attempt_status)
    data = os.urandom(256)
    status, body = await upload(world.executor, task_id, 1, data)
    assert status == 409, body
    assert body["code"] == code
    assert await rows_naming(db_pool, bytes_cid(data)) == NOTHING
    assert await stored_object(world, bytes_cid(data)) is None


async def test_an_unknown_attempt_is_404(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    status, body = await upload(world.executor, task_id, 2, b"x")
    assert status == 404, body
    assert body["code"] == "attempt-not-found"


async def test_an_oversized_output_is_413_and_nothing_is_stored(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    data = os.urandom(26 * MIB)
    status, body = await upload(world.executor, task_id, 1, data)
    assert (status, body["code"]) == (413, "payload-too-large"), body
    assert await rows_naming(db_pool, bytes_cid(data)) == NOTHING
    assert await stored_object(world, bytes_cid(data)) is None


async def test_upload_needs_kind_and_title(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    status, body = await world.executor.call(
        "PUT", f"/tasks/{task_id}/attempts/1/artifacts", data=b"x", params={"kind": "k"}
    )
    assert (status, body["code"]) == (400, "validation-failed"), body
    assert any(e["pointer"] == "/query/title" for e in body["errors"])


async def test_uploads_follow_the_attempt_through_the_real_routes(
    world: World, db_pool: Any
) -> None:
    """POST /tasks, claim, heartbeat, complete (the attempt workflow): an output is refused
    before the first heartbeat, accepted while running, refused once the attempt completed."""
    body = {
        "taskType": "freeform",
        "teamId": world.team_id,
        "diaryId": world.diary_id,
        "input": {"brief": "Write it down"},
    }
    status, task = await world.owner.call("POST", "/tasks", json=body)
    assert status == 201, task
    task_id = uuid.UUID(task["id"])
    status, claimed = await world.executor.call("POST", f"/tasks/{task_id}/claim", json={})
    assert status == 200, claimed
    n = claimed["attemptN"]
    status, refused = await upload(world.executor, task_id, n, b"too early")
    assert (status, refused["code"]) == (409, "attempt-not-started")
    status, beat = await world.executor.call(
        "POST", f"/tasks/{task_id}/attempts/{n}/heartbeat", json={}
    )
    assert status == 200, beat
    status, artifact = await upload(world.executor, task_id, n, b"the notes")
    assert status == 200, artifact
    output = {
        "summary": "done",
        "artifacts": [{"kind": "report", "title": "Notes", "cid": artifact["cid"]}],
    }
    status, done = await world.executor.call(
        "POST",
        f"/tasks/{task_id}/attempts/{n}/complete",
        json={"output": output, "outputCid": json_cid(output)},
    )
    assert status == 200, done
    status, late = await upload(world.executor, task_id, n, b"too late")
    assert (status, late["code"]) == (409, "attempt-finished")
    status, got, _ = await download(
        world.owner, f"/tasks/{task_id}/attempts/{n}/artifacts/{artifact['cid']}/content"
    )
    assert (status, got) == (200, b"the notes")
    assert await rows_naming(db_pool, bytes_cid(b"too late")) == NOTHING


# --- downloads ----------------------------------------------------------------------------------


async def test_downloads_carry_the_metadata_headers(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    data = os.urandom(3 * MIB + 1)
    status, artifact = await upload(
        world.executor, task_id, 1, data, contentType="text/plain", contentEncoding="gzip"
    )
    assert status == 200, artifact
    cid = artifact["cid"]
    for path in (
        f"/tasks/{task_id}/attempts/1/artifacts/{cid}/content",
        f"/tasks/{task_id}/artifacts/{cid}/content",
    ):
        status, body, headers = await download(world.member, path)
        assert status == 200, body
        assert body == data
        assert headers["Content-Type"] == "application/octet-stream"
        assert headers["Content-Length"] == str(len(data))
        assert headers["x-service-task-artifact-id"] == artifact["id"]
        assert headers["x-service-task-artifact-cid"] == cid
        assert headers["x-service-task-artifact-content-type"] == "text/plain"
        assert headers["x-service-task-artifact-content-encoding"] == "gzip"
        assert headers["X-Request-Id"]


async def test_downloads_of_what_is_not_there_are_404(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    status, artifact = await upload(world.executor, task_id, 1, b"only on attempt 1")
    assert status == 200, artifact
    cid = artifact["cid"]
    missing = bytes_cid(b"never uploaded")
    for path in (
        f"/tasks/{task_id}/attempts/2/artifacts/{cid}/content",
        f"/tasks/{task_id}/attempts/1/artifacts/{missing}/content",
        f"/tasks/{task_id}/artifacts/{missing}/content",
        f"/tasks/{uuid.uuid4()}/artifacts/{cid}/content",
    ):
        status, body, _ = await download(world.owner, path)
        assert status == 404, (path, body)
    status, body, _ = await download(world.owner, f"/tasks/{task_id}/artifacts/not-a-cid/content")
    assert (status, body["code"]) == (400, "validation-failed"), body


async def test_outsiders_see_nothing(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    status, artifact = await upload(world.executor, task_id, 1, b"private bytes")
    assert status == 200, artifact
    cid = artifact["cid"]
    for path in (
        f"/tasks/{task_id}/artifacts",
        f"/tasks/{task_id}/artifacts/{cid}/content",
        f"/tasks/{task_id}/attempts/1/artifacts/{cid}/content",
    ):
        status, body, _ = await download(world.outsider, path)
        assert (status, body["code"]) == (404, "task-not-found"), (path, body)
    # a member naming another team in the header does not see it either
    status, body = await world.owner.call(
        "GET", f"/tasks/{task_id}/artifacts", team=world.outsider_team_id
    )
    assert (status, body["code"]) == (404, "task-not-found"), body


async def test_a_bound_input_is_downloadable_before_any_attempt(world: World, db_pool: Any) -> None:
    data = os.urandom(5000)
    status, staged = await stage(world.owner, world.team_id, data, contentType="text/plain")
    assert status == 200, staged
    body = {
        "taskType": "freeform",
        "teamId": world.team_id,
        "diaryId": world.diary_id,
        "input": {"brief": "Read the attachment"},
        "references": [{"artifact": {"cid": staged["cid"], "title": "Notes"}, "role": "context"}],
    }
    status, task = await world.owner.call("POST", "/tasks", json=body)
    assert status == 201, task
    status, got, headers = await download(
        world.member, f"/tasks/{task['id']}/artifacts/{staged['cid']}/content"
    )
    assert status == 200, got
    assert got == data
    assert headers["x-service-task-artifact-content-type"] == "text/plain"
    status, listing = await world.member.call("GET", f"/tasks/{task['id']}/artifacts")
    assert status == 200, listing
    [artifact] = listing["artifacts"]
    assert artifact["attemptN"] is None
    assert (artifact["kind"], artifact["title"], artifact["role"]) == ("input", "Notes", "context")


# --- listing ------------------------------------------------------------------------------------


async def test_list_pages_through_every_artifact(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    uploaded = []
    for i in range(5):
        status, artifact = await upload(world.executor, task_id, 1, f"part {i}".encode())
        assert status == 200, artifact
        uploaded.append(artifact)
    seen: list[dict[str, Any]] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        status, page = await world.member.call("GET", f"/tasks/{task_id}/artifacts", params=params)
        assert status == 200, page
        seen += page["artifacts"]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert pages == 3
    assert [a["id"] for a in seen] == [a["id"] for a in uploaded]
    assert seen == uploaded


async def test_a_cursor_is_bound_to_its_task(world: World, db_pool: Any) -> None:
    task_id = await running_task(db_pool, world)
    for i in range(2):
        status, _ = await upload(world.executor, task_id, 1, f"bound {i}".encode())
        assert status == 200
    status, page = await world.member.call(
        "GET", f"/tasks/{task_id}/artifacts", params={"limit": 1}
    )
    assert status == 200, page
    other = await running_task(db_pool, world)
    status, body = await world.member.call(
        "GET", f"/tasks/{other}/artifacts", params={"cursor": page["nextCursor"]}
    )
    assert status == 400, body
    assert body["code"] == "invalid-cursor"
    status, body = await world.member.call(
        "GET", f"/tasks/{task_id}/artifacts", params={"limit": 101}
    )
    assert (status, body["code"]) == (400, "validation-failed"), body


# --- deletion with the task, and the sweep's schedule -------------------------------------------


async def test_the_sweep_schedule_exists_and_an_operator_can_trigger_it(
    world: World, db_pool: Any, stack: Any
) -> None:
    """Deleting a task cascades to its artifact rows; the triggered sweep then deletes the blob
    nothing names and its object, and a staged row past its grace with it."""
    handle = stack.temporal.get_schedule_handle(
        sweep_schedule_id(stack.settings.temporal_task_queue)
    )
    description = await handle.describe()
    [interval] = description.schedule.spec.intervals
    assert interval.every == timedelta(hours=1)

    task_id = await running_task(db_pool, world)
    status, artifact = await upload(world.executor, task_id, 1, os.urandom(4096))
    assert status == 200, artifact
    data = os.urandom(4096)
    status, staged = await stage(world.owner, world.team_id, data)
    assert status == 200, staged
    await db_pool.execute(
        "UPDATE staged_artifacts SET staged_at = now() - interval '49 hours' WHERE cid = $1",
        staged["cid"],
    )
    await db_pool.execute("DELETE FROM tasks WHERE id = $1", task_id)
    assert (await rows_naming(db_pool, artifact["cid"]))["task_artifacts"] == 0

    await handle.trigger()
    for _ in range(200):
        remaining = await db_pool.fetchval(
            "SELECT count(*) FROM artifact_blobs WHERE cid = ANY($1::text[])",
            [artifact["cid"], staged["cid"]],
        )
        if remaining == 0:
            break
        await asyncio.sleep(0.05)
    assert await rows_naming(db_pool, artifact["cid"]) == NOTHING
    assert await rows_naming(db_pool, staged["cid"]) == NOTHING
    assert await stored_object(world, artifact["cid"]) is None
    assert await stored_object(world, staged["cid"]) is None
