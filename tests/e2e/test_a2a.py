"""The task queue over A2A v1.0, driven by the `a2a-sdk` client against the real stack: the Agent
Card, a task sent over A2A that the real `cairn daemon` claims and completes while the client
streams its messages and receives the signed output, cancel reaching the executor, invalid
params without a provenance diary, idempotency by message id, and refusals both ways."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import test_daemon
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError
from actors import Actor
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct, Value
from processes import alive, wait_until
from test_daemon import OUTPUT, Team, until_status

from schemas.kernel.cids import json_cid
from schemas.kernel.task_types import TASK_TYPE_NAMES

ClientOf = Callable[..., Any]
# the daemon tests' fixtures: a fresh team with an executor's key, and `cairn daemon` processes
pair, team, daemons = test_daemon.pair, test_daemon.team, test_daemon.daemons


@pytest.fixture
async def a2a(team: Team) -> AsyncIterator[ClientOf]:
    """`await a2a(actor, streaming=...)`: an SDK client from our Agent Card, as that actor."""
    opened: list[tuple[Client, httpx.AsyncClient]] = []

    async def open_client(actor: Actor, *, streaming: bool = True) -> Client:
        http = httpx.AsyncClient(headers=dict(actor.auth), timeout=60)
        client = await create_client(
            team.stack.base_url, ClientConfig(streaming=streaming, httpx_client=http)
        )
        opened.append((client, http))
        return client

    yield open_client
    for client, http in opened:
        await client.close()
        await http.aclose()


def message(team: Team, text: str, *, diary: bool = True, message_id: str | None = None) -> Any:
    metadata = Struct()
    ParseDict({"teamId": team.team_id, **({"diaryId": team.diary_id} if diary else {})}, metadata)
    return SendMessageRequest(
        message=Message(
            message_id=message_id or uuid.uuid4().hex,
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            metadata=metadata,
        )
    )


async def first_task(stream: AsyncIterator[StreamResponse]) -> Any:
    async for event in stream:
        assert event.HasField("task"), event
        return event.task
    raise AssertionError("no event")


async def test_the_agent_card_offers_each_task_type_as_a_skill(team: Team) -> None:
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, team.stack.base_url).get_agent_card()
    assert [s.id for s in card.skills] == list(TASK_TYPE_NAMES)
    assert all(s.name and s.description and s.tags for s in card.skills)
    assert card.supported_interfaces[0].url == team.stack.base_url.rstrip("/") + "/a2a"
    assert card.capabilities.streaming
    schemes = MessageToDict(card)["securitySchemes"]
    flow = schemes["oauth2"]["oauth2SecurityScheme"]["flows"]["clientCredentials"]
    assert flow["tokenUrl"].endswith("/oauth2/token")
    assert schemes["agentKey"]["httpAuthSecurityScheme"]["scheme"] == "bearer"


async def test_a_daemon_completes_a_task_sent_over_a2a_and_the_client_streams_it(
    team: Team, daemons: Any, a2a: ClientOf
) -> None:
    client = await a2a(team.owner)
    request = message(team, "Write a haiku")
    stream = client.send_message(request)
    created = await first_task(stream)
    assert created.status.state == TaskState.TASK_STATE_SUBMITTED
    status, rest_task = await team.owner.call("GET", f"/tasks/{created.id}", team=team.team_id)
    assert status == 200 and rest_task["input"] == {"brief": "Write a haiku"}
    assert rest_task["diaryId"] == team.diary_id

    daemon = await daemons("--once")
    progress, artifacts, states = [], [], []
    events = []
    async for event in stream:
        events.append(event)
        if event.HasField("status_update"):
            update = event.status_update
            states.append(update.status.state)
            if update.status.HasField("message"):
                meta = MessageToDict(update.status.message.metadata)
                if meta["kind"] == "progress":
                    progress.append(MessageToDict(update.status.message.parts[0].data))
        elif event.HasField("artifact_update"):
            artifacts.append(event.artifact_update.artifact)
    assert await daemon.exit_code() == 0, daemon.log.read_text()
    assert progress == [{"step": 0}, {"step": 1}, {"step": 2}], [MessageToDict(e) for e in events]
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    assert TaskState.TASK_STATE_WORKING in states
    output = artifacts[0]
    assert MessageToDict(output.parts[0].data) == OUTPUT
    signed = MessageToDict(output.metadata)
    assert signed["outputCid"] == output.artifact_id == json_cid(OUTPUT)
    assert team.executor.signing_key is not None
    team.executor.signing_key.verify_key.verify(
        signed["outputCid"].encode(), base64.b64decode(signed["contentSignature"])
    )

    got = await client.get_task(GetTaskRequest(id=created.id))
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert [a.artifact_id for a in got.artifacts] == [json_cid(OUTPUT)]
    assert [MessageToDict(m.parts[0].data) for m in got.history if m.parts[0].HasField("data")][
        :3
    ] == [{"step": 0}, {"step": 1}, {"step": 2}]

    # the message id is the idempotency key: the same message again is the same task
    again = await (await a2a(team.owner, streaming=False)).send_message(request).__anext__()
    assert again.task.id == created.id
    listed = await client.list_tasks(ListTasksRequest(tenant=team.team_id))
    assert created.id in [t.id for t in listed.tasks]

    # subscribing to the ended task answers it, its signed output and its final status
    replay = [e async for e in client.subscribe(SubscribeToTaskRequest(id=created.id))]
    assert replay[0].task.id == created.id
    assert [e.artifact_update.artifact.artifact_id for e in replay if e.HasField("artifact_update")]
    assert replay[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    with pytest.raises(TaskNotCancelableError):  # a completed task is the route's 409
        await client.cancel_task(CancelTaskRequest(id=created.id))


async def test_cancel_over_a2a_reaches_the_executor(
    team: Team, daemons: Any, a2a: ClientOf
) -> None:
    client = await a2a(team.owner, streaming=False)
    created = await first_task(client.send_message(message(team, "Write an epic")))
    daemon = await daemons(sleep=120, lease=3)
    pid = await daemon.executor_pid()
    await until_status(team, created.id, "running")
    cancelled = await client.cancel_task(CancelTaskRequest(id=created.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    await wait_until(lambda: not alive(pid), limit_s=15)
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task(CancelTaskRequest(id=str(uuid.uuid4())))


async def test_a_message_without_a_provenance_diary_is_invalid_params(
    team: Team, a2a: ClientOf
) -> None:
    client = await a2a(team.owner, streaming=False)
    with pytest.raises(InvalidParamsError, match="diaryId"):
        await first_task(client.send_message(message(team, "Write a haiku", diary=False)))
    status, listing = await team.owner.call("GET", "/tasks", team=team.team_id)
    assert status == 200 and listing["items"] == []


async def test_refusals_both_ways(team: Team, actors: Any, a2a: ClientOf) -> None:
    # a credential without task:write cannot send: the route's 403, over HTTP
    reader = await actors.agent(scope="task:read")
    async with httpx.AsyncClient(headers=dict(reader.auth)) as http:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": MessageToDict(message(team, "Write a haiku")),
        }
        response = await http.post(
            team.stack.base_url.rstrip("/") + "/a2a",
            json=body,
            headers={"A2A-Version": "1.0"},
        )
    assert response.status_code == 403, response.text
    assert response.json()["code"] == "missing-scope"

    # the owner's task is not found by an agent outside the team
    client = await a2a(team.owner, streaming=False)
    created = await first_task(client.send_message(message(team, "Write a haiku")))
    stranger = await a2a(await actors.agent(), streaming=False)
    with pytest.raises(TaskNotFoundError):
        await stranger.get_task(GetTaskRequest(id=created.id))


def data_message(team: Team, data: dict[str, Any]) -> Any:
    request = message(team, "unused")
    request.message.ClearField("parts")
    request.message.parts.append(Part(data=ParseDict(data, Value())))
    return request


async def test_a_data_part_names_another_type_and_its_input(team: Team, a2a: ClientOf) -> None:
    client = await a2a(team.owner, streaming=False)
    asked = {"taskType": "fulfill_brief", "input": {"brief": "Add a --json flag"}, "title": "flag"}
    created = await first_task(client.send_message(data_message(team, asked)))
    status, task = await team.owner.call("GET", f"/tasks/{created.id}", team=team.team_id)
    assert status == 200, task
    assert (task["taskType"], task["input"], task["title"]) == (
        "fulfill_brief",
        {"brief": "Add a --json flag"},
        "flag",
    )
    # the route's own validation answers, as invalid params carrying its problem
    with pytest.raises(InvalidParamsError) as refused:
        await first_task(
            client.send_message(data_message(team, {"taskType": "fulfill_brief", "input": {}}))
        )
    assert refused.value.data is not None
    assert [e["pointer"] for e in refused.value.data["problem"]["errors"]] == ["/input/brief"]


async def test_a_team_header_naming_another_team_than_the_metadata_is_refused(
    team: Team,
) -> None:
    http = httpx.AsyncClient(headers={**team.owner.auth, "x-service-team-id": str(uuid.uuid4())})
    try:
        client = await create_client(
            team.stack.base_url, ClientConfig(streaming=False, httpx_client=http)
        )
        with pytest.raises(InvalidParamsError) as refused:
            await first_task(client.send_message(message(team, "Write a haiku")))
        assert refused.value.data is not None
        assert refused.value.data["problem"]["code"] == "team-mismatch"
    finally:
        await http.aclose()
