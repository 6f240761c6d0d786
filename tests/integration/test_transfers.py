"""Diary transfers on the real stack (SPEC 3.3; DECISIONS "Names"): a source-team owner
proposes, a destination-team owner accepts or rejects, and only an accept moves the diary
(`diaries.team_id` and the Diary `team` tuple together). Every permission rule is tested both
ways, refusals are checked to have written nothing, and the 7-day expiry is in
tests/workflow_runs/test_transfer_workflow.py."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from actors import Actor, new_diary, personal_team

# --- helpers ------------------------------------------------------------------------------------


async def new_team(owner: Actor, name: str = "receivers") -> str:
    """A non-personal team, active at once, `owner` its owner."""
    status, body = await owner.call("POST", "/teams", json={"name": name})
    assert status == 201, body
    return str(body["id"])


async def add_member(owner: Actor, team_id: str, actor: Actor, role: str) -> None:
    status, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"role": role})
    assert status == 201, invite
    status, joined = await actor.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 200, joined


async def propose(actor: Actor, diary_id: str, destination: str) -> tuple[int, Any]:
    return await actor.call(
        "POST", f"/diaries/{diary_id}/transfers", json={"destinationTeamId": destination}
    )


async def decide(actor: Actor, transfer: dict[str, Any], decision: str) -> tuple[int, Any]:
    return await actor.call(
        "POST", f"/diaries/{transfer['diaryId']}/transfers/{transfer['id']}/{decision}"
    )


async def proposed(actor: Actor, diary_id: str, destination: str) -> dict[str, Any]:
    status, body = await propose(actor, diary_id, destination)
    assert status == 201, body
    return dict(body)


async def diary_team(db_pool: Any, diary_id: str) -> uuid.UUID:
    return uuid.UUID(
        str(
            await db_pool.fetchval("SELECT team_id FROM diaries WHERE id = $1", uuid.UUID(diary_id))
        )
    )


async def team_bindings(db_pool: Any, diary_id: str) -> set[str]:
    rows = await db_pool.fetch(
        "SELECT subject_ns, subject_id FROM relation_tuples"
        " WHERE namespace = 'Diary' AND object_id = $1 AND relation = 'team'",
        diary_id,
    )
    return {f"{r['subject_ns']}:{r['subject_id']}" for r in rows}


async def transfer_rows(db_pool: Any, diary_id: str) -> list[dict[str, Any]]:
    rows = await db_pool.fetch(
        "SELECT id, status, resolved_at FROM diary_transfers WHERE diary_id = $1",
        uuid.UUID(diary_id),
    )
    return [dict(r) for r in rows]


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def giver(actors: Any) -> Actor:
    """Owns the diaries (in its personal team)."""
    return await actors.agent()


@pytest.fixture(scope="module")
async def receiver(actors: Any) -> Actor:
    """Owns the destination team."""
    return await actors.agent()


@pytest.fixture(scope="module")
async def outsider(actors: Any) -> Actor:
    return await actors.agent()


@pytest.fixture(scope="module")
async def destination(receiver: Actor) -> str:
    return await new_team(receiver)


@pytest.fixture(scope="module")
async def destination_manager(actors: Any, receiver: Actor, destination: str) -> Actor:
    """A manager, not an owner, of the destination team."""
    manager = await actors.agent()
    await add_member(receiver, destination, manager, "manager")
    return manager


# --- accept -------------------------------------------------------------------------------------


async def test_accept_moves_the_diary_and_swaps_its_team_binding(
    giver: Actor, receiver: Actor, destination: str, db_pool: Any
) -> None:
    diary = await new_diary(giver, "private")
    source = await personal_team(giver)
    status, entry = await giver.call(
        "POST", f"/diaries/{diary['id']}/entries", json={"content": "kept across the move"}
    )
    assert status == 201, entry

    transfer = await proposed(giver, diary["id"], destination)
    assert transfer["status"] == "pending"
    assert transfer["diaryId"] == diary["id"] and transfer["sourceTeamId"] == source
    assert transfer["destinationTeamId"] == destination
    assert transfer["initiatedBy"] == str(giver.subject_id)
    assert "resolvedAt" not in transfer
    wait = instant(transfer["expiresAt"]) - instant(transfer["createdAt"])
    assert abs(wait - timedelta(days=7)) < timedelta(seconds=5)

    status, pending = await receiver.call("GET", "/transfers")
    assert status == 200 and transfer["id"] in {t["id"] for t in pending["items"]}
    status, mine = await giver.call("GET", "/transfers")
    assert status == 200 and transfer["id"] not in {t["id"] for t in mine["items"]}

    status, accepted = await decide(receiver, transfer, "accept")
    assert status == 200, accepted
    assert accepted["id"] == transfer["id"] and accepted["status"] == "accepted"
    assert instant(accepted["resolvedAt"]) >= instant(accepted["createdAt"])

    assert await diary_team(db_pool, diary["id"]) == uuid.UUID(destination)
    assert await team_bindings(db_pool, diary["id"]) == {f"Team:{destination}"}
    rows = await transfer_rows(db_pool, diary["id"])
    assert [r["status"] for r in rows] == ["accepted"] and rows[0]["resolved_at"] is not None

    # the old team lost the private diary; the new owner reads and writes it
    status, _ = await giver.call("GET", f"/diaries/{diary['id']}")
    assert (status, _["code"]) == (404, "diary-not-found")
    status, _ = await giver.call("GET", f"/entries/{entry['id']}")
    assert (status, _["code"]) == (404, "entry-not-found")
    status, body = await receiver.call("GET", f"/diaries/{diary['id']}")
    assert status == 200 and body["teamId"] == destination
    status, body = await receiver.call("GET", f"/entries/{entry['id']}")
    assert status == 200 and body["content"] == "kept across the move"
    status, body = await receiver.call(
        "POST", f"/diaries/{diary['id']}/entries", json={"content": "written by the new team"}
    )
    assert status == 201, body

    status, pending = await receiver.call("GET", "/transfers")
    assert transfer["id"] not in {t["id"] for t in pending["items"]}
    status, history = await receiver.call("GET", f"/diaries/{diary['id']}/transfers")
    assert status == 200 and [t["status"] for t in history["items"]] == ["accepted"]


async def test_a_repeated_accept_answers_200_a_late_reject_409_and_nothing_changes(
    giver: Actor, receiver: Actor, destination: str, db_pool: Any
) -> None:
    diary = await new_diary(giver, "private")
    transfer = await proposed(giver, diary["id"], destination)
    status, accepted = await decide(receiver, transfer, "accept")
    assert status == 200, accepted
    before = await transfer_rows(db_pool, diary["id"])

    status, again = await decide(receiver, transfer, "accept")  # a retry: the state reached
    assert (status, again["status"], again["resolvedAt"]) == (
        200,
        "accepted",
        accepted["resolvedAt"],
    )
    status, problem = await decide(receiver, transfer, "reject")  # the opposite decision
    assert status == 409, problem
    assert problem["code"] == "diary-transfer-already-resolved"

    assert await transfer_rows(db_pool, diary["id"]) == before
    assert await diary_team(db_pool, diary["id"]) == uuid.UUID(destination)
    assert await team_bindings(db_pool, diary["id"]) == {f"Team:{destination}"}


async def test_concurrent_accepts_resolve_once(
    giver: Actor, receiver: Actor, destination: str, db_pool: Any
) -> None:
    diary = await new_diary(giver, "private")
    transfer = await proposed(giver, diary["id"], destination)
    results = await asyncio.gather(*(decide(receiver, transfer, "accept") for _ in range(3)))
    assert [(status, body["status"]) for status, body in results] == [(200, "accepted")] * 3
    assert len({body["resolvedAt"] for _, body in results}) == 1  # one decision, recorded once
    assert [row["status"] for row in await transfer_rows(db_pool, diary["id"])] == ["accepted"]
    assert await team_bindings(db_pool, diary["id"]) == {f"Team:{destination}"}


# --- reject ---------------------------------------------------------------------------------------


async def test_reject_keeps_the_diary_with_its_team(
    giver: Actor, receiver: Actor, destination: str, db_pool: Any
) -> None:
    diary = await new_diary(giver, "private")
    source = await personal_team(giver)
    transfer = await proposed(giver, diary["id"], destination)

    status, rejected = await decide(receiver, transfer, "reject")
    assert status == 200, rejected
    assert rejected["status"] == "rejected" and "resolvedAt" in rejected

    assert await diary_team(db_pool, diary["id"]) == uuid.UUID(source)
    assert await team_bindings(db_pool, diary["id"]) == {f"Team:{source}"}
    status, _ = await giver.call("GET", f"/diaries/{diary['id']}")
    assert status == 200
    status, _ = await receiver.call("GET", f"/diaries/{diary['id']}")
    assert (status, _["code"]) == (404, "diary-not-found")
    status, again = await decide(receiver, transfer, "reject")  # a retry: the state reached
    assert (status, again["status"]) == (200, "rejected"), again
    status, problem = await decide(receiver, transfer, "accept")
    assert status == 409 and problem["code"] == "diary-transfer-already-resolved"

    # a rejected transfer is no longer pending, so a new one may be proposed
    again = await proposed(giver, diary["id"], destination)
    assert again["id"] != transfer["id"]
    status, one = await giver.call("GET", f"/diaries/{diary['id']}/transfers/{again['id']}")
    assert status == 200 and one["status"] == "pending"
    status, history = await giver.call("GET", f"/diaries/{diary['id']}/transfers")
    assert status == 200
    assert [t["status"] for t in history["items"]] == ["pending", "rejected"]


# --- who may decide ---------------------------------------------------------------------------


async def test_only_a_destination_owner_decides(
    giver: Actor,
    receiver: Actor,
    outsider: Actor,
    destination: str,
    destination_manager: Actor,
    db_pool: Any,
) -> None:
    diary = await new_diary(giver, "private")
    source = await personal_team(giver)
    transfer = await proposed(giver, diary["id"], destination)

    # the source owner and a destination manager see the transfer, but may not decide
    for actor in (giver, destination_manager):
        for decision in ("accept", "reject"):
            status, problem = await decide(actor, transfer, decision)
            assert status == 403, problem
            assert problem["code"] == "not-destination-owner"
    # a stranger to both teams and to the private diary does not learn it exists
    status, problem = await decide(outsider, transfer, "accept")
    assert status == 404 and problem["code"] == "diary-transfer-not-found"
    status, _ = await outsider.call("GET", f"/diaries/{diary['id']}/transfers/{transfer['id']}")
    assert (status, problem["code"]) == (404, "diary-transfer-not-found")
    # a transfer id under another diary's path is not found either
    other = await new_diary(giver, "private")
    status, _ = await receiver.call(
        "POST", f"/diaries/{other['id']}/transfers/{transfer['id']}/accept"
    )
    assert (status, problem["code"]) == (404, "diary-transfer-not-found")

    assert [r["status"] for r in await transfer_rows(db_pool, diary["id"])] == ["pending"]
    assert await team_bindings(db_pool, diary["id"]) == {f"Team:{source}"}
    status, accepted = await decide(receiver, transfer, "accept")
    assert status == 200 and accepted["status"] == "accepted"


# --- who may propose, and to where ------------------------------------------------------------


async def test_outsider_gets_404_and_a_reader_who_is_not_owner_403(
    giver: Actor, outsider: Actor, destination: str, db_pool: Any
) -> None:
    private = await new_diary(giver, "private")
    status, problem = await propose(outsider, private["id"], destination)
    assert status == 404, problem
    public = await new_diary(giver, "public")
    status, problem = await propose(outsider, public["id"], destination)
    assert status == 403 and problem["code"] == "not-team-owner"
    for diary in (private, public):
        assert await transfer_rows(db_pool, diary["id"]) == []


async def test_destination_must_be_another_active_shared_team(
    giver: Actor, receiver: Actor, db_pool: Any
) -> None:
    diary = await new_diary(giver, "private")
    cases = [
        (await personal_team(receiver), 400, "diary-transfer-personal-team"),
        (await personal_team(giver), 400, "diary-transfer-same-team"),
        (str(uuid.uuid4()), 404, "team-not-found"),
    ]
    for team_id, expected, code in cases:
        status, problem = await propose(giver, diary["id"], team_id)
        assert (status, problem["code"]) == (expected, code), problem
    assert await transfer_rows(db_pool, diary["id"]) == []


async def test_one_pending_transfer_per_diary(
    giver: Actor, receiver: Actor, destination: str, db_pool: Any
) -> None:
    diary = await new_diary(giver, "private")
    first = await proposed(giver, diary["id"], destination)
    other = await new_team(giver, "another home")
    status, problem = await propose(giver, diary["id"], other)
    assert status == 409 and problem["code"] == "diary-transfer-pending"
    rows = await transfer_rows(db_pool, diary["id"])
    assert [(str(r["id"]), r["status"]) for r in rows] == [(first["id"], "pending")]


async def test_concurrent_proposals_store_one(giver: Actor, destination: str, db_pool: Any) -> None:
    diary = await new_diary(giver, "private")
    results = await asyncio.gather(*(propose(giver, diary["id"], destination) for _ in range(3)))
    assert sorted(status for status, _ in results) == [201, 409, 409], results
    assert len(await transfer_rows(db_pool, diary["id"])) == 1


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({}, "/destinationTeamId"),
        ({"destinationTeamId": "not-a-uuid"}, "/destinationTeamId"),
        ({"destinationTeamId": str(uuid.uuid4()), "note": "x"}, "/note"),
    ],
)
async def test_invalid_body_is_400(
    giver: Actor, body: dict[str, Any], pointer: str, db_pool: Any
) -> None:
    diary = await new_diary(giver, "private")
    status, problem = await giver.call("POST", f"/diaries/{diary['id']}/transfers", json=body)
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert pointer in {e["pointer"] for e in problem["errors"]}
    assert await transfer_rows(db_pool, diary["id"]) == []


async def test_transfer_routes_need_the_share_scope(actors: Any, destination: str) -> None:
    reader = await actors.agent(scope="agent:profile diary:read diary:write")
    diary = await new_diary(reader, "private")
    status, problem = await propose(reader, diary["id"], destination)
    assert status == 403 and problem["code"] == "missing-scope"


async def test_the_diary_history_is_for_its_team(
    giver: Actor, outsider: Actor, destination: str
) -> None:
    diary = await new_diary(giver, "public")
    await proposed(giver, diary["id"], destination)
    status, history = await giver.call("GET", f"/diaries/{diary['id']}/transfers")
    assert status == 200 and len(history["items"]) == 1
    status, problem = await outsider.call("GET", f"/diaries/{diary['id']}/transfers")
    assert (status, problem["code"]) == (403, "forbidden"), problem


async def test_transfers_name_the_diary_and_both_teams(
    giver: Actor, receiver: Actor, destination: str
) -> None:
    """The person deciding may not read the diary yet: the views carry what moves where."""
    diary = await new_diary(giver, "private")
    source = await personal_team(giver)
    status, teams = await giver.call("GET", "/teams")
    assert status == 200, teams
    source_name = next(team["name"] for team in teams["items"] if team["id"] == source)
    transfer = await proposed(giver, diary["id"], destination)
    names = {"diaryName": diary["name"], "sourceTeamName": source_name}
    names["destinationTeamName"] = "receivers"
    status, pending = await receiver.call("GET", "/transfers")
    assert status == 200, pending
    [listed] = [item for item in pending["items"] if item["id"] == transfer["id"]]
    assert {key: listed[key] for key in names} == names
    status, history = await giver.call("GET", f"/diaries/{diary['id']}/transfers")
    assert status == 200 and {key: history["items"][0][key] for key in names} == names
    status, one = await receiver.call("GET", f"/diaries/{diary['id']}/transfers/{transfer['id']}")
    assert status == 200 and {key: one[key] for key in names} == names


async def test_a_member_lists_what_waits_for_the_team_but_only_an_owner_decides(
    giver: Actor, destination: str, destination_manager: Actor, outsider: Actor
) -> None:
    diary = await new_diary(giver, "private")
    transfer = await proposed(giver, diary["id"], destination)
    status, mine = await destination_manager.call("GET", "/transfers")
    assert status == 200 and transfer["id"] not in {t["id"] for t in mine["items"]}
    status, waiting = await destination_manager.call(
        "GET", "/transfers", params={"teamId": destination}
    )
    assert status == 200 and transfer["id"] in {t["id"] for t in waiting["items"]}
    status, problem = await decide(destination_manager, transfer, "accept")
    assert (status, problem["code"]) == (403, "not-destination-owner"), problem
    status, problem = await outsider.call("GET", "/transfers", params={"teamId": destination})
    assert (status, problem["code"]) == (404, "team-not-found"), problem
