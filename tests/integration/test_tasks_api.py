"""Task routes on the real stack (SPEC 2.6, 4.5, 5, 7): the type registry, create and its
validation order, idempotency, continuations, list filters and cursors, get, attempts and grants.

Every refusal is checked with "nothing written" (no task row, no workflow). Reads (list, get,
attempts) are tested on rows inserted directly with `db_pool`, so that they do not depend on
the attempt workflow; creation is tested end to end through `POST /tasks`.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from actors import Actor, new_diary

from schemas.kernel.cids import bytes_cid, json_cid
from schemas.kernel.task_types import TASK_TYPE_NAMES, input_schema_cid
from schemas.task_attempts import task_workflow_id

# --- the world: one team with a member of each role, and an outsider --------------------------


class World:
    owner: Actor
    manager: Actor
    executor: Actor
    member: Actor
    outsider: Actor
    human: Actor
    team_id: str
    other_team_id: str
    diary_id: str  # private diary of the team
    outsider_diary_id: str  # private diary of the outsider's personal team
    shared_diary_id: str  # the outsider's `moltnet` diary: readable by every principal


async def _new_team(owner: Actor) -> str:
    status, body = await owner.call("POST", "/teams", json={"name": f"t-{uuid.uuid4().hex[:6]}"})
    assert status == 201, body
    return str(body["id"])


async def _add_member(owner: Actor, team_id: str, actor: Actor, role: str) -> None:
    status, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"role": role})
    assert status == 201, invite
    status, joined = await actor.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 200, joined


async def _team_diary(actor: Actor, team_id: str, visibility: str = "private") -> str:
    body = {"name": f"d-{uuid.uuid4().hex[:6]}", "visibility": visibility}
    status, diary = await actor.call("POST", "/diaries", json=body, team=team_id)
    assert status == 201, diary
    return str(diary["id"])


@pytest.fixture(scope="module")
async def world(actors: Any) -> World:
    w = World()
    w.owner, w.manager, w.executor = (
        await actors.agent(),
        await actors.agent(),
        await actors.agent(),
    )
    w.member, w.outsider = await actors.agent(), await actors.agent()
    w.human = await actors.human()
    w.team_id = await _new_team(w.owner)
    await _add_member(w.owner, w.team_id, w.manager, "manager")
    await _add_member(w.owner, w.team_id, w.executor, "executor")
    await _add_member(w.owner, w.team_id, w.member, "member")
    await _add_member(w.owner, w.team_id, w.human, "manager")
    w.other_team_id = await _new_team(w.outsider)
    w.diary_id = await _team_diary(w.owner, w.team_id)
    w.outsider_diary_id = (await new_diary(w.outsider))["id"]
    w.shared_diary_id = (await new_diary(w.outsider, visibility="moltnet"))["id"]
    return w


def freeform(world: World, **extra: Any) -> dict[str, Any]:
    return {
        "taskType": "freeform",
        "teamId": world.team_id,
        "diaryId": world.diary_id,
        "input": {"brief": "Summarise the week"},
        **extra,
    }


async def task_count(db_pool: Any) -> int:
    return int(await db_pool.fetchval("SELECT count(*) FROM tasks"))


async def scoped_token(actor: Actor, scope: str) -> dict[str, str]:
    form = {
        "grant_type": "client_credentials",
        "client_id": actor.client_id,
        "client_secret": actor.client_secret,
        "scope": scope,
    }
    async with actor.http.post("/oauth2/token", data=form) as response:
        token = await response.json(content_type=None)
        assert response.status == 200, token
    return {"Authorization": f"Bearer {token['access_token']}"}


async def call_with(
    actor: Actor, auth: dict[str, str], method: str, path: str, **kwargs: Any
) -> tuple[int, Any]:
    saved = actor.auth
    actor.auth = auth
    try:
        return await actor.call(method, path, **kwargs)
    finally:
        actor.auth = saved


async def insert_task(db_pool: Any, world: World, **columns: Any) -> uuid.UUID:
    """A task row as the attempt workflow would project it (reads do not need the workflow)."""
    task_id = columns.pop("id", uuid.uuid4())
    row: dict[str, Any] = {
        "id": task_id,
        "team_id": uuid.UUID(world.team_id),
        "diary_id": uuid.UUID(world.diary_id),
        "task_type": "freeform",
        "input": {"brief": "x"},
        "input_cid": json_cid({"brief": "x"}),
        "input_schema_cid": input_schema_cid("freeform"),
        "output_kind": "artifact",
        "dispatch_timeout_sec": 300,
        "running_timeout_sec": 7200,
        "proposed_by_agent_id": world.owner.subject_id,
        "workflow_id": task_workflow_id(task_id),
        "status": "queued",
        **columns,
    }
    names = ", ".join(f'"{name}"' for name in row)
    params = ", ".join(f"${i}" for i in range(1, len(row) + 1))
    await db_pool.execute(f"INSERT INTO tasks ({names}) VALUES ({params})", *row.values())
    return task_id


async def insert_attempt(
    db_pool: Any, task_id: uuid.UUID, attempt_n: int, agent: Actor, status: str = "running"
) -> uuid.UUID:
    attempt_id = uuid.uuid4()
    await db_pool.execute(
        "INSERT INTO task_attempts (id, task_id, attempt_n, workflow_id, lease_id,"
        " claimed_by_agent_id, status, lease_ttl_sec, output)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, 300, $8)",
        attempt_id,
        task_id,
        attempt_n,
        task_workflow_id(task_id),
        uuid.uuid4(),
        agent.subject_id,
        status,
        {"summary": "done"} if status == "completed" else None,
    )
    return attempt_id


# --- the type registry --------------------------------------------------------------------------


async def test_schemas_lists_every_type_with_its_schema_cid(world: World) -> None:
    status, body = await world.executor.call("GET", "/tasks/schemas")
    assert status == 200, body
    assert [item["taskType"] for item in body["items"]] == list(TASK_TYPE_NAMES)
    for item in body["items"]:
        assert item["inputSchemaCid"] == json_cid(item["inputSchema"])
        assert item["inputSchemaCid"] == input_schema_cid(item["taskType"])
        assert item["outputKind"] in ("artifact", "judgment")
    kinds = {item["taskType"]: item["outputKind"] for item in body["items"]}
    assert kinds["freeform"] == "artifact" and kinds["assess_brief"] == "judgment"


async def test_schemas_need_task_read(world: World) -> None:
    auth = await scoped_token(world.owner, "diary:read")
    status, body = await call_with(world.owner, auth, "GET", "/tasks/schemas")
    assert status == 403 and body["code"] == "missing-scope"


# --- create: 400s, in the order the checks run ----------------------------------------------------


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        ({"colour": "blue"}, "/colour"),
        ({"taskType": "nope"}, "/taskType"),
        ({"input": {"brief": "x", "extra": 1}}, "/input"),
        ({"input": {}}, "/input"),
        ({"input": {"brief": 7}}, "/input/brief"),
        ({"projectId": ""}, "/projectId"),
        ({"projectId": None}, "/projectId"),
        ({"projectId": "none"}, "/projectId"),
        ({"maxAttempts": 0}, "/maxAttempts"),
        ({"maxAttempts": 11}, "/maxAttempts"),
        ({"dispatchTimeoutSec": 0}, "/dispatchTimeoutSec"),
        ({"runningTimeoutSec": 86_401}, "/runningTimeoutSec"),
        ({"expiresInSec": 90 * 86_400 + 1}, "/expiresInSec"),
        ({"requiredExecutorTrustLevel": "trustMe"}, "/requiredExecutorTrustLevel"),
        ({"allowedProfiles": [{"profileId": str(uuid.uuid4())}] * 17}, "/allowedProfiles"),
        ({"title": "t" * 256}, "/title"),
        ({"claimCondition": {"kind": "task_status", "taskId": str(uuid.uuid4())}}, None),
        ({"references": [{"role": "context"}]}, "/references/0"),
        ({"references": [{"role": "elsewhere", "taskId": None}]}, None),
        (
            {
                "input": {
                    "brief": "go on",
                    "continueFrom": {"taskId": str(uuid.uuid4())},
                    "execution": {"workspace": "shared_mount"},
                }
            },
            "/input",
        ),
    ],
)
async def test_create_rejects_an_invalid_body_and_writes_nothing(
    world: World, db_pool: Any, change: dict[str, Any], pointer: str | None
) -> None:
    before = await task_count(db_pool)
    status, body = await world.owner.call("POST", "/tasks", json=freeform(world, **change))
    assert status == 400, body
    assert body["type"].endswith(body["code"]) and body["errors"], body
    if pointer is not None:
        assert any(e["pointer"].startswith(pointer) for e in body["errors"]), body
    assert await task_count(db_pool) == before


async def test_unknown_input_field_is_named(world: World) -> None:
    status, body = await world.owner.call(
        "POST", "/tasks", json=freeform(world, input={"brief": "x", "sneaky": True})
    )
    assert (status, body["code"]) == (400, "task-input-invalid")
    assert [e["pointer"] for e in body["errors"]] == ["/input/sneaky"]


async def test_assess_brief_without_references_is_400(world: World, db_pool: Any) -> None:
    before = await task_count(db_pool)
    body = {
        "taskType": "assess_brief",
        "teamId": world.team_id,
        "diaryId": world.diary_id,
        "input": {
            "targetTaskId": str(uuid.uuid4()),
            "successCriteria": {
                "version": 1,
                "rubric": {
                    "rubricId": "r",
                    "version": "1",
                    "criteria": [
                        {"id": "c", "description": "d", "weight": 1, "scoring": "llm_score"}
                    ],
                },
            },
        },
    }
    status, problem = await world.owner.call("POST", "/tasks", json=body)
    assert status == 400 and problem["code"] == "references-required", problem
    assert problem["errors"] == [{"pointer": "/references", "message": "at least one is required"}]
    assert await task_count(db_pool) == before


async def test_idempotency_key_must_be_1_to_200_characters(world: World, db_pool: Any) -> None:
    before = await task_count(db_pool)
    for key in ("", "k" * 201):
        status, body = await world.owner.call(
            "POST", "/tasks", json=freeform(world), headers={"Idempotency-Key": key}
        )
        assert status == 400 and body["code"] == "invalid-idempotency-key", body
    assert await task_count(db_pool) == before


async def test_team_header_must_match_team_id(world: World) -> None:
    status, body = await world.owner.call(
        "POST", "/tasks", json=freeform(world), team=world.other_team_id
    )
    assert status == 400 and body["code"] == "team-mismatch", body


# --- create: the three 403s and the 404 -----------------------------------------------------------


async def test_create_without_task_write_scope_is_missing_scope(world: World, db_pool: Any) -> None:
    before = await task_count(db_pool)
    auth = await scoped_token(world.owner, "task:read")
    status, body = await call_with(world.owner, auth, "POST", "/tasks", json=freeform(world))
    assert status == 403 and body["code"] == "missing-scope", body
    assert await task_count(db_pool) == before


@pytest.mark.parametrize("who", ["member", "outsider"])
async def test_create_without_propose_tasks_is_403(world: World, db_pool: Any, who: str) -> None:
    before = await task_count(db_pool)
    status, body = await getattr(world, who).call("POST", "/tasks", json=freeform(world))
    assert status == 403 and body["code"] == "task-propose-forbidden", body
    assert await task_count(db_pool) == before


async def test_create_with_an_unreadable_provenance_diary_is_403(
    world: World, db_pool: Any
) -> None:
    before = await task_count(db_pool)
    status, body = await world.owner.call(
        "POST", "/tasks", json=freeform(world, diaryId=world.outsider_diary_id)
    )
    assert status == 403 and body["code"] == "provenance-diary-unreadable", body
    assert await task_count(db_pool) == before


async def test_create_with_a_nonexistent_diary_is_404(world: World, db_pool: Any) -> None:
    before = await task_count(db_pool)
    status, body = await world.owner.call(
        "POST", "/tasks", json=freeform(world, diaryId=str(uuid.uuid4()))
    )
    assert status == 404 and body["code"] == "diary-not-found", body
    assert await task_count(db_pool) == before


async def test_the_three_create_denials_have_distinct_codes(world: World) -> None:
    auth = await scoped_token(world.member, "task:read")
    scope = await call_with(world.member, auth, "POST", "/tasks", json=freeform(world))
    team = await world.member.call("POST", "/tasks", json=freeform(world))
    diary = await world.manager.call(
        "POST", "/tasks", json=freeform(world, diaryId=world.outsider_diary_id)
    )
    codes = [scope[1]["code"], team[1]["code"], diary[1]["code"]]
    assert [scope[0], team[0], diary[0]] == [403, 403, 403]
    assert len(set(codes)) == 3, codes


# --- create: checks against stored state (400) -------------------------------------------------


async def test_a_project_of_another_team_is_400(world: World, db_pool: Any) -> None:
    status, project = await world.outsider.call(
        "POST", f"/teams/{world.other_team_id}/projects", json={"name": "elsewhere"}
    )
    assert status == 201, project
    before = await task_count(db_pool)
    for project_id in (project["id"], str(uuid.uuid4())):
        status, body = await world.owner.call(
            "POST", "/tasks", json=freeform(world, projectId=project_id)
        )
        assert status == 400 and body["code"] == "project-not-found", body
        assert body["errors"][0]["pointer"] == "/projectId"
    assert await task_count(db_pool) == before


async def test_a_reference_to_an_unstaged_cid_is_400(world: World, db_pool: Any) -> None:
    before = await task_count(db_pool)
    cid = bytes_cid(b"never staged")
    ref = {"artifact": {"cid": cid}, "role": "context", "taskId": None}
    status, body = await world.owner.call("POST", "/tasks", json=freeform(world, references=[ref]))
    assert status == 400 and body["code"] == "artifact-not-staged", body
    assert body["errors"][0]["pointer"] == "/references/0/artifact/cid"
    assert await task_count(db_pool) == before


async def test_a_cid_staged_by_another_team_is_not_bindable(world: World, db_pool: Any) -> None:
    cid = bytes_cid(b"staged elsewhere")
    await db_pool.execute(
        "INSERT INTO artifact_blobs (cid, size_bytes) VALUES ($1, 16) ON CONFLICT DO NOTHING", cid
    )
    await db_pool.execute(
        "INSERT INTO staged_artifacts (team_id, cid) VALUES ($1, $2)",
        uuid.UUID(world.other_team_id),
        cid,
    )
    ref = {"artifact": {"cid": cid}, "role": "context"}
    status, body = await world.owner.call("POST", "/tasks", json=freeform(world, references=[ref]))
    assert status == 400 and body["code"] == "artifact-not-staged", body


async def test_a_claim_condition_on_an_invisible_task_is_400(world: World, db_pool: Any) -> None:
    foreign = await insert_task(
        db_pool,
        world,
        team_id=uuid.UUID(world.other_team_id),
        diary_id=uuid.UUID(world.outsider_diary_id),
        proposed_by_agent_id=world.outsider.subject_id,
    )
    before = await task_count(db_pool)
    for task_id in (foreign, uuid.uuid4()):
        condition = {"kind": "task_accepted", "taskId": str(task_id)}
        status, body = await world.owner.call(
            "POST", "/tasks", json=freeform(world, claimCondition=condition)
        )
        assert status == 400 and body["code"] == "claim-condition-task-not-found", body
    assert await task_count(db_pool) == before


def continuation(world: World, source: uuid.UUID, **extra: Any) -> dict[str, Any]:
    cont: dict[str, Any] = {"taskId": str(source), "mode": "extend", **extra}
    return freeform(world, input={"brief": "carry on", "continueFrom": cont})


async def test_continuation_source_rules(world: World, db_pool: Any) -> None:
    queued = await insert_task(db_pool, world)
    judged = await insert_task(db_pool, world, task_type="pr_review", status="completed")
    await insert_attempt(db_pool, judged, 1, world.executor, status="completed")
    foreign = await insert_task(
        db_pool,
        world,
        team_id=uuid.UUID(world.other_team_id),
        diary_id=uuid.UUID(world.outsider_diary_id),
        status="completed",
    )
    await insert_attempt(db_pool, foreign, 1, world.outsider, status="completed")
    done = await insert_task(db_pool, world, status="completed")
    await insert_attempt(db_pool, done, 1, world.executor, status="failed")
    await insert_attempt(db_pool, done, 2, world.executor, status="completed")
    before = await task_count(db_pool)
    cases = [
        (continuation(world, uuid.uuid4()), "continuation-source-not-found"),
        (continuation(world, foreign), "continuation-source-not-found"),
        (continuation(world, queued), "continuation-source-not-completed"),
        (continuation(world, judged), "continuation-type-mismatch"),
        (continuation(world, done, attemptN=1), "continuation-source-not-completed"),
        (continuation(world, done, attemptN=7), "continuation-source-not-completed"),
    ]
    for body, code in cases:
        status, problem = await world.owner.call("POST", "/tasks", json=body)
        assert status == 400 and problem["code"] == code, (body, problem)
        assert problem["errors"][0]["pointer"].startswith("/input/continueFrom")
    assert await task_count(db_pool) == before


async def test_continuation_may_not_change_its_project(world: World, db_pool: Any) -> None:
    status, project = await world.owner.call(
        "POST", f"/teams/{world.team_id}/projects", json={"name": f"p-{uuid.uuid4().hex[:6]}"}
    )
    assert status == 201, project
    source = await insert_task(db_pool, world, status="completed")
    await insert_attempt(db_pool, source, 1, world.executor, status="completed")
    before = await task_count(db_pool)
    body = continuation(world, source) | {"projectId": project["id"]}
    status, problem = await world.owner.call("POST", "/tasks", json=body)
    assert status == 400 and problem["code"] == "continuation-project-mismatch", problem
    assert problem["errors"][0]["pointer"] == "/projectId"
    assert await task_count(db_pool) == before


# --- create: success, idempotency, continuation (through the attempt workflow) --------------------


async def stage(world: World, db_pool: Any, data: bytes, content_type: str = "text/plain") -> str:
    """A staged artifact of the team (the row `PUT /task-artifacts/staged` leaves behind)."""
    cid = bytes_cid(data)
    await db_pool.execute(
        "INSERT INTO artifact_blobs (cid, size_bytes) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        cid,
        len(data),
    )
    await db_pool.execute(
        "INSERT INTO staged_artifacts (team_id, cid, content_type) VALUES ($1, $2, $3)"
        " ON CONFLICT DO NOTHING",
        uuid.UUID(world.team_id),
        cid,
        content_type,
    )
    return cid


async def test_create_answers_the_queued_task(world: World, db_pool: Any) -> None:
    correlation = str(uuid.uuid4())
    status, profile = await world.manager.call(
        "POST",
        "/runtime-profiles",
        json={"teamId": world.team_id, "name": f"p-{uuid.uuid4().hex[:8]}"},
        team=world.team_id,
    )
    assert status == 201, profile
    body = freeform(
        world,
        title="weekly summary",
        correlationId=correlation,
        maxAttempts=3,
        dispatchTimeoutSec=60,
        allowedProfiles=[{"profileId": profile["id"]}],
        requiredExecutorTrustLevel="agentSigned",
    )
    status, task = await world.manager.call("POST", "/tasks", json=body)
    assert status == 201, task
    assert task["status"] == "queued" and task["taskType"] == "freeform"
    assert task["teamId"] == world.team_id and task["diaryId"] == world.diary_id
    assert task["inputCid"] == json_cid(body["input"])
    assert task["inputSchemaCid"] == input_schema_cid("freeform")
    assert task["outputKind"] == "artifact" and task["title"] == "weekly summary"
    assert task["maxAttempts"] == 3 and task["dispatchTimeoutSec"] == 60
    assert task["runningTimeoutSec"] == 7200 and task["correlationId"] == correlation
    assert task["proposedByAgentId"] == str(world.manager.subject_id)
    assert "projectId" not in task  # General work
    expires = datetime.fromisoformat(task["expiresAt"])
    assert timedelta(days=89) < expires - datetime.now(UTC) <= timedelta(days=90)
    assert task["workflowId"] == f"task/{task['id']}"
    row = await db_pool.fetchrow(
        "SELECT status, team_id FROM tasks WHERE id = $1", uuid.UUID(task["id"])
    )
    assert row["status"] == "queued" and str(row["team_id"]) == world.team_id

    status, got = await world.member.call("GET", f"/tasks/{task['id']}")
    assert status == 200 and got == task


async def test_a_moltnet_diary_of_another_team_is_a_valid_provenance(world: World) -> None:
    # an agent executor may propose, but reads no private diary of the team (Team `access`)
    status, body = await world.executor.call("POST", "/tasks", json=freeform(world))
    assert status == 403 and body["code"] == "provenance-diary-unreadable", body
    status, task = await world.executor.call(
        "POST", "/tasks", json=freeform(world, diaryId=world.shared_diary_id)
    )
    assert status == 201, task
    assert task["diaryId"] == world.shared_diary_id


async def test_a_human_manager_creates_tasks(world: World) -> None:
    status, task = await world.human.call("POST", "/tasks", json=freeform(world))
    assert status == 201, task
    assert task["proposedByHumanId"] == str(world.human.subject_id)
    assert "proposedByAgentId" not in task


async def test_create_in_a_project_of_the_team(world: World) -> None:
    status, project = await world.owner.call(
        "POST", f"/teams/{world.team_id}/projects", json={"name": f"p-{uuid.uuid4().hex[:6]}"}
    )
    assert status == 201, project
    status, task = await world.owner.call(
        "POST", "/tasks", json=freeform(world, projectId=project["id"])
    )
    assert status == 201 and task["projectId"] == project["id"], task


async def test_references_bind_staged_artifacts(world: World, db_pool: Any) -> None:
    cid = await stage(world, db_pool, b"the brief, attached")
    titled = await stage(world, db_pool, b"second attachment", "application/json")
    refs = [
        {"artifact": {"cid": cid}, "role": "context", "taskId": None},
        {"artifact": {"cid": titled, "kind": "spec", "title": "Spec"}, "role": "context"},
    ]
    status, task = await world.owner.call("POST", "/tasks", json=freeform(world, references=refs))
    assert status == 201, task
    assert task["references"] == [
        {
            "artifact": {"cid": cid, "contentType": "text/plain", "kind": "input", "title": cid},
            "role": "context",
            "taskId": None,
        },
        {
            "artifact": {
                "cid": titled,
                "contentType": "application/json",
                "kind": "spec",
                "title": "Spec",
            },
            "role": "context",
            "taskId": None,
        },
    ]


async def test_references_become_task_artifact_rows(world: World, db_pool: Any) -> None:
    cid = await stage(world, db_pool, b"bound at creation")
    titled = await stage(world, db_pool, b"bound with a title", "application/json")
    refs = [
        {"artifact": {"cid": cid}, "role": "context", "taskId": None},
        {"artifact": {"cid": titled, "kind": "spec", "title": "Spec"}, "role": "context"},
    ]
    status, task = await world.owner.call("POST", "/tasks", json=freeform(world, references=refs))
    assert status == 201, task
    bound = await db_pool.fetch(
        "SELECT cid, kind, title, attempt_n, content_type, size_bytes FROM task_artifacts"
        " WHERE task_id = $1 ORDER BY kind",
        uuid.UUID(task["id"]),
    )
    assert [tuple(r.values()) for r in bound] == [
        (cid, "input", cid, None, "text/plain", len(b"bound at creation")),
        (titled, "spec", "Spec", None, "application/json", len(b"bound with a title")),
    ]


async def test_the_same_staged_cid_binds_to_several_tasks(world: World, db_pool: Any) -> None:
    cid = await stage(world, db_pool, b"shared input")
    ref = {"artifact": {"cid": cid}, "role": "context"}
    for _ in range(2):
        status, task = await world.owner.call(
            "POST", "/tasks", json=freeform(world, references=[ref])
        )
        assert status == 201, task
    assert await db_pool.fetchval("SELECT count(*) FROM task_artifacts WHERE cid = $1", cid) == 2


async def test_idempotency_key_replays_and_refuses_another_body(world: World, db_pool: Any) -> None:
    key = {"Idempotency-Key": f"k-{uuid.uuid4()}"}
    body = freeform(world, title="once")
    status, first = await world.owner.call("POST", "/tasks", json=body, headers=key)
    assert status == 201, first
    count = await task_count(db_pool)

    # the same body, with defaults spelled out and keys reordered, is the same request
    same = dict(reversed(list(body.items()))) | {"maxAttempts": 1, "references": []}
    status, again = await world.owner.call("POST", "/tasks", json=same, headers=key)
    assert status == 201 and again["id"] == first["id"], again
    assert await task_count(db_pool) == count

    status, problem = await world.owner.call(
        "POST", "/tasks", json=freeform(world, title="twice"), headers=key
    )
    assert status == 409 and problem["code"] == "idempotency-key-reused", problem
    assert await task_count(db_pool) == count

    # the key is scoped to its creator: another proposer gets its own task
    status, other = await world.manager.call("POST", "/tasks", json=body, headers=key)
    assert status == 201 and other["id"] != first["id"], other


async def test_concurrent_retries_with_one_key_make_one_task(world: World, db_pool: Any) -> None:
    import asyncio

    key = {"Idempotency-Key": f"race-{uuid.uuid4()}"}
    body = freeform(world, title="raced")
    results = await asyncio.gather(
        *(world.owner.call("POST", "/tasks", json=body, headers=key) for _ in range(5))
    )
    assert {status for status, _ in results} == {201}, results
    assert len({task["id"] for _, task in results}) == 1
    rows = await db_pool.fetchval(
        "SELECT count(*) FROM tasks WHERE idempotency_key = $1", key["Idempotency-Key"]
    )
    assert rows == 1


async def test_a_key_whose_creation_failed_is_409(world: World, db_pool: Any, stack: Any) -> None:
    """The workflow refused the insert (a reference no longer staged): the key names no task,
    and a retry says so instead of a 500."""
    from api.routes.tasks import _idempotent_task_id
    from api.task_flows import start_task_workflow
    from schemas.principals import Principal
    from schemas.tasks import TaskStart

    key = f"doomed-{uuid.uuid4()}"
    owner = Principal(
        subject_type="agent",
        identity_id=world.owner.identity_id,
        credential="oauth2",
        scopes=frozenset(),
        agent_id=world.owner.subject_id,
    )
    task_id = _idempotent_task_id(uuid.UUID(world.team_id), owner, key)
    gone = bytes_cid(b"unstaged before the insert")
    doomed = TaskStart(
        task_id=task_id,
        team_id=uuid.UUID(world.team_id),
        diary_id=uuid.UUID(world.diary_id),
        task_type="freeform",
        input={"brief": "x"},
        input_cid=json_cid({"brief": "x"}),
        input_schema_cid=input_schema_cid("freeform"),
        output_kind="artifact",
        references=[{"artifact": {"cid": gone}, "role": "context", "taskId": None}],
        proposed_by_agent_id=world.owner.subject_id,
    )
    with pytest.raises(Exception):  # noqa: B017 - the update fails with the workflow's problem
        await start_task_workflow(stack.temporal, stack.settings.temporal_task_queue, doomed)
    before = await task_count(db_pool)
    status, body = await world.owner.call(
        "POST", "/tasks", json=freeform(world), headers={"Idempotency-Key": key}
    )
    assert status == 409 and body["code"] == "idempotency-key-failed", body
    assert await task_count(db_pool) == before


async def test_continuation_inherits_project_and_waits_on_its_source(
    world: World, db_pool: Any
) -> None:
    status, project = await world.owner.call(
        "POST", f"/teams/{world.team_id}/projects", json={"name": f"p-{uuid.uuid4().hex[:6]}"}
    )
    assert status == 201, project
    source = await insert_task(
        db_pool, world, status="completed", project_id=uuid.UUID(project["id"])
    )
    await insert_attempt(db_pool, source, 1, world.executor, status="completed")

    status, task = await world.owner.call("POST", "/tasks", json=continuation(world, source))
    assert status == 201, task
    assert task["projectId"] == project["id"]
    assert task["claimCondition"] == {
        "kind": "task_status",
        "taskId": str(source),
        "statuses": ["completed"],
    }
    # naming the same project explicitly is allowed
    body = continuation(world, source, attemptN=1) | {"projectId": project["id"]}
    status, task = await world.owner.call("POST", "/tasks", json=body)
    assert status == 201 and task["projectId"] == project["id"], task


# --- list -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def listed(world: World, db_pool: Any) -> dict[str, uuid.UUID]:
    """A second team with known tasks, created oldest to newest at fixed times."""
    team_id = await _new_team(world.owner)
    await _add_member(world.owner, team_id, world.executor, "executor")
    diary_id = await _team_diary(world.owner, team_id)
    status, project = await world.owner.call(
        "POST", f"/teams/{team_id}/projects", json={"name": "alpha"}
    )
    assert status == 201, project
    base = datetime(2030, 1, 1, tzinfo=UTC)
    correlation = uuid.uuid4()
    common = {"team_id": uuid.UUID(team_id), "diary_id": uuid.UUID(diary_id)}
    specs: dict[str, dict[str, Any]] = {
        "done": {"status": "completed"},
        "gate_open": {"claim_condition": "done:task_status:completed"},
        "gate_closed": {"claim_condition": "running:task_status:completed"},
        "accepted": {"claim_condition": "done:task_accepted"},
        "running": {"status": "running", "correlation_id": correlation},
        "review": {
            "task_type": "pr_review",
            "output_kind": "judgment",
            "project_id": uuid.UUID(project["id"]),
            "correlation_id": correlation,
        },
        "plain": {},
    }
    ids: dict[str, uuid.UUID] = {name: uuid.uuid4() for name in specs}
    for i, (name, spec) in enumerate(specs.items()):
        condition = spec.pop("claim_condition", None)
        if condition is not None:
            gate, kind, *statuses = condition.split(":")
            spec["claim_condition"] = {"kind": kind, "taskId": str(ids[gate])} | (
                {"statuses": statuses} if statuses else {}
            )
        await insert_task(
            db_pool, world, id=ids[name], created_at=base + timedelta(minutes=i), **common, **spec
        )
    ids["team"] = uuid.UUID(team_id)
    ids["project"] = uuid.UUID(project["id"])
    ids["correlation"] = correlation
    ids["diary"] = uuid.UUID(diary_id)
    return ids


async def list_names(actor: Actor, listed: dict[str, uuid.UUID], **params: Any) -> list[str]:
    status, body = await actor.call("GET", "/tasks", team=listed["team"], params=params)
    assert status == 200, body
    names = {str(v): k for k, v in listed.items()}
    return [names[item["id"]] for item in body["items"]]


async def test_list_is_newest_first(world: World, listed: dict[str, uuid.UUID]) -> None:
    assert await list_names(world.owner, listed) == [
        "plain",
        "review",
        "running",
        "accepted",
        "gate_closed",
        "gate_open",
        "done",
    ]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"status": "completed"}, ["done"]),
        ({"statuses": "running,completed"}, ["running", "done"]),
        ({"taskType": "pr_review"}, ["review"]),
        ({"taskTypes": "pr_review,freeform", "status": "running"}, ["running"]),
        (
            {"projectId": "none", "status": "queued"},
            ["plain", "accepted", "gate_closed", "gate_open"],
        ),
        ({"claimable": "true"}, ["plain", "review", "accepted", "gate_open"]),
    ],
)
async def test_list_filters(
    world: World, listed: dict[str, uuid.UUID], params: dict[str, str], expected: list[str]
) -> None:
    assert await list_names(world.owner, listed, **params) == expected


async def test_list_filters_by_project_correlation_and_diary(
    world: World, listed: dict[str, uuid.UUID]
) -> None:
    assert await list_names(world.owner, listed, projectId=str(listed["project"])) == ["review"]
    assert await list_names(world.owner, listed, correlationId=str(listed["correlation"])) == [
        "review",
        "running",
    ]
    assert len(await list_names(world.owner, listed, diaryId=str(listed["diary"]))) == 7
    assert await list_names(world.owner, listed, diaryId=str(uuid.uuid4())) == []


async def test_list_rejects_bad_filters(world: World, listed: dict[str, uuid.UUID]) -> None:
    for params in (
        {"status": "waiting"},
        {"projectId": "nowhere"},
        {"limit": "0"},
        {"limit": "101"},
        {"colour": "blue"},
    ):
        status, body = await world.owner.call("GET", "/tasks", team=listed["team"], params=params)
        assert (status, body["code"]) == (400, "validation-failed"), (params, body)


async def test_list_pages_with_a_signed_cursor(world: World, listed: dict[str, uuid.UUID]) -> None:
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": "3"} | ({"cursor": cursor} if cursor else {})
        status, body = await world.owner.call("GET", "/tasks", team=listed["team"], params=params)
        assert status == 200, body
        seen += [item["id"] for item in body["items"]]
        pages += 1
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert pages == 3 and len(seen) == len(set(seen)) == 7
    names = {str(v): k for k, v in listed.items()}
    assert [names[i] for i in seen] == await list_names(world.owner, listed)


async def test_a_tampered_or_rebound_cursor_is_400(
    world: World, listed: dict[str, uuid.UUID]
) -> None:
    status, body = await world.owner.call(
        "GET", "/tasks", team=listed["team"], params={"limit": "2"}
    )
    cursor = body["nextCursor"]
    payload, tag = cursor.split(".")
    position = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    position["c"] = "2000-01-01T00:00:00+00:00"
    forged = base64.urlsafe_b64encode(json.dumps(position).encode()).decode().rstrip("=")
    for params in (
        {"cursor": f"{forged}.{tag}"},
        {"cursor": cursor[:-2] + ("AA" if not cursor.endswith("AA") else "BB")},
        {"cursor": "garbage"},
        {"cursor": cursor, "status": "queued"},  # the cursor is bound to its filters
    ):
        status, problem = await world.owner.call(
            "GET", "/tasks", team=listed["team"], params=params
        )
        assert status == 400 and problem["code"] == "invalid-cursor", (params, problem)
    status, problem = await world.owner.call(
        "GET", "/tasks", team=world.team_id, params={"cursor": cursor}
    )
    assert status == 400 and problem["code"] == "invalid-cursor"


async def test_list_needs_the_team_header_and_membership(
    world: World, listed: dict[str, uuid.UUID]
) -> None:
    status, body = await world.owner.call("GET", "/tasks")
    assert status == 400 and body["code"] == "team-required", body
    status, body = await world.outsider.call("GET", "/tasks", team=listed["team"])
    assert status == 404 and body["code"] == "team-not-found", body
    # a bare executor polls the queue of a team it belongs to
    assert len(await list_names(world.executor, listed, claimable="true")) == 4
    auth = await scoped_token(world.owner, "diary:read")
    status, body = await call_with(world.owner, auth, "GET", "/tasks", team=listed["team"])
    assert status == 403 and body["code"] == "missing-scope"


# --- get, attempts, grants ------------------------------------------------------------------------


async def test_get_is_for_the_owning_team(world: World, db_pool: Any) -> None:
    task_id = await insert_task(db_pool, world)
    for who in ("owner", "manager", "executor", "member", "human"):
        status, task = await getattr(world, who).call("GET", f"/tasks/{task_id}")
        assert status == 200 and task["id"] == str(task_id), (who, task)
    status, body = await world.outsider.call("GET", f"/tasks/{task_id}")
    assert status == 404 and body["code"] == "task-not-found"
    status, body = await world.owner.call("GET", f"/tasks/{uuid.uuid4()}")
    assert (status, body["code"]) == (404, "task-not-found")
    status, body = await world.owner.call("GET", f"/tasks/{task_id}", team=world.other_team_id)
    assert (status, body["code"]) == (404, "task-not-found")
    status, body = await world.owner.call("GET", "/tasks/not-a-uuid")
    assert (status, body["code"]) == (400, "validation-failed")


async def test_attempts_are_listed_in_order(world: World, db_pool: Any) -> None:
    task_id = await insert_task(db_pool, world, status="completed", attempt_count=2)
    await insert_attempt(db_pool, task_id, 2, world.executor, status="completed")
    await insert_attempt(db_pool, task_id, 1, world.executor, status="timed_out")
    status, body = await world.member.call("GET", f"/tasks/{task_id}/attempts")
    assert status == 200, body
    assert [(a["attemptN"], a["status"]) for a in body["items"]] == [
        (1, "timed_out"),
        (2, "completed"),
    ]
    assert body["items"][1]["output"] == {"summary": "done"}
    assert body["items"][0]["claimedByAgentId"] == str(world.executor.subject_id)
    # the executor named as people read it (the console's task page), without a lookup per row
    assert body["items"][0]["claimedByFingerprint"] == world.executor.fingerprint
    status, body = await world.outsider.call("GET", f"/tasks/{task_id}/attempts")
    assert (status, body["code"]) == (404, "task-not-found")


async def test_an_explicit_grantee_reads_by_id_only(world: World, db_pool: Any) -> None:
    task_id = await insert_task(db_pool, world)
    grantee = world.outsider
    assert (await grantee.call("GET", f"/tasks/{task_id}"))[0] == 404

    grant = {"subjectId": str(grantee.subject_id), "subjectNs": "Agent", "role": "writer"}
    status, body = await world.manager.call("POST", f"/tasks/{task_id}/grants", json=grant)
    assert status == 201, body
    assert body == {"taskId": str(task_id), **grant}
    tuples = await db_pool.fetch(
        "SELECT relation, subject_id FROM relation_tuples WHERE namespace = 'Task'"
        " AND object_id = $1",
        str(task_id),
    )
    assert [(t["relation"], t["subject_id"]) for t in tuples] == [
        ("writers", str(grantee.subject_id))
    ]

    status, got = await grantee.call("GET", f"/tasks/{task_id}", team=world.team_id)
    assert status == 200 and got["id"] == str(task_id), got
    assert (await grantee.call("GET", f"/tasks/{task_id}"))[0] == 200
    assert (await grantee.call("GET", f"/tasks/{task_id}/attempts"))[0] == 200
    # another team's context, or the owning team's list: not for a grantee
    assert (await grantee.call("GET", f"/tasks/{task_id}", team=world.other_team_id))[0] == 404
    assert (await grantee.call("GET", "/tasks", team=world.team_id))[0] == 404

    status, grants = await world.owner.call("GET", f"/tasks/{task_id}/grants")
    assert status == 200, grants
    assert [(g["subjectId"], g["role"]) for g in grants["items"]] == [
        (str(grantee.subject_id), "writer")
    ]

    status, body = await world.owner.call("DELETE", f"/tasks/{task_id}/grants", json=grant)
    assert status == 200 and body == {"revoked": True}, body
    assert (await grantee.call("GET", f"/tasks/{task_id}"))[0] == 404
    status, body = await world.owner.call("DELETE", f"/tasks/{task_id}/grants", json=grant)
    assert status == 200 and body == {"revoked": False}


async def test_grants_need_team_write_or_task_manager(world: World, db_pool: Any) -> None:
    task_id = await insert_task(db_pool, world)
    grant = {"subjectId": str(world.outsider.subject_id), "subjectNs": "Agent", "role": "manager"}
    for who in ("member", "executor"):
        status, body = await getattr(world, who).call(
            "POST", f"/tasks/{task_id}/grants", json=grant
        )
        assert status == 403 and body["code"] == "task-manage-forbidden", (who, body)
    status, body = await world.outsider.call("POST", f"/tasks/{task_id}/grants", json=grant)
    assert (status, body["code"]) == (404, "task-not-found")
    auth = await scoped_token(world.owner, "task:read task:write")
    status, body = await call_with(
        world.owner, auth, "POST", f"/tasks/{task_id}/grants", json=grant
    )
    assert status == 403 and body["code"] == "missing-scope"
    ghost = grant | {"subjectId": str(uuid.uuid4())}
    status, body = await world.owner.call("POST", f"/tasks/{task_id}/grants", json=ghost)
    assert status == 404 and body["code"] == "subject-not-found"
    none = await db_pool.fetchval(
        "SELECT count(*) FROM relation_tuples WHERE namespace = 'Task' AND object_id = $1",
        str(task_id),
    )
    assert none == 0

    # an explicit task manager may share the task in turn
    status, body = await world.owner.call("POST", f"/tasks/{task_id}/grants", json=grant)
    assert status == 201, body
    reader = {"subjectId": str(world.member.subject_id), "subjectNs": "Agent", "role": "writer"}
    status, body = await world.outsider.call("POST", f"/tasks/{task_id}/grants", json=reader)
    assert status == 201, body
