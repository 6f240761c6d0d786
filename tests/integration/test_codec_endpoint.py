"""The codec endpoint (issue 31 §1): an operator's session opens a real run's sealed payloads;
anyone else is refused (401, 403) and counted; CORS answers the Temporal UI's origin only, and a
session cookie is accepted from that origin and no other.

The API under test is a second app on the module's stack (its database, Temporal and worker)
with `SERVICE_OPERATORS` naming one human and a meter provider of the test's own."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from actors import Actor, new_diary
from aiohttp import web
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from api.app import Deps, create_app
from api.auth import SESSION_COOKIE
from api.routes.codec import DECODES
from infra.db import create_pool
from infra.devstack import free_port
from infra.payload_codec import PayloadEncryption, PayloadKeyring, key_id_of
from workflows.entries import entry_create_workflow_id

UI_ORIGIN = "http://127.0.0.1:18233"
OTHER_ORIGIN = "http://127.0.0.1:18999"


@dataclasses.dataclass
class CodecApi:
    base_url: str
    reader: InMemoryMetricReader
    operator: Actor


@pytest.fixture(scope="module")
async def codec_api(stack: Any, actors: Any) -> AsyncIterator[CodecApi]:
    operator: Actor = await actors.human()
    settings = stack.settings.model_copy(
        update={
            # listed in another case, among others: the check is on the normalised email
            "operators": f"someone@example.org, {operator.extra['email'].upper()}",
            "temporal_ui_url": UI_ORIGIN + "/",
        }
    )
    reader = InMemoryMetricReader()
    pool = await create_pool(stack.settings.database_url, read_only=True)
    deps = Deps(
        read_pool=pool,
        temporal=stack.temporal,
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    port = free_port()
    runner = web.AppRunner(create_app(settings, deps=deps))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield CodecApi(f"http://127.0.0.1:{port}", reader, operator)
    finally:
        await runner.cleanup()
        await pool.close()


def decodes(reader: InMemoryMetricReader) -> dict[str, int]:
    data = reader.get_metrics_data()
    counts: dict[str, int] = {}
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == DECODES:
                    for point in metric.data.data_points:
                        counts[str(point.attributes["codec.outcome"])] = int(point.value)
    return counts


def as_json(payload: Payload) -> dict[str, Any]:
    return {
        "metadata": {k: base64.b64encode(v).decode() for k, v in payload.metadata.items()},
        "data": base64.b64encode(payload.data).decode(),
    }


def from_json(sent: dict[str, Any]) -> Payload:
    return Payload(
        metadata={k: base64.b64decode(v) for k, v in sent["metadata"].items()},
        data=base64.b64decode(sent["data"]),
    )


async def sealed_entry_input(stack: Any, actors: Any, text: str) -> Payload:
    """The sealed input of a real entry-create run, as the Temporal UI fetches it."""
    agent = await actors.agent()
    diary = await new_diary(agent)
    status, entry = await agent.call(
        "POST", f"/diaries/{diary['id']}/entries", json={"content": text}
    )
    assert status == 201, entry
    raw = await Client.connect(stack.settings.temporal_address)  # no codec: what is stored
    history = await raw.get_workflow_handle(
        entry_create_workflow_id(uuid.UUID(entry["id"]))
    ).fetch_history()
    payload: Payload = history.events[0].workflow_execution_started_event_attributes.input.payloads[
        0
    ]
    assert key_id_of(payload) is not None and text.encode() not in payload.data
    return payload


async def post(
    api: CodecApi,
    operation: str,
    payloads: list[Payload],
    *,
    headers: dict[str, str] | None = None,
    session: str | None = None,
) -> tuple[int, Any, Any]:
    jar = aiohttp.CookieJar(unsafe=True)  # an IP host: aiohttp keeps no cookie otherwise
    if session is not None:
        jar.update_cookies({SESSION_COOKIE: session})
    async with (
        aiohttp.ClientSession(base_url=api.base_url, cookie_jar=jar) as http,
        http.post(
            f"/codec/{operation}",
            json={"payloads": [as_json(p) for p in payloads]},
            headers={"X-Namespace": "default", **(headers or {})},
            params={"preserveStorageRefs": "true"},  # as the Temporal UI asks
        ) as response,
    ):
        return response.status, await response.json(content_type=None), response.headers


async def test_an_operators_session_opens_a_real_runs_payloads(
    stack: Any, actors: Any, codec_api: CodecApi
) -> None:
    text = f"a remark only operators may read {uuid.uuid4().hex}"
    sealed = await sealed_entry_input(stack, actors, text)
    before = decodes(codec_api.reader).get("decoded", 0)

    status, body, _ = await post(codec_api, "decode", [sealed], headers=codec_api.operator.auth)
    assert status == 200, body
    [opened] = [from_json(p) for p in body["payloads"]]
    assert opened.metadata["encoding"] == b"json/plain"
    assert json.loads(opened.data)["content"] == text
    assert decodes(codec_api.reader)["decoded"] == before + 1


async def test_the_ui_origin_gets_cors_and_its_cookie_is_accepted(
    stack: Any, actors: Any, codec_api: CodecApi
) -> None:
    sealed = await sealed_entry_input(stack, actors, f"cors {uuid.uuid4().hex}")
    session = codec_api.operator.auth["X-Session-Token"]
    status, body, headers = await post(
        codec_api, "decode", [sealed], headers={"Origin": UI_ORIGIN}, session=session
    )
    assert status == 200, body
    assert headers["Access-Control-Allow-Origin"] == UI_ORIGIN
    assert headers["Access-Control-Allow-Credentials"] == "true"

    # another page's origin: its cookie is refused, and it gets no CORS answer to read
    status, body, headers = await post(
        codec_api, "decode", [sealed], headers={"Origin": OTHER_ORIGIN}, session=session
    )
    assert (status, body["code"]) == (403, "cross-origin-refused")
    assert "Access-Control-Allow-Origin" not in headers

    async with aiohttp.ClientSession() as http:
        # the UI's origin may use the session on the codec endpoint only
        async with http.post(
            codec_api.base_url + "/diaries",
            json={"name": "from the UI", "visibility": "private"},
            headers={"Origin": UI_ORIGIN, "Cookie": f"{SESSION_COOKIE}={session}"},
        ) as response:
            refused = await response.json(content_type=None)
            assert (response.status, refused["code"]) == (403, "cross-origin-refused")
        for origin, allowed in ((UI_ORIGIN, True), (OTHER_ORIGIN, False)):
            async with http.options(
                codec_api.base_url + "/codec/decode",
                headers={
                    "Origin": origin,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "content-type,x-namespace",
                },
            ) as response:
                assert response.status == 204
                assert (response.headers.get("Access-Control-Allow-Origin") == origin) is allowed
                if allowed:
                    assert "X-Namespace" in response.headers["Access-Control-Allow-Headers"]
                    assert response.headers["Access-Control-Allow-Methods"] == "POST"


async def test_everyone_but_an_operator_is_refused_and_counted(
    stack: Any, actors: Any, codec_api: CodecApi
) -> None:
    sealed = await sealed_entry_input(stack, actors, f"refused {uuid.uuid4().hex}")
    before = decodes(codec_api.reader).get("refused", 0)
    status, body, _ = await post(codec_api, "decode", [sealed])
    assert (status, body["code"]) == (401, "unauthorized")

    human: Actor = await actors.human()
    agent: Actor = await actors.agent()
    for who in (human, agent):
        status, body, headers = await post(
            codec_api, "decode", [sealed], headers={**who.auth, "Origin": UI_ORIGIN}
        )
        assert (status, body["code"]) == (403, "not-an-operator"), who.kind
        assert headers["Access-Control-Allow-Origin"] == UI_ORIGIN  # the UI can show why
        assert "content" not in json.dumps(body)
    assert decodes(codec_api.reader)["refused"] == before + 2
    status, body, _ = await post(codec_api, "encode", [sealed], headers=human.auth)
    assert (status, body["code"]) == (403, "not-an-operator")


async def test_encode_seals_with_the_current_key_and_decode_opens_it(
    stack: Any, codec_api: CodecApi
) -> None:
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'{"signal": "from the UI"}')
    status, body, _ = await post(codec_api, "encode", [plain], headers=codec_api.operator.auth)
    assert status == 200, body
    [sealed] = [from_json(p) for p in body["payloads"]]
    assert key_id_of(sealed) == stack.settings.payload_keyring.current_id
    status, body, _ = await post(codec_api, "decode", [sealed], headers=codec_api.operator.auth)
    assert [from_json(p) for p in body["payloads"]] == [plain]


async def test_a_payload_of_an_unknown_key_is_a_problem(codec_api: CodecApi) -> None:
    stranger = PayloadEncryption(PayloadKeyring.parse(PayloadKeyring.new_entry("gone")))
    [sealed] = await stranger.encode([Payload(data=b"{}")])
    status, body, _ = await post(codec_api, "decode", [sealed], headers=codec_api.operator.auth)
    assert (status, body["code"]) == (400, "payload-undecodable")
    async with (
        aiohttp.ClientSession(base_url=codec_api.base_url) as http,
        http.post(
            "/codec/decode",
            json={"payloads": [{"metadata": {"encoding": "%%%"}, "data": ""}]},
            headers=codec_api.operator.auth,
        ) as response,
    ):
        problem = await response.json(content_type=None)
        assert (response.status, problem["code"]) == (400, "validation-failed")
        assert problem["errors"][0]["pointer"] == "/payloads/0/metadata/encoding"
