"""Teams on the real stack (SPEC 2.2, 3.2, 4.3, 5): personal teams, creation and founding,
members and roles, invites, groups and projects. Every permission rule is tested both ways:
the role that may, and the roles (and outsiders) that may not, with the rows and tuples that
result (or do not) checked in Postgres."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from workflows.teams import team_founding_workflow_id

INVITE_CODE = re.compile(r"^service_inv_[A-Za-z0-9_-]{22}$")


# --- helpers ------------------------------------------------------------------------------------


async def tuples_of(db_pool: Any, namespace: str, object_id: Any) -> set[str]:
    rows = await db_pool.fetch(
        "SELECT relation, subject_ns, subject_id, subject_relation FROM relation_tuples"
        " WHERE namespace = $1 AND object_id = $2",
        namespace,
        str(object_id),
    )
    return {
        f"{r['relation']}@{r['subject_ns']}:{r['subject_id']}"
        + (f"#{r['subject_relation']}" if r["subject_relation"] else "")
        for r in rows
    }


async def new_team(owner: Any, name: str = "crew") -> str:
    status, body = await owner.call("POST", "/teams", json={"name": name})
    assert status == 201, body
    return str(body["id"])


async def team_with(owner: Any, **roles: Any) -> str:
    """A team of `owner`, with each actor given under its role name (lists allowed)."""
    team_id = await new_team(owner)
    for role, actors in roles.items():
        for actor in actors if isinstance(actors, list) else [actors]:
            await add_member(owner, team_id, actor, role)
    return team_id


async def add_member(owner: Any, team_id: str, actor: Any, role: str) -> None:
    invite_role = "member" if role == "owner" else role
    status, invite = await owner.call(
        "POST", f"/teams/{team_id}/invites", json={"role": invite_role}
    )
    assert status == 201, invite
    status, joined = await actor.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 200, joined
    if role == "owner":
        status, body = await owner.call(
            "PATCH", f"/teams/{team_id}/members/{actor.subject_id}", json={"role": "owner"}
        )
        assert status == 200, body


async def role_of(db_pool: Any, team_id: str, actor: Any) -> set[str]:
    return {
        t.split("@")[0]
        for t in await tuples_of(db_pool, "Team", team_id)
        if t.endswith(f":{actor.subject_id}")
    }


# --- personal teams and reads -------------------------------------------------------------------


async def test_registration_makes_a_personal_team_owned_by_the_agent(actors, db_pool) -> None:
    agent = await actors.agent()
    status, body = await agent.call("GET", "/teams")
    assert status == 200
    [team] = body["items"]
    assert team == {
        "id": team["id"],
        "name": agent.fingerprint,
        "personal": True,
        "status": "active",
        "role": "owner",
    }
    assert await tuples_of(db_pool, "Team", team["id"]) == {f"owners@Agent:{agent.subject_id}"}
    row = await db_pool.fetchrow(
        "SELECT created_by, created_by_ns FROM teams WHERE id = $1", uuid.UUID(team["id"])
    )
    assert (row["created_by"], row["created_by_ns"]) == (agent.subject_id, "Agent")

    status, got = await agent.call("GET", f"/teams/{team['id']}")
    assert status == 200
    assert got["members"] == [
        {
            "subjectId": str(agent.subject_id),
            "subjectNs": "Agent",
            "role": "owner",
            "fingerprint": agent.fingerprint,
        }
    ]
    assert got["role"] == "owner" and got["personal"] is True


async def test_humans_have_no_personal_team(actors) -> None:
    human = await actors.human()
    status, body = await human.call("GET", "/teams")
    assert status == 200 and body == {"items": []}


async def test_a_team_is_invisible_to_outsiders(actors) -> None:
    owner, outsider = await actors.agent(), await actors.agent()
    team_id = await new_team(owner)
    for path in ("", "/members", "/groups", "/projects"):
        status, body = await outsider.call("GET", f"/teams/{team_id}{path}")
        assert (status, body["code"]) == (404, "team-not-found"), (path, body)
    status, body = await outsider.call("GET", f"/teams/{uuid.uuid4()}")
    assert (status, body["code"]) == (404, "team-not-found")
    status, body = await outsider.call("GET", "/teams/not-a-uuid")
    assert (status, body["code"]) == (400, "validation-failed")
    assert body["errors"][0]["pointer"] == "/path/id"
    status, body = await outsider.call("GET", "/teams")
    assert team_id not in {t["id"] for t in body["items"]}


# --- creating teams -----------------------------------------------------------------------------


async def teams_created_by(db_pool: Any, actor: Any) -> int:
    return int(
        await db_pool.fetchval("SELECT count(*) FROM teams WHERE created_by = $1", actor.subject_id)
    )


async def test_a_team_without_founding_members_is_active_at_once(actors, db_pool) -> None:
    owner = await actors.agent()
    status, body = await owner.call("POST", "/teams", json={"name": "  Research crew  "})
    assert status == 201, body
    assert body["name"] == "Research crew" and body["status"] == "active"
    assert body["personal"] is False and body["role"] == "owner"
    assert body["createdBy"] == str(owner.subject_id)
    assert await tuples_of(db_pool, "Team", body["id"]) == {f"owners@Agent:{owner.subject_id}"}
    status, listed = await owner.call("GET", "/teams")
    assert {
        "id": body["id"],
        "name": "Research crew",
        "personal": False,
        "status": "active",
        "role": "owner",
    } in listed["items"]


async def test_a_human_creates_a_team_and_owns_it(actors, db_pool) -> None:
    human = await actors.human()
    team_id = await new_team(human, "humans welcome")
    assert await tuples_of(db_pool, "Team", team_id) == {f"owners@Human:{human.subject_id}"}
    status, body = await human.call("GET", "/teams")
    assert status == 200 and [t["id"] for t in body["items"]] == [team_id]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"name": ""},
        {"name": "   "},
        {"name": "x" * 256},
        {"name": "crew", "unknown": 1},
        {"name": "crew", "foundingMembers": [{"subjectId": "nope", "subjectNs": "Agent"}]},
        {
            "name": "crew",
            "foundingMembers": [{"subjectId": str(uuid.uuid4()), "subjectNs": "Group"}],
        },
        {
            "name": "crew",
            "foundingMembers": [
                {"subjectId": str(uuid.uuid4()), "subjectNs": "Agent", "role": "boss"}
            ],
        },
        {
            "name": "crew",
            "foundingMembers": [
                {"subjectId": str(uuid.uuid4()), "subjectNs": "Agent", "extra": True}
            ],
        },
        {"name": "crew", "foundingMembers": "everyone"},
    ],
)
async def test_bad_team_bodies_are_400_and_write_nothing(actors, db_pool, body) -> None:
    owner = await actors.agent()
    before = await teams_created_by(db_pool, owner)
    status, problem = await owner.call("POST", "/teams", json=body)
    assert status == 400, problem
    assert problem["code"] == "validation-failed" and problem["errors"]
    assert await teams_created_by(db_pool, owner) == before


async def test_founding_members_must_be_distinct_known_and_not_the_creator(actors, db_pool) -> None:
    owner, other = await actors.agent(), await actors.agent()
    before = await teams_created_by(db_pool, owner)
    me = {"subjectId": str(owner.subject_id), "subjectNs": "Agent"}
    them = {"subjectId": str(other.subject_id), "subjectNs": "Agent"}
    ghost = {"subjectId": str(uuid.uuid4()), "subjectNs": "Human"}
    status, problem = await owner.call(
        "POST", "/teams", json={"name": "c", "foundingMembers": [me]}
    )
    assert (status, problem["code"]) == (400, "creator-listed-as-founder")
    assert problem["errors"][0]["pointer"] == "/foundingMembers/0/subjectId"
    status, problem = await owner.call(
        "POST", "/teams", json={"name": "c", "foundingMembers": [them, them]}
    )
    assert (status, problem["code"]) == (400, "validation-failed")
    status, problem = await owner.call(
        "POST", "/teams", json={"name": "c", "foundingMembers": [them, ghost]}
    )
    assert status == 400 and problem["code"] == "unknown-subject", problem
    assert ghost["subjectId"] in problem["detail"]
    assert await teams_created_by(db_pool, owner) == before
    assert (
        await db_pool.fetchval(
            "SELECT count(*) FROM founding_acceptances WHERE subject_id = $1", other.subject_id
        )
        == 0
    )


# --- founding -----------------------------------------------------------------------------------


async def test_founding_becomes_active_when_every_member_accepts(actors, db_pool) -> None:
    creator, cofounder, human, outsider = (
        await actors.agent(),
        await actors.agent(),
        await actors.human(),
        await actors.agent(),
    )
    status, team = await creator.call(
        "POST",
        "/teams",
        json={
            "name": "founders",
            "foundingMembers": [
                {"subjectId": str(cofounder.subject_id), "subjectNs": "Agent"},
                {"subjectId": str(human.subject_id), "subjectNs": "Human", "role": "member"},
            ],
        },
    )
    assert status == 202, team
    team_id = team["id"]
    assert team["status"] == "founding" and team["workflowId"] == f"teams/{team_id}/founding"
    seats = {a["subjectId"]: (a["role"], a["status"]) for a in team["foundingAcceptances"]}
    assert seats == {  # SPEC 3.2: a row for the creator too, pending like the others
        str(creator.subject_id): ("owner", "pending"),
        str(cofounder.subject_id): ("owner", "pending"),
        str(human.subject_id): ("member", "pending"),
    }
    assert await tuples_of(db_pool, "Team", team_id) == set()  # nobody holds a role yet

    # the founders see the team (to accept it); an outsider does not
    status, listed = await cofounder.call("GET", "/teams")
    assert {
        "id": team_id,
        "name": "founders",
        "personal": False,
        "status": "founding",
        "role": "owner",
        "foundingAcceptance": "pending",
    } in listed["items"]
    status, got = await human.call("GET", f"/teams/{team_id}")
    assert status == 200 and got["role"] == "member" and got["members"] == []
    assert (await outsider.call("GET", f"/teams/{team_id}"))[0] == 404
    status, problem = await outsider.call("POST", f"/teams/{team_id}/accept-founding")
    assert (status, problem["code"]) == (404, "team-not-found"), problem

    # accepting is idempotent; every founder but the creator accepting is not enough
    for _ in range(2):
        assert await cofounder.call("POST", f"/teams/{team_id}/accept-founding") == (
            200,
            {"accepted": True, "teamStatus": "founding"},
        )
    assert await human.call("POST", f"/teams/{team_id}/accept-founding") == (
        200,
        {"accepted": True, "teamStatus": "founding"},
    )
    status, listed = await cofounder.call("GET", "/teams")
    mine = next(team for team in listed["items"] if team["id"] == team_id)
    assert mine["foundingAcceptance"] == "accepted"  # the home page's pending list leaves it
    status, got = await creator.call("GET", f"/teams/{team_id}")
    assert status == 200 and got["status"] == "founding", got
    assert {a["subjectId"]: a["status"] for a in got["foundingAcceptances"]}[
        str(creator.subject_id)
    ] == "pending"
    # the creator's own acceptance is the last one needed
    for _ in range(2):
        assert await creator.call("POST", f"/teams/{team_id}/accept-founding") == (
            200,
            {"accepted": True, "teamStatus": "active"},
        )
    assert await tuples_of(db_pool, "Team", team_id) == {
        f"owners@Agent:{creator.subject_id}",
        f"owners@Agent:{cofounder.subject_id}",
        f"members@Human:{human.subject_id}",
    }
    row = await db_pool.fetchrow("SELECT status FROM teams WHERE id = $1", uuid.UUID(team_id))
    assert row["status"] == "active"
    accepted = await db_pool.fetch(
        "SELECT status, accepted_at FROM founding_acceptances WHERE team_id = $1",
        uuid.UUID(team_id),
    )
    assert {r["status"] for r in accepted} == {"accepted"} and all(
        r["accepted_at"] for r in accepted
    )
    status, got = await cofounder.call("GET", f"/teams/{team_id}")
    assert got["status"] == "active" and got["role"] == "owner" and "foundingAcceptances" not in got
    # an active team's owners can do owner things: the cofounder invites
    status, invite = await cofounder.call("POST", f"/teams/{team_id}/invites", json={})
    assert status == 201, invite
    handle = actors._stack.temporal.get_workflow_handle(team_founding_workflow_id(team_id))
    assert (await handle.result())["status"] == "active"


async def test_accepting_a_team_that_is_no_longer_founding_is_409(actors, db_pool) -> None:
    creator, cofounder = await actors.agent(), await actors.agent()
    status, team = await creator.call(
        "POST",
        "/teams",
        json={
            "name": "late",
            "foundingMembers": [{"subjectId": str(cofounder.subject_id), "subjectNs": "Agent"}],
        },
    )
    assert status == 202
    # what the workflow writes after 24 h without acceptance (the timer itself is tested with
    # time skipping in tests/workflow_runs/test_team_founding.py)
    await db_pool.execute(
        "UPDATE teams SET status = 'archived' WHERE id = $1", uuid.UUID(team["id"])
    )
    status, problem = await cofounder.call("POST", f"/teams/{team['id']}/accept-founding")
    assert status == 409 and problem["code"] == "team-not-founding"
    status, listed = await cofounder.call("GET", "/teams")
    assert {
        "id": team["id"],
        "name": "late",
        "personal": False,
        "status": "archived",
        "role": "owner",
        "foundingAcceptance": "pending",
    } in listed["items"]
    await actors._stack.temporal.get_workflow_handle(team["workflowId"]).terminate("test done")


async def test_accept_founding_on_a_team_never_founded_is_404(actors) -> None:
    owner, member = await actors.agent(), await actors.agent()
    team_id = await team_with(owner, member=member)
    for actor in (owner, member):
        status, problem = await actor.call("POST", f"/teams/{team_id}/accept-founding")
        assert (status, problem["code"]) == (404, "team-not-found"), problem


# --- deleting teams -----------------------------------------------------------------------------


async def test_only_an_owner_deletes_a_team_and_everything_of_it_goes(actors, db_pool) -> None:
    owner, manager, member, outsider = [await actors.agent() for _ in range(4)]
    team_id = await team_with(owner, manager=manager, member=member)
    status, group = await owner.call("POST", f"/teams/{team_id}/groups", json={"name": "g"})
    assert status == 201
    await owner.call(
        "POST", f"/groups/{group['id']}/members", json={"subjectId": str(member.subject_id)}
    )
    assert (await outsider.call("DELETE", f"/teams/{team_id}"))[0] == 404
    for actor in (manager, member):
        status, problem = await actor.call("DELETE", f"/teams/{team_id}")
        assert (status, problem["code"]) == (403, "forbidden"), problem
    assert await tuples_of(db_pool, "Team", team_id)
    assert await owner.call("DELETE", f"/teams/{team_id}") == (200, {"success": True})
    assert (
        await db_pool.fetchval("SELECT count(*) FROM teams WHERE id = $1", uuid.UUID(team_id)) == 0
    )
    assert (
        await db_pool.fetchval("SELECT count(*) FROM groups WHERE team_id = $1", uuid.UUID(team_id))
        == 0
    )
    assert await tuples_of(db_pool, "Team", team_id) == set()
    assert await tuples_of(db_pool, "Group", group["id"]) == set()
    assert (await owner.call("GET", f"/teams/{team_id}"))[0] == 404
    assert (await owner.call("DELETE", f"/teams/{team_id}"))[0] == 404


async def test_personal_teams_and_teams_owning_diaries_are_not_deleted(actors, db_pool) -> None:
    owner = await actors.agent()
    _, listed = await owner.call("GET", "/teams")
    personal = listed["items"][0]["id"]
    status, problem = await owner.call("DELETE", f"/teams/{personal}")
    assert status == 400 and problem["code"] == "team-personal-immutable"
    team_id = await new_team(owner)
    await db_pool.execute(
        "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
        " VALUES ($1, $2, $3, 'd', 'private')",
        uuid.uuid4(),
        owner.subject_id,
        uuid.UUID(team_id),
    )
    status, problem = await owner.call("DELETE", f"/teams/{team_id}")
    assert status == 409 and problem["code"] == "team-has-diaries"
    assert await tuples_of(db_pool, "Team", team_id) == {f"owners@Agent:{owner.subject_id}"}


# --- members and roles --------------------------------------------------------------------------


async def test_members_are_listed_with_roles(actors) -> None:
    owner, manager, executor, human = (
        await actors.agent(),
        await actors.agent(),
        await actors.agent(),
        await actors.human(),
    )
    team_id = await team_with(owner, manager=manager, executor=executor, member=human)
    for reader in (owner, manager, executor, human):
        status, body = await reader.call("GET", f"/teams/{team_id}/members")
        assert status == 200, body
        roles = {m["subjectId"]: (m["subjectNs"], m["role"]) for m in body["items"]}
        assert roles == {
            str(owner.subject_id): ("Agent", "owner"),
            str(manager.subject_id): ("Agent", "manager"),
            str(executor.subject_id): ("Agent", "executor"),
            str(human.subject_id): ("Human", "member"),
        }
    status, body = await executor.call("GET", "/teams")
    assert {
        "id": team_id,
        "name": "crew",
        "personal": False,
        "status": "active",
        "role": "executor",
    } in body["items"]


async def test_role_changes_follow_the_permission_table(actors, db_pool) -> None:
    owner, manager, member, other, outsider = [await actors.agent() for _ in range(5)]
    team_id = await team_with(owner, manager=manager, member=[member, other])

    async def patch(actor: Any, subject: Any, role: str) -> tuple[int, Any]:
        return await actor.call(
            "PATCH", f"/teams/{team_id}/members/{subject.subject_id}", json={"role": role}
        )

    assert (await patch(outsider, other, "manager"))[0] == 404
    status, problem = await patch(member, other, "manager")
    assert (status, problem["code"]) == (403, "forbidden"), problem
    assert await role_of(db_pool, team_id, other) == {"members"}
    # a manager moves non-owners between manager, executor and member ...
    status, body = await patch(manager, other, "executor")
    assert status == 200 and body == {
        "subjectId": str(other.subject_id),
        "subjectNs": "Agent",
        "role": "executor",
        "fingerprint": other.fingerprint,
    }
    assert await role_of(db_pool, team_id, other) == {"executors"}
    # ... but neither grants nor takes `owner`
    status, problem = await patch(manager, other, "owner")
    assert status == 403 and problem["code"] == "owner-required"
    status, problem = await patch(manager, owner, "member")
    assert status == 403 and problem["code"] == "owner-required"
    assert await role_of(db_pool, team_id, owner) == {"owners"}
    # an owner does both, and never leaves the team without an owner
    status, problem = await patch(owner, owner, "manager")
    assert status == 409 and problem["code"] == "team-last-owner"
    assert (await patch(owner, member, "owner"))[0] == 200
    assert (await patch(owner, owner, "manager"))[0] == 200
    assert await role_of(db_pool, team_id, owner) == {"managers"}
    assert await role_of(db_pool, team_id, member) == {"owners"}
    status, problem = await patch(member, member, "member")
    assert status == 409 and problem["code"] == "team-last-owner"
    # unknown subjects, roles and fields
    status, problem = await patch(member, outsider, "member")
    assert status == 404 and problem["code"] == "not-a-team-member"
    assert (await patch(member, other, "boss"))[0] == 400
    status, problem = await member.call(
        "PATCH", f"/teams/{team_id}/members/{other.subject_id}", json={"role": "member", "x": 1}
    )
    assert (status, problem["code"]) == (400, "validation-failed")
    status, problem = await member.call(
        "PATCH", f"/teams/{team_id}/members/not-a-uuid", json={"role": "member"}
    )
    assert (status, problem["code"]) == (400, "validation-failed")
    assert problem["errors"][0]["pointer"] == "/path/subjectId"
    assert await role_of(db_pool, team_id, other) == {"executors"}


async def test_removing_members_follows_the_permission_table(actors, db_pool) -> None:
    owner, manager, member, other, outsider = [await actors.agent() for _ in range(5)]
    team_id = await team_with(owner, manager=manager, member=[member, other])

    async def remove(actor: Any, subject: Any) -> tuple[int, Any]:
        return await actor.call("DELETE", f"/teams/{team_id}/members/{subject.subject_id}")

    assert (await remove(outsider, other))[0] == 404
    assert (await remove(outsider, outsider))[0] == 404
    status, problem = await remove(member, other)
    assert status == 403, problem
    status, problem = await remove(manager, owner)
    assert status == 403 and problem["code"] == "owner-required"
    status, problem = await remove(owner, owner)
    assert status == 409 and problem["code"] == "team-last-owner"
    assert await remove(manager, other) == (200, {"success": True})
    assert await role_of(db_pool, team_id, other) == set()
    assert (await other.call("GET", f"/teams/{team_id}"))[0] == 404
    assert await remove(member, member) == (200, {"success": True})  # leaving needs no role
    assert await role_of(db_pool, team_id, member) == set()
    assert (await remove(owner, member))[0] == 404
    assert await remove(owner, manager) == (200, {"success": True})
    assert await tuples_of(db_pool, "Team", team_id) == {f"owners@Agent:{owner.subject_id}"}


async def test_a_leaving_member_leaves_the_teams_groups(actors, db_pool) -> None:
    owner, member = await actors.agent(), await actors.agent()
    team_id = await team_with(owner, member=member)
    _, group = await owner.call("POST", f"/teams/{team_id}/groups", json={"name": "g"})
    status, _ = await owner.call(
        "POST", f"/groups/{group['id']}/members", json={"subjectId": str(member.subject_id)}
    )
    assert status == 201
    assert f"members@Agent:{member.subject_id}" in await tuples_of(db_pool, "Group", group["id"])
    assert (await member.call("DELETE", f"/teams/{team_id}/members/{member.subject_id}"))[0] == 200
    assert await tuples_of(db_pool, "Group", group["id"]) == {f"parent@Team:{team_id}"}


async def test_personal_teams_take_no_members(actors) -> None:
    owner, other = await actors.agent(), await actors.agent()
    _, listed = await owner.call("GET", "/teams")
    personal = listed["items"][0]["id"]
    for path, body in (
        (f"/teams/{personal}/invites", {}),
        (f"/teams/{personal}/groups", {"name": "g"}),
    ):
        status, problem = await owner.call("POST", path, json=body)
        assert status == 400 and problem["code"] == "team-personal-immutable", (path, problem)
    status, problem = await owner.call(
        "PATCH", f"/teams/{personal}/members/{owner.subject_id}", json={"role": "member"}
    )
    assert status == 400 and problem["code"] == "team-personal-immutable"
    status, problem = await owner.call("DELETE", f"/teams/{personal}/members/{owner.subject_id}")
    assert status == 400 and problem["code"] == "team-personal-immutable"
    assert (await other.call("POST", f"/teams/{personal}/invites", json={}))[0] == 404


# --- invites ------------------------------------------------------------------------------------


async def invites_of(db_pool: Any, team_id: str) -> int:
    return int(
        await db_pool.fetchval(
            "SELECT count(*) FROM team_invites WHERE team_id = $1", uuid.UUID(team_id)
        )
    )


async def test_owners_and_managers_issue_invites_others_cannot(actors, db_pool) -> None:
    owner, manager, executor, member, outsider = [await actors.agent() for _ in range(5)]
    team_id = await team_with(owner, manager=manager, executor=executor, member=member)
    before = await invites_of(db_pool, team_id)
    status, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={})
    assert status == 201, invite
    assert INVITE_CODE.match(invite["code"]), invite["code"]
    assert (invite["role"], invite["maxUses"], invite["useCount"]) == ("member", 1, 0)
    assert invite["teamId"] == team_id and invite["createdBy"] == str(owner.subject_id)
    row = await db_pool.fetchrow(
        "SELECT expires_at - created_at AS ttl FROM team_invites WHERE id = $1",
        uuid.UUID(invite["id"]),
    )
    assert abs(row["ttl"].total_seconds() - 168 * 3600) < 60
    status, invite = await manager.call(
        "POST",
        f"/teams/{team_id}/invites",
        json={"role": "manager", "maxUses": 3, "expiresInHours": 1},
    )
    assert status == 201 and (invite["role"], invite["maxUses"]) == ("manager", 3)
    for actor in (executor, member):
        status, problem = await actor.call("POST", f"/teams/{team_id}/invites", json={})
        assert (status, problem["code"]) == (403, "forbidden"), problem
    assert (await outsider.call("POST", f"/teams/{team_id}/invites", json={}))[0] == 404
    assert await invites_of(db_pool, team_id) == before + 2


@pytest.mark.parametrize(
    "body",
    [
        {"role": "owner"},
        {"maxUses": 0},
        {"maxUses": 1001},
        {"expiresInHours": 0},
        {"expiresInHours": 721},
        {"unknown": True},
        {"maxUses": "many"},
    ],
)
async def test_bad_invite_bodies_are_400_and_write_nothing(actors, db_pool, body) -> None:
    owner = await actors.agent()
    team_id = await new_team(owner)
    status, problem = await owner.call("POST", f"/teams/{team_id}/invites", json=body)
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert await invites_of(db_pool, team_id) == 0


async def test_listing_and_revoking_invites_needs_manage_members(actors, db_pool) -> None:
    owner, member, outsider, joiner = [await actors.agent() for _ in range(4)]
    team_id = await team_with(owner, member=member)
    _, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"maxUses": 5})
    status, listed = await owner.call("GET", f"/teams/{team_id}/invites")
    assert status == 200 and invite in listed["items"]
    assert (await member.call("GET", f"/teams/{team_id}/invites"))[0] == 403
    assert (await outsider.call("GET", f"/teams/{team_id}/invites"))[0] == 404
    path = f"/teams/{team_id}/invites/{invite['id']}"
    assert (await member.call("DELETE", path))[0] == 403
    assert (await outsider.call("DELETE", path))[0] == 404
    assert await owner.call("DELETE", path) == (200, {"success": True})
    assert (await owner.call("DELETE", path))[0] == 404
    status, problem = await joiner.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 404, problem
    assert (await owner.call("DELETE", f"/teams/{team_id}/invites/{uuid.uuid4()}"))[0] == 404


async def test_a_human_joins_with_an_invite(actors, db_pool) -> None:
    owner, human = await actors.agent(), await actors.human()
    team_id = await new_team(owner)
    _, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"role": "executor"})
    status, joined = await human.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 200 and joined == {"teamId": team_id, "role": "executor"}
    assert await role_of(db_pool, team_id, human) == {"executors"}
    assert f"executors@Human:{human.subject_id}" in await tuples_of(db_pool, "Team", team_id)
    status, listed = await human.call("GET", "/teams")
    assert [t["role"] for t in listed["items"] if t["id"] == team_id] == ["executor"]
    row = await db_pool.fetchrow(
        "SELECT use_count, used_at FROM team_invites WHERE id = $1", uuid.UUID(invite["id"])
    )
    assert row["use_count"] == 1 and row["used_at"] is not None


async def test_a_repeated_join_answers_200_another_role_409_and_both_use_nothing(
    actors, db_pool
) -> None:
    owner, member = await actors.agent(), await actors.agent()
    team_id = await team_with(owner, member=member)
    _, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"maxUses": 2})
    # already a member in the invite's role: the state this join reaches (a retried join)
    status, joined = await member.call("POST", "/teams/join", json={"code": invite["code"]})
    assert (status, joined) == (200, {"teamId": team_id, "role": "member"})
    status, problem = await owner.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 409 and problem["code"] == "already-member"
    assert (
        await db_pool.fetchval(
            "SELECT use_count FROM team_invites WHERE id = $1", uuid.UUID(invite["id"])
        )
        == 0
    )
    assert await role_of(db_pool, team_id, owner) == {"owners"}


async def test_an_invite_admits_max_uses_subjects_then_is_exhausted(actors, db_pool) -> None:
    owner = await actors.agent()
    first, second, third = [await actors.agent() for _ in range(3)]
    team_id = await new_team(owner)
    _, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"maxUses": 2})
    for joiner in (first, second):
        status, body = await joiner.call("POST", "/teams/join", json={"code": invite["code"]})
        assert status == 200, body
    status, problem = await third.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 410 and problem["code"] == "invite-exhausted"
    assert await role_of(db_pool, team_id, third) == set()
    assert (
        await db_pool.fetchval(
            "SELECT use_count FROM team_invites WHERE id = $1", uuid.UUID(invite["id"])
        )
        == 2
    )


async def test_an_expired_invite_is_410(actors, db_pool) -> None:
    owner, joiner = await actors.agent(), await actors.agent()
    team_id = await new_team(owner)
    _, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"expiresInHours": 1})
    await db_pool.execute(
        "UPDATE team_invites SET expires_at = now() - interval '1 second' WHERE id = $1",
        uuid.UUID(invite["id"]),
    )
    status, problem = await joiner.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 410 and problem["code"] == "invite-expired"
    assert await role_of(db_pool, team_id, joiner) == set()


async def test_unknown_and_malformed_codes(actors) -> None:
    joiner = await actors.agent()
    status, problem = await joiner.call(
        "POST", "/teams/join", json={"code": "service_inv_" + "A" * 22}
    )
    assert status == 404, problem
    for body in ({"code": "nope"}, {}, {"code": "service_inv_" + "A" * 22, "x": 1}):
        status, problem = await joiner.call("POST", "/teams/join", json=body)
        assert (status, problem["code"]) == (400, "validation-failed"), (body, problem)


async def test_a_manager_invite_makes_a_manager(actors, db_pool) -> None:
    owner, joiner, later = await actors.agent(), await actors.agent(), await actors.agent()
    team_id = await new_team(owner)
    _, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"role": "manager"})
    assert (await joiner.call("POST", "/teams/join", json={"code": invite["code"]}))[1] == {
        "teamId": team_id,
        "role": "manager",
    }
    # the new manager manages members: it invites in turn
    status, second = await joiner.call("POST", f"/teams/{team_id}/invites", json={})
    assert status == 201
    assert (await later.call("POST", "/teams/join", json={"code": second["code"]}))[0] == 200
    assert await role_of(db_pool, team_id, later) == {"members"}


# --- groups -------------------------------------------------------------------------------------


async def test_groups_are_made_by_owners_and_managers(actors, db_pool) -> None:
    owner, manager, member, outsider = [await actors.agent() for _ in range(4)]
    team_id = await team_with(owner, manager=manager, member=member)
    status, group = await owner.call(
        "POST", f"/teams/{team_id}/groups", json={"name": " reviewers "}
    )
    assert status == 201, group
    assert group["name"] == "reviewers" and group["teamId"] == team_id and group["members"] == []
    assert await tuples_of(db_pool, "Group", group["id"]) == {f"parent@Team:{team_id}"}
    status, _ = await manager.call("POST", f"/teams/{team_id}/groups", json={"name": "writers"})
    assert status == 201
    assert (await member.call("POST", f"/teams/{team_id}/groups", json={"name": "x"}))[0] == 403
    assert (await outsider.call("POST", f"/teams/{team_id}/groups", json={"name": "x"}))[0] == 404
    status, problem = await manager.call(
        "POST", f"/teams/{team_id}/groups", json={"name": "reviewers"}
    )
    assert status == 409 and problem["code"] == "group-exists"
    for body in ({"name": ""}, {}, {"name": "g", "x": 1}):
        assert (await owner.call("POST", f"/teams/{team_id}/groups", json=body))[0] == 400
    count = await db_pool.fetchval(
        "SELECT count(*) FROM groups WHERE team_id = $1", uuid.UUID(team_id)
    )
    assert count == 2
    status, listed = await member.call("GET", f"/teams/{team_id}/groups")
    assert status == 200 and [g["name"] for g in listed["items"]] == ["reviewers", "writers"]
    assert (await outsider.call("GET", f"/teams/{team_id}/groups"))[0] == 404


async def test_group_membership_follows_the_permission_table(actors, db_pool) -> None:
    owner, manager, member, human, outsider = (
        await actors.agent(),
        await actors.agent(),
        await actors.agent(),
        await actors.human(),
        await actors.agent(),
    )
    team_id = await team_with(owner, manager=manager, member=[member, human])
    _, group = await owner.call("POST", f"/teams/{team_id}/groups", json={"name": "g"})
    gid = group["id"]

    async def add(actor: Any, subject: Any, **extra: Any) -> tuple[int, Any]:
        return await actor.call(
            "POST", f"/groups/{gid}/members", json={"subjectId": str(subject.subject_id), **extra}
        )

    assert (await add(outsider, member))[0] == 404
    assert (await add(member, member))[0] == 403
    assert await add(manager, member) == (
        201,
        {"subjectId": str(member.subject_id), "subjectNs": "Agent"},
    )
    assert await add(owner, human, subjectNs="Human") == (
        201,
        {"subjectId": str(human.subject_id), "subjectNs": "Human"},
    )
    status, problem = await add(owner, member)
    assert status == 409 and problem["code"] == "group-member-exists"
    status, problem = await add(owner, outsider)
    assert status == 404 and problem["code"] == "not-a-team-member"
    status, problem = await add(owner, manager, subjectNs="Human")
    assert status == 404 and problem["code"] == "not-a-team-member"
    assert (await add(owner, manager, subjectNs="Group"))[0] == 400
    assert await tuples_of(db_pool, "Group", gid) == {
        f"parent@Team:{team_id}",
        f"members@Agent:{member.subject_id}",
        f"members@Human:{human.subject_id}",
    }

    for reader in (member, human, manager):
        status, got = await reader.call("GET", f"/groups/{gid}")
        assert status == 200 and len(got["members"]) == 2
        status, members = await reader.call("GET", f"/groups/{gid}/members")
        assert status == 200 and members["items"] == got["members"]
    assert (await outsider.call("GET", f"/groups/{gid}"))[0] == 404
    assert (await outsider.call("GET", f"/groups/{gid}/members"))[0] == 404
    assert (await owner.call("GET", f"/groups/{uuid.uuid4()}"))[0] == 404

    async def remove(actor: Any, subject: Any) -> tuple[int, Any]:
        return await actor.call("DELETE", f"/groups/{gid}/members/{subject.subject_id}")

    assert (await remove(outsider, member))[0] == 404
    assert (await remove(member, human))[0] == 403
    assert await remove(human, human) == (200, {"success": True})  # leaving
    assert await remove(manager, member) == (200, {"success": True})
    assert (await remove(manager, member))[0] == 404
    assert await tuples_of(db_pool, "Group", gid) == {f"parent@Team:{team_id}"}


async def test_deleting_a_group_drops_its_grants(actors, db_pool) -> None:
    owner, manager, member, outsider = [await actors.agent() for _ in range(4)]
    team_id = await team_with(owner, manager=manager, member=member)
    _, group = await owner.call("POST", f"/teams/{team_id}/groups", json={"name": "g"})
    gid = group["id"]
    await owner.call("POST", f"/groups/{gid}/members", json={"subjectId": str(member.subject_id)})
    diary = uuid.uuid4()
    await db_pool.execute(
        "INSERT INTO relation_tuples (namespace, object_id, relation, subject_ns, subject_id,"
        " subject_relation) VALUES ('Diary', $1, 'writers', 'Group', $2, 'members')",
        str(diary),
        gid,
    )
    assert (await outsider.call("DELETE", f"/groups/{gid}"))[0] == 404
    assert (await member.call("DELETE", f"/groups/{gid}"))[0] == 403
    assert await manager.call("DELETE", f"/groups/{gid}") == (200, {"success": True})
    assert await tuples_of(db_pool, "Group", gid) == set()
    assert await tuples_of(db_pool, "Diary", diary) == set()
    assert await db_pool.fetchval("SELECT count(*) FROM groups WHERE id = $1", uuid.UUID(gid)) == 0
    assert (await owner.call("GET", f"/groups/{gid}"))[0] == 404


# --- projects -----------------------------------------------------------------------------------


async def test_projects_are_made_by_owners_and_managers(actors, db_pool) -> None:
    owner, manager, executor, member, outsider = [await actors.agent() for _ in range(5)]
    team_id = await team_with(owner, manager=manager, executor=executor, member=member)
    status, project = await owner.call("POST", f"/teams/{team_id}/projects", json={"name": "alpha"})
    assert status == 201, project
    assert project["teamId"] == team_id and project["createdBy"] == str(owner.subject_id)
    assert (await manager.call("POST", f"/teams/{team_id}/projects", json={"name": "beta"}))[
        0
    ] == 201
    for actor in (executor, member):
        assert (await actor.call("POST", f"/teams/{team_id}/projects", json={"name": "x"}))[
            0
        ] == 403
    assert (await outsider.call("POST", f"/teams/{team_id}/projects", json={"name": "x"}))[0] == 404
    status, problem = await owner.call("POST", f"/teams/{team_id}/projects", json={"name": "alpha"})
    assert status == 409 and problem["code"] == "project-exists"
    for body in ({"name": ""}, {"name": "p", "teamId": team_id}):
        assert (await owner.call("POST", f"/teams/{team_id}/projects", json=body))[0] == 400
    for reader in (owner, executor, member):
        status, listed = await reader.call("GET", f"/teams/{team_id}/projects")
        assert status == 200 and [p["name"] for p in listed["items"]] == ["alpha", "beta"]
    assert (await outsider.call("GET", f"/teams/{team_id}/projects"))[0] == 404
    count = await db_pool.fetchval(
        "SELECT count(*) FROM projects WHERE team_id = $1", uuid.UUID(team_id)
    )
    assert count == 2


async def test_a_personal_team_may_hold_projects(actors) -> None:
    owner = await actors.agent()
    _, listed = await owner.call("GET", "/teams")
    personal = listed["items"][0]["id"]
    status, project = await owner.call("POST", f"/teams/{personal}/projects", json={"name": "mine"})
    assert status == 201 and project["teamId"] == personal
