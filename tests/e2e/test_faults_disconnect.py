"""A client that disconnects in the middle of a 25 MiB upload leaves no object and no row, and
the API goes on serving."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

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
