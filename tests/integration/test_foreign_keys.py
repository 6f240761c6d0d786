"""Every foreign key of the migrated schema has a decided delete rule (infra/foreign_keys.py),
and each rule that answers 409 does so with the referencing kind and count, and lets the delete
through once nothing needs the row (DECISIONS "Trust at the edges")."""

from __future__ import annotations

import uuid
from typing import Any

from actors import Actor

from infra.foreign_keys import DELETE_RULES

# pg_constraint.confdeltype: c cascade, n set null, a no action, r restrict
ON_DELETE = {"c": "cascade", "n": "set null", "a": "refuse", "r": "refuse"}


async def test_every_foreign_key_has_a_delete_rule_that_the_schema_keeps(db_pool: Any) -> None:
    rows = await db_pool.fetch(
        "SELECT conname, confdeltype FROM pg_constraint WHERE contype = 'f' ORDER BY conname"
    )
    catalog = {row["conname"]: ON_DELETE.get(row["confdeltype"].decode(), "?") for row in rows}
    assert sorted(set(catalog) - set(DELETE_RULES)) == [], "foreign keys without a rule"
    assert sorted(set(DELETE_RULES) - set(catalog)) == [], "rules naming no foreign key"
    assert catalog == {name: rule.on_delete for name, rule in DELETE_RULES.items()}
    for name, rule in DELETE_RULES.items():
        assert rule.why, name


async def test_a_task_keeps_its_provenance_diary_id_without_a_foreign_key(db_pool: Any) -> None:
    column = await db_pool.fetchval(
        "SELECT is_nullable FROM information_schema.columns"
        " WHERE table_name = 'tasks' AND column_name = 'diary_id'"
    )
    assert column == "NO"
    assert "tasks_diary_id_fkey" not in DELETE_RULES


async def _team(owner: Actor) -> str:
    status, body = await owner.call("POST", "/teams", json={"name": f"t-{uuid.uuid4().hex[:6]}"})
    assert status == 201, body
    return str(body["id"])


async def _diary(owner: Actor, team_id: str) -> str:
    body = {"name": f"d-{uuid.uuid4().hex[:6]}", "visibility": "private"}
    status, diary = await owner.call("POST", "/diaries", json=body, team=team_id)
    assert status == 201, diary
    return str(diary["id"])


async def _task(owner: Actor, team_id: str, diary_id: str) -> str:
    body = {
        "taskType": "freeform",
        "teamId": team_id,
        "diaryId": diary_id,
        "input": {"brief": "Summarise the week"},
    }
    status, task = await owner.call("POST", "/tasks", json=body, team=team_id)
    assert status == 201, task
    return str(task["id"])


async def test_a_diary_named_by_an_open_task_is_in_use_until_the_task_ends(actors: Any) -> None:
    owner = await actors.agent()
    team_id = await _team(owner)
    diary_id = await _diary(owner, team_id)
    task_id = await _task(owner, team_id, diary_id)

    status, problem = await owner.call("DELETE", f"/diaries/{diary_id}")
    assert status == 409, problem
    assert problem["code"] == "diary-in-use"
    assert (problem["referencingKind"], problem["referencingCount"]) == ("task", 1)
    assert (await owner.call("GET", f"/diaries/{diary_id}"))[0] == 200

    status, cancelled = await owner.call(
        "POST", f"/tasks/{task_id}/cancel", json={"reason": "done with it"}, team=team_id
    )
    assert status == 200 and cancelled["status"] == "cancelled", cancelled
    status, body = await owner.call("DELETE", f"/diaries/{diary_id}")
    assert status == 200, body
    assert (await owner.call("GET", f"/diaries/{diary_id}"))[0] == 404
    # the terminal task keeps its provenance as history
    status, task = await owner.call("GET", f"/tasks/{task_id}", team=team_id)
    assert status == 200 and task["diaryId"] == diary_id, task


async def test_a_team_with_tasks_is_in_use_and_one_without_is_deleted(actors: Any) -> None:
    owner = await actors.agent()
    busy, idle = await _team(owner), await _team(owner)
    diary_id = await _diary(owner, busy)
    task_id = await _task(owner, busy, diary_id)
    await owner.call("POST", f"/tasks/{task_id}/cancel", json={"reason": "stop"}, team=busy)
    assert (await owner.call("DELETE", f"/diaries/{diary_id}"))[0] == 200

    status, problem = await owner.call("DELETE", f"/teams/{busy}")
    assert status == 409, problem
    assert problem["code"] == "team-in-use"
    assert (problem["referencingKind"], problem["referencingCount"]) == ("task", 1)
    assert (await owner.call("GET", f"/teams/{busy}"))[0] == 200

    status, body = await owner.call("DELETE", f"/teams/{idle}")
    assert status == 200, body
    assert (await owner.call("GET", f"/teams/{idle}"))[0] == 404


async def test_a_team_owning_a_diary_names_the_count_and_is_deleted_once_it_goes(
    actors: Any,
) -> None:
    owner = await actors.agent()
    team_id = await _team(owner)
    diary_id = await _diary(owner, team_id)

    status, problem = await owner.call("DELETE", f"/teams/{team_id}")
    assert status == 409 and problem["code"] == "team-has-diaries", problem
    assert (problem["referencingKind"], problem["referencingCount"]) == ("diary", 1)

    assert (await owner.call("DELETE", f"/diaries/{diary_id}"))[0] == 200
    status, body = await owner.call("DELETE", f"/teams/{team_id}")
    assert status == 200, body


async def test_a_team_party_to_a_transfer_is_in_use(actors: Any) -> None:
    owner = await actors.agent()
    source, destination = await _team(owner), await _team(owner)
    diary_id = await _diary(owner, source)
    status, transfer = await owner.call(
        "POST", f"/diaries/{diary_id}/transfers", json={"destinationTeamId": destination}
    )
    assert status in (200, 201), transfer

    status, problem = await owner.call("DELETE", f"/teams/{destination}")
    assert status == 409, problem
    assert problem["code"] == "team-in-use"
    assert (problem["referencingKind"], problem["referencingCount"]) == ("transfer", 1)


async def test_a_diary_with_a_pending_transfer_is_in_use_until_it_settles(actors: Any) -> None:
    owner = await actors.agent()
    source, destination = await _team(owner), await _team(owner)
    diary_id = await _diary(owner, source)
    status, transfer = await owner.call(
        "POST", f"/diaries/{diary_id}/transfers", json={"destinationTeamId": destination}
    )
    assert status in (200, 201), transfer

    status, problem = await owner.call("DELETE", f"/diaries/{diary_id}")
    assert status == 409 and problem["code"] == "diary-in-use", problem
    assert (problem["referencingKind"], problem["referencingCount"]) == ("transfer", 1)

    status, rejected = await owner.call(
        "POST", f"/diaries/{diary_id}/transfers/{transfer['id']}/reject"
    )
    assert status == 200, rejected
    assert (await owner.call("DELETE", f"/diaries/{diary_id}"))[0] == 200
