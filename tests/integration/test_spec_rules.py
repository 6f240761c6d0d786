"""Rules of the spec that worked without a test proving them (issue 19), each through the API on
the real stack, both ways where it is a permission:

- deleting an entry removes its parent tuple: then no path reads it (SPEC 5);
- a diary grant to a Group through REST: its members read, others get 404, revoking ends it;
- a voucher expires 24 hours after issue (SPEC 2.3, 8), with the issue time moved by the test;
- `correlationId` does not prevent duplicates: two creates make two tasks, both listed;
- `runningTimeoutSec` reaches the attempt workflow (the timer itself, under time skipping, is
  tests/workflow_runs/test_task_workflow.py);
- a relation's `workflow_id` names the workflow that created it.
"""

from __future__ import annotations

import base64
import uuid
from datetime import timedelta
from typing import Any

import nacl.signing
from actors import Actor, anonymous, new_diary
from test_teams import team_with, tuples_of

from schemas import limits
from schemas.memory import RelationWritten
from schemas.task_attempts import task_workflow_id
from schemas.tasks import TaskStart


async def new_entry(actor: Actor, diary_id: str, content: str) -> dict[str, Any]:
    status, entry = await actor.call(
        "POST", f"/diaries/{diary_id}/entries", json={"content": content}
    )
    assert status == 201, entry
    return dict(entry)


async def listed_ids(actor: Actor, diary_id: str) -> list[str]:
    status, page = await actor.call("GET", f"/diaries/{diary_id}/entries")
    assert status == 200, page
    return [item["id"] for item in page["items"]]


# --- an entry's parent tuple goes with it --------------------------------------------------------


async def test_deleting_an_entry_removes_its_parent_tuple_and_every_read(
    actors: Any, db_pool: Any, api_http: Any
) -> None:
    owner, other = await actors.agent(), await actors.agent()
    diary = await new_diary(owner, "public")
    entry = await new_entry(owner, diary["id"], "Lighthouses are painted for daytime marks.")
    kept = await new_entry(owner, diary["id"], "Foghorns sound every thirty seconds.")
    assert await tuples_of(db_pool, "DiaryEntry", entry["id"]) == {f"parent@Diary:{diary['id']}"}
    for reader in (owner, other):  # public diary: everyone reads it before the delete
        assert (await reader.call("GET", f"/entries/{entry['id']}"))[0] == 200
    assert (await anonymous(api_http, "GET", f"/public/entries/{entry['id']}"))[0] == 200
    status, feed = await anonymous(api_http, "GET", "/public/feed")
    assert status == 200 and entry["id"] in [item["id"] for item in feed["items"]]

    # someone without write permission cannot delete it: entry and tuple stay
    assert (await other.call("DELETE", f"/entries/{entry['id']}"))[0] == 403
    assert await tuples_of(db_pool, "DiaryEntry", entry["id"]) == {f"parent@Diary:{diary['id']}"}

    status, body = await owner.call("DELETE", f"/entries/{entry['id']}")
    assert status == 200 and body == {"success": True}
    assert await tuples_of(db_pool, "DiaryEntry", entry["id"]) == set()
    remaining = await db_pool.fetchval(
        "SELECT count(*) FROM relation_tuples WHERE object_id = $1 OR subject_id = $1", entry["id"]
    )
    assert remaining == 0
    for reader in (owner, other):
        assert (await reader.call("GET", f"/entries/{entry['id']}"))[0] == 404
        assert await listed_ids(reader, diary["id"]) == [kept["id"]]
        status, found = await reader.call(
            "POST", "/diary/search", json={"query": "lighthouses painted", "diaryId": diary["id"]}
        )
        assert status == 200 and entry["id"] not in [r["id"] for r in found["results"]]
    for public in (f"/public/entries/{entry['id']}", f"/public/entry/{entry['id']}"):
        assert (await anonymous(api_http, "GET", public))[0] == 404
    status, feed = await anonymous(api_http, "GET", "/public/feed")
    assert status == 200 and entry["id"] not in [item["id"] for item in feed["items"]]
    assert (await owner.call("DELETE", f"/entries/{entry['id']}"))[0] == 404


# --- a diary grant to a Group ---------------------------------------------------------------------


async def test_a_diary_grant_to_a_group_lets_its_members_read(actors: Any, db_pool: Any) -> None:
    owner, in_group, not_in_group = [await actors.agent() for _ in range(3)]
    # the group's team is not the diary's: only the grant can let its members in
    team_id = await team_with(owner, member=[in_group, not_in_group])
    status, group = await owner.call("POST", f"/teams/{team_id}/groups", json={"name": "readers"})
    assert status == 201, group
    status, _ = await owner.call(
        "POST", f"/groups/{group['id']}/members", json={"subjectId": str(in_group.subject_id)}
    )
    assert status == 201
    diary = await new_diary(owner, "private")
    path = f"/diaries/{diary['id']}"
    entry = await new_entry(owner, diary["id"], "The group may read this.")
    for reader in (in_group, not_in_group):
        assert (await reader.call("GET", path))[0] == 404

    grant = {"subjectId": group["id"], "subjectNs": "Group", "role": "writer"}
    status, body = await owner.call("POST", f"{path}/grants", json=grant)
    assert status == 201, body
    assert f"writers@Group:{group['id']}#members" in await tuples_of(db_pool, "Diary", diary["id"])
    status, got = await in_group.call("GET", path)
    assert status == 200 and got["id"] == diary["id"]
    assert (await in_group.call("GET", f"/entries/{entry['id']}"))[0] == 200
    assert (await not_in_group.call("GET", path))[0] == 404
    assert (await not_in_group.call("GET", f"/entries/{entry['id']}"))[0] == 404
    status, listed = await owner.call("GET", f"{path}/grants")
    assert status == 200
    assert [(g["subjectId"], g["subjectNs"]) for g in listed["items"]] == [(group["id"], "Group")]

    status, _ = await owner.call("DELETE", f"{path}/grants", json=grant)
    assert status == 200
    assert f"writers@Group:{group['id']}#members" not in await tuples_of(
        db_pool, "Diary", diary["id"]
    )
    assert (await in_group.call("GET", path))[0] == 404
    assert (await in_group.call("GET", f"/entries/{entry['id']}"))[0] == 404


# --- vouchers expire 24 h after issue -------------------------------------------------------------


async def register(api_http: Any, voucher_code: str) -> tuple[int, Any]:
    key = nacl.signing.SigningKey.generate()
    public_key = "ed25519:" + base64.b64encode(bytes(key.verify_key)).decode()
    body = {"public_key": public_key, "voucher_code": voucher_code}
    return await anonymous(api_http, "POST", "/auth/register", json=body)


async def issued_ago(db_pool: Any, code: str, age: timedelta) -> None:
    """The test's clock: the voucher was issued `age` ago (issue and expiry move together)."""
    await db_pool.execute(
        "UPDATE agent_vouchers SET created_at = created_at - $2::interval,"
        " expires_at = expires_at - $2::interval WHERE code = $1",
        code,
        age,
    )


async def test_a_voucher_expires_24_hours_after_issue(
    actors: Any, db_pool: Any, api_http: Any
) -> None:
    issuer = await actors.agent()
    codes = []
    for _ in range(2):
        status, voucher = await issuer.call("POST", "/vouch")
        assert status == 201, voucher
        codes.append(voucher["code"])
    row = await db_pool.fetchrow(
        "SELECT created_at, expires_at FROM agent_vouchers WHERE code = $1", codes[0]
    )
    lifetime = row["expires_at"] - row["created_at"]
    assert abs(lifetime - timedelta(seconds=limits.VOUCHER_TTL_SEC)) < timedelta(seconds=5)

    day = timedelta(hours=24)
    await issued_ago(db_pool, codes[0], day - timedelta(minutes=1))
    status, registered = await register(api_http, codes[0])
    assert status == 200, registered  # a minute before its 24 h are up: still good

    await issued_ago(db_pool, codes[1], day + timedelta(minutes=1))
    status, problem = await register(api_http, codes[1])
    assert status == 403 and problem["code"] == "voucher-rejected", problem
    redeemed = await db_pool.fetchval(
        "SELECT redeemed_at FROM agent_vouchers WHERE code = $1", codes[1]
    )
    assert redeemed is None


# --- tasks: correlationId, runningTimeoutSec ------------------------------------------------------


async def task_world(actors: Any) -> tuple[Actor, Actor, str, str]:
    owner, executor = await actors.agent(), await actors.agent()
    team_id = await team_with(owner, executor=executor)
    body = {"name": f"d-{uuid.uuid4().hex[:6]}", "visibility": "private"}
    status, diary = await owner.call("POST", "/diaries", json=body, team=team_id)
    assert status == 201, diary
    return owner, executor, team_id, diary["id"]


def freeform(team_id: str, diary_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "taskType": "freeform",
        "teamId": team_id,
        "diaryId": diary_id,
        "input": {"brief": "Count the gulls"},
        **extra,
    }


async def test_a_correlation_id_does_not_prevent_duplicates(actors: Any) -> None:
    owner, _, team_id, diary_id = await task_world(actors)
    correlation = str(uuid.uuid4())
    body = freeform(team_id, diary_id, correlationId=correlation)
    created = []
    for _ in range(2):
        status, task = await owner.call("POST", "/tasks", json=body)
        assert status == 201, task
        created.append(task["id"])
    assert created[0] != created[1]
    status, page = await owner.call(
        "GET", "/tasks", params={"correlationId": correlation}, team=team_id
    )
    assert status == 200, page
    assert sorted(t["id"] for t in page["items"]) == sorted(created)
    assert all(t["correlationId"] == correlation for t in page["items"])
    # with an Idempotency-Key the same body is one task: the key deduplicates, not the id
    keyed = {"Idempotency-Key": f"k-{uuid.uuid4().hex}"}
    first = await owner.call("POST", "/tasks", json=body, headers=keyed)
    second = await owner.call("POST", "/tasks", json=body, headers=keyed)
    assert first[1]["id"] == second[1]["id"]


async def test_running_timeout_sec_reaches_the_attempt_workflow(actors: Any, stack: Any) -> None:
    owner, _, team_id, diary_id = await task_world(actors)
    for asked, expected in ((60, 60), (None, limits.ATTEMPT_RESULT_DEADLINE_SEC)):
        extra = {} if asked is None else {"runningTimeoutSec": asked}
        status, task = await owner.call("POST", "/tasks", json=freeform(team_id, diary_id, **extra))
        assert status == 201, task
        assert task["runningTimeoutSec"] == expected
        handle = stack.temporal.get_workflow_handle(task_workflow_id(task["id"]))
        async for event in handle.fetch_history_events():
            attrs = event.workflow_execution_started_event_attributes
            payload = attrs.input.payloads[0]
            break
        [start] = await stack.temporal.data_converter.decode([payload], [TaskStart])
        assert start.running_timeout_sec == expected


# --- relations name their workflow ---------------------------------------------------------------


async def test_a_relations_workflow_id_names_the_workflow_that_created_it(
    actors: Any, db_pool: Any, stack: Any
) -> None:
    owner = await actors.agent()
    diary = await new_diary(owner)
    source = await new_entry(owner, diary["id"], "Tide tables come from the harbour office.")
    target = await new_entry(owner, diary["id"], "The harbour office opens at eight.")
    body = {"targetId": target["id"], "relation": "references"}
    status, relation = await owner.call("POST", f"/entries/{source['id']}/relations", json=body)
    assert status == 201, relation
    workflow_id = await db_pool.fetchval(
        "SELECT workflow_id FROM entry_relations WHERE id = $1", uuid.UUID(relation["id"])
    )
    assert workflow_id
    described = await stack.temporal.get_workflow_handle(workflow_id).describe()
    assert described.workflow_type == "RelationCreate"
    result = await stack.temporal.get_workflow_handle(
        workflow_id, result_type=RelationWritten
    ).result()
    assert result == RelationWritten(relation_id=uuid.UUID(relation["id"]), created=True)
    # a second create finds the relation (200) and leaves its creator's workflow id in place
    status, again = await owner.call("POST", f"/entries/{source['id']}/relations", json=body)
    assert status == 200 and again["id"] == relation["id"]
    assert (
        await db_pool.fetchval(
            "SELECT workflow_id FROM entry_relations WHERE id = $1", uuid.UUID(relation["id"])
        )
        == workflow_id
    )
