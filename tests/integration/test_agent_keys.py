"""Agent keys on the real stack (SPEC 2.3, 3.5, 4.6, 5.4, 7, 9): issue, authenticate, list,
rotate, revoke, expiry at read time, v1/v2 metadata; every rule both ways, and every refusal
with its own code and nothing written."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from actors import Actor
from histories import opened_text

from infra.devstack import free_port
from schemas.kernel.crypto import hash_secret
from schemas.principals import AGENT_SCOPES, DAEMON_MIN_SCOPES
from workflows.agent_keys import create_workflow_id

ALL_SCOPES = " ".join(AGENT_SCOPES)


# --- helpers ----------------------------------------------------------------------------------


async def issue(
    caller: Actor,
    *,
    team: Any = None,
    agent: Actor | uuid.UUID | None = None,
    idempotency_key: str | None = None,
    **body: Any,
) -> tuple[int, Any]:
    target = agent.subject_id if isinstance(agent, Actor) else agent
    payload = {"agentId": str(target or caller.subject_id), "name": "daemon", **body}
    headers = {"Idempotency-Key": idempotency_key or uuid.uuid4().hex}
    return await caller.call("POST", "/agent-keys", json=payload, team=team, headers=headers)


async def issued(caller: Actor, **kwargs: Any) -> dict[str, Any]:
    status, key = await issue(caller, **kwargs)
    assert status == 201, key
    return dict(key)


def holding(actor: Actor, secret: str) -> Actor:
    """The same agent, calling with an agent key instead of its OAuth2 token."""
    return dataclasses.replace(actor, auth={"Authorization": f"Bearer {secret}"})


async def personal_team(actor: Actor) -> str:
    status, body = await actor.call("GET", "/teams")
    assert status == 200, body
    return str(next(team["id"] for team in body["items"] if team["personal"]))


async def new_team(owner: Actor) -> str:
    status, body = await owner.call("POST", "/teams", json={"name": "crew"})
    assert status == 201, body
    return str(body["id"])


async def add_member(owner: Actor, team_id: str, actor: Actor, role: str = "member") -> None:
    status, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"role": role})
    assert status == 201, invite
    status, joined = await actor.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 200, joined


async def remove_member(owner: Actor, team_id: str, actor: Actor) -> None:
    status, body = await owner.call("DELETE", f"/teams/{team_id}/members/{actor.subject_id}")
    assert status == 200, body


async def key_rows(db_pool: Any, agent: Actor) -> int:
    return int(
        await db_pool.fetchval(
            "SELECT count(*) FROM agent_keys WHERE actor_id = $1", agent.subject_id
        )
    )


async def rotate(caller: Actor, key_id: str, *, team: Any = None, identity: bool = False) -> Any:
    params = {"bindingScope": "identity"} if identity else None
    return await caller.call("POST", f"/agent-keys/{key_id}/rotate", team=team, params=params)


async def revoke(
    caller: Actor, key_id: str, *, team: Any = None, identity: bool = False, **body: Any
) -> Any:
    params = {"bindingScope": "identity"} if identity else None
    payload = body or {"reason": "superseded"}
    return await caller.call(
        "POST", f"/agent-keys/{key_id}/revoke", team=team, params=params, json=payload
    )


# --- issue and authenticate -------------------------------------------------------------------


async def test_a_team_key_is_issued_once_and_authenticates_with_its_team(
    stack: Any, actors: Any, db_pool: Any
) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    key = await issued(agent, team=team, idempotency_key="first-key")
    assert key["bindingScope"] == "team" and key["teamId"] == team
    assert key["agentId"] == str(agent.subject_id) and key["status"] == "active"
    assert sorted(key["scopes"]) == sorted(DAEMON_MIN_SCOPES)  # omitted -> the daemon minimum
    assert key["secret"].startswith(f"service_ak_{key['id']}_")
    expires = datetime.fromisoformat(key["expiresAt"])
    assert abs(expires - (datetime.now(UTC) + timedelta(days=30))) < timedelta(minutes=1)

    status, me = await holding(agent, key["secret"]).call("GET", "/agents/whoami", team=team)
    assert status == 200, me
    assert me["credentialBinding"] == {
        "bindingScope": "team",
        "keyId": key["id"],
        "boundTeamId": team,
    }
    assert me["agentId"] == str(agent.subject_id) and sorted(me["scopes"]) == sorted(
        DAEMON_MIN_SCOPES
    )
    # under OAuth2 there is no binding
    status, me = await agent.call("GET", "/agents/whoami")
    assert status == 200 and "credentialBinding" not in me

    # only the keyed hash is stored, and the secret is in no workflow history
    row = await db_pool.fetchrow("SELECT * FROM agent_keys WHERE id = $1", uuid.UUID(key["id"]))
    assert row["secret_hash"] == hash_secret(key["secret"], stack.settings.secret_bytes)
    assert key["secret"] not in json.dumps({k: str(v) for k, v in dict(row).items()})
    assert row["metadata"] == {"version": "v2", "binding_scope": "team", "team_id": team}
    history = await stack.temporal.get_workflow_handle(
        f"agent-keys/{key['id']}/expiry"
    ).fetch_history()
    assert key["secret"] not in str(history.events)
    create_id = create_workflow_id("Agent", agent.subject_id, "first-key")
    create_history = await stack.temporal.get_workflow_handle(create_id).fetch_history()
    # its payloads opened: the hash is there, the secret not (sealed, neither shows)
    opened = await opened_text(create_history, stack.temporal)
    assert row["secret_hash"] in opened
    assert key["secret"] not in opened
    assert key["secret"] not in str(create_history.events)


async def test_a_team_key_needs_its_own_team_header(actors: Any) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    other = await new_team(agent)
    key = await issued(agent, team=team)
    holder = holding(agent, key["secret"])
    assert (await holder.call("GET", "/agents/whoami", team=team))[0] == 200

    status, problem = await holder.call("GET", "/agents/whoami")
    assert (status, problem["code"]) == (403, "key-team-header-required")
    # the agent is a member (the owner) of `other`: the binding still decides
    status, problem = await holder.call("GET", "/agents/whoami", team=other)
    assert (status, problem["code"]) == (403, "key-team-mismatch")


async def test_bad_keys_are_401_with_distinct_codes_and_write_nothing(
    actors: Any, db_pool: Any
) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    key = await issued(agent, team=team, scopes=[*DAEMON_MIN_SCOPES, "diary:write"])
    before = await db_pool.fetchval("SELECT count(*) FROM diaries")
    body = {"name": "notes", "visibility": "private"}
    cases = {
        "service_ak_not-a-key": "agent-key-malformed",
        f"service_ak_{key['id']}": "agent-key-malformed",
        f"service_ak_{key['id'].upper()}_{'x' * 43}": "agent-key-malformed",
        f"service_ak_{key['id']}_{'x' * 43}": "agent-key-invalid",
        f"service_ak_{uuid.uuid4()}_{'x' * 43}": "agent-key-invalid",
    }
    for secret, code in cases.items():
        status, problem = await holding(agent, secret).call(
            "POST", "/diaries", json=body, team=team
        )
        assert (status, problem["code"]) == (401, code), secret
    assert await db_pool.fetchval("SELECT count(*) FROM diaries") == before
    # the genuine key writes
    status, diary = await holding(agent, key["secret"]).call(
        "POST", "/diaries", json=body, team=team
    )
    assert status == 201, diary


async def test_the_keys_scopes_are_the_principals_scopes_on_every_route(
    actors: Any, db_pool: Any
) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    key = await issued(agent, team=team)  # the daemon minimum: no diary:write, no key:manage
    holder = holding(agent, key["secret"])
    before = await db_pool.fetchval("SELECT count(*) FROM diaries")
    status, problem = await holder.call(
        "POST", "/diaries", json={"name": "n", "visibility": "private"}, team=team
    )
    assert (status, problem["code"]) == (403, "missing-scope")
    assert await db_pool.fetchval("SELECT count(*) FROM diaries") == before
    status, problem = await holder.call("GET", "/agent-keys", team=team)
    assert (status, problem["code"]) == (403, "missing-scope")
    status, tasks = await holder.call("GET", "/tasks", team=team)  # task:read is held
    assert status == 200, tasks


async def test_an_identity_key_works_in_the_agents_teams_only(actors: Any) -> None:
    agent = await actors.agent()
    outsider = await actors.agent()
    team = await personal_team(agent)
    foreign = await new_team(outsider)
    key = await issued(agent, bindingScope="identity")
    assert key["bindingScope"] == "identity" and "teamId" not in key
    holder = holding(agent, key["secret"])

    status, me = await holder.call("GET", "/agents/whoami")
    assert status == 200, me
    assert me["credentialBinding"] == {"bindingScope": "identity", "keyId": key["id"]}
    status, tasks = await holder.call("GET", "/tasks", team=team)
    assert status == 200, tasks
    status, problem = await holder.call("GET", "/tasks", team=foreign)
    assert (status, problem["code"]) == (403, "key-team-not-authorized")

    # joining the team authorizes the key there; the key itself granted nothing
    await add_member(outsider, foreign, agent)
    assert (await holder.call("GET", "/tasks", team=foreign))[0] == 200
    await remove_member(outsider, foreign, agent)
    status, problem = await holder.call("GET", "/tasks", team=foreign)
    assert (status, problem["code"]) == (403, "key-team-not-authorized")


# --- bodies, headers, scopes ----------------------------------------------------------------------


async def test_create_checks_its_headers_and_body(actors: Any, db_pool: Any) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    payload = {"agentId": str(agent.subject_id), "name": "daemon"}
    status, problem = await agent.call("POST", "/agent-keys", json=payload, team=team)
    assert (status, problem["code"]) == (400, "idempotency-key-required")
    status, problem = await issue(agent)  # a team key without the team header
    assert (status, problem["code"]) == (400, "team-required")
    status, problem = await issue(agent, team=team, bindingScope="identity")
    assert (status, problem["code"]) == (400, "team-header-not-allowed")
    for bad in ({"ttlDays": 91}, {"ttlDays": 0}, {"color": "red"}, {"bindingScope": "global"}):
        status, problem = await issue(agent, team=team, **bad)
        assert (status, problem["code"]) == (400, "validation-failed"), bad
    assert await key_rows(db_pool, agent) == 0
    key = await issued(agent, team=team, ttlDays=90)
    expires = datetime.fromisoformat(key["expiresAt"])
    assert abs(expires - (datetime.now(UTC) + timedelta(days=90))) < timedelta(minutes=1)


async def test_requested_scopes_stay_within_the_grant_and_the_callers_scopes(
    actors: Any, db_pool: Any
) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    status, problem = await issue(agent, team=team, scopes=["task:read", "root:all"])
    assert (status, problem["code"]) == (400, "scope-not-grantable")

    narrow = await actors.agent(scope="key:manage agent:profile task:read")
    narrow_team = await personal_team(narrow)
    status, problem = await issue(narrow, team=narrow_team)  # the six are beyond the token
    assert (status, problem["code"]) == (403, "scope-escalation")
    status, problem = await issue(narrow, team=narrow_team, scopes=["task:read", "task:claim"])
    assert (status, problem["code"]) == (403, "scope-escalation")
    assert await key_rows(db_pool, agent) == 0 and await key_rows(db_pool, narrow) == 0
    key = await issued(narrow, team=narrow_team, scopes=["task:read", "agent:profile"])
    assert key["scopes"] == ["agent:profile", "task:read"]

    # a key can mint keys only within its own scopes
    parent = await issued(agent, team=team, scopes=["key:manage", "task:read"])
    holder = holding(agent, parent["secret"])
    status, problem = await issue(holder, team=team, scopes=["task:read", "diary:write"])
    assert (status, problem["code"]) == (403, "scope-escalation")
    child = await issued(holder, team=team, scopes=["task:read"])
    assert child["scopes"] == ["task:read"]


async def test_a_retried_create_is_409_and_never_mints_a_second_key(
    actors: Any, db_pool: Any
) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    first = await issued(agent, team=team, idempotency_key="create-once")
    status, problem = await issue(agent, team=team, idempotency_key="create-once")
    assert (status, problem["code"]) == (409, "agent-key-duplicate")
    assert "secret" not in problem and first["secret"] not in json.dumps(problem)
    assert await key_rows(db_pool, agent) == 1
    # another key, or another caller with the same key, issues normally
    await issued(agent, team=team, idempotency_key="create-twice")
    other = await actors.agent()
    await issued(other, team=await personal_team(other), idempotency_key="create-once")
    assert await key_rows(db_pool, agent) == 2
    assert create_workflow_id("Agent", agent.subject_id, "k") != create_workflow_id(
        "Agent", other.subject_id, "k"
    )


async def test_a_failed_create_can_be_retried_with_the_same_idempotency_key(
    actors: Any, db_pool: Any
) -> None:
    owner = await actors.agent()
    agent = await actors.agent()
    team = await new_team(owner)
    status, problem = await issue(owner, team=team, agent=agent, idempotency_key="again")
    assert (status, problem["code"]) == (403, "agent-not-team-member")
    await add_member(owner, team, agent)
    await issued(owner, team=team, agent=agent, idempotency_key="again")
    assert await key_rows(db_pool, agent) == 1


# --- who may manage (rule 8) ------------------------------------------------------------------


async def test_team_keys_are_managed_by_the_agent_or_the_teams_credential_managers(
    actors: Any, db_pool: Any
) -> None:
    owner = await actors.human()
    manager = await actors.agent()
    member = await actors.agent()
    executor = await actors.agent()
    stranger = await actors.agent()
    status, team_body = await owner.call("POST", "/teams", json={"name": "crew"})
    assert status == 201, team_body
    team = str(team_body["id"])
    await add_member(owner, team, manager, "manager")
    await add_member(owner, team, member, "member")
    await add_member(owner, team, executor, "executor")

    # the owner (a human) and a manager issue for an agent member; the agent for itself
    by_owner = await issued(owner, team=team, agent=executor)
    by_manager = await issued(manager, team=team, agent=executor)
    own = await issued(executor, team=team)
    assert {by_owner["teamId"], by_manager["teamId"], own["teamId"]} == {team}
    # a plain member issues only for itself; a stranger not even that
    status, problem = await issue(member, team=team, agent=executor)
    assert (status, problem["code"]) == (403, "key-manage-forbidden")
    status, problem = await issue(stranger, team=team)
    assert (status, problem["code"]) == (403, "agent-not-team-member")
    status, problem = await issue(owner, team=team, agent=stranger)
    assert (status, problem["code"]) == (403, "agent-not-team-member")
    assert await key_rows(db_pool, executor) == 3 and await key_rows(db_pool, stranger) == 0

    # rotate and revoke: the agent, the managers; not a plain member
    status, problem = await rotate(member, by_owner["id"], team=team)
    assert (status, problem["code"]) == (403, "key-manage-forbidden")
    status, problem = await revoke(member, by_owner["id"], team=team)
    assert (status, problem["code"]) == (403, "key-manage-forbidden")
    status, rotated = await rotate(manager, by_owner["id"], team=team)
    assert status == 200, rotated
    status, rotated = await rotate(executor, by_manager["id"], team=team)
    assert status == 200, rotated
    # the wrong team: the key is not there
    status, problem = await rotate(executor, own["id"], team=await personal_team(executor))
    assert (status, problem["code"]) == (404, "agent-key-not-found")

    # removal stops issue and rotation; managers can still revoke
    await remove_member(owner, team, executor)
    status, problem = await issue(owner, team=team, agent=executor)
    assert (status, problem["code"]) == (403, "agent-not-team-member")
    status, problem = await rotate(owner, own["id"], team=team)
    assert (status, problem["code"]) == (403, "agent-not-team-member")
    status, revoked = await revoke(owner, own["id"], team=team)
    assert status == 200 and revoked["status"] == "revoked", revoked
    status, revoked = await revoke(manager, by_owner["id"], team=team)
    assert status == 200 and revoked["status"] == "revoked", revoked
    assert await key_rows(db_pool, executor) == 3


async def test_identity_keys_are_managed_only_by_their_agent(actors: Any, db_pool: Any) -> None:
    agent = await actors.agent()
    other = await actors.agent()
    human = await actors.human()
    team = await new_team(agent)
    await add_member(agent, team, human, "manager")

    status, problem = await issue(human, agent=agent, bindingScope="identity")
    assert (status, problem["code"]) == (403, "identity-key-forbidden")
    status, problem = await issue(other, agent=agent, bindingScope="identity")
    assert (status, problem["code"]) == (403, "identity-key-forbidden")
    team_key = await issued(agent, team=team, scopes=list(AGENT_SCOPES))
    # a team key never reaches identity operations: it needs its team header, which they refuse
    team_holder = holding(agent, team_key["secret"])
    status, problem = await issue(team_holder, bindingScope="identity")
    assert (status, problem["code"]) == (403, "key-team-header-required")
    status, problem = await issue(team_holder, team=team, bindingScope="identity")
    assert (status, problem["code"]) == (400, "team-header-not-allowed")
    assert await key_rows(db_pool, agent) == 1

    # OAuth2 issues one; that identity key with key:manage manages its siblings
    manager_key = await issued(agent, bindingScope="identity", scopes=list(AGENT_SCOPES))
    sibling_holder = holding(agent, manager_key["secret"])
    sibling = await issued(sibling_holder, bindingScope="identity")
    status, rotated = await rotate(sibling_holder, sibling["id"], identity=True)
    assert status == 200, rotated

    # without key:manage a sibling identity key cannot
    weak = holding(agent, sibling["secret"])
    status, problem = await issue(weak, bindingScope="identity")
    assert (status, problem["code"]) == (401, "agent-key-invalid")  # rotated: the old secret died
    weak = holding(agent, rotated["secret"])
    status, problem = await issue(weak, bindingScope="identity")
    assert (status, problem["code"]) == (403, "missing-scope")

    # others: humans, team keys and other agents manage none of them
    status, problem = await rotate(human, sibling["id"], identity=True)
    assert (status, problem["code"]) == (403, "identity-key-forbidden")
    status, problem = await revoke(team_holder, sibling["id"], identity=True)
    assert (status, problem["code"]) == (403, "key-team-header-required")
    status, problem = await revoke(other, sibling["id"], identity=True)
    assert (status, problem["code"]) == (404, "agent-key-not-found")
    # a team operation does not find an identity key, nor an identity operation a team key
    status, problem = await revoke(agent, sibling["id"], team=team)
    assert (status, problem["code"]) == (404, "agent-key-not-found")
    status, problem = await revoke(agent, team_key["id"], identity=True)
    assert (status, problem["code"]) == (404, "agent-key-not-found")
    status, problem = await rotate(agent, sibling["id"], team=team, identity=True)
    assert (status, problem["code"]) == (400, "team-header-not-allowed")

    status, revoked = await revoke(sibling_holder, sibling["id"], identity=True)
    assert status == 200 and revoked["status"] == "revoked" and "teamId" not in revoked


# --- rotation and revocation ------------------------------------------------------------------


async def test_rotation_keeps_scopes_and_expiry_and_kills_the_old_secret(actors: Any) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    key = await issued(agent, team=team, scopes=["key:manage", "agent:profile"], ttlDays=7)
    holder = holding(agent, key["secret"])
    status, problem = await rotate(holder, key["id"], team=team)
    assert (status, problem["code"]) == (403, "self-rotation-forbidden")

    status, rotated = await rotate(agent, key["id"], team=team)
    assert status == 200, rotated
    assert rotated["id"] == key["id"] and rotated["secret"] != key["secret"]
    assert rotated["scopes"] == key["scopes"] and rotated["expiresAt"] == key["expiresAt"]
    assert rotated["rotatedAt"] is not None
    status, problem = await holder.call("GET", "/agents/whoami", team=team)
    assert (status, problem["code"]) == (401, "agent-key-invalid")
    assert (await holding(agent, rotated["secret"]).call("GET", "/agents/whoami", team=team))[
        0
    ] == 200

    # another active key of the agent is an independent credential
    sibling = await issued(agent, team=team, scopes=["key:manage", "agent:profile"])
    status, again = await rotate(holding(agent, sibling["secret"]), key["id"], team=team)
    assert status == 200, again


async def test_a_rotation_under_an_idempotency_key_rotates_once(actors: Any) -> None:
    """DECISIONS: rotation honours `Idempotency-Key`. The same request again (a reloaded page)
    is 409 `agent-key-rotated` and mints nothing: the secret shown first still works. Another
    key rotates again; without one, every call rotates."""
    agent = await actors.agent()
    team = await personal_team(agent)
    key = await issued(agent, team=team)
    path = f"/agent-keys/{key['id']}/rotate"
    once = {"Idempotency-Key": str(uuid.uuid4())}
    status, rotated = await agent.call("POST", path, team=team, headers=once)
    assert status == 200, rotated
    status, problem = await agent.call("POST", path, team=team, headers=once)
    assert (status, problem["code"]) == (409, "agent-key-rotated"), problem
    assert "secret" not in problem
    status, _ = await holding(agent, rotated["secret"]).call("GET", "/agents/whoami", team=team)
    assert status == 200  # the repeat minted nothing
    status, again = await agent.call(
        "POST", path, team=team, headers={"Idempotency-Key": str(uuid.uuid4())}
    )
    assert status == 200 and again["secret"] != rotated["secret"], again
    status, unkeyed = await rotate(agent, key["id"], team=team)
    assert status == 200 and unkeyed["secret"] != again["secret"], unkeyed


async def test_revocation_takes_effect_at_once_and_needs_a_reason(
    actors: Any, db_pool: Any
) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    key = await issued(agent, team=team)
    holder = holding(agent, key["secret"])
    status, problem = await agent.call(
        "POST", f"/agent-keys/{key['id']}/revoke", team=team, json={}
    )
    assert (status, problem["code"]) == (400, "validation-failed")
    status, problem = await revoke(agent, key["id"], team=team, reason="bored")
    assert (status, problem["code"]) == (400, "validation-failed")
    status, problem = await revoke(
        agent, key["id"], team=team, reason="superseded", description="why"
    )
    assert (status, problem["code"]) == (400, "validation-failed")
    status, row = await holder.call("GET", "/agents/whoami", team=team)
    assert status == 200, row

    status, revoked = await revoke(
        agent, key["id"], team=team, reason="privilege_withdrawn", description="left the project"
    )
    assert status == 200, revoked
    assert revoked["status"] == "revoked" and revoked["revocationReason"] == "privilege_withdrawn"
    assert revoked["revocationDescription"] == "left the project" and "secret" not in revoked
    status, problem = await holder.call("GET", "/agents/whoami", team=team)
    assert (status, problem["code"]) == (401, "agent-key-revoked")
    status, problem = await rotate(agent, key["id"], team=team)
    assert (status, problem["code"]) == (409, "agent-key-not-active")
    # revoking again answers the key as it is
    status, again = await revoke(agent, key["id"], team=team, reason="key_compromise")
    assert status == 200 and again["revocationReason"] == "privilege_withdrawn"


@pytest.fixture(scope="module")
async def second_api(stack: Any) -> AsyncIterator[str]:
    """Another API instance on the same database: its own pools, no state shared in memory."""
    from aiohttp import web

    from api.app import create_app

    port = free_port()
    runner = web.AppRunner(create_app(stack.settings))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_revocation_and_rotation_count_in_every_api_process(
    actors: Any, second_api: str
) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    rotated_key = await issued(agent, team=team)
    revoked_key = await issued(agent, team=team)
    async with aiohttp.ClientSession(base_url=second_api) as other_process:
        elsewhere = [
            dataclasses.replace(holding(agent, key["secret"]), http=other_process)
            for key in (rotated_key, revoked_key)
        ]
        for holder in elsewhere:  # warm: each authenticated once over there
            assert (await holder.call("GET", "/agents/whoami", team=team))[0] == 200
        assert (await rotate(agent, rotated_key["id"], team=team))[0] == 200
        assert (await revoke(agent, revoked_key["id"], team=team))[0] == 200
        status, problem = await elsewhere[0].call("GET", "/agents/whoami", team=team)
        assert (status, problem["code"]) == (401, "agent-key-invalid")
        status, problem = await elsewhere[1].call("GET", "/agents/whoami", team=team)
        assert (status, problem["code"]) == (401, "agent-key-revoked")


async def test_an_expired_key_fails_at_once_and_lists_as_expired(actors: Any, db_pool: Any) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    key = await issued(agent, team=team)
    holder = holding(agent, key["secret"])
    assert (await holder.call("GET", "/agents/whoami", team=team))[0] == 200
    # the deadline passes (the expiry workflow's timer is tested on the time-skipping server)
    await db_pool.execute(
        "UPDATE agent_keys SET expires_at = now() - interval '1 second' WHERE id = $1",
        uuid.UUID(key["id"]),
    )
    status, problem = await holder.call("GET", "/agents/whoami", team=team)
    assert (status, problem["code"]) == (401, "agent-key-expired")
    status, page = await agent.call("GET", "/agent-keys", team=team, params={"status": "expired"})
    assert status == 200 and [k["id"] for k in page["items"]] == [key["id"]], page
    status, page = await agent.call("GET", "/agent-keys", team=team, params={"status": "active"})
    assert status == 200 and page["items"] == [], page
    status, problem = await rotate(agent, key["id"], team=team)
    assert (status, problem["code"]) == (409, "agent-key-not-active")


# --- lists ---------------------------------------------------------------------------------------


async def test_lists_page_with_cursors_bound_to_their_query(actors: Any) -> None:
    owner = await actors.human()
    agent = await actors.agent()
    other = await actors.agent()
    status, team_body = await owner.call("POST", "/teams", json={"name": "crew"})
    assert status == 201, team_body
    team = str(team_body["id"])
    await add_member(owner, team, agent)
    await add_member(owner, team, other)
    mine = [(await issued(agent, team=team))["id"] for _ in range(3)]
    theirs = (await issued(other, team=team))["id"]
    identity = (await issued(agent, bindingScope="identity"))["id"]

    status, first = await agent.call("GET", "/agent-keys", team=team, params={"limit": 2})
    assert status == 200, first
    assert [k["id"] for k in first["items"]] == mine[::-1][:2]
    assert all("secret" not in k and k["teamId"] == team for k in first["items"])
    status, second = await agent.call(
        "GET", "/agent-keys", team=team, params={"limit": 2, "cursor": first["nextCursor"]}
    )
    assert status == 200 and [k["id"] for k in second["items"]] == [mine[0]], second
    assert second.get("nextCursor") is None
    status, problem = await agent.call(
        "GET",
        "/agent-keys",
        team=team,
        params={"limit": 2, "cursor": first["nextCursor"], "status": "active"},
    )
    assert (status, problem["code"]) == (400, "invalid-cursor")

    # a member sees its own keys; the team's owner sees everyone's
    status, problem = await agent.call(
        "GET", "/agent-keys", team=team, params={"agentId": str(other.subject_id)}
    )
    assert (status, problem["code"]) == (403, "key-manage-forbidden")
    status, everyone = await owner.call("GET", "/agent-keys", team=team)
    assert status == 200 and {k["id"] for k in everyone["items"]} == {*mine, theirs}
    status, filtered = await owner.call(
        "GET", "/agent-keys", team=team, params={"agentId": str(other.subject_id)}
    )
    assert status == 200 and [k["id"] for k in filtered["items"]] == [theirs]

    # identity keys: the agent alone, without the team header
    status, own = await agent.call("GET", "/agent-keys", params={"bindingScope": "identity"})
    assert status == 200 and [k["id"] for k in own["items"]] == [identity], own
    assert own["items"][0]["bindingScope"] == "identity" and "teamId" not in own["items"][0]
    status, problem = await owner.call("GET", "/agent-keys", params={"bindingScope": "identity"})
    assert (status, problem["code"]) == (403, "identity-key-forbidden")
    status, problem = await agent.call(
        "GET", "/agent-keys", team=team, params={"bindingScope": "identity"}
    )
    assert (status, problem["code"]) == (400, "team-header-not-allowed")
    status, problem = await agent.call("GET", "/agent-keys")
    assert (status, problem["code"]) == (400, "team-required")


# --- metadata v1 / v2 (SPEC 9) ----------------------------------------------------------------


async def stored_key(stack: Any, db_pool: Any, agent: Actor, metadata: dict[str, Any]) -> str:
    """A key written straight into the store, as an import of older records would."""
    key_id = uuid.uuid4()
    secret = f"service_ak_{key_id}_{uuid.uuid4().hex}{uuid.uuid4().hex[:11]}"
    await db_pool.execute(
        "INSERT INTO agent_keys (id, actor_id, name, metadata, scopes, secret_hash, expires_at,"
        " created_by_ns, created_by_id) VALUES ($1, $2, 'old', $3, $4, $5,"
        " now() + interval '1 day', 'Agent', $2)",
        key_id,
        agent.subject_id,
        metadata,
        list(DAEMON_MIN_SCOPES),
        hash_secret(secret, stack.settings.secret_bytes),
    )
    return secret


async def test_v1_records_with_an_agent_and_a_team_are_team_keys_others_are_rejected(
    stack: Any, actors: Any, db_pool: Any
) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    v1 = await stored_key(stack, db_pool, agent, {"version": "v1", "team_id": team})
    status, me = await holding(agent, v1).call("GET", "/agents/whoami", team=team)
    assert status == 200, me
    assert me["credentialBinding"]["bindingScope"] == "team"
    assert me["credentialBinding"]["boundTeamId"] == team
    status, problem = await holding(agent, v1).call("GET", "/agents/whoami")
    assert (status, problem["code"]) == (403, "key-team-header-required")
    status, page = await agent.call("GET", "/agent-keys", team=team)
    assert status == 200 and [k["teamId"] for k in page["items"]] == [team], page

    rejected = [
        {"version": "v1"},  # no team
        {"team_id": team},  # no version: not guessed
        {},
        {"version": "v2", "binding_scope": "identity", "team_id": team},
        {"version": "v2", "binding_scope": "team"},
        {"version": "v3", "binding_scope": "team", "team_id": team},
    ]
    for metadata in rejected:
        secret = await stored_key(stack, db_pool, agent, metadata)
        for header in (team, None):
            status, problem = await holding(agent, secret).call(
                "GET", "/agents/whoami", team=header
            )
            assert (status, problem["code"]) == (401, "agent-key-binding-invalid"), metadata
