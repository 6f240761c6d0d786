"""A2A v1.0 on the API: the Agent Card and the JSON-RPC endpoint (`api/a2a.py` maps the calls).

The SDK's `JsonRpcDispatcher` (parsing, method routing, JSON-RPC errors, SSE framing) is a
Starlette handler; it runs here on the aiohttp request through a small ASGI bridge: the request
as an ASGI scope and body, the response's ASGI messages written to an aiohttp response. The
card's skills are the registered task types, each declared in its home
(`schemas/kernel/task_types.py`); its security schemes are our OAuth2 client credentials (REST
access tokens) and agent keys, both sent as bearer tokens.

A refusal of the caller (401, 403, 429) is answered over HTTP as a problem, like REST; every
other refusal is a JSON-RPC error with the problem in its `data`.
"""

from __future__ import annotations

import asyncio
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
from starlette.requests import Request as StarletteRequest

from api import keys
from api.a2a import REFUSALS, REQUEST, CairnRequestHandler
from api.endpoint import endpoint
from api.headers import TEAM_HEADER
from schemas.errors import DomainError, Forbidden, MissingScope, UnsupportedMediaType
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
    errors=(Forbidden, MissingScope, UnsupportedMediaType),
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
    refusals: list[DomainError] = []
    scope = _scope(request, unread, refusals)
    response = await _DISPATCHER.handle_requests(StarletteRequest(scope, _receive(body)))
    if refusals:
        raise refusals[0]
    return await _send(request, scope, response, body)


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
    """The ASGI receive of a request whose body was read: the body once, then nothing until the
    response ends (a disconnect ends the aiohttp handler, and with it the stream)."""
    sent = False
    never = asyncio.Event()

    async def receive() -> MutableMapping[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()
        return {"type": "http.disconnect"}

    return receive


async def _send(
    request: web.Request, scope: dict[str, Any], response: Any, body: bytes
) -> web.StreamResponse:
    """Run the Starlette response as an ASGI app, writing its messages to an aiohttp response."""
    out = web.StreamResponse()

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            out.set_status(message["status"])
            for name, value in message.get("headers", []):
                if name.lower() not in (b"content-length", b"transfer-encoding"):
                    out.headers.add(name.decode(), value.decode())
            await out.prepare(request)
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            if chunk:
                await out.write(chunk)

    await response(scope, _receive(body), send)
    await out.write_eof()
    return out
