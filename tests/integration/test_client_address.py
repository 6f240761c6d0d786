"""The API's runner names the client behind a trusted proxy: in the access log (`%a`) and to
the app (`api.forwarded.client_address`), over a real socket; a peer that is no trusted proxy is
named by its own address whatever it claims."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from waiting import wait_until

from api import keys
from api.forwarded import client_address
from api.server import ApiRunner
from infra.devstack import free_port
from infra.settings import Settings

CLAIMED = "198.51.100.7"


async def _whoami(request: web.Request) -> web.Response:
    return web.Response(text=client_address(request))


@pytest.fixture
async def server() -> AsyncIterator[str]:
    app = web.Application()
    app[keys.SETTINGS] = Settings(trusted_proxies="127.0.0.1/32")
    app.router.add_get("/", _whoami)
    runner = ApiRunner(app)  # the access log on, as aiohttp's default
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        await runner.cleanup()


async def _answer(url: str, source: str) -> str:
    connector = aiohttp.TCPConnector(local_addr=(source, 0))
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.get(url, headers={"X-Forwarded-For": f"203.0.113.1, {CLAIMED}"}) as response,
    ):
        return await response.text()


def _logged(caplog: pytest.LogCaptureFixture, address: str) -> bool:
    return any(r.getMessage().startswith(f"{address} ") for r in caplog.records)


async def test_a_trusted_peer_is_read_through(
    server: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="aiohttp.access"):
        assert await _answer(server, "127.0.0.1") == CLAIMED
        await wait_until(lambda: _logged(caplog, CLAIMED), what="the access log line")
    assert not _logged(caplog, "127.0.0.1")


async def test_an_untrusted_peer_is_its_own_address(
    server: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="aiohttp.access"):
        assert await _answer(server, "127.0.0.2") == "127.0.0.2"
        await wait_until(lambda: _logged(caplog, "127.0.0.2"), what="the access log line")
    assert not _logged(caplog, CLAIMED)
