"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
tests/mcp-conformance, installed by `make test`) against the real MCP server, authenticated as
an agent, once per protocol version the suite knows.

The suite's client sends no credentials, so a small pass-through proxy in front of the server
adds the agent's client credentials to every request (nothing else: Host and Origin go through
as sent, so the DNS-rebinding scenario still reaches the server's own check) and, for the
version under test, asks for that version in `initialize`. Scenarios that need the suite's own
fixture tools (image, audio, sampling, ...) are listed once, with the reason, in
tests/mcp-conformance/expected-failures.yml: the suite fails on any other failure and on a
listed scenario that starts to pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from mcp_support import client_headers, proxy_at

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "mcp-conformance"
CONFORMANCE = SUITE / "node_modules" / ".bin" / "conformance"
EXPECTED_FAILURES = SUITE / "expected-failures.yml"
# the protocol revisions the pinned suite (0.1.13) knows
PROTOCOL_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
RUN_TIMEOUT_S = 600
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade"}


def _with_version(body: bytes, version: str) -> bytes:
    """`initialize` asking for `version` (the suite's client asks for its newest)."""
    try:
        message = json.loads(body)
    except ValueError:
        return body
    if isinstance(message, dict) and message.get("method") == "initialize":
        message.setdefault("params", {})["protocolVersion"] = version
        return json.dumps(message).encode()
    return body


def _negotiated(answer: bytes) -> str | None:
    """The protocol version an `initialize` answer names."""
    try:
        message = json.loads(answer)
    except ValueError:
        return None
    result = message.get("result") if isinstance(message, dict) else None
    version = result.get("protocolVersion") if isinstance(result, dict) else None
    return version if isinstance(version, str) else None


@contextlib.asynccontextmanager
async def credentialed_proxy(
    target: str, credentials: dict[str, str], version: str, negotiated: set[str]
) -> AsyncIterator[str]:
    """A proxy on a free port that adds `credentials` to each request it forwards to `target`
    (the MCP URL), noting in `negotiated` the versions the server's `initialize` answers name;
    yields its own MCP URL."""
    session = aiohttp.ClientSession(auto_decompress=False)

    async def forward(request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = _with_version(await request.read(), version)
        async with session.request(
            request.method,
            target,
            params=request.query,
            headers={**headers, **credentials},
            data=body,
            allow_redirects=False,
        ) as answer:
            payload = await answer.read()
            if b'"initialize"' in body and (found := _negotiated(payload)) is not None:
                negotiated.add(found)
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
            response = web.Response(status=answer.status, headers=kept, body=payload)
            # no idle keep-alive: the suite's process exits only when its sockets are closed
            response.force_close()
            return response

    try:
        async with proxy_at(forward) as url:
            yield url
    finally:
        await session.close()


async def run_suite(url: str, output: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    process = await asyncio.create_subprocess_exec(
        str(CONFORMANCE),
        "server",
        "--url",
        url,
        "--expected-failures",
        str(EXPECTED_FAILURES),
        "--output-dir",
        str(output),
        cwd=output,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT_S)
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace")


async def conformance_run(url: str, credentials: dict[str, str], version: str, out: Path) -> str:
    """One whole run of the suite at `version`; the report when it failed, else ""."""
    negotiated: set[str] = set()
    await asyncio.to_thread(out.mkdir)
    async with credentialed_proxy(url, credentials, version, negotiated) as proxied:
        code, report = await run_suite(proxied, out)
    if code != 0 or "server-initialize" not in report:
        return f"--- protocol {version}: exit {code}\n{report}"
    if negotiated != {version}:
        return f"--- protocol {version}: the server answered initialize with {negotiated}"
    return ""


async def test_the_official_conformance_suite_passes_at_every_protocol_version(
    mcp_server: Any, actors: Any, tmp_path: Path
) -> None:
    """The runs of the versions go side by side: each idles about a minute before it exits."""
    assert CONFORMANCE.exists(), f"{CONFORMANCE} is missing: `make test` installs it (npm ci)"
    agent = await actors.agent()
    credentials = client_headers(agent)
    failures = await asyncio.gather(
        *(
            conformance_run(mcp_server.url, credentials, version, tmp_path / version)
            for version in PROTOCOL_VERSIONS
        )
    )
    assert not any(failures), "\n".join(failures)
