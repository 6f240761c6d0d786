"""Streamed task messages on the real stack (SPEC 4.5, DECISIONS "Tasks"): the one write the
API makes itself. Attempts are brought to each state through the real routes (create, claim,
heartbeat, abort), so the claimant and state checks run against what the attempt workflow
projects. `seq` is server-assigned and gapless per attempt, also under concurrent appends;
every refusal leaves no message behind.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

import pytest
from actors import Actor


class Crew:
    owner: Actor  # proposes
    executor: Actor  # claims
    member: Actor  # sees the task, is not its claimant
    outsider: Actor
    team_id: str
    diary_id: str


@pytest.fixture(scope="module")
async def crew(actors: Any) -> Crew:
    c = Crew()
    c.owner, c.executor = await actors.agent(), await actors.agent()
    c.member, c.outsider = await actors.agent(), await actors.agent()
    status, team = await c.owner.call("POST", "/teams", json={"name": "streamers"})
    assert status == 201, team
    c.team_id = team["id"]
    for actor, role in ((c.executor, "executor"), (c.member, "member")):
        status, invite = await c.owner.call(
            "POST", f"/teams/{c.team_id}/invites", json={"role": role}
        )
        assert status == 201, invite
        status, joined = await actor.call("POST", "/teams/join", json={"code": invite["code"]})
        assert status == 200, joined
    status, diary = await c.owner.call(
        "POST", "/diaries", json={"name": "log", "visibility": "private"}, team=c.team_id
    )
    assert status == 201, diary
    c.diary_id = diary["id"]
    return c


async def claimed(crew: Crew) -> str:
    """A task claimed by the executor, its attempt 1 not started yet; returns the task id."""
    body = {
        "taskType": "freeform",
        "teamId": crew.team_id,
        "diaryId": crew.diary_id,
        "input": {"brief": "stream something"},
    }
    status, task = await crew.owner.call("POST", "/tasks", json=body)
    assert status == 201, task
    status, claim = await crew.executor.call(
        "POST", f"/tasks/{task['id']}/claim", json={}, team=crew.team_id
    )
    assert status == 200 and claim["attemptN"] == 1, claim
    return str(task["id"])


async def running(crew: Crew) -> str:
    task_id = await claimed(crew)
    status, beat = await crew.executor.call(
        "POST", f"/tasks/{task_id}/attempts/1/heartbeat", json={}, team=crew.team_id
    )
    assert status == 200 and beat["cancelled"] is False, beat
    return task_id


async def post(actor: Actor, task_id: str, body: Any, n: int = 1) -> tuple[int, Any]:
    return await actor.call("POST", f"/tasks/{task_id}/attempts/{n}/messages", json=body)


async def stored(db_pool: Any, task_id: str) -> list[tuple[int, str, Any]]:
    rows = await db_pool.fetch(
        "SELECT m.seq, m.kind, m.payload FROM task_messages m"
        " JOIN task_attempts a ON a.id = m.attempt_id WHERE a.task_id = $1 ORDER BY m.seq",
        uuid.UUID(task_id),
    )
    return [(r["seq"], r["kind"], r["payload"]) for r in rows]


# --- append and read ------------------------------------------------------------------------------


async def test_single_and_batch_appends_number_messages_in_order(crew: Crew, db_pool: Any) -> None:
    task_id = await running(crew)
    status, body = await post(crew.executor, task_id, {"kind": "log", "payload": "starting"})
    assert status == 201 and body == {"count": 1, "firstSeq": 1, "lastSeq": 1}, body
    batch = {
        "messages": [
            {"kind": "progress", "payload": {"done": 1, "of": 3}},
            {"kind": "text_delta", "payload": "Hel"},
            {"kind": "tool_call", "payload": [1, 2.5, None, True]},
            {"kind": "info", "payload": None},
        ]
    }
    status, body = await post(crew.executor, task_id, batch)
    assert status == 201 and body == {"count": 4, "firstSeq": 2, "lastSeq": 5}, body
    assert await stored(db_pool, task_id) == [
        (1, "log", "starting"),
        (2, "progress", {"done": 1, "of": 3}),
        (3, "text_delta", "Hel"),
        (4, "tool_call", [1, 2.5, None, True]),
        (5, "info", None),
    ]

    status, page = await crew.member.call("GET", f"/tasks/{task_id}/attempts/1/messages")
    assert status == 200, page
    assert [(m["seq"], m["kind"], m["payload"]) for m in page["items"]] == [
        (1, "log", "starting"),
        (2, "progress", {"done": 1, "of": 3}),
        (3, "text_delta", "Hel"),
        (4, "tool_call", [1, 2.5, None, True]),
        (5, "info", None),
    ]
    assert page["lastSeq"] == 5
    first = page["items"][0]
    assert first["taskId"] == task_id and first["attemptN"] == 1 and first["timestamp"]
    stored_ids = await db_pool.fetch(
        "SELECT m.id FROM task_messages m JOIN task_attempts a ON a.id = m.attempt_id"
        " WHERE a.task_id = $1 ORDER BY m.seq",
        uuid.UUID(task_id),
    )
    # each message carries its own id (SPEC 2.6), the row's, beside its seq
    assert [m["id"] for m in page["items"]] == [str(r["id"]) for r in stored_ids]
    assert len(set(m["id"] for m in page["items"])) == 5

    status, page = await crew.owner.call(
        "GET", f"/tasks/{task_id}/attempts/1/messages", params={"afterSeq": "2", "limit": "2"}
    )
    assert status == 200 and [m["seq"] for m in page["items"]] == [3, 4], page
    status, page = await crew.owner.call(
        "GET", f"/tasks/{task_id}/attempts/1/messages", params={"afterSeq": "5"}
    )
    assert status == 200 and page == {"items": [], "lastSeq": None}


async def test_a_full_batch_of_200_is_accepted(crew: Crew, db_pool: Any) -> None:
    task_id = await running(crew)
    batch = {"messages": [{"kind": "text_delta", "payload": f"t{i}"} for i in range(200)]}
    status, body = await post(crew.executor, task_id, batch)
    assert status == 201 and body == {"count": 200, "firstSeq": 1, "lastSeq": 200}, body
    status, page = await crew.owner.call("GET", f"/tasks/{task_id}/attempts/1/messages")
    assert status == 200 and len(page["items"]) == 200
    assert [m["payload"] for m in page["items"]] == [f"t{i}" for i in range(200)]


async def test_concurrent_appends_get_gapless_seqs(crew: Crew, db_pool: Any) -> None:
    task_id = await running(crew)

    async def append(writer: int) -> tuple[int, Any]:
        size = 1 + writer % 7
        batch = [{"kind": "log", "payload": {"w": writer, "i": i}} for i in range(size)]
        return await post(crew.executor, task_id, {"messages": batch})

    results = await asyncio.gather(*(append(w) for w in range(40)))
    assert {status for status, _ in results} == {201}, results
    total = sum(1 + w % 7 for w in range(40))
    ranges = sorted((body["firstSeq"], body["lastSeq"]) for _, body in results)
    # each batch got one contiguous run, and the runs tile 1..total without gap or overlap
    assert ranges[0][0] == 1 and ranges[-1][1] == total
    assert all(prev[1] + 1 == nxt[0] for prev, nxt in itertools.pairwise(ranges))
    rows = await stored(db_pool, task_id)
    assert [seq for seq, _, _ in rows] == list(range(1, total + 1))
    # a batch's messages stay in their order inside its run
    for _, body in results:
        payloads = [p for seq, _, p in rows if body["firstSeq"] <= seq <= body["lastSeq"]]
        assert [p["i"] for p in payloads] == list(range(body["count"]))
        assert len({p["w"] for p in payloads}) == 1


# --- who may append, and when ---------------------------------------------------------------------


async def test_only_the_claimant_appends(crew: Crew, db_pool: Any) -> None:
    task_id = await running(crew)
    message = {"kind": "log", "payload": "not mine"}
    for who in (crew.owner, crew.member):
        status, body = await post(who, task_id, message)
        assert status == 403 and body["code"] == "not-claimant", body
    status, body = await post(crew.outsider, task_id, message)
    assert status == 404 and body["code"] == "task-not-found", body
    assert await stored(db_pool, task_id) == []
    status, body = await post(crew.executor, task_id, message)
    assert status == 201


async def test_the_claimant_posts_from_the_claim_on_before_the_first_heartbeat(
    crew: Crew, db_pool: Any
) -> None:
    """DECISIONS "Trust at the edges": an executor logs while it starts up; a report (complete,
    fail, an output) still waits for the first heartbeat."""
    task_id = await claimed(crew)
    message = {"kind": "log", "payload": "early"}
    for who in (crew.owner, crew.member):
        status, body = await post(who, task_id, message)
        assert status == 403 and body["code"] == "not-claimant", body
    assert await stored(db_pool, task_id) == []
    status, body = await post(crew.executor, task_id, message)
    assert status == 201 and body["firstSeq"] == 1, body
    attempt = await db_pool.fetchval(
        "SELECT status FROM task_attempts WHERE task_id = $1", uuid.UUID(task_id)
    )
    assert attempt == "claimed"  # posting is no heartbeat: the attempt has not started
    assert await stored(db_pool, task_id) == [(1, "log", "early")]


async def test_a_terminal_attempt_takes_no_messages(crew: Crew, db_pool: Any) -> None:
    task_id = await running(crew)
    status, body = await post(crew.executor, task_id, {"kind": "log", "payload": "before"})
    assert status == 201
    status, aborted = await crew.executor.call(
        "POST", f"/tasks/{task_id}/attempts/1/abort", json={}, team=crew.team_id
    )
    assert status == 200, aborted
    status, body = await post(crew.executor, task_id, {"kind": "log", "payload": "after"})
    assert status == 409 and body["code"] == "attempt-finished", body
    assert await stored(db_pool, task_id) == [(1, "log", "before")]


async def test_unknown_attempts_and_tasks_are_404(crew: Crew) -> None:
    task_id = await running(crew)
    status, body = await post(crew.executor, task_id, {"kind": "log", "payload": 1}, n=2)
    assert status == 404 and body["code"] == "attempt-not-found", body
    status, body = await post(crew.executor, str(uuid.uuid4()), {"kind": "log", "payload": 1})
    assert status == 404
    status, body = await crew.owner.call("GET", f"/tasks/{task_id}/attempts/2/messages")
    assert status == 404 and body["code"] == "attempt-not-found"


@pytest.mark.parametrize("n", [2**31, 10**30])
async def test_an_attempt_number_beyond_a_postgres_integer_is_400_not_500(
    crew: Crew, n: int
) -> None:
    """Found by schemathesis: the path's `n` went into SQL and overflowed (500)."""
    task_id = await running_task(crew)
    for method, path, body in [
        ("POST", f"/tasks/{task_id}/attempts/{n}/messages", {"kind": "log", "payload": 1}),
        ("GET", f"/tasks/{task_id}/attempts/{n}/messages", None),
        ("POST", f"/tasks/{task_id}/attempts/{n}/abort", {}),
        ("POST", f"/tasks/{task_id}/attempts/{n}/fail", {"error": {"message": "x", "code": "x"}}),
    ]:
        status, problem = await crew.executor.call(method, path, json=body)
        assert status == 400 and problem["code"] == "validation-failed", (method, problem)
        assert "/path/n" in {e["pointer"] for e in problem["errors"]}, (method, problem)
    status, problem = await crew.owner.call(
        "GET", f"/tasks/{task_id}/attempts/1/messages", params={"afterSeq": str(n)}
    )
    assert (status, problem["code"]) == (400, "validation-failed")
    assert problem["errors"][0]["pointer"] == "/query/afterSeq", problem


async def test_appending_needs_task_execute(crew: Crew, db_pool: Any) -> None:
    task_id = await running(crew)
    form = {
        "grant_type": "client_credentials",
        "client_id": crew.executor.client_id,
        "client_secret": crew.executor.client_secret,
        "scope": "task:read task:claim",
    }
    async with crew.executor.http.post("/oauth2/token", data=form) as response:
        token = (await response.json())["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    async with crew.executor.http.post(
        f"/tasks/{task_id}/attempts/1/messages",
        json={"kind": "log", "payload": 1},
        headers=headers,
    ) as response:
        body = await response.json(content_type=None)
        assert response.status == 403 and body["code"] == "missing-scope", body
    async with crew.executor.http.get(
        f"/tasks/{task_id}/attempts/1/messages", headers=headers
    ) as response:
        assert response.status == 200
    assert await stored(db_pool, task_id) == []


# --- bad bodies -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "Log", "payload": 1},
        {"kind": "", "payload": 1},
        {"kind": "a" * 65, "payload": 1},
        {"kind": "log-line", "payload": 1},
        {"kind": "log"},
        {"payload": 1},
        {},
        {"kind": "log", "payload": 1, "level": "info"},
        {"messages": []},
        {"messages": [{"kind": "log", "payload": 1}] * 201},
        {"messages": [{"kind": "log", "payload": 1}], "kind": "log", "payload": 1},
        {"messages": [{"kind": "log", "payload": 1, "timestamp": "now"}]},
        {"messages": [{"kind": "log", "payload": 1}, {"kind": "BAD", "payload": 2}]},
        {"kind": "log", "payload": "nul \u0000 byte"},
    ],
)
async def test_bad_messages_are_400_and_nothing_is_written(
    crew: Crew, db_pool: Any, body: dict[str, Any]
) -> None:
    task_id = await running_task(crew)
    status, problem = await post(crew.executor, task_id, body)
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert problem["errors"], problem  # a pointer per invalid field (a NUL's too: /payload)
    assert await stored(db_pool, task_id) == []


_RUNNING: dict[str, str] = {}


async def running_task(crew: Crew) -> str:
    """One running attempt shared by the bad-body cases (none of them writes anything)."""
    if "id" not in _RUNNING:
        _RUNNING["id"] = await running(crew)
    return _RUNNING["id"]


async def test_reading_messages_is_for_those_who_see_the_task(crew: Crew) -> None:
    task_id = await running(crew)
    status, _ = await crew.member.call("GET", f"/tasks/{task_id}/attempts/1/messages")
    assert status == 200
    status, body = await crew.outsider.call("GET", f"/tasks/{task_id}/attempts/1/messages")
    assert (status, body["code"]) == (404, "task-not-found"), body
    for params in ({"limit": "201"}, {"limit": "0"}, {"afterSeq": "-1"}):
        status, body = await crew.owner.call(
            "GET", f"/tasks/{task_id}/attempts/1/messages", params=params
        )
        assert (status, body["code"]) == (400, "validation-failed"), (params, body)
