"""Benchmark the payload codec (issue 31): entry creation with workflow payloads sealed and in the
clear, in the same run, and the codec's own cost per payload.

    .venv/bin/python bench/codec.py [--rounds 10] [--per-round 20]

Starts two embedded stacks side by side (bench/_stack.py: Postgres, the tuned Temporal dev
server, rclone S3, the API and the worker each in their own process), identical but for
`SERVICE_PAYLOAD_KEYS`: one seals every payload (as a deployment does), the other has no keyring.
One writer creates 100-word entries through the API (`POST /diaries/{id}/entries`: the whole
entry workflow, its embedding and insert as local activities) on each stack in turn, round after
round, so that both modes see the same load of the shared machine; the p50 of each mode is taken
over all its rounds. Beside it, in this process: sealing and opening one entry's workflow input
(an `EntryDraft` of that size) with the codec alone.

Target: entry create p50 with the codec on within 10 % of off. Prints one JSON document and
writes it to bench/results/codec.json. About 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import BenchAgent, BenchStack, machine_info, register_agent, run_and_report
from bench.memory import summary

RESULTS = Path(__file__).resolve().parent / "results" / "codec.json"
TARGET_P50_RATIO = 1.10
# fmt: off
WORDS = (
    "deploy", "rollback", "canary", "postgres", "replica", "vacuum", "index", "planner", "queue",
    "worker", "lease", "heartbeat", "timer", "signal", "update", "query", "namespace", "shard",
    "cluster", "frontend", "history", "matching", "retention", "payload", "codec", "keyring",
    "rotation", "operator", "console", "session", "cookie", "origin", "certificate",
)
# fmt: on


def entry_text(n: int, words: int = 100) -> str:
    """A 100-word entry, different for every `n` (the same text twice is a duplicate)."""
    picked = [WORDS[(n * 7 + i * 13) % len(WORDS)] for i in range(words)]
    return " ".join(picked) + f" (write {n})"


class Writer:
    """One closed-loop writer of entries into one diary of one stack."""

    def __init__(self, session: aiohttp.ClientSession, stack: BenchStack) -> None:
        self.session, self.stack = session, stack
        self.agent: BenchAgent | None = None
        self.url = ""
        self.written = 0
        self.latencies_ms: list[float] = []

    async def setup(self) -> None:
        self.agent = await register_agent(self.session, self.stack)
        async with self.session.post(
            self.stack.base_url + "/diaries",
            json={"name": "Codec bench", "visibility": "private"},
            headers={**self.agent.headers, "x-service-team-id": self.agent.team_id},
        ) as response:
            diary = await response.json(content_type=None)
            assert response.status == 201, diary
        self.url = f"{self.stack.base_url}/diaries/{diary['id']}/entries"

    async def create(self, *, timed: bool) -> None:
        assert self.agent is not None
        self.written += 1
        body = {"content": entry_text(self.written), "tags": ["bench"], "importance": 5}
        start = time.perf_counter()
        async with self.session.post(self.url, json=body, headers=self.agent.headers) as response:
            await response.read()
            if response.status != 201:
                raise RuntimeError(f"entry create: {response.status} {await response.text()}")
        if timed:
            self.latencies_ms.append((time.perf_counter() - start) * 1000)


async def codec_alone(runs: int = 2000) -> dict[str, Any]:
    """Seal and open one entry's workflow input, in this process, with the codec alone."""
    from infra.payload_codec import PayloadEncryption, PayloadKeyring, encrypting_converter
    from schemas.memory import EntryDraft

    keyring = PayloadKeyring.parse(PayloadKeyring.new_entry("bench"))
    codec = PayloadEncryption(keyring)
    draft = EntryDraft(
        entry_id=uuid.uuid4(), diary_id=uuid.uuid4(), content=entry_text(1), created_by=uuid.uuid4()
    )
    [payload] = encrypting_converter(keyring).payload_converter.to_payloads([draft])
    seal_us, open_us = [], []
    for _ in range(runs):
        start = time.perf_counter()
        sealed = codec.seal(payload)
        middle = time.perf_counter()
        codec.open(sealed)
        seal_us.append((middle - start) * 1e6)
        open_us.append((time.perf_counter() - middle) * 1e6)
    seal_us.sort()
    open_us.sort()
    return {
        "payload_bytes": len(payload.SerializeToString()),
        "sealed_bytes": len(sealed.SerializeToString()),
        "seal_p50_us": round(seal_us[len(seal_us) // 2], 1),
        "open_p50_us": round(open_us[len(open_us) // 2], 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    info = machine_info(("temporalio", "pynacl", "aiohttp"))
    async with (
        BenchStack() as sealed_stack,
        BenchStack(settings={"payload_keys": ""}) as clear_stack,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
    ):
        writers = {"on": Writer(session, sealed_stack), "off": Writer(session, clear_stack)}
        for writer in writers.values():
            await writer.setup()
            for _ in range(5):  # warm-up: the model, the sandbox, the pools
                await writer.create(timed=False)
        for _ in range(args.rounds):
            for writer in writers.values():
                for _ in range(args.per_round):
                    await writer.create(timed=True)
    on, off = (summary(writers[mode].latencies_ms) for mode in ("on", "off"))
    ratio = round(on["p50_ms"] / off["p50_ms"], 3)
    return {
        "benchmark": "codec",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": info,
        "method": f"two stacks side by side, one writer, {args.rounds} alternating rounds of "
        f"{args.per_round} entry creates on each (100-word entries, the whole entry workflow)",
        "entry_create_codec_on": on,
        "entry_create_codec_off": off,
        "p50_on_over_off": ratio,
        "codec_alone_entry_input": await codec_alone(),
        "target": {
            "p50_on_over_off_at_most": TARGET_P50_RATIO,
            "met": ratio <= TARGET_P50_RATIO,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--per-round", type=int, default=20)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    run_and_report(run(args), args.output)


if __name__ == "__main__":
    main()
