"""Benchmark the MCP server against the REST call it proxies, in the same run.

    .venv/bin/python bench/mcp.py [--quick] [--runs 300] [--clients 16] [--duration 15]

Starts the embedded stack (bench/_stack.py) and `cairn mcp` as its own process, registers 16
agents, seeds one diary with entries, then measures:

1. one client, sequential and interleaved (REST, MCP, tools/list in turn, so each sees the
   same moment of a shared machine): `POST /diary/search` (REST, bearer token) against the
   `entries_search` tool over MCP (a raw JSON-RPC `tools/call` on the stateless endpoint, with
   X-Client-Id/X-Client-Secret), same query and diary; p50/p95. Also `tools/list` p50, and the
   same two calls through the official SDK client (`mcp.client.streamable_http`), whose own
   work (output-schema validation, anyio streams) is on the load generator;
2. N concurrent clients (one agent each), closed loops for `--duration` seconds per variant,
   in alternating windows: REST searches/s against MCP entries_search calls/s;
3. token exchanges the MCP server made (`/healthz` counter) against the number of distinct
   clients it saw: the target is one exchange per client per token lifetime;
4. the catalogue's size (issue 25): the bytes of the whole `tools/list` answer and what a model
   reads of it (each tool's name, description and input schema as compact JSON, app-only
   tools left out), for the default view a connection sees without choosing (issue 33: tools
   and bytes), the whole catalogue (`?toolsets=all`) and per toolset (`?toolsets=`), next to
   the same measure of the baseline commit (`--baseline`, main before issue 25: 41.6 KB and 128 KB),
   taken in this run from a git worktree of it.

Targets (issue 14): MCP p50 ≤ REST p50 + 5 ms; tools/list p50 ≤ 20 ms; MCP throughput ≥ 0.7 of
REST; exchanges == clients. Issue 25: catalogue ≤ 20 KB, memory toolset ≤ 5 KB. Issue 33: the
default view ≤ 10 tools and ≤ 6 KB. Prints JSON and writes bench/results/mcp.json.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

# Run as a script, this file's folder comes first on sys.path and its name would shadow the
# `mcp` SDK: look up modules from the repository root instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench._stack import BenchStack, CpuMeter, _Child, run_and_report  # noqa: E402

OUTPUT = Path(__file__).resolve().parent / "results" / "mcp.json"
ROOT = _HERE.parent
BASELINE = "d6ab204"  # main before issue 25
TOOLSETS = ("memory", "packs", "tasks", "teams", "identity", "crypto")
# the same two measures, in-process, for any checkout (run with that checkout as the cwd)
SIZES_SCRIPT = """
import asyncio, json
from mcp_types import ListToolsResult
from toolserver.app import build_server
from toolserver.backend import Backend
from toolserver.config import ToolServerConfig

async def main():
    server = build_server(Backend(ToolServerConfig(api_url="http://127.0.0.1:9")))
    tools = ListToolsResult(tools=await server.list_tools())
    result = tools.model_dump(mode="json", by_alias=True, exclude_none=True)
    wire = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}, separators=(",", ":"))
    print(json.dumps({"tools_list_bytes": len(wire.encode()), **model_view(result["tools"])}))

def model_view(tools):
    shown = [t for t in tools if (t.get("_meta") or {}).get("ui", {}).get("visibility") != ["app"]]
    views = [{"name": t["name"], "description": t.get("description", ""),
              "inputSchema": t["inputSchema"]} for t in shown]
    size = sum(len(json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode())
               for v in views)
    return {"model_bytes": size, "model_tools": len(views), "tools": len(tools)}

asyncio.run(main())
"""
QUERY = "how do deploys run database migrations"
TOPICS = [
    "The deploy pipeline runs database migrations before the API starts serving",
    "Postgres vacuum reclaims space held by dead tuples after updates",
    "Temporal workflows must be deterministic; side effects belong in activities",
    "Agents sign entries with Ed25519 keys that never leave them",
    "Rate limits are counted per identity across every API process",
]
MCP_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
}


@dataclass
class Agent:
    client_id: str
    client_secret: str
    token: str
    team_id: str

    @property
    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def mcp(self) -> dict[str, str]:
        return {**MCP_HEADERS, "X-Client-Id": self.client_id, "X-Client-Secret": self.client_secret}


def log(message: str) -> None:
    print(f"[bench mcp] {message}", file=sys.stderr, flush=True)


def summary(samples: Sequence[float]) -> dict[str, Any]:
    ordered = sorted(samples)

    def pct(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {
        "runs": len(ordered),
        "p50_ms": pct(0.5),
        "p95_ms": pct(0.95),
        "mean_ms": round(statistics.fmean(ordered), 2),
    }


async def interleaved(
    calls: dict[str, Callable[[], Awaitable[Any]]], runs: int, warmup: int = 10
) -> dict[str, list[float]]:
    """Each call in turn, `runs` rounds: every variant sees the same moment of a shared machine."""
    for _ in range(warmup):
        for call in calls.values():
            await call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(runs):
        for name, call in calls.items():
            start = time.perf_counter()
            await call()
            samples[name].append((time.perf_counter() - start) * 1000)
    return samples


async def timed(call: Callable[[], Awaitable[Any]], runs: int, warmup: int = 10) -> list[float]:
    for _ in range(warmup):
        await call()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def register(http: aiohttp.ClientSession, stack: BenchStack, temporal: Any) -> Agent:
    import nacl.signing

    from workers.admin import issue_bootstrap_voucher

    voucher = await issue_bootstrap_voucher(temporal, stack.settings)
    key = nacl.signing.SigningKey.generate()
    public_key = "ed25519:" + base64.b64encode(bytes(key.verify_key)).decode()
    base = stack.base_url
    body = {"public_key": public_key, "voucher_code": voucher.code}
    async with http.post(base + "/auth/register", json=body) as response:
        registered = await response.json(content_type=None)
        assert response.status == 200, registered
    form = {
        "grant_type": "client_credentials",
        "client_id": registered["clientId"],
        "client_secret": registered["clientSecret"],
    }
    async with http.post(base + "/oauth2/token", data=form) as response:
        token = (await response.json(content_type=None))["access_token"]
    async with http.get(base + "/teams", headers={"Authorization": f"Bearer {token}"}) as response:
        teams = (await response.json(content_type=None))["items"]
    team = next(str(t["id"]) for t in teams if t["personal"])
    return Agent(registered["clientId"], registered["clientSecret"], token, team)


async def seed(
    http: aiohttp.ClientSession, base: str, owner: Agent, readers: list[Agent], entries: int
) -> str:
    """One diary of `owner`'s personal team, shared with every reader as writer."""
    async with http.post(
        base + "/diaries",
        json={"name": "bench", "visibility": "private"},
        headers={**owner.bearer, "x-service-team-id": owner.team_id},
    ) as response:
        diary = (await response.json(content_type=None))["id"]
    for i in range(entries):
        content = f"{TOPICS[i % len(TOPICS)]} (note {i})"
        async with http.post(
            f"{base}/diaries/{diary}/entries",
            json={"content": content, "tags": ["bench"]},
            headers=owner.bearer,
        ) as response:
            assert response.status == 201, await response.text()
    for reader in readers:
        async with http.get(base + "/agents/whoami", headers=reader.bearer) as response:
            subject = (await response.json(content_type=None))["agentId"]
        grant = {"subjectId": subject, "subjectNs": "Agent", "role": "writer"}
        async with http.post(
            f"{base}/diaries/{diary}/grants", json=grant, headers=owner.bearer
        ) as response:
            assert response.status == 201, await response.text()
    return str(diary)


def rest_search(
    http: aiohttp.ClientSession, base: str, agent: Agent, diary: str
) -> Callable[[], Awaitable[None]]:
    body = {"query": QUERY, "diaryId": diary, "limit": 10}

    async def call() -> None:
        async with http.post(base + "/diary/search", json=body, headers=agent.bearer) as response:
            payload = await response.json(content_type=None)
            assert response.status == 200 and payload["results"], payload

    return call


def mcp_call(
    http: aiohttp.ClientSession, url: str, agent: Agent, method: str, params: dict[str, Any]
) -> Callable[[], Awaitable[None]]:
    message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})

    async def call() -> None:
        async with http.post(url, data=message, headers=agent.mcp) as response:
            payload = await response.json(content_type=None)
            assert response.status == 200 and "result" in payload, payload
            assert not payload["result"].get("isError"), payload

    return call


def mcp_search(
    http: aiohttp.ClientSession, url: str, agent: Agent, diary: str
) -> Callable[[], Awaitable[None]]:
    arguments = {"query": QUERY, "diary_id": diary, "limit": 10}
    return mcp_call(
        http, url, agent, "tools/call", {"name": "entries_search", "arguments": arguments}
    )


async def sdk_latencies(url: str, agent: Agent, diary: str, runs: int) -> dict[str, Any]:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"X-Client-Id": agent.client_id, "X-Client-Secret": agent.client_secret}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http, terminate_on_close=False) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        arguments = {"query": QUERY, "diary_id": diary, "limit": 10}

        async def search() -> None:
            result = await session.call_tool("entries_search", arguments)
            assert not result.is_error, result

        async def listing() -> None:
            await session.list_tools()

        return {
            "entries_search": summary(await timed(search, runs)),
            "tools_list": summary(await timed(listing, runs)),
        }


async def throughput(
    variants: dict[str, list[Callable[[], Awaitable[None]]]],
    duration: float,
    windows: int,
    pids: dict[str, int],
) -> dict[str, dict[str, Any]]:
    """Closed loops, one per client, for `duration` seconds per variant, cut into `windows`
    alternating windows (REST, MCP, REST, MCP...): a shared machine's background load then
    weighs on both alike instead of on whichever ran second."""
    ops = dict.fromkeys(variants, 0)
    seconds = dict.fromkeys(variants, 0.0)
    cpu: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}

    async def loop(name: str, call: Callable[[], Awaitable[None]], stop_at: float) -> None:
        while time.perf_counter() < stop_at:
            await call()
            ops[name] += 1

    for _ in range(windows):
        for name, calls in variants.items():
            meter = CpuMeter(pids)
            before = ops[name]
            meter.start()
            started = time.perf_counter()
            stop_at = started + duration / windows
            await asyncio.gather(*(loop(name, call, stop_at) for call in calls))
            seconds[name] += time.perf_counter() - started
            cpu[name].append(meter.stop(ops[name] - before))
    return {
        name: {
            "ops": ops[name],
            "seconds": round(seconds[name], 2),
            "ops_per_s": round(ops[name] / seconds[name], 1),
            "cores_per_window": [window["cores"] for window in cpu[name]],
            "cpu_ms_per_op_per_window": [window["cpu_ms_per_op"] for window in cpu[name]],
        }
        for name in variants
    }


async def wait_for(url: str, child: _Child, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    async with aiohttp.ClientSession() as http:
        while True:
            try:
                async with http.get(url) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if not child.alive():
                raise RuntimeError(f"the MCP process exited:\n{child.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the MCP server did not start:\n{child.log_tail()}")
            await asyncio.sleep(0.1)


def model_bytes(tools: list[dict[str, Any]]) -> int:
    """What a model reads of a `tools/list` answer (app-only tools are kept from it)."""
    views = [
        {
            "name": t["name"],
            "description": t.get("description", ""),
            "inputSchema": t["inputSchema"],
        }
        for t in tools
        if (t.get("_meta") or {}).get("ui", {}).get("visibility") != ["app"]
    ]
    return sum(
        len(json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()) for v in views
    )


async def listed(http: aiohttp.ClientSession, url: str, agent: Agent) -> tuple[int, list[Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with http.post(url, json=body, headers=agent.mcp) as response:
        raw = await response.read()
    return len(raw), json.loads(raw)["result"]["tools"]


async def catalogue(http: aiohttp.ClientSession, url: str, agent: Agent) -> dict[str, Any]:
    """The served catalogue over HTTP: the default view (no `toolsets` chosen), whole
    (`?toolsets=all`), and per toolset."""
    default_size, default = await listed(http, url, agent)
    size, tools = await listed(http, f"{url}?toolsets=all", agent)
    toolsets = {}
    for name in TOOLSETS:
        part_size, part = await listed(http, f"{url}?toolsets={name}", agent)
        toolsets[name] = {"model_bytes": model_bytes(part), "tools_list_bytes": part_size}
    return {
        "default": {
            "tools_list_bytes": default_size,
            "model_bytes": model_bytes(default),
            "tools": len(default),
        },
        "tools_list_bytes": size,
        "model_bytes": model_bytes(tools),
        "tools": len(tools),
        "toolsets": toolsets,
    }


def checkout_sizes(folder: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", SIZES_SCRIPT],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    sizes: dict[str, Any] = json.loads(done.stdout)
    return sizes


def baseline_sizes(revision: str) -> dict[str, Any]:
    """The same measures on `revision`, from a temporary git worktree of it."""
    with tempfile.TemporaryDirectory(prefix="cairn-mcp-baseline-") as tmp:
        folder = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(folder), revision],
            check=True,
            timeout=120,
        )
        try:
            return {"revision": revision, **checkout_sizes(folder)}
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)],
                check=False,
                timeout=120,
            )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from infra.devstack import free_port

    async with BenchStack() as stack:
        port = free_port()
        env = {**stack.env, "SERVICE_MCP_PORT": str(port), "SERVICE_MCP_HOST": "127.0.0.1"}
        mcp = _Child(
            "mcp",
            [sys.executable, "-c", "from cairn import main; main(['mcp'])"],
            stack.root / "mcp.log",
            env=env,
        )
        stack._parts.append(mcp)
        mcp.start()
        root = f"http://127.0.0.1:{port}"
        url = root + "/mcp"
        await wait_for(root + "/healthz", mcp)
        temporal = await stack.temporal_client()
        connector = aiohttp.TCPConnector(limit=256)
        async with aiohttp.ClientSession(connector=connector) as http:
            log(f"registering {args.clients} agents")
            agents = [await register(http, stack, temporal) for _ in range(args.clients)]
            log(f"seeding {args.entries} entries")
            diary = await seed(http, stack.base_url, agents[0], agents[1:], args.entries)
            one = agents[0]

            log("one client: REST search, MCP entries_search, tools/list")
            samples = await interleaved(
                {
                    "rest": rest_search(http, stack.base_url, one, diary),
                    "mcp": mcp_search(http, url, one, diary),
                    "tools_list": mcp_call(http, f"{url}?toolsets=all", one, "tools/list", {}),
                },
                args.runs,
            )
            rest, via_mcp = summary(samples["rest"]), summary(samples["mcp"])
            tools_list = summary(samples["tools_list"])
            log("one client through the official SDK client")
            sdk = await sdk_latencies(url, one, diary, max(50, args.runs // 3))

            pids = {**stack.pids(), "mcp": mcp.process.pid if mcp.process else 0}
            log(f"{args.clients} concurrent clients, {args.duration} s each, alternating")
            loads = await throughput(
                {
                    "rest": [rest_search(http, stack.base_url, a, diary) for a in agents],
                    "mcp": [mcp_search(http, url, a, diary) for a in agents],
                },
                args.duration,
                args.windows,
                pids,
            )
            rest_load, mcp_load = loads["rest"], loads["mcp"]
            async with http.get(root + "/healthz") as response:
                exchanges = (await response.json(content_type=None))["tokenExchanges"]
            log("catalogue sizes, served and in-process, and the baseline's")
            served = await catalogue(http, url, one)
        sizes = {
            "served": served,
            "in_process": checkout_sizes(ROOT),
            "baseline": baseline_sizes(args.baseline),
        }

        overhead = round(via_mcp["p50_ms"] - rest["p50_ms"], 2)
        ratio = round(mcp_load["ops_per_s"] / rest_load["ops_per_s"], 3)
        result: dict[str, Any] = {
            "benchmark": "mcp",
            "topology": {
                **stack.topology(),
                "mcp": "separate process: `cairn mcp` (uvicorn, one process), stateless "
                "streamable HTTP, JSON responses",
            },
            "setup": {
                "agents": args.clients,
                "entries": args.entries,
                "runs": args.runs,
                "duration_s": args.duration,
                "query": QUERY,
            },
            "one_client": {
                "rest_search": rest,
                "mcp_entries_search": via_mcp,
                "mcp_overhead_p50_ms": overhead,
                "mcp_tools_list": tools_list,
                "sdk_client": sdk,
            },
            "concurrent": {
                "clients": args.clients,
                "rest_search": rest_load,
                "mcp_entries_search": mcp_load,
                "mcp_over_rest": ratio,
            },
            "token_exchanges": {"clients": args.clients, "exchanges": exchanges},
            "catalogue": sizes,
        }
        result["targets"] = {
            "mcp_p50_within_rest_plus_5ms": overhead <= 5,
            "tools_list_p50_within_20ms": tools_list["p50_ms"] <= 20,
            "throughput_ratio_at_least_0_7": ratio >= 0.7,
            "one_exchange_per_client": exchanges == args.clients,
            "catalogue_within_20kb": served["model_bytes"] <= 20_000,
            "memory_toolset_within_5kb": served["toolsets"]["memory"]["model_bytes"] <= 5_000,
            "default_within_10_tools": served["default"]["tools"] <= 10,
            "default_within_6kb": served["default"]["model_bytes"] <= 6_000,
        }
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--entries", type=int, default=200)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--baseline", default=BASELINE, help="the commit to compare sizes with")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.entries, args.duration, args.windows = 60, 40, 6.0, 2
    run_and_report(run(args), args.output)


if __name__ == "__main__":
    main()
