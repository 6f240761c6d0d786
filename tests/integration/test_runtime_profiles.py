"""Runtime profiles on the real stack (DECISIONS "Runtime profiles"; SPEC 2.6, 4.5, 5): the
`/runtime-profiles` resource and who may read and write it, claims under a profile (the task's
pin, the policy's task types and scopes), the `runtimeProfileId` view of the queue, and the
profile's revision, policy and hash frozen on the attempt. Every rule is tested both ways.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest
import rfc8785
from actors import Actor, join_team

from infra.repos.runtime_profiles import RuntimeProfileRepo
from schemas.errors import Conflict
from schemas.kernel.cids import json_cid
from schemas.runtime_profiles import ProfileUpdate

OUTPUT = {"summary": "done"}
CLAIM_EXECUTE = ["task:claim", "task:execute"]


class Crew:
    owner: Actor
    manager: Actor
    executor: Actor
    member: Actor
    outsider: Actor
    team_id: str
    other_team_id: str
    diary_id: str


@pytest.fixture(scope="module")
async def crew(actors: Any) -> Crew:
    c = Crew()
    c.owner, c.manager, c.executor, c.member, c.outsider = [await actors.agent() for _ in range(5)]
    status, team = await c.owner.call("POST", "/teams", json={"name": "runtime crew"})
    assert status == 201, team
    c.team_id = str(team["id"])
    await join_team(c.owner, c.team_id, c.manager, "manager")
    await join_team(c.owner, c.team_id, c.executor, "executor")
    await join_team(c.owner, c.team_id, c.member, "member")
    status, other = await c.outsider.call("POST", "/teams", json={"name": "elsewhere"})
    assert status == 201, other
    c.other_team_id = str(other["id"])
    status, diary = await c.owner.call(
        "POST", "/diaries", json={"name": "work", "visibility": "private"}, team=c.team_id
    )
    assert status == 201, diary
    c.diary_id = str(diary["id"])
    return c


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def new_profile(
    actor: Actor, team_id: str, policy: dict[str, Any] | None = None, name: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"teamId": team_id, "name": name or unique("profile")}
    if policy is not None:
        body["policy"] = policy
    status, profile = await actor.call("POST", "/runtime-profiles", json=body, team=team_id)
    assert status == 201, profile
    return dict(profile)


async def new_task(crew: Crew, *, pinned: list[str] | None = None, **extra: Any) -> str:
    body = {
        "taskType": "freeform",
        "teamId": crew.team_id,
        "diaryId": crew.diary_id,
        "input": {"brief": "Write a haiku"},
        **extra,
    }
    if pinned is not None:
        body["allowedProfiles"] = [{"profileId": p} for p in pinned]
    status, task = await crew.owner.call("POST", "/tasks", json=body, team=crew.team_id)
    assert status == 201, task
    return str(task["id"])


async def claim(actor: Actor, task_id: str, profile_id: str | None = None) -> tuple[int, Any]:
    body = {} if profile_id is None else {"runtimeProfileId": profile_id}
    return await actor.call("POST", f"/tasks/{task_id}/claim", json=body)


async def heartbeat(actor: Actor, task_id: str) -> tuple[int, Any]:
    return await actor.call("POST", f"/tasks/{task_id}/attempts/1/heartbeat", json={})


async def attempts(actor: Actor, task_id: str) -> list[dict[str, Any]]:
    status, body = await actor.call("GET", f"/tasks/{task_id}/attempts")
    assert status == 200, body
    return list(body["items"])


def policy_hash(policy: dict[str, Any]) -> str:
    return hashlib.sha256(rfc8785.dumps(policy)).hexdigest()


# --- the resource ----------------------------------------------------------------------------


async def test_a_manager_creates_reads_updates_and_deletes_a_profile(crew: Crew) -> None:
    name = unique("gpu")
    profile = await new_profile(
        crew.manager,
        crew.team_id,
        {"taskTypes": ["freeform", "curate_pack", "freeform"], "scopes": CLAIM_EXECUTE},
        name=name,
    )
    assert profile["teamId"] == crew.team_id and profile["name"] == name
    assert profile["revision"] == 1
    assert profile["policy"] == {"taskTypes": ["curate_pack", "freeform"], "scopes": CLAIM_EXECUTE}
    assert profile["createdByAgentId"] == str(crew.manager.subject_id)

    # any member of the team reads it, the bare executor included (a daemon reads its profile)
    status, got = await crew.executor.call("GET", f"/runtime-profiles/{profile['id']}")
    assert status == 200 and got == profile
    status, listed = await crew.member.call("GET", "/runtime-profiles", team=crew.team_id)
    assert status == 200 and profile in listed["items"]

    status, updated = await crew.manager.call(
        "PATCH", f"/runtime-profiles/{profile['id']}", json={"policy": {"taskTypes": ["freeform"]}}
    )
    assert status == 200, updated
    assert updated["revision"] == 2 and updated["policy"] == {"taskTypes": ["freeform"]}
    assert updated["name"] == name
    status, renamed = await crew.owner.call(
        "PATCH", f"/runtime-profiles/{profile['id']}", json={"name": name + "-2"}
    )
    assert status == 200 and renamed["revision"] == 3 and renamed["name"] == name + "-2"
    assert renamed["policy"] == {"taskTypes": ["freeform"]}

    status, _ = await crew.manager.call("DELETE", f"/runtime-profiles/{profile['id']}")
    assert status == 204
    status, body = await crew.manager.call("GET", f"/runtime-profiles/{profile['id']}")
    assert status == 404 and body["code"] == "runtime-profile-not-found"


async def test_only_owners_and_managers_write_profiles(crew: Crew, db_pool: Any) -> None:
    for actor in (crew.executor, crew.member):
        status, body = await actor.call(
            "POST",
            "/runtime-profiles",
            json={"teamId": crew.team_id, "name": unique("mine")},
            team=crew.team_id,
        )
        assert status == 403 and body["code"] == "runtime-profile-manage-forbidden", body
    profile = await new_profile(crew.owner, crew.team_id)
    status, body = await crew.member.call(
        "PATCH", f"/runtime-profiles/{profile['id']}", json={"name": unique("x")}
    )
    assert status == 403 and body["code"] == "runtime-profile-manage-forbidden"
    status, body = await crew.executor.call("DELETE", f"/runtime-profiles/{profile['id']}")
    assert status == 403 and body["code"] == "runtime-profile-manage-forbidden"
    row = await db_pool.fetchrow(
        "SELECT revision FROM runtime_profiles WHERE id = $1", uuid.UUID(profile["id"])
    )
    assert row["revision"] == 1


async def test_an_outsider_gets_404_for_a_team_it_cannot_see(crew: Crew) -> None:
    profile = await new_profile(crew.manager, crew.team_id)
    path = f"/runtime-profiles/{profile['id']}"
    status, body = await crew.outsider.call("GET", path)
    assert status == 404 and body["code"] == "runtime-profile-not-found"
    status, body = await crew.outsider.call("PATCH", path, json={"name": unique("mine")})
    assert status == 404 and body["code"] == "runtime-profile-not-found"
    status, body = await crew.outsider.call("DELETE", path)
    assert status == 404 and body["code"] == "runtime-profile-not-found"
    status, body = await crew.outsider.call("GET", "/runtime-profiles", team=crew.team_id)
    assert status == 404 and body["code"] == "team-not-found"
    status, body = await crew.outsider.call(
        "POST",
        "/runtime-profiles",
        json={"teamId": crew.team_id, "name": unique("mine")},
        team=crew.team_id,
    )
    assert status == 404 and body["code"] == "team-not-found"
    # a member asking in another team's context does not see it either
    status, body = await crew.member.call("GET", path, team=crew.other_team_id)
    assert status == 404 and body["code"] == "runtime-profile-not-found", body
    status, body = await crew.member.call("GET", path)
    assert status == 200, body


async def test_profiles_need_their_scopes(crew: Crew, actors: Any) -> None:
    profile = await new_profile(crew.manager, crew.team_id)
    reader = await actors.agent(scope="task:read task:manage")
    await join_team(crew.owner, crew.team_id, reader, "manager")
    status, body = await reader.call("GET", f"/runtime-profiles/{profile['id']}")
    assert status == 403 and body["code"] == "missing-scope"
    writer = await actors.agent(scope="runtime:read")
    await join_team(crew.owner, crew.team_id, writer, "manager")
    status, body = await writer.call("GET", f"/runtime-profiles/{profile['id']}")
    assert status == 200, body
    status, body = await writer.call(
        "POST",
        "/runtime-profiles",
        json={"teamId": crew.team_id, "name": unique("w")},
        team=crew.team_id,
    )
    assert status == 403 and body["code"] == "missing-scope"


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"policy": {"taskTypes": ["no_such_type"]}}, "/policy/taskTypes"),
        ({"policy": {"scopes": ["task:fly"]}}, "/policy/scopes"),
        ({"policy": {"taskTypes": []}}, "/policy/taskTypes"),
        ({"policy": {"other": 1}}, "/policy/other"),
        ({"name": ""}, "/name"),
    ],
)
async def test_a_bad_profile_is_a_400_and_writes_nothing(
    crew: Crew, db_pool: Any, body: dict[str, Any], pointer: str
) -> None:
    sent = {"teamId": crew.team_id, "name": unique("bad"), **body}
    status, problem = await crew.manager.call(
        "POST", "/runtime-profiles", json=sent, team=crew.team_id
    )
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert any(e["pointer"] == pointer for e in problem["errors"]), problem
    assert not await db_pool.fetchval(
        "SELECT count(*) FROM runtime_profiles WHERE name = $1", sent["name"] or "-"
    )


async def test_names_are_unique_in_a_team_and_updates_need_a_change(crew: Crew) -> None:
    profile = await new_profile(crew.manager, crew.team_id)
    status, body = await crew.owner.call(
        "POST",
        "/runtime-profiles",
        json={"teamId": crew.team_id, "name": profile["name"], "policy": {"scopes": ["task:read"]}},
        team=crew.team_id,
    )
    assert status == 409 and body["code"] == "runtime-profile-name-taken"
    status, body = await crew.manager.call("PATCH", f"/runtime-profiles/{profile['id']}", json={})
    assert (status, body["code"]) == (400, "validation-failed"), body


async def test_the_same_create_again_answers_the_same_profile(crew: Crew) -> None:
    body = {"teamId": crew.team_id, "name": unique("twice"), "policy": {"scopes": ["task:read"]}}
    first = await crew.manager.call("POST", "/runtime-profiles", json=body, team=crew.team_id)
    again = await crew.manager.call("POST", "/runtime-profiles", json=body, team=crew.team_id)
    assert first[0] == again[0] == 201 and again[1]["id"] == first[1]["id"], (first, again)
    status, listed = await crew.manager.call("GET", "/runtime-profiles", team=crew.team_id)
    assert status == 200, listed
    assert [p["name"] for p in listed["items"]].count(body["name"]) == 1


async def test_an_update_applies_to_the_revision_it_read(crew: Crew, db_pool: Any) -> None:
    profile = await new_profile(crew.manager, crew.team_id)
    repo = RuntimeProfileRepo(db_pool)
    change = ProfileUpdate(profile_id=uuid.UUID(profile["id"]), revision=1, name=unique("moved"))
    assert (await repo.update(change)).revision == 2
    assert (await repo.update(change)).revision == 2  # a retry of the committed step
    other = change.model_copy(update={"name": unique("other")})
    with pytest.raises(Conflict) as refused:
        await repo.update(other)  # revision 1 is gone
    assert refused.value.instance_code == "runtime-profile-changed"
    status, got = await crew.manager.call("GET", f"/runtime-profiles/{profile['id']}")
    assert status == 200, got
    assert got["revision"] == 2 and got["name"] == change.name


async def test_a_task_is_pinned_only_to_profiles_of_its_team(crew: Crew, db_pool: Any) -> None:
    mine = await new_profile(crew.manager, crew.team_id)
    elsewhere = await new_profile(crew.outsider, crew.other_team_id)
    title = unique("pinned")
    for wrong in (str(uuid.uuid4()), elsewhere["id"]):
        body = {
            "taskType": "freeform",
            "teamId": crew.team_id,
            "diaryId": crew.diary_id,
            "title": title,
            "input": {"brief": "Write a haiku"},
            "allowedProfiles": [{"profileId": mine["id"]}, {"profileId": wrong}],
        }
        status, problem = await crew.owner.call("POST", "/tasks", json=body, team=crew.team_id)
        assert status == 400 and problem["code"] == "unknown-runtime-profile", problem
        assert problem["errors"][0]["pointer"] == "/allowedProfiles/1/profileId"
    assert not await db_pool.fetchval("SELECT count(*) FROM tasks WHERE title = $1", title)
    task_id = await new_task(crew, pinned=[mine["id"]])
    status, task = await crew.member.call("GET", f"/tasks/{task_id}")
    assert status == 200 and task["allowedProfiles"] == [{"profileId": mine["id"]}]


# --- claims under a profile --------------------------------------------------------------------


async def test_a_pinned_task_is_claimed_only_under_one_of_its_profiles(crew: Crew) -> None:
    allowed = await new_profile(crew.manager, crew.team_id, {"taskTypes": ["freeform"]})
    other = await new_profile(crew.manager, crew.team_id)
    task_id = await new_task(crew, pinned=[allowed["id"]])

    status, body = await claim(crew.executor, task_id)
    assert status == 403 and body["code"] == "profile-not-allowed", body
    status, body = await claim(crew.executor, task_id, other["id"])
    assert status == 403 and body["code"] == "profile-not-allowed", body
    assert await attempts(crew.owner, task_id) == []

    status, claimed = await claim(crew.executor, task_id, allowed["id"])
    assert status == 200, claimed
    attempt = claimed["attempt"]
    assert attempt["runtimeProfileId"] == allowed["id"]
    assert attempt["runtimeProfileRevision"] == 1
    assert attempt["policySnapshotHash"] == policy_hash({"taskTypes": ["freeform"]})


async def test_an_unrestricted_task_is_claimed_with_or_without_a_profile(crew: Crew) -> None:
    task_id = await new_task(crew)
    status, claimed = await claim(crew.executor, task_id)
    assert status == 200, claimed
    attempt = claimed["attempt"]
    assert "runtimeProfileId" not in attempt and "policySnapshotHash" not in attempt

    profile = await new_profile(crew.manager, crew.team_id)
    task_id = await new_task(crew)
    status, claimed = await claim(crew.executor, task_id, profile["id"])
    assert status == 200, claimed
    assert claimed["attempt"]["runtimeProfileId"] == profile["id"]
    assert claimed["attempt"]["policySnapshotHash"] == policy_hash({})


async def test_a_claim_naming_no_profile_of_the_team_is_a_400(crew: Crew) -> None:
    elsewhere = await new_profile(crew.outsider, crew.other_team_id)
    gone = await new_profile(crew.manager, crew.team_id)
    task_id = await new_task(crew, pinned=[gone["id"]])
    status, _ = await crew.manager.call("DELETE", f"/runtime-profiles/{gone['id']}")
    assert status == 204
    for profile_id in (str(uuid.uuid4()), elsewhere["id"], gone["id"]):
        status, body = await claim(crew.executor, task_id, profile_id)
        assert status == 400 and body["code"] == "unknown-runtime-profile", body
        assert body["errors"][0]["pointer"] == "/runtimeProfileId"
    assert await attempts(crew.owner, task_id) == []


async def test_a_profile_claims_only_its_task_types(crew: Crew) -> None:
    briefs = await new_profile(crew.manager, crew.team_id, {"taskTypes": ["fulfill_brief"]})
    task_id = await new_task(crew)
    status, body = await claim(crew.executor, task_id, briefs["id"])
    assert status == 403 and body["code"] == "profile-task-type-not-allowed", body
    freeform = await new_profile(crew.manager, crew.team_id, {"taskTypes": ["freeform"]})
    status, body = await claim(crew.executor, task_id, freeform["id"])
    assert status == 200, body


async def test_the_profile_view_of_the_queue(crew: Crew) -> None:
    mine = await new_profile(crew.manager, crew.team_id)
    theirs = await new_profile(crew.manager, crew.team_id)
    briefs = await new_profile(crew.manager, crew.team_id, {"taskTypes": ["fulfill_brief"]})
    correlation = str(uuid.uuid4())
    pinned_mine = await new_task(crew, pinned=[mine["id"]], correlationId=correlation)
    pinned_theirs = await new_task(crew, pinned=[theirs["id"]], correlationId=correlation)
    pinned_both = await new_task(crew, pinned=[theirs["id"], mine["id"]], correlationId=correlation)
    free = await new_task(crew, correlationId=correlation)

    async def listed(**params: str) -> set[str]:
        query = {"claimable": "true", "correlationId": correlation, **params}
        status, body = await crew.executor.call("GET", "/tasks", team=crew.team_id, params=query)
        assert status == 200, body
        return {task["id"] for task in body["items"]}

    assert await listed() == {pinned_mine, pinned_theirs, pinned_both, free}
    assert await listed(runtimeProfileId=mine["id"]) == {pinned_mine, pinned_both, free}
    assert await listed(runtimeProfileId=theirs["id"]) == {pinned_theirs, pinned_both, free}
    assert await listed(runtimeProfileId=briefs["id"]) == set()  # freeform is not its type

    status, body = await crew.executor.call(
        "GET",
        "/tasks",
        team=crew.team_id,
        params={"claimable": "true", "runtimeProfileId": str(uuid.uuid4())},
    )
    assert status == 400 and body["code"] == "unknown-runtime-profile", body


async def test_a_cursor_is_bound_to_its_profile(crew: Crew) -> None:
    profile = await new_profile(crew.manager, crew.team_id)
    for _ in range(2):
        await new_task(crew)
    params = {"limit": "1", "runtimeProfileId": profile["id"]}
    status, page = await crew.executor.call("GET", "/tasks", team=crew.team_id, params=params)
    assert status == 200 and page["nextCursor"], page
    status, body = await crew.executor.call(
        "GET", "/tasks", team=crew.team_id, params={"limit": "1", "cursor": page["nextCursor"]}
    )
    assert (status, body["code"]) == (400, "invalid-cursor"), body


# --- scopes narrowed for the attempt -----------------------------------------------------------


async def test_a_policy_without_task_execute_refuses_the_attempts_calls(crew: Crew) -> None:
    narrow = await new_profile(crew.manager, crew.team_id, {"scopes": ["task:claim", "task:read"]})
    task_id = await new_task(crew)
    status, body = await claim(crew.executor, task_id, narrow["id"])
    assert status == 200, body

    status, body = await heartbeat(crew.executor, task_id)
    assert status == 403 and body["code"] == "profile-scope-denied", body
    base = f"/tasks/{task_id}/attempts/1"
    status, body = await crew.executor.call(
        "POST", f"{base}/messages", json={"kind": "log", "payload": "hello"}
    )
    assert status == 403 and body["code"] == "profile-scope-denied", body
    status, body = await crew.executor.call(
        "PUT",
        f"{base}/artifacts",
        data=b"report",
        params={"kind": "report", "title": "The report"},
        headers={"Content-Type": "application/octet-stream"},
    )
    assert status == 403 and body["code"] == "profile-scope-denied", body
    status, body = await crew.executor.call(
        "POST", f"{base}/complete", json={"output": OUTPUT, "outputCid": json_cid(OUTPUT)}
    )
    assert status == 403 and body["code"] == "profile-scope-denied", body
    status, body = await crew.executor.call("POST", f"{base}/abort", json={})
    assert status == 403 and body["code"] == "profile-scope-denied", body
    error = {"code": "gave_up", "message": "no"}
    status, body = await crew.executor.call("POST", f"{base}/fail", json={"error": error})
    assert status == 403 and body["code"] == "profile-scope-denied", body
    [attempt] = await attempts(crew.owner, task_id)
    assert attempt["status"] == "claimed"


async def test_a_policy_keeping_task_execute_lets_the_attempt_run(crew: Crew) -> None:
    wide = await new_profile(crew.manager, crew.team_id, {"scopes": CLAIM_EXECUTE})
    task_id = await new_task(crew)
    status, body = await claim(crew.executor, task_id, wide["id"])
    assert status == 200, body
    status, body = await heartbeat(crew.executor, task_id)
    assert status == 200, body
    base = f"/tasks/{task_id}/attempts/1"
    status, body = await crew.executor.call(
        "POST", f"{base}/messages", json={"kind": "log", "payload": "hello"}
    )
    assert status == 201, body
    status, body = await crew.executor.call(
        "POST", f"{base}/complete", json={"output": OUTPUT, "outputCid": json_cid(OUTPUT)}
    )
    assert status == 200 and body["status"] == "completed", body


async def test_a_policy_without_task_claim_refuses_the_claim(crew: Crew) -> None:
    profile = await new_profile(crew.manager, crew.team_id, {"scopes": ["task:execute"]})
    task_id = await new_task(crew)
    status, body = await claim(crew.executor, task_id, profile["id"])
    assert status == 403 and body["code"] == "profile-scope-denied", body
    assert await attempts(crew.owner, task_id) == []


async def test_a_policy_never_widens_the_credential(crew: Crew, actors: Any) -> None:
    claimer = await actors.agent(scope="task:read task:claim")
    await join_team(crew.owner, crew.team_id, claimer, "executor")
    generous = await new_profile(
        crew.manager, crew.team_id, {"scopes": ["task:claim", "task:execute", "task:read"]}
    )
    task_id = await new_task(crew)
    status, body = await claim(claimer, task_id, generous["id"])
    assert status == 200, body
    status, body = await heartbeat(claimer, task_id)
    assert status == 403 and body["code"] == "missing-scope", body


# --- frozen at claim ---------------------------------------------------------------------------


async def test_revision_policy_and_hash_stay_as_they_were_at_claim(crew: Crew) -> None:
    policy = {"scopes": CLAIM_EXECUTE, "taskTypes": ["freeform"]}
    profile = await new_profile(crew.manager, crew.team_id, policy)
    task_id = await new_task(crew, pinned=[profile["id"]])
    status, claimed = await claim(crew.executor, task_id, profile["id"])
    assert status == 200, claimed
    frozen_hash = policy_hash(policy)
    assert claimed["attempt"]["policySnapshotHash"] == frozen_hash

    # the profile now takes task:execute away; the attempt keeps what it was claimed with
    status, updated = await crew.manager.call(
        "PATCH",
        f"/runtime-profiles/{profile['id']}",
        json={"policy": {"scopes": ["task:claim"], "taskTypes": ["freeform"]}},
    )
    assert status == 200 and updated["revision"] == 2, updated
    status, body = await heartbeat(crew.executor, task_id)
    assert status == 200, body
    status, body = await crew.executor.call(
        "POST",
        f"/tasks/{task_id}/attempts/1/complete",
        json={"output": OUTPUT, "outputCid": json_cid(OUTPUT)},
    )
    assert status == 200, body
    [attempt] = await attempts(crew.owner, task_id)
    assert attempt["runtimeProfileId"] == profile["id"]
    assert attempt["runtimeProfileRevision"] == 1
    assert attempt["policySnapshotHash"] == frozen_hash

    # a new claim reads the profile as it is now
    task_id = await new_task(crew)
    status, claimed = await claim(crew.executor, task_id, profile["id"])
    assert status == 200, claimed
    assert claimed["attempt"]["runtimeProfileRevision"] == 2
    assert claimed["attempt"]["policySnapshotHash"] != frozen_hash
    status, body = await heartbeat(crew.executor, task_id)
    assert status == 403 and body["code"] == "profile-scope-denied", body
