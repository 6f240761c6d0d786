"""Time-aware retrieval on the real stack (issue 26): `asOf` on search, entry listing and packs
reads a diary as it stood at an instant — entries created by then, supersession by the
`supersedes` relations accepted by then — and a pack made `asOf` records it in its params, so
its CID pins that instant. Instants come from the rows' stored timestamps, never from sleeping.

The story every test reads: `old` is written, then `new`, then `new supersedes old` is proposed
and accepted, then `later` is written."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import asyncpg
import pytest
from actors import Actor, new_diary

from schemas.memory import as_of_text

OLD = "The release train leaves every Tuesday at noon from the staging branch."
NEW = "Release trains now leave on Thursdays; the Tuesday slot was dropped."
LATER = "Staging branch freezes one hour before each release train."
QUERY = "release train leaves every Tuesday at noon"
MICRO = timedelta(microseconds=1)


@dataclass(frozen=True)
class Story:
    diary: str
    old: dict[str, Any]
    new: dict[str, Any]
    later: dict[str, Any]
    old_at: datetime
    new_at: datetime
    accepted_at: datetime
    later_at: datetime


async def new_entry(actor: Actor, diary_id: str, content: str) -> dict[str, Any]:
    status, entry = await actor.call(
        "POST", f"/diaries/{diary_id}/entries", json={"content": content}
    )
    assert status == 201, entry
    return dict(entry)


async def created_at(db_pool: asyncpg.Pool, entry: dict[str, Any]) -> datetime:
    stored: datetime = await db_pool.fetchval(
        "SELECT created_at FROM diary_entries WHERE id = $1", uuid.UUID(entry["id"])
    )
    return stored


async def accepted_at(db_pool: asyncpg.Pool, relation_id: str) -> datetime | None:
    stored: datetime | None = await db_pool.fetchval(
        "SELECT accepted_at FROM entry_relations WHERE id = $1", uuid.UUID(relation_id)
    )
    return stored


async def set_status(actor: Actor, relation_id: str, status: str) -> dict[str, Any]:
    code, relation = await actor.call("PATCH", f"/relations/{relation_id}", json={"status": status})
    assert code == 200, relation
    return dict(relation)


@pytest.fixture(scope="module")
async def owner(actors) -> Actor:
    return await actors.agent()


@pytest.fixture(scope="module")
async def story(owner, db_pool) -> Story:
    diary = (await new_diary(owner))["id"]
    old = await new_entry(owner, diary, OLD)
    new = await new_entry(owner, diary, NEW)
    body = {"targetId": old["id"], "relation": "supersedes"}
    status, relation = await owner.call("POST", f"/entries/{new['id']}/relations", json=body)
    assert status == 201, relation
    await set_status(owner, relation["id"], "accepted")
    later = await new_entry(owner, diary, LATER)
    accepted = await accepted_at(db_pool, relation["id"])
    assert accepted is not None
    return Story(
        diary=diary,
        old=old,
        new=new,
        later=later,
        old_at=await created_at(db_pool, old),
        new_at=await created_at(db_pool, new),
        accepted_at=accepted,
        later_at=await created_at(db_pool, later),
    )


async def listed(owner: Actor, story: Story, as_of: datetime | None) -> dict[str, Any]:
    params = {} if as_of is None else {"asOf": as_of.isoformat()}
    status, page = await owner.call("GET", f"/diaries/{story.diary}/entries", params=params)
    assert status == 200, page
    return dict(page)


async def search(owner: Actor, story: Story, as_of: datetime | None, **body: Any) -> list[str]:
    sent = {"query": QUERY, "diaryId": story.diary, **body}
    if as_of is not None:
        sent["asOf"] = as_of.isoformat()
    status, found = await owner.call("POST", "/diary/search", json=sent)
    assert status == 200, found
    return [hit["id"] for hit in found["results"]]


# --- relations record when they were accepted -----------------------------------------------


async def test_accepted_at_is_set_on_acceptance_and_cleared_on_rejection(owner, db_pool) -> None:
    diary = (await new_diary(owner))["id"]
    first = await new_entry(owner, diary, "Backups run nightly at two in the morning.")
    second = await new_entry(owner, diary, "Backups now run hourly, on the hour.")
    body = {"targetId": first["id"], "relation": "supersedes"}
    status, relation = await owner.call("POST", f"/entries/{second['id']}/relations", json=body)
    assert status == 201 and await accepted_at(db_pool, relation["id"]) is None
    await set_status(owner, relation["id"], "accepted")
    when = await accepted_at(db_pool, relation["id"])
    updated: datetime = await db_pool.fetchval(
        "SELECT updated_at FROM entry_relations WHERE id = $1", uuid.UUID(relation["id"])
    )
    assert when is not None and when == updated  # the decision's own moment
    await set_status(owner, relation["id"], "accepted")  # accepting again keeps the moment
    assert await accepted_at(db_pool, relation["id"]) == when
    await set_status(owner, relation["id"], "rejected")
    assert await accepted_at(db_pool, relation["id"]) is None


async def test_a_relation_created_accepted_is_accepted_from_its_creation(owner, db_pool) -> None:
    diary = (await new_diary(owner))["id"]
    # unlike enough that the hygiene flush proposes no supersession of its own between them
    # (it would be the relation this create then finds: 200, not 201)
    first = await new_entry(owner, diary, "The on-call rota changes on Mondays.")
    second = await new_entry(owner, diary, "Pages now go to whoever holds the Friday shift.")
    body = {"targetId": first["id"], "relation": "supersedes", "status": "accepted"}
    status, relation = await owner.call("POST", f"/entries/{second['id']}/relations", json=body)
    assert status == 201, relation
    row = await db_pool.fetchrow(
        "SELECT accepted_at, created_at FROM entry_relations WHERE id = $1",
        uuid.UUID(relation["id"]),
    )
    assert row["accepted_at"] == row["created_at"]


# --- entry listing --------------------------------------------------------------------------


async def test_listing_as_of_shows_the_entries_created_by_then(owner, story) -> None:
    assert (await listed(owner, story, story.old_at - MICRO))["total"] == 0
    page = await listed(owner, story, story.old_at)
    assert [e["id"] for e in page["items"]] == [story.old["id"]] and page["total"] == 1
    page = await listed(owner, story, story.new_at)
    assert [e["id"] for e in page["items"]] == [story.new["id"], story.old["id"]]
    now = await listed(owner, story, None)
    assert now["items"][0]["id"] == story.later["id"] and now["total"] == 3


async def test_listing_as_of_shows_supersession_as_it_stood(owner, story) -> None:
    def superseded_by(page: dict[str, Any]) -> str | None:
        old = next(e for e in page["items"] if e["id"] == story.old["id"])
        return old.get("supersededBy")

    assert superseded_by(await listed(owner, story, story.accepted_at - MICRO)) is None
    assert superseded_by(await listed(owner, story, story.accepted_at)) == story.new["id"]
    assert superseded_by(await listed(owner, story, None)) == story.new["id"]


async def test_an_as_of_with_another_offset_is_the_same_instant(owner, story) -> None:
    elsewhere = story.old_at.astimezone(timezone(timedelta(hours=-5)))
    page = await listed(owner, story, elsewhere)
    assert [e["id"] for e in page["items"]] == [story.old["id"]]


# --- search ---------------------------------------------------------------------------------


async def test_search_as_of_finds_only_what_existed_then(owner, story) -> None:
    assert await search(owner, story, story.old_at) == [story.old["id"]]
    assert story.later["id"] not in await search(owner, story, story.accepted_at)
    assert story.later["id"] in await search(owner, story, None)


async def test_superseded_ranks_below_its_successor_by_default(owner, story) -> None:
    found = await search(owner, story, None)
    assert found.index(story.new["id"]) < found.index(story.old["id"])


async def test_before_the_supersession_the_old_fact_wins(owner, story) -> None:
    # the query is the old wording: without the accepted relation the old entry ranks first
    found = await search(owner, story, story.accepted_at - MICRO)
    assert found[0] == story.old["id"] and story.new["id"] in found
    found = await search(owner, story, story.accepted_at)
    assert found.index(story.new["id"]) < found.index(story.old["id"])


async def test_exclude_superseded_removes_by_what_was_accepted_by_then(owner, story) -> None:
    assert story.old["id"] not in await search(owner, story, None, excludeSuperseded=True)
    then = await search(owner, story, story.accepted_at, excludeSuperseded=True)
    assert story.old["id"] not in then
    before = await search(owner, story, story.accepted_at - MICRO, excludeSuperseded=True)
    assert story.old["id"] in before


async def test_search_hits_say_superseded_as_of_then(owner, story) -> None:
    sent = {"query": QUERY, "diaryId": story.diary, "asOf": (story.accepted_at - MICRO).isoformat()}
    status, found = await owner.call("POST", "/diary/search", json=sent)
    assert status == 200, found
    old = next(hit for hit in found["results"] if hit["id"] == story.old["id"])
    assert old.get("supersededBy") is None


# --- packs ----------------------------------------------------------------------------------


async def pack(owner: Actor, story: Story, path: str = "", **body: Any) -> tuple[int, Any]:
    sent = {"entries": [{"entryId": story.old["id"], "rank": 1}], **body}
    return await owner.call("POST", f"/diaries/{story.diary}/packs{path}", json=sent)


async def test_a_pack_made_as_of_records_it_and_its_cid_pins_it(owner, story) -> None:
    at_old = story.old_at.isoformat()
    status, first = await pack(owner, story, asOf=at_old)
    assert status == 201, first
    assert first["params"] == {"asOf": as_of_text(story.old_at)}
    elsewhere = story.old_at.astimezone(timezone(timedelta(hours=3))).isoformat()
    status, again = await pack(owner, story, asOf=elsewhere)  # the same instant
    assert status == 200 and again["packCid"] == first["packCid"], again
    status, later = await pack(owner, story, asOf=story.later_at.isoformat())
    assert status == 201 and later["packCid"] != first["packCid"], later
    status, plain = await pack(owner, story)
    assert status == 201 and plain["packCid"] not in {first["packCid"], later["packCid"]}
    status, preview = await pack(owner, story, "/preview", asOf=at_old)
    assert status == 200 and preview["packCid"] == first["packCid"], preview


async def test_a_pack_as_of_refuses_entries_written_after(owner, story) -> None:
    sent = {
        "entries": [
            {"entryId": story.old["id"], "rank": 1},
            {"entryId": story.new["id"], "rank": 2},
        ],
        "asOf": story.old_at.isoformat(),
    }
    for path in ("/preview", ""):
        status, problem = await owner.call("POST", f"/diaries/{story.diary}/packs{path}", json=sent)
        assert status == 400 and problem["code"] == "pack-entry-after-as-of", problem
        assert problem["entryIds"] == [story.new["id"]]
    sent["asOf"] = story.new_at.isoformat()
    status, preview = await owner.call("POST", f"/diaries/{story.diary}/packs/preview", json=sent)
    assert status == 200, preview


async def test_params_as_of_is_only_what_as_of_writes(owner, story) -> None:
    status, problem = await pack(owner, story, "/preview", params={"asOf": "2020-01-01T00:00:00Z"})
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    echoed = {"asOf": as_of_text(story.old_at)}
    status, _ = await pack(owner, story, "/preview", params=echoed, asOf=story.old_at.isoformat())
    assert status == 200


# --- bad instants ---------------------------------------------------------------------------


@pytest.mark.parametrize("as_of", ["future", "yesterday-ish", "2026-13-01T00:00:00Z", "2026-01-01"])
async def test_a_future_or_malformed_as_of_is_400_everywhere(owner, story, as_of) -> None:
    value = {
        "future": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
        "yesterday-ish": "yesterday",
    }.get(as_of, as_of)
    status, problem = await owner.call(
        "GET", f"/diaries/{story.diary}/entries", params={"asOf": value}
    )
    assert (status, problem["code"]) == (400, "validation-failed")
    assert problem["errors"][0]["pointer"] == "/query/asOf", problem
    status, problem = await owner.call(
        "POST", "/diary/search", json={"query": QUERY, "diaryId": story.diary, "asOf": value}
    )
    assert (status, problem["code"]) == (400, "validation-failed")
    assert problem["errors"][0]["pointer"] == "/asOf", problem
    status, problem = await pack(owner, story, "/preview", asOf=value)
    assert (status, problem["code"]) == (400, "validation-failed")
    assert problem["errors"][0]["pointer"] == "/asOf", problem
