"""A team-bound agent key acts only inside its team (DECISIONS "Trust at the edges").

The agent below belongs to two teams: its personal team and a team it founded. A key bound to
the personal team must find nothing of the other team (diary, entries, relations, search hits,
packs, rendered packs, task, artifacts, runtime profile, the team itself), nor a diary of a third
team where the agent is a grantee; the same agent's OAuth2 token and identity key see all of it;
and every credential still reads the other team's `public` and `moltnet` diaries.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from actors import Actor, agent_key_secret, holding_key, personal_team

WORD = "zephyrquartz"


@dataclass
class World:
    agent: Actor = field(init=False)
    team_key: Actor = field(init=False)
    identity_key: Actor = field(init=False)
    personal: str = ""
    team: str = ""
    private: dict[str, Any] = field(default_factory=dict)
    public: dict[str, Any] = field(default_factory=dict)
    moltnet: dict[str, Any] = field(default_factory=dict)
    granted: dict[str, Any] = field(default_factory=dict)
    entries: list[dict[str, Any]] = field(default_factory=list)
    open_entries: list[dict[str, Any]] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)


async def ok(actor: Actor, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    status, body = await actor.call(method, path, **kwargs)
    assert status in (200, 201), (method, path, status, body)
    return dict(body)


async def diary_in(actor: Actor, team: str, visibility: str) -> dict[str, Any]:
    body = {"name": f"d-{visibility}-{uuid.uuid4().hex[:6]}", "visibility": visibility}
    return await ok(actor, "POST", "/diaries", json=body, team=team)


async def entry_in(actor: Actor, diary_id: str, text: str) -> dict[str, Any]:
    body = {"content": f"{WORD} {text}", "tags": ["isolation"]}
    return await ok(actor, "POST", f"/diaries/{diary_id}/entries", json=body)


async def key_of(agent: Actor, binding: str, team: str | None) -> Actor:
    return holding_key(agent, await agent_key_secret(agent, binding, team))


@pytest.fixture(scope="module")
async def world(actors: Any) -> World:
    w = World()
    w.agent = await actors.agent()
    other = await actors.agent()
    w.personal = await personal_team(w.agent)
    w.team = str((await ok(w.agent, "POST", "/teams", json={"name": "second"}))["id"])
    w.private = await diary_in(w.agent, w.team, "private")
    w.public = await diary_in(w.agent, w.team, "public")
    w.moltnet = await diary_in(w.agent, w.team, "moltnet")
    w.entries = [await entry_in(w.agent, w.private["id"], f"private note {n}") for n in (1, 2)]
    w.open_entries = [
        await entry_in(w.agent, w.public["id"], "public note"),
        await entry_in(w.agent, w.moltnet["id"], "moltnet note"),
    ]
    relation = {"targetId": w.entries[0]["id"], "relation": "elaborates"}
    await ok(w.agent, "POST", f"/entries/{w.entries[1]['id']}/relations", json=relation)
    selection = [{"entryId": e["id"], "rank": i + 1} for i, e in enumerate(w.entries)]
    pack = await ok(
        w.agent, "POST", f"/diaries/{w.private['id']}/packs", json={"entries": selection}
    )
    render = {"renderMethod": "server:pack-to-docs-v1"}
    rendered = await ok(w.agent, "POST", f"/packs/{pack['packId']}/render", json=render)
    w.ids = {"pack": pack["packId"], "rendered": rendered["id"]}
    await _task_and_profile(w)
    # a third team's private diary where the agent is a grantee
    other_team = await personal_team(other)
    w.granted = await diary_in(other, other_team, "private")
    grant = {"subjectId": str(w.agent.subject_id), "subjectNs": "Agent", "role": "writer"}
    await ok(other, "POST", f"/diaries/{w.granted['id']}/grants", json=grant)
    w.team_key = await key_of(w.agent, "team", w.personal)
    w.identity_key = await key_of(w.agent, "identity", None)
    return w


async def _task_and_profile(w: World) -> None:
    status, staged = await w.agent.call(
        "PUT", "/task-artifacts/staged", team=w.team, data=b"notes for the task"
    )
    assert status == 200, staged
    task = await ok(
        w.agent,
        "POST",
        "/tasks",
        json={
            "taskType": "freeform",
            "teamId": w.team,
            "diaryId": w.private["id"],
            "input": {"brief": "Read the attachment"},
            "references": [{"artifact": {"cid": staged["cid"]}, "role": "context"}],
        },
    )
    profile = await ok(
        w.agent, "POST", "/runtime-profiles", json={"teamId": w.team, "name": "p"}, team=w.team
    )
    w.ids |= {"task": task["id"], "artifact": staged["cid"], "profile": profile["id"]}


def owned_paths(w: World) -> list[str]:
    """Every GET that names something the second team owns (or the granted diary)."""
    task, private = w.ids["task"], w.private["id"]
    return [
        f"/diaries/{private}",
        f"/diaries/{private}/entries",
        f"/diaries/{private}/tags",
        f"/diaries/{private}/packs",
        f"/diaries/{private}/rendered-packs",
        f"/diaries/{private}/map",
        f"/entries/{w.entries[0]['id']}",
        f"/entries/{w.entries[0]['id']}/relations",
        f"/packs/{w.ids['pack']}",
        f"/packs/{w.ids['pack']}/provenance",
        f"/rendered-packs/{w.ids['rendered']}",
        f"/tasks/{task}",
        f"/tasks/{task}/attempts",
        f"/tasks/{task}/artifacts",
        f"/tasks/{task}/artifacts/{w.ids['artifact']}/content",
        f"/runtime-profiles/{w.ids['profile']}",
        f"/teams/{w.team}",
        f"/teams/{w.team}/members",
        f"/teams/{w.team}/groups",
        f"/teams/{w.team}/invites",
        f"/teams/{w.team}/projects",
        f"/diaries/{w.granted['id']}",
        f"/diaries/{w.granted['id']}/entries",
    ]


async def hits(actor: Actor, team: str, **filters: Any) -> tuple[int, set[str]]:
    status, body = await actor.call(
        "POST", "/diary/search", json={"query": WORD, "limit": 50, **filters}, team=team
    )
    found = {hit["id"] for hit in body["results"]} if status == 200 else set()
    return status, found


async def test_a_team_key_finds_nothing_of_another_team(world: World) -> None:
    for path in owned_paths(world):
        status, body = await world.team_key.call("GET", path, team=world.personal)
        assert status == 404, (path, status, body)
    status, found = await hits(world.team_key, world.personal)
    assert status == 200 and not found & {e["id"] for e in world.entries}, found
    status, _ = await hits(world.team_key, world.personal, diaryId=world.private["id"])
    assert (status, body["code"]) == (404, "diary-not-found")


async def test_a_team_keys_lists_hold_its_own_team_only(world: World) -> None:
    teams = await ok(world.team_key, "GET", "/teams", team=world.personal)
    assert [t["id"] for t in teams["items"]] == [world.personal]
    diaries = await ok(world.team_key, "GET", "/diaries", team=world.personal)
    assert world.private["id"] not in {d["id"] for d in diaries["items"]}
    tasks = await ok(world.team_key, "GET", "/tasks", team=world.personal)
    assert world.ids["task"] not in {t["id"] for t in tasks["items"]}
    profiles = await ok(world.team_key, "GET", "/runtime-profiles", team=world.personal)
    assert world.ids["profile"] not in {p["id"] for p in profiles["items"]}


@pytest.mark.parametrize("credential", ["oauth2", "identity_key"])
async def test_the_same_agent_reads_it_all_with_its_token_or_identity_key(
    world: World, credential: str
) -> None:
    caller = world.agent if credential == "oauth2" else world.identity_key
    for path in owned_paths(world):
        status, body = await caller.call("GET", path, team=world.team)
        if path.startswith(f"/diaries/{world.granted['id']}"):
            status, body = await caller.call("GET", path)  # the grant is outside both teams
        assert status == 200, (path, status, body)
    status, found = await hits(caller, world.team)
    assert status == 200 and {e["id"] for e in world.entries} <= found, found


async def test_a_team_key_still_reads_public_and_moltnet_diaries(world: World) -> None:
    for diary, entry in zip((world.public, world.moltnet), world.open_entries, strict=True):
        for path in (f"/diaries/{diary['id']}", f"/entries/{entry['id']}"):
            status, body = await world.team_key.call("GET", path, team=world.personal)
            assert status == 200, (path, status, body)
        listed = await ok(
            world.team_key, "GET", f"/diaries/{diary['id']}/entries", team=world.personal
        )
        assert entry["id"] in {e["id"] for e in listed["items"]}
