"""The daemon's one resend loop (`client.daemon.resend_while_passing`): a passing refusal
(502/503/504) is sent again, a final one is not, and a draining daemon stops resending a claim
at once instead of holding its poll for the task's whole dispatch timeout."""

from __future__ import annotations

import pytest

from client.daemon import resend_while_passing
from client.rest import ApiError


class Refusals:
    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.sent = 0

    async def send(self) -> str:
        self.sent += 1
        if self.statuses:
            raise ApiError(self.statuses.pop(0), {})
        return "granted"


async def test_a_passing_refusal_is_sent_again_until_it_is_answered() -> None:
    api = Refusals(503, 502)
    assert await resend_while_passing(api.send, for_sec=30, what="claim") == "granted"
    assert api.sent == 3


async def test_a_final_refusal_is_not_sent_again() -> None:
    api = Refusals(409)
    with pytest.raises(ApiError) as refused:
        await resend_while_passing(api.send, for_sec=30, what="claim")
    assert refused.value.status == 409 and api.sent == 1


async def test_a_draining_daemon_stops_resending() -> None:
    api = Refusals(503, 503)
    with pytest.raises(ApiError) as refused:
        await resend_while_passing(api.send, for_sec=300, what="claim", unless=lambda: True)
    assert refused.value.status == 503 and api.sent == 1
