"""The `cairn` command: the embedded stack for development, and the production entry points.

cairn dev                 everything on one machine (Postgres, Temporal, S3, worker, API)
cairn api | worker        the two production processes (addresses from SERVICE_* settings);
                          `cairn api --processes N` serves one port from N processes
cairn mcp                 the tool-protocol (MCP) server, a client of the API
cairn migrate             apply database migrations
cairn admin voucher       issue a bootstrap voucher (needs Temporal and a running worker)
cairn admin rotate-signing-key
cairn openapi             print the OpenAPI document without starting anything
cairn daemon | whoami     the agent's side (client/cli.py): claim and run tasks with an agent key

`cairn api` and `cairn mcp` drain on SIGTERM or SIGINT: readiness answers 503 at once, the
listener keeps accepting for SERVICE_SHUTDOWN_DRAIN_S (a load balancer sees the failed probe
and moves traffic away), then it closes, the requests in flight get SERVICE_SHUTDOWN_GRACE_S to
finish, and the process exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import multiprocessing
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from client import cli as agent_commands
from infra.settings import Settings

if TYPE_CHECKING:
    from toolserver.config import ToolServerConfig

log = logging.getLogger("cairn")


def _kept_file(data_dir: Path, name: str, make: Callable[[], str]) -> str:
    """A dev secret made once and kept in .cairn/<name> (owner-only), so restarts reuse it."""
    path = data_dir / name
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(make())
        path.chmod(0o600)
    return path.read_text().strip()


def codec_endpoint(settings: Settings) -> str:
    """Where the Temporal UI sends sealed payloads to be decoded: the API's codec endpoint."""
    from api.routes.codec import CODEC_PATH

    return settings.base_url.rstrip("/") + CODEC_PATH


def _secret_file(data_dir: Path) -> str:
    """The dev server secret: tokens survive restarts."""
    return _kept_file(data_dir, "secret", lambda: secrets.token_urlsafe(48))


def _payload_keys_file(data_dir: Path) -> str:
    """The dev payload keyring: runs sealed before a restart still open after it."""
    from infra.payload_codec import PayloadKeyring

    return _kept_file(data_dir, "payload-keys", lambda: PayloadKeyring.new_entry("dev-1"))


async def _serve_api(settings: Settings, *, reuse_port: bool = False) -> web.AppRunner:
    from api.app import create_app
    from api.server import ApiRunner

    runner = ApiRunner(create_app(settings), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, settings.api_host, settings.api_port, reuse_port=reuse_port or None)
    await site.start()
    return runner


async def _drain(draining: asyncio.Event, settings: Settings) -> None:
    """Readiness fails from now on; the listener keeps accepting for the drain delay, so the
    load balancer that probes readiness stops sending traffic before the listener closes."""
    draining.set()
    log.info("draining for %g s (pid %d)", settings.shutdown_drain_s, os.getpid())
    await asyncio.sleep(settings.shutdown_drain_s)


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def dev(args: argparse.Namespace) -> None:
    from infra.devstack import Postgres, RcloneS3, TemporalDevServer, stopped_on_exit
    from infra.pgdata import DataDirectoryRefused

    started = time.monotonic()
    base = Settings()
    data_dir = base.data_dir.resolve()
    postgres = Postgres(data_dir / "pg")
    temporal = TemporalDevServer(
        db_file=data_dir / "temporal.db",
        port=int(base.temporal_address.rsplit(":", 1)[1]),
        ui_port=args.ui_port,
        log_path=data_dir / "temporal.log",
        codec_endpoint=codec_endpoint(base),
    )
    s3 = RcloneS3(
        root=data_dir / "s3",
        access_key=base.s3_access_key,
        secret_key=base.s3_secret_key.get_secret_value(),
        bucket=base.s3_bucket,
        port=args.s3_port,
        log_path=data_dir / "s3.log",
    )
    with stopped_on_exit(postgres, temporal, s3):
        try:
            postgres.start()
        except DataDirectoryRefused as refused:  # its message says what to do
            sys.exit(f"cairn dev: {refused}")
        temporal.start()
        s3.start()
        settings = base.model_copy(
            update={
                "database_url": base.database_url or postgres.ensure_database("cairn"),
                "s3_endpoint": base.s3_endpoint or s3.endpoint,
                "secret_key": base.secret_key
                if base.secret_key.get_secret_value()
                else type(base.secret_key)(_secret_file(data_dir)),
                # the only worker of this stack: each start's build serves, edited code or not
                "worker_set_current": "always",
                "payload_keys": base.payload_keys
                if base.payload_keys.get_secret_value()
                else type(base.payload_keys)(_payload_keys_file(data_dir)),
            }
        )
        asyncio.run(_run_dev(settings, args, started))


async def _run_dev(settings: Settings, args: argparse.Namespace, started: float) -> None:
    from infra.db import migrate
    from infra.telemetry import setup_metrics
    from infra.temporal import connect
    from toolserver.app import running
    from workers.admin import issue_bootstrap_voucher
    from workers.main import running_worker

    await migrate(settings.database_url)
    # before the client: the SDK's metrics too
    setup_metrics(
        settings.otel_service_name,
        scrape_port=settings.metrics_port,
        scrape_host=settings.metrics_host,
    )
    if "SERVICE_TEMPORAL_UI_URL" not in os.environ:  # the UI this command started
        ui = f"http://127.0.0.1:{args.ui_port}"
        settings = settings.model_copy(update={"temporal_ui_url": ui})
    client = await connect(settings)
    async with running_worker(settings, client):
        runner = await _serve_api(settings)  # its codec endpoint answers that UI's origin
        try:
            async with running(toolserver_config(settings)):
                voucher = await issue_bootstrap_voucher(client, settings)
                _print_banner(settings, args, voucher.code, time.monotonic() - started)
                await _until_signalled()
                print("\nstopping…", flush=True)
        finally:
            await runner.cleanup()


def _print_banner(settings: Settings, args: argparse.Namespace, voucher: str, took: float) -> None:
    api = settings.base_url
    lines = [
        f"Cairn is ready ({took:.1f} s).",
        f"  API          {api}",
        f"  OpenAPI      {api}/openapi.json",
        f"  Console      {api}/console/ (humans: sign up or log in there)",
        f"  MCP          {settings.mcp_url} (X-Client-Id + X-Client-Secret, an agent key, "
        "or a human's browser OAuth)",
        f"  Temporal UI  {settings.temporal_ui_url} (payloads decoded by {codec_endpoint(settings)}"
        f" for the operators of SERVICE_OPERATORS: {settings.operators or 'none set'})",
        f"  Temporal     {settings.temporal_address} (namespace {settings.temporal_namespace})",
        f"  S3           {settings.s3_endpoint} (bucket {settings.s3_bucket})",
        f"  Data         {settings.data_dir.resolve()}",
        "",
        f"Bootstrap voucher (24 h, one registration): {voucher}",
        "Register an agent:",
        f"  curl -s {api}/auth/register -H 'content-type: application/json' \\",
        f'    -d \'{{"public_key": "ed25519:<base64 key>", "voucher_code": "{voucher}"}}\'',
        "Press Ctrl-C to stop everything.",
    ]
    print("\n".join(lines), flush=True)


def api(args: argparse.Namespace) -> None:
    """Serve the API; with N processes, N-1 children bind the same port (the kernel spreads
    connections over them) and stop with the parent: a signal to the parent (the one PID 1's
    init forwards it to) is passed on to every child, so all of them drain at once."""
    settings = Settings()
    processes = args.processes or settings.api_processes
    spawn = multiprocessing.get_context("spawn")
    children = [
        spawn.Process(target=_api_process, args=(True, os.getpid(), index), daemon=True)
        for index in range(1, processes)
    ]
    for child in children:
        child.start()
    try:
        _api_process(processes > 1, None, 0, children)
    finally:
        for child in children:
            child.terminate()  # a no-op for a child that has stopped already
        for child in children:
            child.join(timeout=settings.shutdown_drain_s + settings.shutdown_grace_s + 5)


def _api_process(
    reuse_port: bool, parent_pid: int | None, index: int, children: Sequence[BaseProcess] = ()
) -> None:
    settings = Settings()
    if settings.metrics_port and index:  # one scrape endpoint per process
        settings = settings.model_copy(update={"metrics_port": settings.metrics_port + index})

    async def main() -> None:
        from api import keys

        runner = await _serve_api(settings, reuse_port=reuse_port)
        log.info("API on http://%s:%s (pid %d)", settings.api_host, settings.api_port, os.getpid())
        try:
            if parent_pid is None:
                await _until_signalled()
                for child in children:
                    child.terminate()  # SIGTERM: each child drains beside this process
                await _drain(runner.app[keys.DRAINING], settings)
            elif await _until_orphaned(parent_pid):
                await _drain(runner.app[keys.DRAINING], settings)
        finally:
            await runner.cleanup()  # the listener closes; requests in flight get the grace

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


async def _until_orphaned(parent_pid: int) -> bool:
    """A child API process: until SIGTERM (True), or until its parent is gone, even killed
    (False: nothing routes to a replica whose parent died, so there is nothing to drain)."""
    signalled = asyncio.create_task(_until_signalled())
    while os.getppid() == parent_pid:
        done, _ = await asyncio.wait({signalled}, timeout=1.0)
        if done:
            return True
    signalled.cancel()
    return False


def _connector_secrets(settings: Settings) -> list[str]:
    """The browser OAuth connector shares a secret with the API, derived from the server
    secret (current first, then the ring's older keys); without one, `cairn mcp` serves agents'
    credentials only (the connector is off)."""
    from schemas.connector import connector_secret

    try:
        return [connector_secret(key) for key in settings.secret_ring.keys]
    except ValueError:
        log.warning("SERVICE_SECRET_KEY is unset: the MCP server's browser connector is off")
        return [""]


def toolserver_config(settings: Settings) -> ToolServerConfig:
    from urllib.parse import urlsplit

    from toolserver.config import ToolServerConfig

    current, *older = _connector_secrets(settings)
    return ToolServerConfig(
        api_url=(settings.mcp_api_url or settings.base_url).rstrip("/"),
        public_url=settings.mcp_url,
        host=settings.mcp_host,
        port=settings.mcp_port,
        path=urlsplit(settings.mcp_url).path or "/mcp",
        temporal_ui_url=settings.temporal_ui_url,
        temporal_namespace=settings.temporal_namespace,
        challenge_token=settings.mcp_challenge_token.get_secret_value(),
        challenge_path=settings.mcp_challenge_path,
        connector_secret=current,
        older_connector_secrets=tuple(older),
        console_url=settings.base_url.rstrip("/"),
        shutdown_grace_s=settings.shutdown_grace_s,
    )


def mcp(args: argparse.Namespace) -> None:
    from infra.telemetry import setup_metrics, setup_tracing
    from toolserver.app import running

    settings = Settings()
    # the tool server imports no infra: its process's tracer and meter are installed here
    setup_tracing(settings.otel_service_name)
    setup_metrics(
        settings.otel_service_name,
        scrape_port=settings.metrics_port,
        scrape_host=settings.metrics_host,
    )

    async def main() -> None:
        async with running(toolserver_config(settings)) as server:
            log.info("MCP server on %s (pid %d)", settings.mcp_url, os.getpid())
            await _until_signalled()
            await _drain(server.draining, settings)

    asyncio.run(main())


def worker(args: argparse.Namespace) -> None:
    from workers.main import run_worker

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_worker(Settings()))


def migrate_cmd(args: argparse.Namespace) -> None:
    from infra.db import migrate

    applied = asyncio.run(migrate(Settings().database_url))
    print("applied: " + (", ".join(applied) if applied else "nothing (up to date)"))


def admin(args: argparse.Namespace) -> None:
    from infra.temporal import connect
    from workers.admin import issue_bootstrap_voucher
    from workers.main import ensure_signing_key

    settings = Settings()

    async def main() -> None:
        client = await connect(settings, tracing=False)
        if args.action == "voucher":
            voucher = await issue_bootstrap_voucher(client, settings)
            print(voucher.code)
        else:
            print(await ensure_signing_key(client, settings, rotate=True))

    asyncio.run(main())


def openapi(args: argparse.Namespace) -> None:
    import api.app  # noqa: F401  (registers every route)
    from api.openapi import build_openapi

    json.dump(build_openapi(Settings().base_url), sys.stdout, indent=2)
    sys.stdout.write("\n")


def main(argv: list[str] | None = None) -> None:
    from infra.logs import setup_logging

    setup_logging(Settings().log_format, os.environ.get("LOG_LEVEL", "INFO"))
    parser = argparse.ArgumentParser(prog="cairn", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    dev_parser = commands.add_parser("dev", help="run the whole service on the embedded stack")
    dev_parser.add_argument("--ui-port", type=int, default=8233)
    dev_parser.add_argument("--s3-port", type=int, default=9000)
    dev_parser.set_defaults(run=dev)
    api_parser = commands.add_parser("api", help="serve the REST API")
    api_parser.add_argument(
        "--processes", type=int, default=0, help="processes (default: SERVICE_API_PROCESSES, 1)"
    )
    api_parser.set_defaults(run=api)
    commands.add_parser("worker", help="run a Temporal worker").set_defaults(run=worker)
    commands.add_parser("mcp", help="serve the tool-protocol (MCP) server").set_defaults(run=mcp)
    commands.add_parser("migrate", help="apply database migrations").set_defaults(run=migrate_cmd)
    admin_parser = commands.add_parser("admin", help="operator actions")
    admin_parser.add_argument("action", choices=["voucher", "rotate-signing-key"])
    admin_parser.set_defaults(run=admin)
    commands.add_parser("openapi", help="print the OpenAPI document").set_defaults(run=openapi)
    agent_commands.register(commands)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
