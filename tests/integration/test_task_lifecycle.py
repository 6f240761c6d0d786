"""The attempt lifecycle on the real stack (SPEC 3.1, 4.5, 5, 7): claim, heartbeat, complete,
fail, abort and cancel through REST, each row of the 3.1 table and each guard, with the rows,
tuples and workflow that result (or do not). Timers are tested on the time-skipping server
(tests/workflow_runs/test_task_workflow.py).

Who may claim: Task `claim` is the owning team's *agent executors* (or an explicit writer or
manager grant). A team owner is not an executor, so the crew below has executors joined
through an `executor` invite; the owner may create and cancel tasks but not claim them.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import signal
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import nacl.signing
import pytest
from actors import Actor, join_team
from waiting import db_clock_past, wait_until

from api.task_flows import start_task_workflow
from schemas.kernel.cids import json_cid
from schemas.kernel.task_types import input_schema_cid
from schemas.task_attempts import task_workflow_id
from schemas.tasks import TaskStart

pytestmark = pytest.mark.pgbouncer_smoke  # also behind pgbouncer (tests/conftest.py)

TRACEPARENT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
OUTPUT = {"summary": "Three lines of verse"}


# --- the crew: one team, each role, an outsider --------------------------------------------------


class Crew:
    owner: Actor
    manager: Actor
    executor: Actor
    executor2: Actor
    member: Actor
    outsider: Actor
    human_owner: Actor
    team_id: str
    diary_id: str


@pytest.fixture(scope="module")
async def crew(actors: Any) -> Crew:
    c = Crew()
    c.owner, c.manager, c.executor, c.executor2, c.member, c.outsider = [
        await actors.agent() for _ in range(6)
    ]
    c.human_owner = await actors.human()
    status, team = await c.owner.call("POST", "/teams", json={"name": "crew"})
    assert status == 201, team
    c.team_id = str(team["id"])
    await join_team(c.owner, c.team_id, c.manager, "manager")
    await join_team(c.owner, c.team_id, c.executor, "executor")
    await join_team(c.owner, c.team_id, c.executor2, "executor")
    await join_team(c.owner, c.team_id, c.member, "member")
    await join_team(c.owner, c.team_id, c.human_owner, "member")
    status, body = await c.owner.call(
        "PATCH", f"/teams/{c.team_id}/members/{c.human_owner.subject_id}", json={"role": "owner"}
    )
    assert status == 200, body
    status, diary = await c.owner.call(
        "POST", "/diaries", json={"name": "work", "visibility": "private"}, team=c.team_id
    )
    assert status == 201, diary
    c.diary_id = str(diary["id"])
    return c


async def create(crew: Crew, headers: dict[str, str] | None = None, **extra: Any) -> str:
    body = {
        "taskType": "freeform",
        "teamId": crew.team_id,
        "diaryId": crew.diary_id,
        "input": {"brief": "Write a haiku"},
        **extra,
    }
    status, task = await crew.owner.call(
        "POST", "/tasks", json=body, team=crew.team_id, headers=headers
    )
    assert status == 201, task
    return str(task["id"])


async def claim(actor: Actor, task_id: str, **body: Any) -> tuple[int, Any]:
    return await actor.call("POST", f"/tasks/{task_id}/claim", json=body)


async def heartbeat(actor: Actor, task_id: str, n: int = 1, **body: Any) -> tuple[int, Any]:
    return await actor.call("POST", f"/tasks/{task_id}/attempts/{n}/heartbeat", json=body)


async def complete(
    actor: Actor, task_id: str, n: int = 1, output: Any = None, **extra: Any
) -> tuple[int, Any]:
    output = OUTPUT if output is None else output
    body = {"output": output, "outputCid": json_cid(output), **extra}
    return await actor.call("POST", f"/tasks/{task_id}/attempts/{n}/complete", json=body)


async def fail(actor: Actor, task_id: str, n: int = 1, retryable: bool = False) -> tuple[int, Any]:
    error = {"code": "tool_crashed", "message": "the tool died", "retryable": retryable}
    return await actor.call("POST", f"/tasks/{task_id}/attempts/{n}/fail", json={"error": error})


async def abort(actor: Actor, task_id: str, n: int = 1, **body: Any) -> tuple[int, Any]:
    return await actor.call("POST", f"/tasks/{task_id}/attempts/{n}/abort", json=body)


async def cancel(actor: Actor, task_id: str, reason: str = "not needed") -> tuple[int, Any]:
    return await actor.call("POST", f"/tasks/{task_id}/cancel", json={"reason": reason})


async def started(crew: Crew, **extra: Any) -> str:
    """A task claimed by `crew.executor` whose attempt 1 has started."""
    task_id = await create(crew, **extra)
    status, body = await claim(crew.executor, task_id)
    assert status == 200, body
    status, body = await heartbeat(crew.executor, task_id)
    assert status == 200, body
    return task_id


async def task_row(db_pool: Any, task_id: str) -> Any:
    return await db_pool.fetchrow("SELECT * FROM tasks WHERE id = $1", uuid.UUID(task_id))


async def attempt_rows(db_pool: Any, task_id: str) -> list[Any]:
    return list(
        await db_pool.fetch(
            "SELECT * FROM task_attempts WHERE task_id = $1 ORDER BY attempt_n",
            uuid.UUID(task_id),
        )
    )


async def task_tuples(db_pool: Any, task_id: str) -> set[str]:
    rows = await db_pool.fetch(
        "SELECT relation, subject_ns, subject_id FROM relation_tuples"
        " WHERE namespace = 'Task' AND object_id = $1",
        task_id,
    )
    return {f"{r['relation']}@{r['subject_ns']}:{r['subject_id']}" for r in rows}


def claimant(actor: Actor) -> str:
    return f"claimant@Agent:{actor.subject_id}"


async def scoped(actor: Actor, scope: str) -> Actor:
    """The same agent with a token limited to `scope`."""
    form = {
        "grant_type": "client_credentials",
        "client_id": actor.client_id,
        "client_secret": actor.client_secret,
        "scope": scope,
    }
    async with actor.http.post("/oauth2/token", data=form) as response:
        token = await response.json(content_type=None)
        assert response.status == 200, token
    return Actor(
        kind=actor.kind,
        subject_id=actor.subject_id,
        identity_id=actor.identity_id,
        http=actor.http,
        auth={"Authorization": f"Bearer {token['access_token']}"},
        signing_key=actor.signing_key,
    )


def sign(actor: Actor, text: str) -> str:
    return actor.sign(text)


# --- (none) → queued -----------------------------------------------------------------------------


async def test_create_starts_the_workflow_with_the_task_row_and_tuples(
    crew: Crew, db_pool: Any, stack: Any
) -> None:
    task_id = await create(crew)
    row = await task_row(db_pool, task_id)
    assert row["status"] == "queued" and row["workflow_id"] == task_workflow_id(task_id)
    assert await task_tuples(db_pool, task_id) == {
        f"team@Team:{crew.team_id}",
        f"parent@Diary:{crew.diary_id}",
    }
    described = await stack.temporal.get_workflow_handle(task_workflow_id(task_id)).describe()
    attributes = {key.name: value for key, value in described.typed_search_attributes}
    assert attributes["TeamId"] == crew.team_id
    assert attributes["DiaryId"] == crew.diary_id
    assert attributes["TaskType"] == "freeform"


# --- queued → dispatched (claim) -----------------------------------------------------------------


async def test_claim_dispatches_with_a_lease_and_continues_the_creation_trace(
    crew: Crew, db_pool: Any, stack: Any
) -> None:
    trace_id = uuid.uuid4().hex
    task_id = await create(crew, headers={"traceparent": f"00-{trace_id}-{'1' * 16}-01"})
    async with crew.executor.http.post(
        f"/tasks/{task_id}/claim", json={}, headers=crew.executor.auth
    ) as response:
        body = await response.json()
        assert response.status == 200, body
        header = response.headers["traceparent"]
    assert set(body) == {"task", "attemptN", "attempt", "traceparent"}
    assert body["attemptN"] == 1 and body["traceparent"] == header
    assert TRACEPARENT.match(header) and header.split("-")[1] == trace_id
    assert body["task"]["status"] == "dispatched" and body["task"]["attemptCount"] == 1
    assert body["task"]["claimAgentId"] == str(crew.executor.subject_id)
    attempt = body["attempt"]
    assert attempt["status"] == "claimed" and attempt["attemptN"] == 1
    assert attempt["leaseTtlSec"] == 300 and attempt.get("startedAt") is None
    assert attempt["claimedByAgentId"] == str(crew.executor.subject_id)
    row = await task_row(db_pool, task_id)
    assert row["status"] == "dispatched" and row["attempt_count"] == 1
    lease = row["claim_expires_at"] - (await attempt_rows(db_pool, task_id))[0]["claimed_at"]
    assert lease.total_seconds() == 300
    assert claimant(crew.executor) in await task_tuples(db_pool, task_id)
    described = await stack.temporal.get_workflow_handle(task_workflow_id(task_id)).describe()
    attributes = {key.name: value for key, value in described.typed_search_attributes}
    assert attributes["AgentId"] == str(crew.executor.subject_id)


async def test_claim_takes_a_lease_ttl_within_bounds(crew: Crew, db_pool: Any) -> None:
    task_id = await create(crew)
    for bad in (0, 3601, "long"):
        status, body = await claim(crew.executor, task_id, leaseTtlSec=bad)
        assert (status, body["code"]) == (400, "validation-failed")
        assert body["errors"][0]["pointer"] == "/leaseTtlSec", body
    status, body = await claim(crew.executor, task_id, executorManifest={})
    assert (status, body["code"]) == (400, "validation-failed")
    assert body["errors"][0]["message"] == "Unknown field"
    assert (await task_row(db_pool, task_id))["status"] == "queued"
    status, body = await claim(crew.executor, task_id, leaseTtlSec=60)
    assert status == 200 and body["attempt"]["leaseTtlSec"] == 60


async def test_only_executors_and_grantees_claim(crew: Crew, db_pool: Any) -> None:
    task_id = await create(crew)
    # the owner, a manager and a member see the task but hold no claim
    for actor in (crew.owner, crew.manager, crew.member, crew.human_owner):
        status, body = await claim(actor, task_id)
        assert (status, body["code"]) == (403, "forbidden"), (actor.kind, body)
    status, body = await claim(crew.outsider, task_id)
    assert (status, body["code"]) == (404, "task-not-found"), body
    # a team header naming another team hides the task
    status, body = await crew.executor.call(
        "POST", f"/tasks/{task_id}/claim", json={}, team=uuid.uuid4()
    )
    assert (status, body["code"]) == (404, "task-not-found"), body
    # the scope is task:claim
    reader = await scoped(crew.executor, "task:read task:execute")
    status, body = await claim(reader, task_id)
    assert status == 403 and body["code"] == "missing-scope"
    assert await attempt_rows(db_pool, task_id) == []
    # an explicit writer grant lets an outsider claim
    status, body = await crew.owner.call(
        "POST",
        f"/tasks/{task_id}/grants",
        json={"subjectId": str(crew.outsider.subject_id), "subjectNs": "Agent", "role": "writer"},
        team=crew.team_id,
    )
    assert status == 201, body
    status, body = await claim(crew.outsider, task_id)
    assert status == 200, body


async def test_a_human_grantee_cannot_claim(crew: Crew, actors: Any) -> None:
    task_id = await create(crew)
    human = await actors.human()
    status, body = await crew.owner.call(
        "POST",
        f"/tasks/{task_id}/grants",
        json={"subjectId": str(human.subject_id), "subjectNs": "Human", "role": "writer"},
        team=crew.team_id,
    )
    assert status == 201, body
    status, body = await claim(human, task_id)
    assert status == 403 and body["code"] == "agents-only"


async def test_a_second_claim_is_409_and_writes_nothing(crew: Crew, db_pool: Any) -> None:
    task_id = await create(crew)
    assert (await claim(crew.executor, task_id))[0] == 200
    status, body = await claim(crew.executor2, task_id)
    assert status == 409 and body["code"] == "task-not-queued"
    assert len(await attempt_rows(db_pool, task_id)) == 1
    assert claimant(crew.executor2) not in await task_tuples(db_pool, task_id)


def accepted_updates(history: Any, name: str) -> int:
    return sum(
        1
        for event in history.events
        if event.HasField("workflow_execution_update_accepted_event_attributes")
        and event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        == name
    )


async def test_two_agents_race_for_a_claim_and_exactly_one_wins(
    crew: Crew, db_pool: Any, stack: Any
) -> None:
    for _ in range(50):
        task_id = await create(crew)
        results = await asyncio.gather(
            claim(crew.executor, task_id), claim(crew.executor2, task_id)
        )
        statuses = sorted(status for status, _ in results)
        assert statuses == [200, 409], results
        assert len(await attempt_rows(db_pool, task_id)) == 1
        winners = [
            actor
            for actor, (status, _) in zip((crew.executor, crew.executor2), results, strict=True)
            if status == 200
        ]
        assert {t for t in await task_tuples(db_pool, task_id) if t.startswith("claimant")} == {
            claimant(winners[0])
        }
        # the loser was refused before anything was written, in the workflow's history too
        handle = stack.temporal.get_workflow_handle(task_workflow_id(task_id))
        assert accepted_updates(await handle.fetch_history(), "claim") == 1


async def test_a_claim_condition_gates_claiming(crew: Crew) -> None:
    first = await create(crew)
    gated = await create(
        crew, claimCondition={"kind": "task_status", "taskId": first, "statuses": ["completed"]}
    )
    accepted = await create(crew, claimCondition={"kind": "task_accepted", "taskId": first})
    for task_id in (gated, accepted):
        status, body = await claim(crew.executor2, task_id)
        assert status == 409 and body["code"] == "claim-condition-unmet", body
    assert (await claim(crew.executor, first))[0] == 200
    assert (await heartbeat(crew.executor, first))[0] == 200
    assert (await complete(crew.executor, first))[0] == 200
    for task_id in (gated, accepted):
        status, body = await claim(crew.executor2, task_id)
        assert status == 200, body


# --- dispatched → running (first heartbeat), running → running -----------------------------------


async def test_the_first_heartbeat_starts_the_attempt_and_later_ones_renew_the_lease(
    crew: Crew, db_pool: Any
) -> None:
    task_id = await create(crew)
    assert (await claim(crew.executor, task_id, leaseTtlSec=120))[0] == 200
    status, body = await heartbeat(crew.executor, task_id)
    assert status == 200, body
    assert body["cancelled"] is False and body["cancelReason"] is None
    row, attempt = await task_row(db_pool, task_id), (await attempt_rows(db_pool, task_id))[0]
    assert row["status"] == "running" and attempt["status"] == "running"
    assert attempt["started_at"] == attempt["last_heartbeat_at"]
    first_expiry = row["claim_expires_at"]
    assert (first_expiry - attempt["started_at"]).total_seconds() == 120
    # the renewal must be dated after the first heartbeat: the clock has to have passed it
    await wait_until(lambda: datetime.now(UTC) > attempt["last_heartbeat_at"])
    sent = datetime.now(UTC)
    status, body = await heartbeat(crew.executor, task_id, leaseTtlSec=600)
    assert status == 200, body
    answered = datetime.fromisoformat(body["claimExpiresAt"])
    assert 600 <= (answered - sent).total_seconds() < 605
    # a later heartbeat is a signal: the workflow renews the lease and its rows catch up
    later = await until_attempt(db_pool, task_id, "running", lease_ttl_sec=600)
    row = await task_row(db_pool, task_id)
    assert later["started_at"] == attempt["started_at"]
    assert later["last_heartbeat_at"] > attempt["last_heartbeat_at"]
    assert row["claim_expires_at"] > first_expiry
    assert (row["claim_expires_at"] - later["last_heartbeat_at"]).total_seconds() == 600
    # the lease the worker was told ends no later than the one the workflow keeps
    assert answered <= row["claim_expires_at"]


async def test_only_the_claimant_heartbeats(crew: Crew, db_pool: Any) -> None:
    task_id = await create(crew)
    assert (await claim(crew.executor, task_id))[0] == 200
    for actor in (crew.executor2, crew.member, crew.owner):
        status, body = await heartbeat(actor, task_id)
        assert (status, body["code"]) == (403, "not-claimant"), body
    status, body = await heartbeat(crew.outsider, task_id)
    assert (status, body["code"]) == (404, "task-not-found"), body
    status, body = await heartbeat(crew.executor, task_id, n=2)
    assert status == 404, body
    status, body = await heartbeat(await scoped(crew.executor, "task:claim"), task_id)
    assert status == 403 and body["code"] == "missing-scope"
    assert (await attempt_rows(db_pool, task_id))[0]["status"] == "claimed"


# --- running → completed -------------------------------------------------------------------------


async def test_complete_stores_output_cid_signature_and_usage(crew: Crew, db_pool: Any) -> None:
    task_id = await started(crew)
    cid = json_cid(OUTPUT)
    usage = {"inputTokens": 10, "outputTokens": 20, "model": "m"}
    status, body = await complete(
        crew.executor, task_id, contentSignature=sign(crew.executor, cid), usage=usage
    )
    assert status == 200, body
    assert body["status"] == "completed" and body.get("claimAgentId") is None
    assert body["completedAt"] is not None
    attempt = (await attempt_rows(db_pool, task_id))[0]
    assert attempt["status"] == "completed" and attempt["finished_at"] is not None
    assert attempt["output"] == OUTPUT and attempt["output_cid"] == cid
    assert attempt["content_signature"] == sign(crew.executor, cid)
    assert attempt["usage"] == usage
    assert claimant(crew.executor) not in await task_tuples(db_pool, task_id)
    # a result arrives once
    status, body = await complete(crew.executor, task_id)
    assert (status, body["code"]) == (409, "attempt-finished"), body
    status, body = await fail(crew.executor, task_id)
    assert (status, body["code"]) == (409, "attempt-finished"), body
    status, body = await heartbeat(crew.executor, task_id)
    assert (status, body["code"]) == (409, "attempt-finished"), body


async def test_complete_before_the_first_heartbeat_is_409(crew: Crew, db_pool: Any) -> None:
    task_id = await create(crew)
    assert (await claim(crew.executor, task_id))[0] == 200
    for call in (complete, fail):
        status, body = await call(crew.executor, task_id)
        assert status == 409 and body["code"] == "attempt-not-started", body
    status, body = await abort(crew.executor, task_id)
    assert status == 409 and body["code"] == "attempt-not-started", body
    assert (await attempt_rows(db_pool, task_id))[0]["status"] == "claimed"


@pytest.mark.parametrize(
    ("output", "pointer"),
    [
        ({}, "/output/summary"),
        ({"summary": "ok", "extra": 1}, "/output/extra"),
        ({"summary": 3}, "/output/summary"),
    ],
)
async def test_an_output_failing_its_schema_is_400_with_pointers(
    crew: Crew, db_pool: Any, output: Any, pointer: str
) -> None:
    task_id = await started(crew)
    status, body = await complete(crew.executor, task_id, output=output)
    assert status == 400 and body["code"] == "task-output-invalid", body
    assert pointer in [error["pointer"] for error in body["errors"]]
    assert (await attempt_rows(db_pool, task_id))[0]["status"] == "running"


async def test_a_wrong_output_cid_or_signature_is_400(crew: Crew, db_pool: Any) -> None:
    task_id = await started(crew)
    body = {"output": OUTPUT, "outputCid": json_cid({"summary": "other"})}
    status, problem = await crew.executor.call(
        "POST", f"/tasks/{task_id}/attempts/1/complete", json=body
    )
    assert status == 400 and problem["code"] == "output-cid-mismatch", problem
    assert problem["errors"][0]["pointer"] == "/outputCid"
    stranger = nacl.signing.SigningKey.generate()
    forged = base64.b64encode(stranger.sign(json_cid(OUTPUT).encode()).signature).decode()
    for signature in (forged, sign(crew.executor, "something else"), "not base64!"):
        status, problem = await complete(crew.executor, task_id, contentSignature=signature)
        assert status == 400 and problem["code"] == "invalid-signature", problem
    status, problem = await complete(crew.executor, task_id, verdict="great")
    assert (status, problem["code"]) == (400, "validation-failed")
    assert problem["errors"][0]["pointer"] == "/verdict"
    attempt = (await attempt_rows(db_pool, task_id))[0]
    assert attempt["status"] == "running" and attempt["output"] is None


async def test_only_the_claimant_completes(crew: Crew, db_pool: Any) -> None:
    task_id = await started(crew)
    for actor in (crew.executor2, crew.owner):
        status, body = await complete(actor, task_id)
        assert status == 403 and body["code"] == "not-claimant", body
    status, body = await complete(crew.outsider, task_id)
    assert (status, body["code"]) == (404, "task-not-found"), body
    assert (await task_row(db_pool, task_id))["status"] == "running"


# --- fail ----------------------------------------------------------------------------------------


async def test_fail_requeues_a_retryable_error_while_attempts_remain(
    crew: Crew, db_pool: Any
) -> None:
    task_id = await started(crew, maxAttempts=2)
    status, body = await fail(crew.executor, task_id, retryable=True)
    assert status == 200 and body["status"] == "queued", body
    assert body.get("claimAgentId") is None and body.get("claimExpiresAt") is None
    attempt = (await attempt_rows(db_pool, task_id))[0]
    assert attempt["status"] == "failed"
    assert attempt["error"] == {
        "code": "tool_crashed",
        "message": "the tool died",
        "retryable": True,
    }
    assert claimant(crew.executor) not in await task_tuples(db_pool, task_id)
    # the second (last) attempt fails for good, retryable or not
    status, body = await claim(crew.executor2, task_id)
    assert status == 200 and body["attemptN"] == 2
    assert (await heartbeat(crew.executor2, task_id, n=2))[0] == 200
    status, body = await fail(crew.executor2, task_id, n=2, retryable=True)
    assert status == 200 and body["status"] == "failed", body
    assert [a["status"] for a in await attempt_rows(db_pool, task_id)] == ["failed", "failed"]


async def test_a_non_retryable_failure_fails_the_task(crew: Crew, db_pool: Any) -> None:
    task_id = await started(crew, maxAttempts=3)
    status, body = await fail(crew.executor, task_id)
    assert status == 200 and body["status"] == "failed", body
    assert (await task_row(db_pool, task_id))["completed_at"] is not None
    status, body = await fail(crew.executor, task_id)
    assert (status, body["code"]) == (409, "attempt-finished"), body


async def test_fail_bodies_are_closed(crew: Crew) -> None:
    task_id = await started(crew)
    for error in ({"code": "x"}, {"code": "x", "message": "y", "stack": "z"}, {}):
        status, body = await crew.executor.call(
            "POST", f"/tasks/{task_id}/attempts/1/fail", json={"error": error}
        )
        assert (status, body["code"]) == (400, "validation-failed"), body


# --- abort ---------------------------------------------------------------------------------------


async def test_abort_requeues_or_fails_and_clears_the_claim(crew: Crew, db_pool: Any) -> None:
    task_id = await started(crew, maxAttempts=2)
    status, body = await abort(crew.executor, task_id, reason="shutting down")
    assert status == 200 and body["status"] == "queued", body
    assert body.get("cancelledByAgentId") is None and body.get("cancelReason") is None
    attempt = (await attempt_rows(db_pool, task_id))[0]
    assert attempt["status"] == "aborted"
    assert attempt["error"] == {"code": "aborted", "message": "shutting down"}
    assert claimant(crew.executor) not in await task_tuples(db_pool, task_id)
    # late results from the aborted attempt are refused
    for call in (complete, fail, abort):
        status, body = await call(crew.executor, task_id)
        assert status == 409 and body["code"] == "attempt-finished", body
    # the last attempt aborted: failed
    assert (await claim(crew.executor, task_id))[0] == 200
    assert (await heartbeat(crew.executor, task_id, n=2))[0] == 200
    status, body = await abort(crew.executor, task_id, n=2)
    assert status == 200 and body["status"] == "failed", body
    row = await task_row(db_pool, task_id)
    assert row["cancel_reason"] is None and row["cancelled_at"] is None


async def test_only_the_current_claimant_aborts(crew: Crew, db_pool: Any) -> None:
    task_id = await started(crew)
    for actor in (crew.executor2, crew.manager, crew.owner):
        status, body = await abort(actor, task_id)
        assert (status, body["code"]) == (403, "not-claimant"), body
    status, body = await abort(crew.outsider, task_id)
    assert (status, body["code"]) == (404, "task-not-found"), body
    status, body = await abort(crew.executor, task_id, reason="x" * 513)
    assert (status, body["code"]) == (400, "validation-failed"), body
    assert (await attempt_rows(db_pool, task_id))[0]["status"] == "running"


# --- any non-terminal → cancelled ----------------------------------------------------------------


async def test_owners_managers_and_task_managers_cancel(crew: Crew, db_pool: Any) -> None:
    for actor in (crew.owner, crew.manager):
        task_id = await create(crew)
        status, body = await cancel(actor, task_id, reason="changed my mind")
        assert status == 200 and body["status"] == "cancelled", body
        assert body["cancelledByAgentId"] == str(actor.subject_id)
        assert body["cancelReason"] == "changed my mind" and body["cancelledAt"] is not None
    task_id = await create(crew)
    status, body = await cancel(crew.human_owner, task_id)
    assert status == 200 and body["cancelledByHumanId"] == str(crew.human_owner.subject_id)
    assert body.get("cancelledByAgentId") is None
    # an explicit task manager from outside the team
    task_id = await create(crew)
    status, body = await crew.owner.call(
        "POST",
        f"/tasks/{task_id}/grants",
        json={"subjectId": str(crew.outsider.subject_id), "subjectNs": "Agent", "role": "manager"},
        team=crew.team_id,
    )
    assert status == 201, body
    status, body = await cancel(crew.outsider, task_id)
    assert status == 200 and body["status"] == "cancelled", body


async def test_others_cannot_cancel(crew: Crew, db_pool: Any) -> None:
    task_id = await create(crew)
    for actor in (crew.member, crew.executor):
        status, body = await cancel(actor, task_id)
        assert (status, body["code"]) == (403, "forbidden"), body
    status, body = await cancel(crew.outsider, task_id)
    assert (status, body["code"]) == (404, "task-not-found"), body
    status, body = await crew.owner.call("POST", f"/tasks/{task_id}/cancel", json={})
    assert (status, body["code"]) == (400, "validation-failed")
    assert body["errors"][0]["pointer"] == "/reason"
    status, body = await cancel(crew.owner, task_id, reason="")
    assert status == 400, body
    status, body = await cancel(await scoped(crew.owner, "task:read task:write"), task_id)
    assert status == 403 and body["code"] == "missing-scope"
    assert (await task_row(db_pool, task_id))["status"] == "queued"


async def test_the_worker_learns_of_a_cancel_on_its_next_heartbeat(
    crew: Crew, db_pool: Any, stack: Any
) -> None:
    task_id = await started(crew)
    status, body = await cancel(crew.owner, task_id, reason="the brief changed")
    assert status == 200 and body["status"] == "cancelled", body
    attempt = (await attempt_rows(db_pool, task_id))[0]
    assert attempt["status"] == "cancelled"
    assert claimant(crew.executor) in await task_tuples(db_pool, task_id)  # kept: it heartbeats
    handle = stack.temporal.get_workflow_handle(task_workflow_id(task_id))
    await handle.result()  # a cancelled task's workflow ends
    for _ in range(2):
        status, body = await heartbeat(crew.executor, task_id)
        assert status == 200, body
        assert body["cancelled"] is True and body["cancelReason"] == "the brief changed"
    for call in (complete, fail, abort):
        status, body = await call(crew.executor, task_id)
        assert (status, body["code"]) == (409, "attempt-finished"), body
    # cancelling again is the decision already made: 200, the first reason kept
    status, body = await cancel(crew.owner, task_id, reason="another reason")
    assert (status, body["status"], body["cancelReason"]) == (200, "cancelled", "the brief changed")
    assert (await task_row(db_pool, task_id))["cancel_reason"] == "the brief changed"


async def test_cancelling_a_dispatched_task_cancels_its_attempt(crew: Crew, db_pool: Any) -> None:
    task_id = await create(crew)
    assert (await claim(crew.executor, task_id))[0] == 200
    status, body = await cancel(crew.manager, task_id)
    assert status == 200 and body["status"] == "cancelled", body
    assert (await attempt_rows(db_pool, task_id))[0]["status"] == "cancelled"
    status, body = await heartbeat(crew.executor, task_id)
    assert status == 200 and body["cancelled"] is True


async def test_terminal_tasks_cannot_be_cancelled_or_claimed(crew: Crew) -> None:
    task_id = await started(crew)
    assert (await complete(crew.executor, task_id))[0] == 200
    status, body = await cancel(crew.owner, task_id)
    assert status == 409 and body["code"] == "task-finished", body
    status, body = await claim(crew.executor2, task_id)
    assert status == 409 and body["code"] == "task-not-queued", body


# --- a worker killed in the middle of an attempt (dev server, real processes) --------------------

WORKER_SCRIPT = """
import asyncio, sys
from temporalio.worker import Worker
from infra.settings import Settings
from infra.temporal import connect
from workers.interceptors import DomainErrorInterceptor
from workers.main import worker_pool
from workers.registry import WORKFLOWS, ActivityDeps, activities
from workers.versioning import deployment_config, worker_version

async def main(queue):
    settings = Settings()
    client = await connect(settings, tracing=False)
    pool = await worker_pool(settings)
    deps = ActivityDeps(pool, settings.secret_ring)
    # versioned like every worker of this code (the stack's version is current)
    async with Worker(client, task_queue=queue, workflows=list(WORKFLOWS),
                      activities=activities(deps), interceptors=[DomainErrorInterceptor()],
                      deployment_config=deployment_config(worker_version(settings))):
        print("ready", flush=True)
        await asyncio.Event().wait()

asyncio.run(main(sys.argv[1]))
"""


class WorkerProcess:
    """A worker of every workflow and activity on its own task queue, in its own process, so
    that a test can SIGKILL it mid-attempt."""

    def __init__(self, stack: Any, queue: str) -> None:
        self.stack, self.queue = stack, queue
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        settings = self.stack.settings
        env = {
            **os.environ,
            "SERVICE_DATABASE_URL": settings.database_url,
            "SERVICE_DATABASE_TRANSACTION_POOLER": str(settings.database_transaction_pooler),
            "SERVICE_TEMPORAL_ADDRESS": settings.temporal_address,
            "SERVICE_SECRET_KEY": settings.secret_key.get_secret_value(),
        }
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WORKER_SCRIPT,
            self.queue,
            env=env,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), timeout=60)
        assert line.strip() == b"ready", line

    async def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()


async def start_on(stack: Any, queue: str, crew: Crew) -> uuid.UUID:
    """A task whose workflow runs on `queue` (the API would start it on the service's queue;
    the routes reach it by workflow id either way)."""
    task_input = {"brief": "survive a crash"}
    start = TaskStart(
        task_id=uuid.uuid4(),
        team_id=uuid.UUID(crew.team_id),
        diary_id=uuid.UUID(crew.diary_id),
        task_type="freeform",
        input=task_input,
        input_cid=json_cid(task_input),
        input_schema_cid=input_schema_cid("freeform"),
        output_kind="artifact",
        proposed_by_agent_id=crew.owner.subject_id,
    )
    await start_task_workflow(stack.temporal, queue, start)
    return start.task_id


async def until_attempt(
    db_pool: Any, task_id: str, status: str, limit_s: float = 30, **columns: Any
) -> Any:
    """The last attempt's row once it has `status` (and the given column values)."""
    deadline = time.monotonic() + limit_s
    while True:
        rows = await attempt_rows(db_pool, task_id)
        wanted = {"status": status, **columns}
        if rows and all(rows[-1][name] == value for name, value in wanted.items()):
            return rows[-1]
        assert time.monotonic() < deadline, rows
        await asyncio.sleep(0.1)


async def test_a_killed_worker_is_replaced_and_the_lease_still_runs_out_on_time(
    crew: Crew, db_pool: Any, stack: Any
) -> None:
    queue = f"crash-{uuid.uuid4().hex[:8]}"
    first = WorkerProcess(stack, queue)
    await first.start()
    task_id = str(await start_on(stack, queue, crew))
    assert (await claim(crew.executor, task_id))[0] == 200
    assert (await heartbeat(crew.executor, task_id))[0] == 200
    await first.kill()
    second = WorkerProcess(stack, queue)
    await second.start()
    try:
        # the new worker rebuilds the run from its history: the attempt goes on
        status, body = await heartbeat(crew.executor, task_id, leaseTtlSec=2)
        assert status == 200 and body["cancelled"] is False, body
        beat = await until_attempt(db_pool, task_id, "running", lease_ttl_sec=2)
        assert beat["started_at"] < beat["last_heartbeat_at"]
        attempt = await until_attempt(db_pool, task_id, "timed_out")
        assert attempt["timeout_reason"] == "lease_expired"
        assert (attempt["finished_at"] - beat["last_heartbeat_at"]).total_seconds() == 2
        assert (await task_row(db_pool, task_id))["status"] == "failed"
    finally:
        await second.kill()


async def test_a_lease_that_runs_out_while_no_worker_runs_is_dated_on_schedule(
    crew: Crew, db_pool: Any, stack: Any
) -> None:
    queue = f"crash-{uuid.uuid4().hex[:8]}"
    first = WorkerProcess(stack, queue)
    await first.start()
    task_id = str(await start_on(stack, queue, crew))
    assert (await claim(crew.executor, task_id, leaseTtlSec=1))[0] == 200
    assert (await heartbeat(crew.executor, task_id))[0] == 200
    beat = (await attempt_rows(db_pool, task_id))[0]
    await first.kill()
    # the lease runs out with no worker at all (the behaviour under test: time passes)
    lapsed = beat["last_heartbeat_at"] + timedelta(seconds=1)
    await wait_until(lambda: db_clock_past(db_pool, lapsed))
    assert (await attempt_rows(db_pool, task_id))[0]["status"] == "running"
    second = WorkerProcess(stack, queue)
    await second.start()
    try:
        attempt = await until_attempt(db_pool, task_id, "timed_out")
        assert (attempt["finished_at"] - beat["last_heartbeat_at"]).total_seconds() == 1
    finally:
        await second.kill()


async def test_a_claim_retried_with_its_key_answers_the_attempt_it_was_granted(
    crew: Crew, db_pool: Any
) -> None:
    task_id = await create(crew)
    key = {"Idempotency-Key": f"claim-{uuid.uuid4()}"}
    path = f"/tasks/{task_id}/claim"
    status, first = await crew.executor.call("POST", path, json={}, headers=key)
    assert status == 200, first
    status, again = await crew.executor.call("POST", path, json={}, headers=key)
    assert status == 200, again
    assert (again["attemptN"], again["attempt"]["id"]) == (
        first["attemptN"],
        first["attempt"]["id"],
    )
    # without the key, or with it and another body, it is a second claim: the task is taken
    status, problem = await crew.executor.call("POST", path, json={})
    assert (status, problem["code"]) == (409, "task-not-queued")
    status, problem = await crew.executor.call("POST", path, json={"leaseTtlSec": 60}, headers=key)
    assert (status, problem["code"]) == (409, "task-not-queued")
    assert len(await attempt_rows(db_pool, task_id)) == 1
