"""`Idempotency-Key` on every create (DECISIONS "Trust at the edges"), on the real stack: the
same key and body from the same principal answer the first response again (status and
resource, nothing written twice); the same key with another body is 409
`idempotency-key-reused`; another principal's key is its own. Decisions repeated without a key
are in the tests of their resources (transfers, teams, task lifecycle)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from actors import Actor, join_team, new_diary, personal_team

Sent = tuple[int, Any]


@dataclass
class World:
    owner: Actor
    peer: Actor
    team_id: str  # a shared team of `owner` (groups, invites, projects need one)
    diary: dict[str, Any]
    entries: list[dict[str, Any]]
    pack_id: str
    destinations: list[str]  # teams of `peer`, for transfers
    transfer_diary: dict[str, Any]


@pytest.fixture(scope="module")
async def world(actors: Any) -> World:
    owner, peer = await actors.agent(), await actors.agent()
    status, team = await owner.call("POST", "/teams", json={"name": "idempotent"})
    assert status == 201, team
    await join_team(owner, team["id"], peer, "member")
    diary = await new_diary(owner)
    entries = []
    for text in ("first note", "second note"):
        status, entry = await owner.call(
            "POST", f"/diaries/{diary['id']}/entries", json={"content": text}
        )
        assert status == 201, entry
        entries.append(entry)
    selection = [{"entryId": e["id"], "rank": i + 1} for i, e in enumerate(entries)]
    status, pack = await owner.call(
        "POST", f"/diaries/{diary['id']}/packs", json={"entries": selection}
    )
    assert status == 201, pack
    destinations = []
    for name in ("receivers", "others"):
        status, destination = await peer.call("POST", "/teams", json={"name": name})
        assert status == 201, destination
        destinations.append(destination["id"])
    return World(
        owner,
        peer,
        team["id"],
        diary,
        entries,
        pack["packId"],
        destinations,
        await new_diary(owner),
    )


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


# Each create: how to send it (with a key, in one of two bodies) and what names its resource.
Send = Callable[[World, str, int], Awaitable[Sent]]


async def _entry(w: World, key: str, v: int) -> Sent:
    body = {"content": f"a retried note {v}", "tags": ["retry"]}
    return await w.owner.call(
        "POST", f"/diaries/{w.diary['id']}/entries", json=body, headers=keyed(key)
    )


async def _diary(w: World, key: str, v: int) -> Sent:
    body = {"name": f"retried-{v}", "visibility": "private"}
    team = await personal_team(w.owner)
    return await w.owner.call("POST", "/diaries", json=body, team=team, headers=keyed(key))


async def _relation(w: World, key: str, v: int) -> Sent:
    source, target = w.entries
    body = {"targetId": target["id"], "relation": ["supports", "elaborates"][v]}
    path = f"/entries/{source['id']}/relations"
    return await w.owner.call("POST", path, json=body, headers=keyed(key))


async def _grant(w: World, key: str, v: int) -> Sent:
    role = ["writer", "manager"][v]
    body = {"subjectId": str(w.peer.subject_id), "subjectNs": "Agent", "role": role}
    path = f"/diaries/{w.diary['id']}/grants"
    return await w.owner.call("POST", path, json=body, headers=keyed(key))


async def _pack(w: World, key: str, v: int) -> Sent:
    entries = [{"entryId": e["id"], "rank": i + 1} for i, e in enumerate(w.entries)]
    body = {"entries": entries[: v + 1], "params": {"retry": key}}
    path = f"/diaries/{w.diary['id']}/packs"
    return await w.owner.call("POST", path, json=body, headers=keyed(key))


async def _render(w: World, key: str, v: int) -> Sent:
    body = {"renderMethod": "agent:retry", "renderedMarkdown": f"# {key} {v}"}
    path = f"/packs/{w.pack_id}/render"
    return await w.owner.call("POST", path, json=body, headers=keyed(key))


async def _team(w: World, key: str, v: int) -> Sent:
    return await w.owner.call("POST", "/teams", json={"name": f"team-{v}"}, headers=keyed(key))


async def _founding(w: World, key: str, v: int) -> Sent:
    member = {"subjectId": str(w.peer.subject_id), "subjectNs": "Agent"}
    body = {"name": f"founding-{v}", "foundingMembers": [member]}
    return await w.owner.call("POST", "/teams", json=body, headers=keyed(key))


async def _invite(w: World, key: str, v: int) -> Sent:
    body = {"role": ["member", "executor"][v]}
    path = f"/teams/{w.team_id}/invites"
    return await w.owner.call("POST", path, json=body, headers=keyed(key))


async def _group(w: World, key: str, v: int) -> Sent:
    body = {"name": f"group-{key[:8]}-{v}"}
    return await w.owner.call("POST", f"/teams/{w.team_id}/groups", json=body, headers=keyed(key))


async def _project(w: World, key: str, v: int) -> Sent:
    body = {"name": f"project-{key[:8]}-{v}"}
    return await w.owner.call("POST", f"/teams/{w.team_id}/projects", json=body, headers=keyed(key))


async def _signing_request(w: World, key: str, v: int) -> Sent:
    body = {"message": f"sign me {v}"}
    return await w.owner.call("POST", "/crypto/signing-requests", json=body, headers=keyed(key))


async def _transfer(w: World, key: str, v: int) -> Sent:
    body = {"destinationTeamId": w.destinations[v]}
    path = f"/diaries/{w.transfer_diary['id']}/transfers"
    return await w.owner.call("POST", path, json=body, headers=keyed(key))


async def _runtime_profile(w: World, key: str, v: int) -> Sent:
    body = {"teamId": w.team_id, "name": f"profile-{key[:8]}-{v}"}
    return await w.owner.call("POST", "/runtime-profiles", json=body, headers=keyed(key))


CREATES: dict[str, tuple[Send, str]] = {
    "entry": (_entry, "id"),
    "diary": (_diary, "id"),
    "relation": (_relation, "id"),
    "grant": (_grant, "role"),
    "pack": (_pack, "packId"),
    "render": (_render, "id"),
    "team": (_team, "id"),
    "founding team": (_founding, "id"),
    "invite": (_invite, "code"),
    "group": (_group, "id"),
    "project": (_project, "id"),
    "signing request": (_signing_request, "request_id"),
    "transfer": (_transfer, "id"),
    "runtime profile": (_runtime_profile, "id"),
}


@pytest.mark.parametrize("name", list(CREATES))
async def test_the_same_key_and_body_answer_the_first_response_another_body_409(
    world: World, name: str
) -> None:
    send, names = CREATES[name]
    key = str(uuid.uuid4())
    status, first = await send(world, key, 0)
    assert status in (200, 201, 202), first
    again_status, again = await send(world, key, 0)
    assert (again_status, again[names]) == (status, first[names]), again
    status, problem = await send(world, key, 1)
    assert (status, problem["code"]) == (409, "idempotency-key-reused"), problem


# A create under a parent (a team, a diary), sent with one key under two parents.
UNDER_PARENTS: dict[str, tuple[str, dict[str, Any]]] = {
    "invite": ("/teams/{team}/invites", {"role": "member"}),
    "group": ("/teams/{team}/groups", {"name": "reused"}),
    "project": ("/teams/{team}/projects", {"name": "reused"}),
    "entry": ("/diaries/{diary}/entries", {"content": "a note under one key"}),
}


@pytest.mark.parametrize("name", list(UNDER_PARENTS))
async def test_one_key_under_another_parent_is_409(world: World, name: str) -> None:
    """The id a key mints names the resource and its run, never the parent: the key sent again
    under another team or diary finds the first run and is refused, with nothing made there."""
    owner = world.owner
    status, team = await owner.call("POST", "/teams", json={"name": f"second {name}"})
    assert status == 201, team
    parents = [
        {"team": world.team_id, "diary": world.diary["id"]},
        {"team": team["id"], "diary": (await new_diary(owner))["id"]},
    ]
    template, body = UNDER_PARENTS[name]
    key = keyed(str(uuid.uuid4()))
    status, first = await owner.call("POST", template.format(**parents[0]), json=body, headers=key)
    assert status == 201, first
    status, problem = await owner.call(
        "POST", template.format(**parents[1]), json=body, headers=key
    )
    assert (status, problem["code"]) == (409, "idempotency-key-reused"), problem


async def test_a_voucher_retried_with_its_key_is_the_same_voucher(world: World) -> None:
    key = keyed(str(uuid.uuid4()))
    status, first = await world.peer.call("POST", "/vouch", headers=key)
    assert status == 201, first
    assert await world.peer.call("POST", "/vouch", headers=key) == (201, first)
    status, other = await world.peer.call("POST", "/vouch")
    assert status == 201 and other["code"] != first["code"]


async def entries_with(db_pool: Any, content: str) -> list[uuid.UUID]:
    rows = await db_pool.fetch("SELECT id FROM diary_entries WHERE content = $1", content)
    return [row["id"] for row in rows]


async def parent_tuples(db_pool: Any, entry_ids: list[uuid.UUID]) -> int:
    return int(
        await db_pool.fetchval(
            "SELECT count(*) FROM relation_tuples WHERE namespace = 'DiaryEntry'"
            " AND object_id = ANY($1::text[]) AND relation = 'parent'",
            [str(i) for i in entry_ids],
        )
    )


async def test_one_row_and_one_tuple_per_key_and_principal(
    world: World, actors: Any, db_pool: Any
) -> None:
    content = f"written once {uuid.uuid4()}"
    path = f"/diaries/{world.diary['id']}/entries"
    key = keyed(str(uuid.uuid4()))
    for _ in range(3):
        status, entry = await world.owner.call("POST", path, json={"content": content}, headers=key)
        assert status == 201, entry
    ids = await entries_with(db_pool, content)
    assert ids == [uuid.UUID(entry["id"])]
    assert await parent_tuples(db_pool, ids) == 1

    # another principal (a writer of the same diary) with the same key writes its own entry
    writer = await actors.agent()
    grant = {"subjectId": str(writer.subject_id), "subjectNs": "Agent", "role": "writer"}
    assert (await world.owner.call("POST", f"/diaries/{world.diary['id']}/grants", json=grant))[
        0
    ] == 201
    # (other content: the same content in the same diary would be an exact duplicate)
    theirs_content = f"{content} (the writer's)"
    status, theirs = await writer.call("POST", path, json={"content": theirs_content}, headers=key)
    assert status == 201 and theirs["id"] != entry["id"], theirs
    assert len(await entries_with(db_pool, theirs_content)) == 1

    # and without a key a request is a new one: here an exact duplicate, answered with the
    # live entry (200), nothing written
    status, again = await world.owner.call("POST", path, json={"content": content})
    assert status == 200 and again["id"] == entry["id"]
    assert len(await entries_with(db_pool, content)) == 1


async def test_a_key_of_the_wrong_length_is_400(world: World) -> None:
    path = f"/diaries/{world.diary['id']}/entries"
    for bad in ("", "k" * 201):
        status, problem = await world.owner.call(
            "POST", path, json={"content": "never written"}, headers=keyed(bad)
        )
        assert (status, problem["code"]) == (400, "invalid-idempotency-key"), problem
    # a decision that needs no key to be safe still refuses a malformed one
    path = f"/teams/{world.team_id}/accept-founding"
    status, problem = await world.owner.call("POST", path, headers=keyed("k" * 201))
    assert (status, problem["code"]) == (400, "invalid-idempotency-key"), problem


async def test_an_accept_founding_repeated_answers_200(world: World) -> None:
    status, team = await _founding(world, str(uuid.uuid4()), 0)
    assert status == 202, team
    path = f"/teams/{team['id']}/accept-founding"
    for _ in range(2):
        status, accepted = await world.peer.call("POST", path)
        assert (status, accepted["accepted"]) == (200, True), accepted
