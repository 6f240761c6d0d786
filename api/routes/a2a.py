"""A2A v1.0 on the API: the Agent Card and the JSON-RPC endpoint (`api/a2a.py` maps the calls).

The JSON-RPC request is answered on aiohttp like every route: `api.a2a.dispatch` answers a
response object, a stream of them (written here as `text/event-stream`), or the caller's refusal
(401, 403, 429), which this route raises as its problem, like REST. Every other refusal is a
JSON-RPC error with the problem in its `data`. The card's skills are the registered task types,
each declared in its home (`schemas/kernel/task_types.py`); its security schemes are our OAuth2
client credentials (REST access tokens) and agent keys, both sent as bearer tokens.

The rows a stream shows are read here, in the route layer (`_TaskRows`), for a caller
`GET /tasks/{id}` let see the task; the stream reads them again when the task changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Final
from uuid import UUID

import asyncpg
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    ClientCredentialsOAuthFlow,
    HTTPAuthSecurityScheme,
    OAuth2SecurityScheme,
    OAuthFlows,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from aiohttp import web
from google.protobuf.json_format import MessageToDict

from api import keys
from api.a2a import Call, Changes, Refused, Reply, dispatch
from api.endpoint import endpoint
from api.headers import TEAM_HEADER
from infra.repos import task_reads
from schemas import limits
from schemas.errors import (
    FieldError,
    MissingScope,
    PermissionDenied,
    RequestInvalid,
    UnsupportedMediaType,
)
from schemas.kernel.task_types import DEFAULT_TASK_TYPE, TASK_TYPES
from schemas.task_api import Task, TaskAttempt, TaskMessage

routes = web.RouteTableDef()
TAG = "a2a"
A2A_PATH: Final = "/a2a"
CARD_PATH: Final = "/.well-known/agent-card.json"
TASK_SCOPES: Final = ("task:read", "task:write", "task:manage")


# what an event stream answers with (as sse-starlette's, which the SDK's dispatcher used)
STREAM_HEADERS: Final = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}


def agent_card(base_url: str) -> AgentCard:
    base = base_url.rstrip("/")
    return AgentCard(
        name="Cairn",
        description="A team task queue: leased, schema-checked, content-addressed and signed "
        "work for agents. Send a message to queue a task in your team; executors claim it.",
        supported_interfaces=[
            AgentInterface(url=base + A2A_PATH, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={
            "oauth2": SecurityScheme(
                oauth2_security_scheme=OAuth2SecurityScheme(
                    description="OAuth2 client credentials of an agent (REST access tokens)",
                    flows=OAuthFlows(
                        client_credentials=ClientCredentialsOAuthFlow(
                            token_url=base + "/oauth2/token",
                            scopes={scope: scope for scope in TASK_SCOPES},
                        )
                    ),
                )
            ),
            "agentKey": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer",
                    description=f"An agent key; a team-bound key acts in its team only "
                    f"(send the team as {TEAM_HEADER} or metadata teamId)",
                )
            ),
        },
        security_requirements=[
            SecurityRequirement(schemes={"oauth2": StringList(list=list(TASK_SCOPES))}),
            SecurityRequirement(schemes={"agentKey": StringList()}),
        ],
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["application/json"],
        skills=[
            AgentSkill(
                id=t.name,
                name=t.skill.name,
                description=t.skill.description,
                tags=list(t.skill.tags),
                examples=list(t.skill.examples),
                # words are a brief of the default type; other types take a data part
                input_modes=["text/plain", "application/json"]
                if t is DEFAULT_TASK_TYPE
                else ["application/json"],
                output_modes=["application/json"],
            )
            for t in TASK_TYPES
        ],
    )


@endpoint(routes, "GET", CARD_PATH, tag=TAG, auth="none", raw_response="application/json")
async def get_agent_card(request: web.Request, parsed: Any) -> web.StreamResponse:
    """The A2A Agent Card: skills (one per task type), the JSON-RPC interface, security."""
    card = agent_card(request.app[keys.SETTINGS].base_url)
    return web.json_response(MessageToDict(card))


@endpoint(
    routes,
    "POST",
    A2A_PATH,
    tag=TAG,
    auth="required",
    raw_body="application/json",
    raw_response="application/json",
    headers=(TEAM_HEADER,),
    errors=(PermissionDenied, MissingScope, UnsupportedMediaType, RequestInvalid),
)
async def a2a_rpc(request: web.Request, parsed: Any) -> web.StreamResponse:
    """A2A v1.0 JSON-RPC (SendMessage, GetTask, ListTasks, CancelTask and the streams).

    `SendStreamingMessage` and `SubscribeToTask` answer `text/event-stream`. Each operation runs
    the task route that does the same, with its scopes, permissions, rate limits and
    idempotency; a refused caller is that route's 401, 403 or 429 problem."""
    if request.content_type != "application/json":
        raise UnsupportedMediaType(
            f"Send the JSON-RPC request as application/json, not {request.content_type}"
        )
    # each call of a route runs on a clone of this request, which aiohttp allows only unread
    unread = request.clone()
    body = _json_object(await request.read())
    answer = await dispatch(Call(request=unread, rows=_TaskRows(request.app)), body)
    if isinstance(answer, Refused):
        raise answer.problem
    if isinstance(answer, dict):
        return web.json_response(answer)
    return await _stream(request, answer)


def _json_object(body: bytes) -> dict[str, Any]:
    """The HTTP contract, as for every JSON route: a JSON object, else 400 (malformed JSON, an
    array, a scalar). What the object says is JSON-RPC's to judge: an object that is no valid
    request is answered in-band (-32600), as the protocol says."""
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RequestInvalid(
            f"The body is not valid JSON: {exc}", errors=[FieldError(pointer="", message=str(exc))]
        ) from None
    if not isinstance(value, dict):
        raise RequestInvalid(
            "The body must be a JSON-RPC request object",
            errors=[FieldError(pointer="", message="Expected a JSON object")],
        )
    return value


async def _stream(request: web.Request, replies: AsyncIterator[Reply]) -> web.StreamResponse:
    """The replies as server-sent events, each written as the stream yields it; an SSE comment
    keeps a quiet stream open through proxies and finds a client that left (aiohttp does not
    cancel the handler: the write fails), which ends the stream and its watch of the task."""
    out = web.StreamResponse(headers=STREAM_HEADERS)
    await out.prepare(request)
    queue: asyncio.Queue[Reply | Exception | None] = asyncio.Queue(maxsize=1)

    async def produce() -> None:
        try:
            async for reply in replies:
                await queue.put(reply)
        except Exception as failure:  # the writer raises it: the request's own failure
            await queue.put(failure)
            return
        await queue.put(None)

    producer = asyncio.create_task(produce())
    keep_alive_s = request.app[keys.SETTINGS].a2a_stream_keepalive_s
    try:
        while (reply := await _next_or_keep_alive(queue, out, keep_alive_s)) is not None:
            await out.write(_event(reply))
    except ConnectionResetError:
        return out  # the client left; the stream and its watch end below
    finally:
        producer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await producer
    await out.write_eof()
    return out


async def _next_or_keep_alive(
    queue: asyncio.Queue[Reply | Exception | None], out: web.StreamResponse, keep_alive_s: float
) -> Reply | None:
    """The stream's next reply (None at its end), writing a keep-alive comment for each quiet
    `SERVICE_A2A_STREAM_KEEPALIVE_S`."""
    while True:
        try:
            async with asyncio.timeout(keep_alive_s):
                found = await queue.get()
        except TimeoutError:
            await out.write(b": keep-alive\r\n\r\n")
            continue
        if isinstance(found, Exception):
            raise found
        return found


def _event(reply: Reply) -> bytes:
    kind = "event: error\r\n" if "error" in reply else ""
    data = json.dumps(reply, separators=(",", ":"), ensure_ascii=False)
    return f"{kind}data: {data}\r\n\r\n".encode()


class _TaskRows:
    """`api.a2a.TaskRows` on the API's read pool: the rows the task's REST reads read."""

    def __init__(self, app: web.Application) -> None:
        self._app = app

    @property
    def _pool(self) -> asyncpg.Pool:
        return self._app[keys.READ_POOL]

    async def task(self, task_id: UUID) -> Task | None:
        return await task_reads.get_task(self._pool, task_id)

    async def attempts(self, task_id: UUID) -> list[TaskAttempt]:
        return await task_reads.list_attempts(self._pool, task_id)

    async def messages(self, attempt: TaskAttempt, after_seq: int) -> list[TaskMessage]:
        """Every message after `after_seq`, page by page."""
        ref = task_reads.AttemptRef(
            id=attempt.id,
            task_id=attempt.taskId,
            attempt_n=attempt.attemptN,
            status=attempt.status,
            claimed_by_agent_id=attempt.claimedByAgentId,
        )
        found: list[TaskMessage] = []
        while True:
            page = await task_reads.list_messages(
                self._pool, ref, after_seq, limits.TASK_MESSAGES_PAGE.max
            )
            found += page
            if len(page) < limits.TASK_MESSAGES_PAGE.max:
                return found
            after_seq = page[-1].seq

    def changes(self, task_id: UUID) -> contextlib.AbstractAsyncContextManager[Changes]:
        return self._app[keys.TASK_CHANGES].watch(task_id)
