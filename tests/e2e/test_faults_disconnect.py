"""A client that disconnects in the middle of a 25 MiB upload leaves no object and no row, and
the API goes on serving; one whose connection dies after the server committed, and that sends
the request again, gets the first answer and nothing written twice."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import psutil
import pytest
from actors import personal_team
from waiting import wait_until

from infra.s3 import BlobStore, artifact_key
from schemas import limits
from schemas.kernel.cids import bytes_cid

MIB = 1024 * 1024


@pytest.fixture(scope="module")
async def blobs(stack: Any) -> AsyncIterator[BlobStore]:
    store = BlobStore.from_settings(stack.settings)
    yield store
    store.close()


async def artifact_rows(db_pool: Any) -> int:
    return int(
        await db_pool.fetchval(
            "SELECT (SELECT count(*) FROM artifact_blobs) + (SELECT count(*) FROM"
            " staged_artifacts) + (SELECT count(*) FROM task_artifacts)"
        )
    )


async def send_part_then_hang_up(
    base_url: str, path: str, headers: dict[str, str], body: bytes, sent: int
) -> int:
    """Announce the whole body, send its first `sent` bytes, and close the connection; returns
    the client's port, by which the server's side of the connection is known."""
    where = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(where.hostname, where.port)
    client_port = int(writer.get_extra_info("sockname")[1])
    head = [f"PUT {path} HTTP/1.1", f"Host: {where.netloc}", f"Content-Length: {len(body)}"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    for start in range(0, sent, MIB):
        writer.write(body[start : min(start + MIB, sent)])
        await writer.drain()
    writer.transport.abort()  # a reset, as when a client process dies
    reader.feed_eof()
    return client_port


def server_holds_connection_from(client_port: int) -> bool:
    """Whether the API (served in this test process by the `stack` fixture) still has a socket
    open to `client_port`: it closes it once it has noticed the client is gone."""
    return any(
        connection.raddr and connection.raddr.port == client_port
        for connection in psutil.Process().net_connections(kind="tcp")
    )


async def test_a_disconnect_mid_upload_leaves_no_object_and_no_row(
    stack: Any, actors: Any, db_pool: Any, blobs: BlobStore
) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    data = os.urandom(limits.ARTIFACT_MAX_BYTES)  # 25 MiB, the largest upload allowed
    before = await artifact_rows(db_pool)
    headers = {
        **agent.auth,
        "Content-Type": "application/octet-stream",
        "x-service-team-id": team,
    }
    for sent in (12 * MIB, len(data) - 1):  # midway, and one byte short of the end
        port = await send_part_then_hang_up(
            stack.base_url, "/task-artifacts/staged", headers, data, sent
        )
        # the server notices the lost connection on its next read, and closes its side
        await wait_until(
            lambda port=port: not server_holds_connection_from(port),
            what="the server to drop the connection",
        )
        assert await artifact_rows(db_pool) == before
        assert not await blobs.exists(artifact_key(bytes_cid(data)))
        assert not await blobs.exists(artifact_key(bytes_cid(data[:sent])))

    # the API goes on serving, and the same bytes sent whole are stored once
    status, body = await agent.call(
        "PUT",
        "/task-artifacts/staged",
        data=data,
        team=team,
        headers={"Content-Type": "application/octet-stream"},
    )
    assert status == 200, body
    assert await blobs.exists(artifact_key(bytes_cid(data)))
    assert await artifact_rows(db_pool) == before + 2  # its blob row and its staged row


# --- a client whose connection dies after the server committed, and that sends again ----------


class AnswerDroppingProxy:
    """Relays HTTP/1.1 connections to the API. The first `drops` requests are carried out in
    full, then the client's connection is reset before it reads a byte of the answer: a client
    that timed out, or whose network failed, just after the server committed."""

    def __init__(self, upstream: str, drops: int) -> None:
        where = urlsplit(upstream)
        self.host, self.port = where.hostname or "127.0.0.1", where.port or 80
        self.drops = drops
        self.dropped = 0
        self.server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> AnswerDroppingProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        upstream, to_upstream = await asyncio.open_connection(self.host, self.port)
        try:
            while request := await _message(client):
                to_upstream.write(request)
                answer = await _message(upstream)
                if self.dropped < self.drops:
                    self.dropped += 1
                    to_client.transport.abort()
                    return
                to_client.write(answer)
                await to_client.drain()
        finally:
            to_upstream.close()


async def _message(stream: asyncio.StreamReader) -> bytes:
    """One HTTP/1.1 message with a Content-Length body (b"" at the end of the stream)."""
    try:
        head = await stream.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return b""
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head + await stream.readexactly(length)


async def test_a_create_resent_after_a_lost_answer_writes_one_row_and_one_tuple(
    stack: Any, actors: Any, db_pool: Any
) -> None:
    from actors import new_diary

    from client.rest import CairnClient
    from schemas.memory import EntryCreateRequest

    agent = await actors.agent()
    diary = await new_diary(agent)
    content = f"sent once, answered twice {os.urandom(4).hex()}"
    bearer = agent.auth["Authorization"].removeprefix("Bearer ")
    async with (
        AnswerDroppingProxy(stack.base_url, drops=1) as proxy,
        CairnClient(proxy.base_url, bearer=bearer) as api,
    ):
        entry = await api.create_entry(diary["id"], EntryCreateRequest(content=content))
    assert proxy.dropped == 1  # the first answer was lost; the client sent the create again
    rows = await db_pool.fetch("SELECT id FROM diary_entries WHERE content = $1", content)
    assert [row["id"] for row in rows] == [entry.id]
    tuples = await db_pool.fetchval(
        "SELECT count(*) FROM relation_tuples WHERE namespace = 'DiaryEntry' AND object_id = $1",
        str(entry.id),
    )
    assert tuples == 1


async def test_an_upload_resent_after_a_lost_answer_stores_one_object_and_its_rows(
    stack: Any, actors: Any, db_pool: Any, blobs: BlobStore
) -> None:
    agent = await actors.agent()
    team = await personal_team(agent)
    data = os.urandom(64 * 1024)
    before = await artifact_rows(db_pool)
    headers = {"Content-Type": "application/octet-stream"}
    async with AnswerDroppingProxy(stack.base_url, drops=1) as proxy:
        # aiohttp itself sends a PUT again on a connection reset before any answer
        status, body = await put_staged(proxy.base_url, agent, team, data, headers)
    assert proxy.dropped == 1  # the first answer was lost after the upload was stored
    assert status == 200 and body["cid"] == bytes_cid(data), body
    assert await artifact_rows(db_pool) == before + 2  # its blob row and its staged row, once
    assert await blobs.exists(artifact_key(bytes_cid(data)))


async def put_staged(
    base_url: str, agent: Any, team: str, data: bytes, headers: dict[str, str]
) -> tuple[int, Any]:
    sent = {**agent.auth, **headers, "x-service-team-id": team}
    async with (
        aiohttp.ClientSession() as session,
        session.put(f"{base_url}/task-artifacts/staged", data=data, headers=sent) as response,
    ):
        return response.status, await response.json(content_type=None)


async def test_a_post_without_a_key_is_not_sent_again(stack: Any, actors: Any) -> None:
    """Only what says it is safe to repeat is resent: a keyless POST surfaces the lost answer."""
    from client.rest import CairnClient

    agent = await actors.agent()
    bearer = agent.auth["Authorization"].removeprefix("Bearer ")
    async with (
        AnswerDroppingProxy(stack.base_url, drops=1) as proxy,
        CairnClient(proxy.base_url, bearer=bearer) as api,
    ):
        with pytest.raises(aiohttp.ClientConnectionError):
            await api.request("POST", "/diary/search", json={"query": "anything"})
        assert proxy.dropped == 1
        assert await api.request("POST", "/diary/search", json={"query": "anything"})
