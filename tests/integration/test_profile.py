"""Names for people on the real stack (issue 24): a human's optional display name at
registration, the profile routes that read and change it (humans only), whoami's names, and
the views that name a member, a grantee, a co-founder, a transfer's initiator or a key's agent
by email and display name (humans) or fingerprint (agents), not only by uuid."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from actors import PASSWORD, Actor, anonymous, new_diary, personal_team

from client.rest import CairnClient
from schemas import limits
from schemas.principals import AGENT_SCOPES

NAME = "Ada Lovelace"


def new_email() -> str:
    return f"human-{uuid.uuid4().hex[:12]}@example.org"


async def register(api_http: Any, body: dict[str, Any]) -> tuple[int, Any]:
    return await anonymous(api_http, "POST", "/self-service/registration", json=body)


def names(human: Actor) -> dict[str, Any]:
    return {"email": human.extra["email"], "displayName": human.extra["displayName"]}


def named(item: dict[str, Any]) -> dict[str, Any]:
    return {"email": item.get("email"), "displayName": item.get("displayName")}


async def new_team(owner: Actor, **extra: Any) -> dict[str, Any]:
    """A team of `owner`: active at once (201), or founding with co-founders (202)."""
    status, team = await owner.call("POST", "/teams", json={"name": "crew", **extra})
    assert status == (202 if "foundingMembers" in extra else 201), team
    return dict(team)


async def join(owner: Actor, team_id: str, actor: Actor, role: str = "member") -> None:
    status, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"role": role})
    assert status == 201, invite
    status, joined = await actor.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 200, joined


# --- registration ---------------------------------------------------------------------------


async def test_registration_keeps_a_display_name(stack, api_http, db_pool) -> None:
    email = new_email()
    body = {"email": email, "password": PASSWORD, "displayName": f"  {NAME} "}
    status, created = await register(api_http, body)
    assert status == 201, created
    assert created["displayName"] == NAME
    stored = await db_pool.fetchval(
        "SELECT display_name FROM identities WHERE id = $1", uuid.UUID(created["identityId"])
    )
    assert stored == NAME


async def test_registration_without_a_display_name_has_none(stack, api_http, db_pool) -> None:
    status, created = await register(api_http, {"email": new_email(), "password": PASSWORD})
    assert status == 201, created
    assert "displayName" not in created
    stored = await db_pool.fetchval(
        "SELECT display_name FROM identities WHERE id = $1", uuid.UUID(created["identityId"])
    )
    assert stored is None


BAD_NAMES: dict[str, Any] = {
    "empty": "",
    "blank": "   ",
    "too-long": "x" * (limits.DISPLAY_NAME_MAX_CHARS + 1),
    "nul": "Ada\u0000",
    "lone-surrogate": "Ada\ud800",
    "number": 42,
    "list": ["Ada"],
}


@pytest.mark.parametrize("display_name", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
async def test_bad_display_name_at_registration_is_400_and_writes_nothing(
    stack, api_http, db_pool, display_name: Any
) -> None:
    email = new_email()
    body = {"email": email, "password": PASSWORD, "displayName": display_name}
    status, problem = await register(api_http, body)
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert [error["pointer"] for error in problem["errors"]] == ["/displayName"]
    assert await db_pool.fetchval("SELECT count(*) FROM identities WHERE email = $1", email) == 0


async def test_the_longest_display_name_is_taken(stack, api_http) -> None:
    longest = "x" * limits.DISPLAY_NAME_MAX_CHARS
    body = {"email": new_email(), "password": PASSWORD, "displayName": longest}
    status, created = await register(api_http, body)
    assert status == 201, created
    assert created["displayName"] == longest


# --- the profile ----------------------------------------------------------------------------


async def test_a_human_reads_and_changes_their_profile(actors) -> None:
    human = await actors.human(NAME)
    status, profile = await human.call("GET", "/self-service/profile")
    assert status == 200, profile
    assert profile == {"identityId": str(human.identity_id), **names(human)}

    status, changed = await human.call(
        "PATCH", "/self-service/profile", json={"displayName": "Countess of Lovelace"}
    )
    assert status == 200, changed
    assert changed["displayName"] == "Countess of Lovelace"
    status, profile = await human.call("GET", "/self-service/profile")
    assert status == 200 and profile["displayName"] == "Countess of Lovelace"

    status, cleared = await human.call("PATCH", "/self-service/profile", json={"displayName": None})
    assert status == 200, cleared
    assert "displayName" not in cleared and cleared["email"] == human.extra["email"]
    status, whoami = await human.call("GET", "/agents/whoami")
    assert status == 200 and "displayName" not in whoami


async def test_a_human_without_a_name_gives_one_later(actors) -> None:
    human = await actors.human()
    status, profile = await human.call("GET", "/self-service/profile")
    assert status == 200 and "displayName" not in profile
    status, changed = await human.call("PATCH", "/self-service/profile", json={"displayName": NAME})
    assert status == 200 and changed["displayName"] == NAME


@pytest.mark.parametrize("method", ["GET", "PATCH"])
async def test_an_agent_has_no_profile(actors, method: str) -> None:
    agent = await actors.agent()
    body = {"displayName": NAME} if method == "PATCH" else None
    status, problem = await agent.call(method, "/self-service/profile", json=body)
    assert status == 403, problem
    assert problem["code"] == "humans-only"


@pytest.mark.parametrize("method", ["GET", "PATCH"])
async def test_the_profile_needs_a_session(stack, api_http, method: str) -> None:
    body = {"displayName": NAME} if method == "PATCH" else None
    status, problem = await anonymous(api_http, method, "/self-service/profile", json=body)
    assert (status, problem["code"]) == (401, "unauthorized"), problem


@pytest.mark.parametrize(
    "body,pointer",
    [
        *[
            pytest.param({"displayName": bad}, "/displayName", id=name)
            for name, bad in BAD_NAMES.items()
        ],
        pytest.param({}, "/displayName", id="missing"),
        pytest.param({"displayName": NAME, "email": "x@example.org"}, "/email", id="unknown"),
    ],
)
async def test_bad_profile_changes_are_400_and_change_nothing(
    actors, db_pool, body: dict[str, Any], pointer: str
) -> None:
    human = await actors.human(NAME)
    status, problem = await human.call("PATCH", "/self-service/profile", json=body)
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert [error["pointer"] for error in problem["errors"]] == [pointer]
    stored = await db_pool.fetchval(
        "SELECT display_name FROM identities WHERE id = $1", human.identity_id
    )
    assert stored == NAME


# --- whoami -----------------------------------------------------------------------------------


async def test_whoami_names_a_human(actors) -> None:
    human = await actors.human(NAME)
    status, whoami = await human.call("GET", "/agents/whoami")
    assert status == 200, whoami
    assert named(whoami) == names(human)


async def test_whoami_of_an_agent_has_no_email(actors) -> None:
    agent = await actors.agent()
    status, whoami = await agent.call("GET", "/agents/whoami")
    assert status == 200, whoami
    assert "email" not in whoami and "displayName" not in whoami
    assert whoami["fingerprint"] == agent.fingerprint


# --- views that name subjects -----------------------------------------------------------------


async def test_team_members_and_groups_carry_names(actors) -> None:
    owner, mate, agent = await actors.human(NAME), await actors.human(), await actors.agent()
    team = await new_team(owner)
    await join(owner, team["id"], mate)
    await join(owner, team["id"], agent, "executor")

    status, members = await owner.call("GET", f"/teams/{team['id']}/members")
    assert status == 200, members
    by_id = {item["subjectId"]: item for item in members["items"]}
    assert named(by_id[str(owner.subject_id)]) == names(owner)
    assert named(by_id[str(mate.subject_id)]) == names(mate)
    assert by_id[str(agent.subject_id)]["fingerprint"] == agent.fingerprint
    assert "email" not in by_id[str(agent.subject_id)]
    assert "fingerprint" not in by_id[str(owner.subject_id)]

    status, group = await owner.call("POST", f"/teams/{team['id']}/groups", json={"name": "g"})
    assert status == 201, group
    for subject in (mate, agent):
        status, added = await owner.call(
            "POST", f"/groups/{group['id']}/members", json={"subjectId": str(subject.subject_id)}
        )
        assert status == 201, added
    status, listed = await owner.call("GET", f"/groups/{group['id']}/members")
    assert status == 200, listed
    by_id = {item["subjectId"]: item for item in listed["items"]}
    assert named(by_id[str(mate.subject_id)]) == names(mate)
    assert by_id[str(agent.subject_id)]["fingerprint"] == agent.fingerprint
    status, shown = await owner.call("GET", f"/groups/{group['id']}")
    assert status == 200 and {m.get("fingerprint") for m in shown["members"]} == {
        None,
        agent.fingerprint,
    }


async def test_founding_acceptances_carry_names(actors) -> None:
    founder, cofounder, agent = await actors.human(NAME), await actors.human(), await actors.agent()
    founding = [
        {"subjectId": str(cofounder.subject_id), "subjectNs": "Human"},
        {"subjectId": str(agent.subject_id), "subjectNs": "Agent"},
    ]
    team = await new_team(founder, foundingMembers=founding)
    by_id = {item["subjectId"]: item for item in team["foundingAcceptances"]}
    assert named(by_id[str(founder.subject_id)]) == names(founder)
    assert named(by_id[str(cofounder.subject_id)]) == names(cofounder)
    assert by_id[str(agent.subject_id)]["fingerprint"] == agent.fingerprint
    status, shown = await cofounder.call("GET", f"/teams/{team['id']}")
    assert status == 200, shown
    assert {item.get("displayName") for item in shown["foundingAcceptances"]} == {NAME, None}


async def test_diary_grants_carry_names(actors) -> None:
    owner, human, agent = await actors.agent(), await actors.human(NAME), await actors.agent()
    diary = await new_diary(owner, "private")
    path = f"/diaries/{diary['id']}/grants"
    for subject, role in ((human, "writer"), (agent, "manager")):
        grant = {
            "subjectId": str(subject.subject_id),
            "subjectNs": subject.subject_ns,
            "role": role,
        }
        status, body = await owner.call("POST", path, json=grant)
        assert status == 201, body
    status, listed = await owner.call("GET", path)
    assert status == 200, listed
    by_id = {item["subjectId"]: item for item in listed["items"]}
    assert named(by_id[str(human.subject_id)]) == names(human)
    assert by_id[str(agent.subject_id)]["fingerprint"] == agent.fingerprint


async def test_transfers_name_their_initiator(actors) -> None:
    giver, receiver = await actors.human(NAME), await actors.agent()
    source = (await new_team(giver))["id"]  # a human has no personal team
    status, diary = await giver.call(
        "POST", "/diaries", json={"name": "notes", "visibility": "private"}, team=source
    )
    assert status == 201, diary
    destination = (await new_team(receiver))["id"]
    status, proposed = await giver.call(
        "POST", f"/diaries/{diary['id']}/transfers", json={"destinationTeamId": destination}
    )
    assert status == 201, proposed
    status, pending = await receiver.call("GET", "/transfers")
    assert status == 200, pending
    [listed] = [item for item in pending["items"] if item["id"] == proposed["id"]]
    assert listed["initiatedBy"] == str(giver.subject_id)
    assert named(listed["initiator"]) == names(giver)
    status, of_diary = await giver.call("GET", f"/diaries/{diary['id']}/transfers")
    assert status == 200 and named(of_diary["items"][0]["initiator"]) == names(giver)


async def test_agent_keys_name_their_agent(actors) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    body = {
        "agentId": str(agent.subject_id),
        "name": "k",
        "bindingScope": "team",
        "scopes": list(AGENT_SCOPES),
    }
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    status, key = await agent.call("POST", "/agent-keys", json=body, team=team, headers=headers)
    assert status == 201, key
    status, listed = await agent.call("GET", "/agent-keys", team=team)
    assert status == 200, listed
    [item] = [item for item in listed["items"] if item["id"] == key["id"]]
    assert item["agentFingerprint"] == agent.fingerprint


# --- the typed SDK ----------------------------------------------------------------------------


async def test_the_sdk_registers_logs_in_and_names_a_human(stack) -> None:
    email = new_email()
    async with CairnClient(stack.base_url) as api:
        created = await api.register_human(email, PASSWORD, display_name=NAME)
        assert created.displayName == NAME
        session = await api.login_human(email, PASSWORD)
        assert session.identityId == created.identityId
        whoami = await api.whoami()
        assert (whoami.subjectType, whoami.email, whoami.displayName) == ("human", email, NAME)
        assert (await api.update_profile(None)).displayName is None
        profile = await api.profile()
        assert (profile.identityId, profile.email, profile.displayName) == (
            created.identityId,
            email,
            None,
        )
