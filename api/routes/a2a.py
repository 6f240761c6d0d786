"""A2A v1.0 on the API: the Agent Card and the JSON-RPC endpoint (`api/a2a.py` maps the calls).

The SDK's `JsonRpcDispatcher` (parsing, method routing, JSON-RPC errors, SSE framing) is a
Starlette handler; it runs here on the aiohttp request through a small bridge: the request as an
ASGI scope and body, its Starlette response written back as an aiohttp one. The
card's skills are the registered task types, each declared in its home
(`schemas/kernel/task_types.py`); its security schemes are our OAuth2 client credentials (REST
access tokens) and agent keys, both sent as bearer tokens.

A refusal of the caller (401, 403, 429) is answered over HTTP as a problem, like REST; every
other refusal is a JSON-RPC error with the problem in its `data`.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any, Final

from a2a.server.context import ServerCallContext
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
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
from sse_starlette.event import ensure_bytes
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request as StarletteRequest
from starlette.responses import Response

from api import keys
from api.a2a import REFUSALS, REQUEST, CairnRequestHandler
from api.endpoint import endpoint
from api.headers import TEAM_HEADER
from schemas.errors import (
    DomainError,
    FieldError,
    MissingScope,
    PermissionDenied,
    RequestInvalid,
    UnsupportedMediaType,
)
from schemas.kernel.task_types import DEFAULT_TASK_TYPE, TASK_TYPES

routes = web.RouteTableDef()
TAG = "a2a"
A2A_PATH: Final = "/a2a"
CARD_PATH: Final = "/.well-known/agent-card.json"
TASK_SCOPES: Final = ("task:read", "task:write", "task:manage")


class _ContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's context, carrying the aiohttp request and the refusals list for `api/a2a.py`."""

    def build(self, request: StarletteRequest) -> ServerCallContext:
        context = super().build(request)
        context.state[REQUEST] = request.scope[REQUEST]
        context.state[REFUSALS] = request.scope[REFUSALS]
        return context


_DISPATCHER: Final = JsonRpcDispatcher(CairnRequestHandler(), context_builder=_ContextBuilder())


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
    body = await request.read()
    _require_json_object(body)
    refusals: list[DomainError] = []
    scope = _scope(request, unread, refusals)
    response = await _DISPATCHER.handle_requests(StarletteRequest(scope, _receive(body)))
    if refusals:
        raise refusals[0]
    return await _send(request, response)


def _require_json_object(body: bytes) -> None:
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


def _scope(
    request: web.Request, unread: web.Request, refusals: list[DomainError]
) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.encode(),
        "query_string": request.query_string.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in request.headers.items()],
        "client": None,
        "server": None,
        REQUEST: unread,
        REFUSALS: refusals,
    }


def _receive(body: bytes) -> Any:
    """The ASGI receive of a request whose body was read: the body, once."""

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def _send(request: web.Request, response: Response) -> web.StreamResponse:
    """The dispatcher's Starlette response as an aiohttp one: a JSON body as it is, an event
    stream written event by event as the SDK's generator yields it.

    The stream is not run through sse-starlette's own runner: its shutdown watcher ends every
    stream of the process once any in-process uvicorn server starts shutting down."""
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length",)}
    if not isinstance(response, EventSourceResponse):
        assert isinstance(response.body, bytes)
        return web.Response(body=response.body, status=response.status_code, headers=headers)
    out = web.StreamResponse(status=response.status_code, headers=headers)
    await out.prepare(request)
    events = response.body_iterator
    try:
        async for event in events:
            await out.write(ensure_bytes(event, response.sep))
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    await out.write_eof()
    return out
