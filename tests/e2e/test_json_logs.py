"""`cairn api` logs JSON lines an SRE can join to traces, requests and callers.

The API runs as its own process (its logging is what `cairn` sets up) on the module's stack;
its stderr goes to a file the test reads line by line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from actors import PASSWORD, Actor, Actors
from processes import service_env, wait_until

from infra.devstack import free_port
from infra.logs import JsonFormatter, setup_logging


@pytest.fixture(scope="module")
async def logged_api(
    stack: Any, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[str, Path]]:
    """`cairn api` on a free port, its stderr in a file: (base URL, log file)."""
    port = free_port()
    log_file = tmp_path_factory.mktemp("logs") / "api.log"
    with log_file.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "cairn",
            "api",
            env=service_env(stack.settings, port),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=sink,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_until(lambda: _healthy(base), what="cairn api answering")
        yield base, log_file
    finally:
        process.terminate()
        await process.wait()


async def _healthy(base: str) -> bool:
    try:
        async with aiohttp.ClientSession() as http, http.get(f"{base}/health") as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


def _lines(log_file: Path) -> list[dict[str, Any]]:
    """Every line of the log, each one JSON object (a line that is not fails the test)."""
    return [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
async def human(stack: Any, logged_api: tuple[str, Path]) -> AsyncIterator[Actor]:
    base, _ = logged_api
    async with aiohttp.ClientSession(base, cookie_jar=aiohttp.DummyCookieJar()) as http:
        yield await Actors(stack, http).human()


async def test_each_request_has_an_access_line_with_its_ids_and_caller(
    logged_api: tuple[str, Path], human: Actor
) -> None:
    base, log_file = logged_api
    async with (
        aiohttp.ClientSession(base) as http,
        http.get("/agents/whoami", headers=human.auth) as response,
    ):
        assert response.status == 200
        request_id = response.headers["X-Request-Id"]

    def access_line() -> dict[str, Any] | None:
        found = [line for line in _lines(log_file) if line.get("request_id") == request_id]
        return found[0] if found else None

    await wait_until(lambda: access_line() is not None, what="the request's access line")
    line = access_line()
    assert line is not None
    assert line["logger"] == "cairn.access" and line["level"] == "INFO"
    assert line["route"] == "/agents/whoami" and line["status"] == 200
    assert line["principal_kind"] == "human" and line["principal_id"] == str(human.subject_id)
    assert len(line["trace_id"]) == 32 and len(line["span_id"]) == 16
    assert line["time"].endswith("+00:00") and line["message"] == "GET /agents/whoami 200"
    text = log_file.read_text()
    assert human.auth["X-Session-Token"] not in text and PASSWORD not in text


async def test_the_trace_id_of_a_500_finds_its_log_line(
    logged_api: tuple[str, Path], human: Actor, db_pool: Any
) -> None:
    base, log_file = logged_api
    # a real fault under the route: the column its query reads is gone
    await db_pool.execute("ALTER TABLE identities RENAME COLUMN display_name TO display_name_x")
    try:
        async with (
            aiohttp.ClientSession(base) as http,
            http.get("/agents/whoami", headers=human.auth) as response,
        ):
            assert response.status == 500
            problem = await response.json(content_type=None)
    finally:
        await db_pool.execute("ALTER TABLE identities RENAME COLUMN display_name_x TO display_name")
    assert "display_name" not in json.dumps(problem)  # no internals in the body

    def error_lines() -> list[dict[str, Any]]:
        return [
            line
            for line in _lines(log_file)
            if line.get("trace_id") == problem["traceId"] and line["level"] == "ERROR"
        ]

    await wait_until(lambda: bool(error_lines()), what="the 500's log line")
    (line,) = error_lines()
    assert line["request_id"] == problem["requestId"]
    assert line["principal_id"] == str(human.subject_id)
    assert "UndefinedColumn" in line["exception"]


def test_text_format_keeps_the_plain_lines_for_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        setup_logging("text")
        logging.getLogger("cairn.test").warning("plain %s", "words")
        assert capsys.readouterr().err == "WARNING cairn.test plain words\n"
        setup_logging("json")
        logging.getLogger("cairn.test").warning("one\nline", extra={"secret": "nope"})
        (printed,) = capsys.readouterr().err.splitlines()
        assert json.loads(printed)["message"] == "one\nline" and "nope" not in printed
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
