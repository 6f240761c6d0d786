"""`CairnClient._send` resends what is safe to resend when the API answers a passing status
(502/503/504: an API restarting, between replicas, or out of workers for a moment): a keyed POST
with the same Idempotency-Key, a GET; never a POST without a key. A real aiohttp server on
localhost answers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from client.rest import IDEMPOTENCY_HEADER, RESENDS, ApiError, CairnClient


class Refusing:
    """Answers each request with the next refusal, then 200; records the keys it was sent."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.keys: list[str | None] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.keys.append(request.headers.get(IDEMPOTENCY_HEADER))
        if self.statuses:
            status = self.statuses.pop(0)
            return web.json_response(
                {"code": "service-unavailable", "status": status},
                status=status,
                headers={"Retry-After": "0"},
            )
        return web.json_response({"ok": True})


@pytest.fixture
async def served() -> AsyncIterator[tuple[Refusing, str]]:
    refusing = Refusing()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", refusing.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield refusing, str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


async def test_a_keyed_post_refused_503_is_sent_again_with_its_key(
    served: tuple[Refusing, str],
) -> None:
    refusing, base_url = served
    refusing.statuses = [503, 502]
    async with CairnClient(base_url, bearer="token") as api:
        answer = await api.request("POST", "/tasks", json={}, headers={IDEMPOTENCY_HEADER: "k-1"})
    assert answer == {"ok": True}
    assert refusing.keys == ["k-1", "k-1", "k-1"]


async def test_a_get_refused_504_is_sent_again(served: tuple[Refusing, str]) -> None:
    refusing, base_url = served
    refusing.statuses = [504]
    async with CairnClient(base_url, bearer="token") as api:
        assert await api.request("GET", "/tasks") == {"ok": True}
    assert len(refusing.keys) == 2


async def test_a_post_without_a_key_is_not_sent_again(served: tuple[Refusing, str]) -> None:
    refusing, base_url = served
    refusing.statuses = [503]
    async with CairnClient(base_url, bearer="token") as api:
        with pytest.raises(ApiError) as refused:
            await api.request("POST", "/tasks", json={})
    assert refused.value.status == 503 and len(refusing.keys) == 1


async def test_an_outage_longer_than_the_resends_is_the_callers(
    served: tuple[Refusing, str],
) -> None:
    refusing, base_url = served
    refusing.statuses = [503] * (RESENDS + 2)
    async with CairnClient(base_url, bearer="token") as api:
        with pytest.raises(ApiError) as refused:
            await api.request("POST", "/tasks", json={}, headers={IDEMPOTENCY_HEADER: "k-2"})
    assert refused.value.status == 503 and refusing.keys == ["k-2"] * (RESENDS + 1)
