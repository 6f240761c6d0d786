"""The tool-protocol (MCP) server: the official SDK's `MCPServer`, streamable HTTP at
`{mcp_url}`, stateless (any replica answers any request; JSON responses, no sessions: the
toolsets a connection enabled ride in a cookie, toolserver.toolsets), behind the credential
gate; plus the unauthenticated `/.well-known/` challenge of spec 4.7.

`build_app(config)` gives the ASGI app; `running(config)` runs it inside an event loop (`cairn
mcp`, `cairn dev`, the tests). `/healthz` is liveness; `/readyz` is readiness, 503 once the
server drains (`RunningServer.draining`, set by `cairn mcp` on SIGTERM before it stops).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import uvicorn
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp

from schemas import limits
from schemas.version import VERSION
from toolserver import prompts, resources
from toolserver import tools as _catalogue  # noqa: F401  (registers every tool)
from toolserver.backend import Backend
from toolserver.config import ToolServerConfig
from toolserver.gate import AuthGate
from toolserver.oauth import (
    ConnectorProvider,
    bearer_backend,
    connector_routes,
    resource_metadata_url,
)
from toolserver.registry import CATALOGUE, sdk_tool
from toolserver.toolsets import DISCOVERY, CatalogueView
from toolserver.tracing import TracedApp

SERVER_NAME = "cairn"
INSTRUCTIONS = (
    "Cairn keeps verifiable memory for agents and coordinates their work. Diaries hold entries "
    "(search them with entries_search); teams own diaries and task queues; tasks are proposed "
    "with tasks_create and claimed by agents. Call service_whoami first to learn your ids; "
    "toolsets_enable, when listed, adds the tools you do not see yet."
)
# an artifact travels as base64 inside a JSON-RPC message: 4/3 of its bytes, plus the envelope
MAX_REQUEST_BYTES = limits.ARTIFACT_MAX_BYTES * 4 // 3 + 64 * 1024
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# Freshness of list results on 2026-07-28 requests (`ttlMs`/`cacheScope`; older protocol
# versions never see them). Everything listed is fixed at start-up; the tools a caller sees
# depend on its credential's scopes, so that list is private to it.
LIST_TTL_MS = 5 * 60 * 1000
CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    "tools/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="private"),
    "prompts/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="public"),
    "resources/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="public"),
    "resources/templates/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="public"),
}


def build_server(backend: Backend) -> MCPServer:
    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[None]:
        await backend.start()
        try:
            yield
        finally:
            await backend.stop()

    server: MCPServer = MCPServer(
        name=SERVER_NAME,
        title="Cairn",
        version=VERSION,
        instructions=INSTRUCTIONS,
        tools=[sdk_tool(definition, backend) for definition in (*CATALOGUE, DISCOVERY)],
        lifespan=lifespan,
        log_level="WARNING",
        middleware=[CatalogueView()],
        cache_hints=CACHE_HINTS,
        extensions=[resources.apps_extension()],
    )
    prompts.register(server)
    return server


def transport_security(config: ToolServerConfig) -> TransportSecuritySettings:
    """Loopback always (the SDK's default), plus the configured public host."""
    hosts = [f"{host}:*" for host in LOOPBACK_HOSTS] + list(LOOPBACK_HOSTS)
    origins = [f"http://{host}:*" for host in LOOPBACK_HOSTS]
    public = urlsplit(config.public_url)
    if public.hostname and public.netloc not in hosts:
        hosts += [public.netloc, f"{public.hostname}:*"]
        origins += [f"{public.scheme}://{public.netloc}"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def build_app(
    config: ToolServerConfig, backend: Backend | None = None, draining: asyncio.Event | None = None
) -> tuple[ASGIApp, Backend]:
    backend = backend or Backend(config)
    server = build_server(backend)
    draining = draining or asyncio.Event()

    @server.custom_route(config.challenge_path, methods=["GET"], include_in_schema=False)  # type: ignore[untyped-decorator]
    async def challenge(request: Request) -> Response:
        """The app directory's domain check: one configured token, 404 when none is set."""
        if not config.challenge_token:
            return PlainTextResponse("Not Found", status_code=404)
        return PlainTextResponse(config.challenge_token)

    @server.custom_route("/healthz", methods=["GET"], include_in_schema=False)  # type: ignore[untyped-decorator]
    async def health(request: Request) -> Response:
        """Liveness, the version, and how many token exchanges this process has made."""
        return JSONResponse(
            {"status": "ok", "version": VERSION, "tokenExchanges": backend.token_exchanges}
        )

    @server.custom_route("/readyz", methods=["GET"], include_in_schema=False)  # type: ignore[untyped-decorator]
    async def ready(request: Request) -> Response:
        """Readiness: 503 from the moment the server drains, so a load balancer takes this
        replica out while it still answers (its only dependency, the API, has its own probe)."""
        if draining.is_set():
            return JSONResponse({"status": "draining"}, status_code=503)
        return JSONResponse({"status": "ok"})

    starlette: Starlette = server.streamable_http_app(
        streamable_http_path=config.path,
        stateless_http=True,
        json_response=True,
        transport_security=transport_security(config),
        host=config.host,
        max_request_body_size=MAX_REQUEST_BYTES,
    )
    if not config.connector_secret:
        return TracedApp(AuthGate(starlette, backend, config.path), config.path), backend
    # the browser OAuth connector for humans (spec 5.5; toolserver.oauth)
    provider = ConnectorProvider(config, backend)
    starlette.router.routes.extend(connector_routes(provider))
    gate = AuthGate(
        starlette,
        backend,
        config.path,
        bearer=bearer_backend(provider),
        resource_metadata=resource_metadata_url(config),
    )
    return TracedApp(gate, config.path), backend


def _uvicorn(config: ToolServerConfig, app: ASGIApp) -> uvicorn.Server:
    return uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=math.ceil(config.shutdown_grace_s),  # whole seconds here
        )
    )


@dataclass
class RunningServer:
    url: str
    backend: Backend
    draining: asyncio.Event  # set: `/readyz` answers 503 (the listener still accepts)


@contextlib.asynccontextmanager
async def running(config: ToolServerConfig) -> AsyncIterator[RunningServer]:
    """The server on this event loop, for as long as the block runs (signals stay the host
    process's: uvicorn's own handlers are not installed, and would re-raise the signal after the
    shutdown, so the process would not exit 0). When the block ends the listener closes and the
    requests in flight get `config.shutdown_grace_s` to finish."""
    draining = asyncio.Event()
    app, backend = build_app(config, draining=draining)
    server = _uvicorn(config, app)
    # `_serve` is `serve` without taking over the process's signal handlers
    task = asyncio.create_task(server._serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("the MCP server stopped during start-up")
        await asyncio.sleep(0.02)
    try:
        url = f"http://{config.host}:{config.port}{config.path}"
        yield RunningServer(url=url, backend=backend, draining=draining)
    finally:
        server.should_exit = True
        await task
