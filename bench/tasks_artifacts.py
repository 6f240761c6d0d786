"""Benchmark task artifacts: 25 MiB uploads and downloads through the API, with the memory of
the API process, next to raw S3 baselines of the same run.

    .venv/bin/python bench/tasks_artifacts.py [--runs 6] [--quick]

Starts the embedded stack (bench/_stack.py: Postgres, the tuned Temporal dev server, rclone S3,
the API and the worker each in their own process), then measures:

1. baselines in this process: sha256 of 25 MiB in memory; boto3 `put_object` of a 25 MiB file
   and `get_object` of it against the same rclone (the S3 ceiling); a no-op workflow;
2. the two ways an upload can reach its CID key, without HTTP, from 64 KiB chunks as a request
   delivers them: (a) spool to a temporary file while hashing, then one PUT at the CID key
   (what the service does); (b) a multipart upload to a temporary key while hashing, then a
   server-side copy to the CID key and a delete. Throughput and the Python allocation peak
   (tracemalloc) of each;
3. through the API: `PUT /task-artifacts/staged` of 25 MiB (new bytes each run), the same
   bytes again (stored once: no PUT to S3), `PUT /tasks/{id}/attempts/1/artifacts` of 25 MiB,
   and `GET .../content` of it. While each request runs, the API process's RSS is sampled every
   2 ms: `rss_peak_over_start_mib` is how far it rose above where it stood when the request
   began (flat memory: far below the 25 MiB of the body).

Target (issue 5): a 25 MiB upload at ≥ 50 MB/s (decimal megabytes) with flat memory. Prints one
JSON document and writes it to bench/results/artifacts.json. About a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._stack import (
    NOOP_TASK_QUEUE,
    NOOP_WORKFLOW,
    BenchAgent,
    BenchStack,
    machine_info,
    register_agent,
    run_and_report,
)
from schemas.task_attempts import task_workflow_id

RESULTS = Path(__file__).resolve().parent / "results" / "artifacts.json"
MIB = 1024 * 1024
SIZE = 25 * MIB
REQUEST_CHUNK = 64 * 1024  # what aiohttp's reader typically hands over per read
PART = 8 * MIB  # multipart part size of the alternative strategy
TARGET_MB_PER_S = 50.0


def log(message: str) -> None:
    print(f"[artifacts-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def mb_per_s(nbytes: int, seconds: float) -> float:
    return round(nbytes / 1e6 / seconds, 1) if seconds > 0 else 0.0


def timing(seconds: list[float], nbytes: int = SIZE, **extra: Any) -> dict[str, Any]:
    median = statistics.median(seconds)
    return {
        "runs": len(seconds),
        "median_ms": round(median * 1000, 1),
        "min_ms": round(min(seconds) * 1000, 1),
        "max_ms": round(max(seconds) * 1000, 1),
        "median_mb_per_s": mb_per_s(nbytes, median),
        **extra,
    }


# --- raw baselines ----------------------------------------------------------------------------


async def s3_baselines(blobs: Any, runs: int) -> dict[str, Any]:
    data = os.urandom(SIZE)
    start = time.perf_counter()
    hashlib.sha256(data).digest()
    sha_s = time.perf_counter() - start
    puts, gets = [], []
    with tempfile.TemporaryFile() as file:
        file.write(data)
        for i in range(runs):
            key = f"bench/raw/{i}"
            start = time.perf_counter()
            await blobs.put_file(key, file, SIZE)
            puts.append(time.perf_counter() - start)
            start = time.perf_counter()
            reader = await blobs.open(key)
            async for _ in reader.chunks(MIB):
                pass
            gets.append(time.perf_counter() - start)
    return {
        "sha256_25mib_ms": round(sha_s * 1000, 1),
        "sha256_mb_per_s": mb_per_s(SIZE, sha_s),
        "s3_put_object_25mib": timing(puts),
        "s3_get_object_25mib": timing(gets),
    }


async def noop_workflow(stack: BenchStack, runs: int) -> dict[str, Any]:
    client = await stack.temporal_client()
    samples = []
    for i in range(runs + 3):
        start = time.perf_counter()
        await client.execute_workflow(
            NOOP_WORKFLOW, id=f"bench-noop/{uuid.uuid4()}", task_queue=NOOP_TASK_QUEUE
        )
        if i >= 3:
            samples.append(time.perf_counter() - start)
    return {"p50_ms": round(statistics.median(samples) * 1000, 2), "runs": runs}


# --- the two strategies, without HTTP -----------------------------------------------------------


async def spool_then_put(blobs: Any, data: bytes) -> str:
    """What the service does: hash and spool in 1 MiB blocks, then one PUT at the CID key."""
    from infra.s3 import artifact_key
    from schemas.kernel.cids import BytesCidHasher

    hasher = BytesCidHasher()
    with tempfile.TemporaryFile() as file:
        pending: list[bytes] = []
        pending_bytes = 0
        for offset in range(0, len(data), REQUEST_CHUNK):
            chunk = data[offset : offset + REQUEST_CHUNK]
            pending.append(chunk)
            pending_bytes += len(chunk)
            if pending_bytes >= MIB:
                block = b"".join(pending)
                await asyncio.to_thread(_hash_and_write, hasher, file, block)
                pending, pending_bytes = [], 0
        if pending:
            await asyncio.to_thread(_hash_and_write, hasher, file, b"".join(pending))
        cid = hasher.cid()
        if not await blobs.exists(artifact_key(cid)):
            await blobs.put_file(artifact_key(cid), file, hasher.size)
    return cid


def _hash_and_write(hasher: Any, file: Any, block: bytes) -> None:
    hasher.update(block)
    file.write(block)


async def multipart_then_copy(blobs: Any, data: bytes) -> str:
    """The alternative: parts to a temporary key while hashing, then copy to the CID key."""
    from infra.s3 import artifact_key
    from schemas.kernel.cids import BytesCidHasher

    client, bucket = blobs.client, blobs.bucket
    temp_key = f"bench/upload/{uuid.uuid4()}"
    hasher = BytesCidHasher()
    upload = await asyncio.to_thread(client.create_multipart_upload, Bucket=bucket, Key=temp_key)
    parts: list[dict[str, Any]] = []
    pending: list[bytes] = []
    pending_bytes = 0

    async def send(block: bytes) -> None:
        hasher.update(block)
        number = len(parts) + 1
        answer = await asyncio.to_thread(
            client.upload_part,
            Bucket=bucket,
            Key=temp_key,
            UploadId=upload["UploadId"],
            PartNumber=number,
            Body=block,
        )
        parts.append({"PartNumber": number, "ETag": answer["ETag"]})

    for offset in range(0, len(data), REQUEST_CHUNK):
        chunk = data[offset : offset + REQUEST_CHUNK]
        pending.append(chunk)
        pending_bytes += len(chunk)
        if pending_bytes >= PART:
            await send(b"".join(pending))
            pending, pending_bytes = [], 0
    if pending:
        await send(b"".join(pending))
    await asyncio.to_thread(
        client.complete_multipart_upload,
        Bucket=bucket,
        Key=temp_key,
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": parts},
    )
    cid = hasher.cid()
    await asyncio.to_thread(
        client.copy_object,
        Bucket=bucket,
        Key=artifact_key(cid),
        CopySource={"Bucket": bucket, "Key": temp_key},
    )
    await asyncio.to_thread(client.delete_object, Bucket=bucket, Key=temp_key)
    return cid


async def strategies(blobs: Any, runs: int) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, strategy in (
        ("spool_then_put", spool_then_put),
        ("multipart_to_temp_then_copy", multipart_then_copy),
    ):
        seconds, peaks = [], []
        for _ in range(runs):
            data = os.urandom(SIZE)
            tracemalloc.start()
            start = time.perf_counter()
            await strategy(blobs, data)
            seconds.append(time.perf_counter() - start)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        found[name] = timing(seconds, python_alloc_peak_mib=round(max(peaks) / MIB, 2))
    found["note"] = (
        "in this process, from 64 KiB chunks of bytes already in memory (not counted); "
        "python_alloc_peak_mib is the tracemalloc peak of the strategy itself (its buffers: "
        "1 MiB spool blocks, or 8 MiB multipart parts)"
    )
    return found


# --- through the API ----------------------------------------------------------------------------


async def running_attempt(
    session: aiohttp.ClientSession, stack: BenchStack, agent: BenchAgent
) -> str:
    """A task of the agent's team with attempt 1 running and claimed by the agent (rows as the
    attempt workflow projects them: the upload route reads exactly these)."""
    import asyncpg

    from schemas.kernel.cids import json_cid
    from schemas.kernel.task_types import input_schema_cid

    headers = {**agent.headers, "x-service-team-id": agent.team_id}
    body = {"name": "bench", "visibility": "private"}
    async with session.post(stack.base_url + "/diaries", json=body, headers=headers) as response:
        diary = await response.json(content_type=None)
        assert response.status == 201, diary
    task_id = uuid.uuid4()
    conn = await asyncpg.connect(stack.settings.database_url)
    try:
        await conn.execute(
            "INSERT INTO tasks (id, team_id, diary_id, task_type, input, input_cid,"
            " input_schema_cid, output_kind, dispatch_timeout_sec, running_timeout_sec,"
            " proposed_by_agent_id, workflow_id, status) VALUES ($1, $2, $3, 'freeform',"
            " '{\"brief\": \"x\"}', $4, $5, 'artifact', 300, 7200, $6, $7, 'running')",
            task_id,
            uuid.UUID(agent.team_id),
            uuid.UUID(diary["id"]),
            json_cid({"brief": "x"}),
            input_schema_cid("freeform"),
            agent.agent_id,
            task_workflow_id(task_id),
        )
        await conn.execute(
            "INSERT INTO task_attempts (id, task_id, attempt_n, workflow_id, lease_id,"
            " claimed_by_agent_id, status, lease_ttl_sec) VALUES ($1, $2, 1, $3, $4, $5,"
            " 'running', 300)",
            uuid.uuid4(),
            task_id,
            task_workflow_id(task_id),
            uuid.uuid4(),
            agent.agent_id,
        )
    finally:
        await conn.close()
    return str(task_id)


class RssSampler:
    """Samples a process's RSS every `interval` seconds while a block runs."""

    def __init__(self, pid: int, interval: float = 0.002) -> None:
        self.process = psutil.Process(pid)
        self.interval = interval
        self.start_rss = 0
        self.peak_rss = 0

    async def _sample(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.peak_rss = max(self.peak_rss, self.process.memory_info().rss)
            await asyncio.sleep(self.interval)

    async def measure(self, request: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
        self.start_rss = self.peak_rss = self.process.memory_info().rss
        stop = asyncio.Event()
        sampler = asyncio.create_task(self._sample(stop))
        start = time.perf_counter()
        try:
            result = await request()
        finally:
            elapsed = time.perf_counter() - start
            stop.set()
            await sampler
        self.peak_rss = max(self.peak_rss, self.process.memory_info().rss)
        return elapsed, result

    @property
    def rise_mib(self) -> float:
        return (self.peak_rss - self.start_rss) / MIB


async def api_phase(
    session: aiohttp.ClientSession, stack: BenchStack, agent: BenchAgent, runs: int
) -> dict[str, Any]:
    assert stack.api is not None and stack.api.process is not None
    api = psutil.Process(stack.api.process.pid)
    sampler = RssSampler(api.pid)
    task_id = await running_attempt(session, stack, agent)
    base = stack.base_url
    octet = {"Content-Type": "application/octet-stream"}
    stage_headers = {**agent.headers, **octet, "x-service-team-id": agent.team_id}

    async def put(url: str, data: bytes, headers: dict[str, str]) -> dict[str, Any]:
        async with session.put(url, data=data, headers=headers) as response:
            body = await response.json(content_type=None)
            assert response.status == 200, body
            return dict(body)

    async def get(url: str) -> int:
        size = 0
        async with session.get(url, headers=agent.headers) as response:
            assert response.status == 200, await response.text()
            async for chunk in response.content.iter_chunked(MIB):
                size += len(chunk)
        return size

    rss_at_start = api.memory_info().rss
    found: dict[str, Any] = {}
    # warm-up: first requests load code paths, connections and pools
    await put(base + "/task-artifacts/staged", os.urandom(MIB), stage_headers)

    async def series(
        name: str, make: Callable[[int], Callable[[], Awaitable[Any]]], count: int
    ) -> None:
        seconds, rises = [], []
        for i in range(count):
            elapsed, _ = await sampler.measure(make(i))
            seconds.append(elapsed)
            rises.append(sampler.rise_mib)
        found[name] = timing(
            seconds,
            rss_peak_over_start_mib_max=round(max(rises), 1),
            rss_peak_over_start_mib_median=round(statistics.median(rises), 1),
            meets_50_mb_per_s=mb_per_s(SIZE, statistics.median(seconds)) >= TARGET_MB_PER_S,
        )
        log(f"{name}: {found[name]}")

    staged = [os.urandom(SIZE) for _ in range(runs)]
    await series(
        "stage_25mib_new_bytes",
        lambda i: lambda: put(base + "/task-artifacts/staged", staged[i], stage_headers),
        runs,
    )
    await series(
        "stage_25mib_same_bytes_again",
        lambda i: lambda: put(base + "/task-artifacts/staged", staged[0], stage_headers),
        runs,
    )
    outputs = [os.urandom(SIZE) for _ in range(runs)]
    upload_url = base + f"/tasks/{task_id}/attempts/1/artifacts?kind=report&title=bench-%d"
    cids: list[str] = []

    def upload(i: int) -> Callable[[], Awaitable[Any]]:
        async def run() -> None:
            body = await put(upload_url % i, outputs[i], {**agent.headers, **octet})
            cids.append(body["cid"])

        return run

    await series("attempt_upload_25mib", upload, runs)
    await series(
        "download_25mib",
        lambda i: lambda: get(base + f"/tasks/{task_id}/attempts/1/artifacts/{cids[i]}/content"),
        runs,
    )
    found["api_rss_mib"] = {
        "before_phase": round(rss_at_start / MIB, 1),
        "after_phase": round(api.memory_info().rss / MIB, 1),
        "body_size_mib": SIZE / MIB,
        "uploads_in_phase": 3 * runs + 1,
    }
    return found


# --- the run ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from infra.s3 import BlobStore

    result: dict[str, Any] = {
        "benchmark": "artifacts",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": {"runs": args.runs, "size_bytes": SIZE},
        "env": machine_info(),
        "target": {"upload_mb_per_s": TARGET_MB_PER_S, "memory": "flat (peak rise << 25 MiB)"},
    }
    async with BenchStack(keep_dir=args.keep_dir) as stack:
        result["topology"] = stack.topology()
        blobs = BlobStore.from_settings(stack.settings)
        try:
            log("raw baselines")
            result["baselines"] = await s3_baselines(blobs, args.runs)
            result["baselines"]["noop_workflow"] = await noop_workflow(stack, 20)
            log(f"baselines: {result['baselines']}")
            log("strategies without HTTP")
            result["strategies"] = await strategies(blobs, args.runs)
            log(f"strategies: {result['strategies']}")
            async with aiohttp.ClientSession() as session:
                agent = await register_agent(session, stack)
                log("through the API")
                result["api"] = await api_phase(session, stack, agent, args.runs)
        finally:
            blobs.close()
    stage = result["api"]["stage_25mib_new_bytes"]
    upload = result["api"]["attempt_upload_25mib"]
    result["verdict"] = {
        "stage_mb_per_s": stage["median_mb_per_s"],
        "attempt_upload_mb_per_s": upload["median_mb_per_s"],
        "meets_50_mb_per_s": stage["meets_50_mb_per_s"] and upload["meets_50_mb_per_s"],
        "api_rss_peak_rise_mib_max": max(
            stage["rss_peak_over_start_mib_max"], upload["rss_peak_over_start_mib_max"]
        ),
        "over_raw_s3_put": round(
            upload["median_mb_per_s"]
            / result["baselines"]["s3_put_object_25mib"]["median_mb_per_s"],
            2,
        ),
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=6, help="measured runs per phase")
    parser.add_argument("--quick", action="store_true", help="3 runs per phase")
    parser.add_argument("--keep-dir", action="store_true", help="keep the stack's temp dir")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.runs = 3

    run_and_report(run(args), args.output)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
