"""Reads from a streaming replica (`SERVICE_DATABASE_READ_URL`, api/reads.py): list, get and
search requests read there; a request that writes reads its own rows from the primary.

The replica is real: `pg_basebackup -R` of the session's Postgres, started with the same
installation's binaries. Its replay is paused while the test writes, so what the replica
answers is known without timing: the create's own response is whole (the primary), a list,
a get and a search right after do not see the entry (the replica), and once replay resumes they
do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest
from actors import Actor, Actors, new_diary
from waiting import wait_until

from infra.devstack import Postgres, StreamingReplica, database_of


@pytest.fixture(scope="module")
def replica(
    postgres: Postgres, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StreamingReplica]:
    root = tmp_path_factory.mktemp("replica")
    root.chmod(0o755)  # the server runs as its own user and must traverse it
    server = StreamingReplica(postgres, root / "pg")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stack_settings(replica: StreamingReplica, database_url: str) -> dict[str, object]:
    return {"database_read_url": replica.dsn(database_of(database_url))}


@pytest.fixture(scope="module")
async def replica_db(replica: StreamingReplica, database_url: str) -> AsyncIterator[Any]:
    conn = await asyncpg.connect(replica.dsn(database_of(database_url)))
    yield conn
    await conn.close()


async def found(agent: Actor, diary_id: str, entry_id: str) -> dict[str, bool]:
    """Whether a get, a list and a search of the diary each return the entry."""
    got, _ = await agent.call("GET", f"/entries/{entry_id}")
    status, listed = await agent.call("GET", f"/diaries/{diary_id}/entries")
    assert status == 200, listed
    search = {"query": "replica lag", "diaryId": diary_id, "mode": "fulltext"}
    status, searched = await agent.call("POST", "/diary/search", json=search)
    assert status == 200, searched
    return {
        "get": got == 200,
        "list": any(item["id"] == entry_id for item in listed["items"]),
        "search": any(item["id"] == entry_id for item in searched["results"]),
    }


async def test_reads_come_from_the_replica_and_a_write_reads_its_own_rows(
    actors: Actors, replica_db: Any
) -> None:
    assert await replica_db.fetchval("SELECT pg_is_in_recovery()")
    agent = await actors.agent()
    diary = await new_diary(agent)

    async def diary_replayed() -> bool:
        status, _ = await agent.call("GET", f"/diaries/{diary['id']}")
        return status == 200

    await wait_until(diary_replayed, what="the replica to replay the new diary")

    await replica_db.execute("SELECT pg_wal_replay_pause()")
    try:

        async def paused() -> bool:
            state = await replica_db.fetchval("SELECT pg_get_wal_replay_pause_state()")
            return bool(state == "paused")

        await wait_until(paused, what="the replica's replay to pause")
        content = "What the replica has not replayed yet: replica lag, measured."
        status, entry = await agent.call(
            "POST", f"/diaries/{diary['id']}/entries", json={"content": content}
        )
        # the create read the row its workflow wrote: from the primary
        assert status == 201, entry
        assert entry["content"] == content
        assert entry["diaryId"] == diary["id"]
        # the next requests read from the replica, which has not replayed the write
        assert await found(agent, diary["id"], entry["id"]) == {
            "get": False,
            "list": False,
            "search": False,
        }
    finally:
        await replica_db.execute("SELECT pg_wal_replay_resume()")

    async def replayed() -> bool:
        return all((await found(agent, diary["id"], entry["id"])).values())

    await wait_until(replayed, what="the replica to replay the entry")
