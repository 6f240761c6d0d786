"""Imports from other memory systems over REST on the real stack (issue 33 §2; docs/imports.md):
each committed fixture (Mem0 `get_all`, Letta agent file, COGX zip) becomes one diary whose
entries keep their origin, pass the exact-duplicate rule, the injection scan and the embedding
of an entry create, and are found by search; sending the same file again names the same diary;
a bad file is refused naming its first bad record, with nothing written; an unknown type is
415."""

from __future__ import annotations

import json
from typing import Any

import pytest
from actors import Actor, personal_team
from fixtures.peer_files import COGX, LETTA, MEM0, cogx_files, cogx_zip, letta_agent_file

from schemas import limits
from schemas.kernel.cids import bytes_cid

TABLES = ("diaries", "diary_entries", "entry_relations", "relation_tuples")
JSON = {"Content-Type": "application/json"}
ZIP = {"Content-Type": "application/zip"}


@pytest.fixture(scope="module")
async def importer(actors: Any) -> Actor:
    return await actors.agent()


async def import_file(
    actor: Actor, data: bytes, headers: dict[str, str], **params: str
) -> tuple[int, Any]:
    team = await personal_team(actor)
    return await actor.call(
        "POST", "/diaries/import", data=data, team=team, headers=headers, params=params
    )


async def entries_of(actor: Actor, diary_id: str) -> list[dict[str, Any]]:
    status, listed = await actor.call("GET", f"/diaries/{diary_id}/entries", params={"limit": 100})
    assert status == 200, listed
    return list(listed["items"])


async def search(actor: Actor, diary_id: str, query: str) -> list[dict[str, Any]]:
    status, found = await actor.call(
        "POST", "/diary/search", json={"query": query, "diaryId": diary_id}
    )
    assert status == 200 and found["search_type"] == "hybrid", found
    return list(found["results"])


async def row_counts(db_pool: Any) -> dict[str, int]:
    return {t: int(await db_pool.fetchval(f"SELECT count(*) FROM {t}")) for t in TABLES}


async def test_a_mem0_listing_is_one_diary_deduplicated_and_searchable(importer: Actor) -> None:
    data = MEM0.read_bytes()
    status, diary = await import_file(importer, data, JSON)
    assert status == 201 and diary["name"] == "Mem0 memories", diary

    entries = await entries_of(importer, diary["id"])
    assert len(entries) == 2  # the third memory repeats the second's content
    by_id = {e["origin"]["id"]: e for e in entries}
    seat = by_id["4a7f2c1e-6b0d-4f57-9c8e-1d2b3a4c5d6e"]
    assert seat["origin"] == {
        "format": "mem0",
        "id": "4a7f2c1e-6b0d-4f57-9c8e-1d2b3a4c5d6e",
        "createdAt": "2026-01-05T09:15:00.123456-08:00",  # as Mem0 wrote it
        "updatedAt": "2026-01-06T10:00:00-08:00",
        "file": bytes_cid(data),
        "metadata": {"source": "chat"},
    }
    assert seat["createdAt"] == "2026-01-05T17:15:00.123456Z"
    assert set(seat["tags"]) == {"user:alice", "agent:travel-helper", "travel", "preferences"}
    assert all(e["hasEmbedding"] for e in entries)
    status, hygiene = await importer.call("GET", f"/diaries/{diary['id']}/hygiene")
    assert status == 200 and hygiene["duplicatesRefused"] == 1, hygiene

    found = await search(importer, diary["id"], "aisle or window seat on a plane")
    assert found[0]["content"] == "Prefers window seats on long-haul flights"


async def test_the_same_file_again_names_the_same_diary_and_writes_nothing(
    importer: Actor, db_pool: Any
) -> None:
    data = MEM0.read_bytes()
    status, first = await import_file(importer, data, JSON)
    assert status == 201, first
    before = await row_counts(db_pool)
    status, again = await import_file(importer, data, {"Content-Type": "application/octet-stream"})
    assert status == 201 and again["id"] == first["id"], again
    assert await row_counts(db_pool) == before


async def test_a_letta_agent_file_keeps_blocks_and_scans_passages(importer: Actor) -> None:
    status, diary = await import_file(importer, LETTA.read_bytes(), JSON, name="support memory")
    assert status == 201 and diary["name"] == "support memory", diary

    entries = {e["origin"]["id"]: e for e in await entries_of(importer, diary["id"])}
    assert set(entries) == {"block-0", "block-1", "passage-0", "passage-1"}
    persona = entries["block-0"]
    assert persona["title"] == "persona" and "persona" in persona["tags"]
    assert persona["entryType"] == "semantic" and persona["origin"]["format"] == "letta"
    assert entries["passage-0"]["entryType"] == "episodic"
    assert entries["passage-1"]["injectionRisk"] is True  # scanned as any new entry
    assert not entries["passage-0"]["injectionRisk"]

    found = await search(importer, diary["id"], "who is the user on the night shift")
    assert found[0]["origin"]["id"] == "block-1"


async def test_a_cogx_archive_keeps_records_and_links_them(importer: Actor) -> None:
    status, diary = await import_file(importer, COGX.read_bytes(), ZIP)
    assert status == 201 and diary["name"] == "COGX import from mem0", diary

    entries = {e["origin"]["id"]: e for e in await entries_of(importer, diary["id"])}
    assert set(entries) == {"m-1", "m-2", "b-1", "d-1"}
    status, relations = await importer.call(
        "GET", f"/entries/{entries['m-2']['id']}/relations", params={"direction": "as_source"}
    )
    assert status == 200, relations
    (relation,) = relations["items"]
    assert relation["relation"] == "elaborates" and relation["status"] == "accepted"
    assert relation["targetId"] == entries["m-1"]["id"]

    found = await search(importer, diary["id"], "when is the staging database upgraded")
    assert found[0]["origin"]["id"] == "m-2"


async def test_a_bad_record_is_400_naming_it_and_nothing_is_written(
    importer: Actor, db_pool: Any
) -> None:
    agent_file = letta_agent_file()
    agent_file["agents"][0]["passages"][1]["text"] = "x" * 10_001
    before = await row_counts(db_pool)
    status, problem = await import_file(importer, json.dumps(agent_file).encode(), JSON)
    assert status == 400 and problem["code"] == "import-invalid", problem
    assert problem["record"] == "agents/0/passages/1"
    assert await row_counts(db_pool) == before


async def test_an_archive_unpacking_past_the_limit_is_413_naming_the_file(
    importer: Actor, db_pool: Any
) -> None:
    files = cogx_files()
    files["documents.jsonl"] = b" " * (limits.DIARY_IMPORT_MAX_BYTES + 1)  # zips to ~33 KB
    before = await row_counts(db_pool)
    status, problem = await import_file(importer, cogx_zip(files), ZIP)
    assert status == 413 and problem["code"] == "payload-too-large", problem
    assert problem["record"] == "documents.jsonl"
    assert await row_counts(db_pool) == before


async def test_an_unknown_media_type_is_415(importer: Actor) -> None:
    status, problem = await import_file(importer, MEM0.read_bytes(), {"Content-Type": "text/csv"})
    assert status == 415 and problem["code"] == "unsupported-media-type", problem
