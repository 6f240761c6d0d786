"""Diaries on the real stack (SPEC 2.1, 4.2, 5): creation in a team, the three visibility rules
both ways (public without credentials, moltnet for any principal and 401 otherwise, private by
permission and 404 otherwise), updates, grants to agents and humans, deletion with its tuples,
and bad input that writes nothing."""

from __future__ import annotations

import uuid

import pytest
from actors import anonymous, new_diary, personal_team


async def diary_rows(db_pool, name: str) -> int:
    return int(await db_pool.fetchval("SELECT count(*) FROM diaries WHERE name = $1", name))


# --- create -----------------------------------------------------------------------------


async def test_create_returns_the_diary_and_writes_row_and_team_binding(actors, db_pool) -> None:
    owner = await actors.agent()
    team = await personal_team(owner)
    status, diary = await owner.call(
        "POST", "/diaries", json={"name": "notes", "visibility": "moltnet"}, team=team
    )
    assert status == 201, diary
    assert diary["name"] == "notes" and diary["visibility"] == "moltnet"
    assert diary["teamId"] == team and diary["createdBy"] == str(owner.subject_id)
    assert diary["signed"] is False
    binding = await db_pool.fetchval(
        "SELECT subject_id FROM relation_tuples "
        "WHERE namespace = 'Diary' AND object_id = $1 AND relation = 'team'",
        diary["id"],
    )
    assert binding == team


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"name": "x", "visibility": "secret"}, "/visibility"),
        ({"name": "", "visibility": "private"}, "/name"),
        ({"name": "x", "colour": "red"}, "/colour"),
        ({"visibility": "private"}, "/name"),
    ],
)
async def test_invalid_body_is_400_and_writes_nothing(actors, db_pool, body, pointer) -> None:
    owner = await actors.agent()
    team = await personal_team(owner)
    before = await db_pool.fetchval("SELECT count(*) FROM diaries")
    status, problem = await owner.call("POST", "/diaries", json=body, team=team)
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert pointer in [e["pointer"] for e in problem["errors"]]
    assert await db_pool.fetchval("SELECT count(*) FROM diaries") == before


async def test_team_header_is_required_and_must_be_a_uuid(actors, db_pool) -> None:
    owner = await actors.agent()
    name = f"nohdr-{uuid.uuid4().hex[:6]}"
    status, problem = await owner.call("POST", "/diaries", json={"name": name})
    assert status == 400 and problem["code"] == "team-required"
    status, problem = await owner.call("POST", "/diaries", json={"name": name}, team="not-a-uuid")
    assert status == 400 and problem["code"] == "invalid-team-header"
    assert await diary_rows(db_pool, name) == 0


async def test_another_agents_team_is_404_and_an_unknown_team_too(actors, db_pool) -> None:
    owner, stranger = await actors.agent(), await actors.agent()
    name = f"foreign-{uuid.uuid4().hex[:6]}"
    for team in (await personal_team(owner), str(uuid.uuid4())):
        status, problem = await stranger.call("POST", "/diaries", json={"name": name}, team=team)
        assert status == 404 and problem["code"] == "team-not-found"
    assert await diary_rows(db_pool, name) == 0


async def test_a_token_without_diary_write_is_403(actors) -> None:
    reader = await actors.agent(scope="diary:read")
    team = await personal_team(reader)
    status, problem = await reader.call("POST", "/diaries", json={"name": "x"}, team=team)
    assert status == 403 and problem["code"] == "missing-scope"


# --- visibility ---------------------------------------------------------------------------


async def test_public_diary_is_readable_without_credentials(actors, api_http) -> None:
    diary = await new_diary(await actors.agent(), "public")
    status, body = await anonymous(api_http, "GET", f"/diaries/{diary['id']}")
    assert status == 200 and body["id"] == diary["id"]
    assert body.get("yourPermissions") is None  # nobody asked


async def test_moltnet_diary_needs_any_credential(actors, api_http) -> None:
    diary = await new_diary(await actors.agent(), "moltnet")
    status, problem = await anonymous(api_http, "GET", f"/diaries/{diary['id']}")
    assert (status, problem["code"]) == (401, "unauthorized"), problem
    for reader in (await actors.agent(), await actors.human()):
        status, body = await reader.call("GET", f"/diaries/{diary['id']}")
        assert status == 200 and body["id"] == diary["id"]
        assert body["yourPermissions"] == []  # reads it, may change nothing


async def test_private_diary_is_404_for_outsiders_and_anonymous(actors, api_http) -> None:
    owner = await actors.agent()
    diary = await new_diary(owner, "private")
    status, _ = await owner.call("GET", f"/diaries/{diary['id']}")
    assert status == 200
    for outsider in (await actors.agent(), await actors.human()):
        status, problem = await outsider.call("GET", f"/diaries/{diary['id']}")
        assert status == 404 and problem["code"] == "diary-not-found"
    status, _ = await anonymous(api_http, "GET", f"/diaries/{diary['id']}")
    assert (status, problem["code"]) == (404, "diary-not-found")
    status, _ = await owner.call("GET", f"/diaries/{uuid.uuid4()}")
    assert (status, problem["code"]) == (404, "diary-not-found")


async def test_list_shows_only_diaries_the_caller_can_read(actors) -> None:
    owner, outsider = await actors.agent(), await actors.agent()
    mine = await new_diary(owner, "private")
    status, body = await owner.call("GET", "/diaries")
    assert status == 200 and mine["id"] in [d["id"] for d in body["items"]]
    status, body = await outsider.call("GET", "/diaries")
    assert status == 200 and mine["id"] not in [d["id"] for d in body["items"]]
    team = await personal_team(owner)
    status, body = await owner.call("GET", "/diaries", team=team)
    assert {d["teamId"] for d in body["items"]} == {team}


# --- update and delete --------------------------------------------------------------------


async def test_owner_updates_and_outsiders_cannot(actors) -> None:
    owner, outsider = await actors.agent(), await actors.agent()
    diary = await new_diary(owner, "moltnet")
    path = f"/diaries/{diary['id']}"
    status, body = await owner.call("PATCH", path, json={"name": "renamed"})
    assert status == 200 and body["name"] == "renamed" and body["visibility"] == "moltnet"
    status, problem = await outsider.call("PATCH", path, json={"name": "mine now"})
    assert (status, problem["code"]) == (403, "forbidden"), (
        problem
    )  # readable (moltnet) but not manageable
    status, _ = await owner.call("PATCH", path, json={"visibility": "private"})
    status, problem = await outsider.call("PATCH", path, json={"name": "mine now"})
    assert (status, problem["code"]) == (404, "diary-not-found"), (
        problem
    )  # private: the outsider cannot know it exists
    status, problem = await owner.call("PATCH", path, json={})
    assert (status, problem["code"]) == (400, "validation-failed")


async def test_delete_removes_rows_and_tuples(actors, db_pool) -> None:
    owner = await actors.agent()
    diary = await new_diary(owner)
    status, entry = await owner.call(
        "POST", f"/diaries/{diary['id']}/entries", json={"content": "to be deleted"}
    )
    assert status == 201, entry
    status, body = await owner.call("DELETE", f"/diaries/{diary['id']}")
    assert status == 200 and body == {"success": True}
    assert (
        await db_pool.fetchval("SELECT count(*) FROM diaries WHERE id = $1", uuid.UUID(diary["id"]))
        == 0
    )
    assert (
        await db_pool.fetchval(
            "SELECT count(*) FROM diary_entries WHERE id = $1", uuid.UUID(entry["id"])
        )
        == 0
    )
    assert (
        await db_pool.fetchval(
            "SELECT count(*) FROM relation_tuples "
            "WHERE object_id = ANY($1) OR subject_id = ANY($1)",
            [diary["id"], entry["id"]],
        )
        == 0
    )
    status, _ = await owner.call("GET", f"/diaries/{diary['id']}")
    assert (status, _["code"]) == (404, "diary-not-found")


async def test_outsider_cannot_delete(actors, db_pool) -> None:
    owner, outsider = await actors.agent(), await actors.agent()
    diary = await new_diary(owner, "public")
    status, problem = await outsider.call("DELETE", f"/diaries/{diary['id']}")
    assert (status, problem["code"]) == (403, "forbidden"), problem
    assert (
        await db_pool.fetchval("SELECT count(*) FROM diaries WHERE id = $1", uuid.UUID(diary["id"]))
        == 1
    )


# --- grants -------------------------------------------------------------------------------


async def test_writer_grant_lets_an_agent_read_and_write_but_not_manage(actors) -> None:
    owner, writer = await actors.agent(), await actors.agent()
    diary = await new_diary(owner, "private")
    path = f"/diaries/{diary['id']}"
    status, _ = await writer.call("POST", f"{path}/entries", json={"content": "hello"})
    assert (status, _["code"]) == (
        404,
        "diary-not-found",
    )  # before the grant the diary does not exist for them
    grant = {"subjectId": str(writer.subject_id), "subjectNs": "Agent", "role": "writer"}
    status, body = await owner.call("POST", f"{path}/grants", json=grant)
    assert status == 201 and body["role"] == "writer", body
    status, entry = await writer.call("POST", f"{path}/entries", json={"content": "hello"})
    assert status == 201, entry
    status, seen = await writer.call("GET", path)
    assert status == 200 and seen["yourPermissions"] == ["write"]
    status, seen = await owner.call("GET", path)
    assert status == 200 and seen["yourPermissions"] == ["write", "manage"]
    status, problem = await writer.call("PATCH", path, json={"name": "taken"})
    assert (status, problem["code"]) == (403, "forbidden"), problem
    status, problem = await writer.call("POST", f"{path}/grants", json=grant)
    assert (status, problem["code"]) == (403, "forbidden"), problem
    status, listed = await owner.call("GET", f"{path}/grants")
    assert status == 200
    assert [(g["subjectId"], g["role"]) for g in listed["items"]] == [
        (str(writer.subject_id), "writer")
    ]
    status, _ = await owner.call("DELETE", f"{path}/grants", json=grant)
    assert status == 200
    status, _ = await writer.call("GET", path)
    assert (status, _["code"]) == (404, "diary-not-found")


async def test_manager_grant_to_a_human_allows_managing(actors) -> None:
    owner, human = await actors.agent(), await actors.human()
    diary = await new_diary(owner, "private")
    path = f"/diaries/{diary['id']}"
    grant = {"subjectId": str(human.subject_id), "subjectNs": "Human", "role": "manager"}
    status, _ = await owner.call("POST", f"{path}/grants", json=grant)
    assert status == 201
    status, body = await human.call("PATCH", path, json={"name": "human-managed"})
    assert status == 200 and body["name"] == "human-managed"
    status, entry = await human.call("POST", f"{path}/entries", json={"content": "by a human"})
    assert status == 201 and entry["createdBy"] == str(human.subject_id)


async def test_grant_to_an_unknown_subject_is_404_and_bad_role_400(actors) -> None:
    owner = await actors.agent()
    diary = await new_diary(owner)
    path = f"/diaries/{diary['id']}/grants"
    grant = {"subjectId": str(uuid.uuid4()), "subjectNs": "Agent", "role": "writer"}
    status, problem = await owner.call("POST", path, json=grant)
    assert status == 404 and problem["code"] == "subject-not-found"
    status, _ = await owner.call("POST", path, json={**grant, "role": "owner"})
    assert (status, _["code"]) == (400, "validation-failed")
