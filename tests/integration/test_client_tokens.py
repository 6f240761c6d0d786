"""The SDK's token cache (spec 5.1), against the real token endpoint: a token is reused until
five minutes before it expires, then renewed; a 401 renews it once and retries."""

from __future__ import annotations

import time
from typing import Any

import pytest
from actors import Actor

from client.rest import REFRESH_MARGIN_SEC, ApiError, CairnClient, ClientCredentials


@pytest.fixture(scope="module")
async def agent(actors: Any) -> Actor:
    return await actors.agent()


def _cached(api: CairnClient) -> Any:
    [entry] = api.tokens._tokens.values()
    return entry


async def test_a_token_is_reused_and_renewed_under_five_minutes_before_expiry(
    stack: Any, agent: Actor
) -> None:
    credentials = ClientCredentials(agent.client_id, agent.client_secret)
    async with CairnClient(stack.base_url, credentials=credentials) as api:
        await api.whoami()
        await api.whoami()
        assert api.tokens.exchanges == 1
        first = _cached(api).value

        _cached(api).expires_at = time.time() + REFRESH_MARGIN_SEC + 60  # still comfortable
        await api.whoami()
        assert api.tokens.exchanges == 1

        _cached(api).expires_at = time.time() + REFRESH_MARGIN_SEC - 1  # under five minutes
        await api.whoami()
        assert api.tokens.exchanges == 2
        assert _cached(api).value != first


async def test_a_401_renews_the_token_once_and_retries(stack: Any, agent: Actor) -> None:
    credentials = ClientCredentials(agent.client_id, agent.client_secret)
    async with CairnClient(stack.base_url, credentials=credentials) as api:
        await api.whoami()
        _cached(api).value = "eyJhbGciOiJFZERTQSJ9.e30.revoked"  # the server will refuse it
        me = await api.whoami()
        assert str(me.agentId) == str(agent.subject_id)
        assert api.tokens.exchanges == 2


async def test_refused_credentials_fail_without_a_loop(stack: Any, agent: Actor) -> None:
    wrong = ClientCredentials(agent.client_id, "service_cs_wrong")
    async with CairnClient(stack.base_url, credentials=wrong) as api:
        with pytest.raises(ApiError) as refused:
            await api.whoami()
        assert refused.value.status == 401
        assert api.tokens.exchanges == 1
