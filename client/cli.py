"""The agent's commands of `cairn` (the operator's commands live in `cairn.py`).

cairn daemon --team <id> [--profile <id>] [--config FILE] [--slots N] [--once]
             [--task-types a,b] -- CMD ARGS…
cairn whoami
cairn keys | tasks | entries | sign       (client/commands.py)

The API address comes from `--base-url`, `SERVICE_API_URL` or the config's `base_url`
(default http://127.0.0.1:8000). The daemon's config file is TOML; every key is optional and a
command-line flag wins over it: `base_url`, `team_id`, `agent_key_ref`, `signing_key_ref`,
`command` (list), `task_types` (list), `slots`, `lease_ttl_sec`, `poll_max_sec`, `grace_sec`,
`byte_limit`, `runtime_profile_id`. The runtime profile also comes from `SERVICE_RUNTIME_PROFILE_ID`
(the flag wins, then the environment, then the config).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from uuid import UUID

from client import commands as agent_commands
from client.config import API_URL_ENV, DEFAULT_API_URL, api_url, load_config, refuse
from client.credentials import (
    cli_credential,
    daemon_agent_key,
    require_safe_transport,
    signing_key,
)
from client.daemon import Daemon, DaemonConfig, DaemonRefused
from client.rest import ApiError, CairnClient
from client.secrets import SecretError, SecretSource
from schemas import limits
from schemas.identity import Whoami

log = logging.getLogger("cairn.client")
RUNTIME_PROFILE_ENV = "SERVICE_RUNTIME_PROFILE_ID"


def register(commands: Any) -> None:
    """Add the agent's subcommands to the `cairn` parser."""
    daemon = commands.add_parser("daemon", help="claim a team's tasks and run an executor for each")
    _common(daemon)
    daemon.add_argument("--team", help="the team whose queue to poll (uuid)")
    daemon.add_argument("--slots", type=int, help="tasks run at once (default 1)")
    daemon.add_argument("--once", action="store_true", help="run one task, then exit")
    daemon.add_argument("--task-types", help="comma-separated task types to serve (default all)")
    daemon.add_argument("--lease-ttl-sec", type=int, help="claim lease (default 300)")
    daemon.add_argument("--runtime-id", help="this daemon's stable id (default cairn-daemon@host)")
    daemon.add_argument(
        "--profile",
        help=f"claim under this runtime profile of the team (uuid; or ${RUNTIME_PROFILE_ENV})",
    )
    daemon.add_argument("executor", nargs="*", help="the executor command (after --)")
    daemon.set_defaults(run=run_daemon)
    whoami = commands.add_parser("whoami", help="who the API takes this credential for")
    _common(whoami)
    whoami.add_argument("--agent-key-ref", help="an agent key reference (env:NAME, file:path)")
    whoami.add_argument("--team", type=UUID, help="send x-service-team-id (a team key needs it)")
    whoami.set_defaults(run=run_whoami)
    agent_commands.register(commands, _common)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help=f"the API (default ${API_URL_ENV}, {DEFAULT_API_URL})")
    parser.add_argument("--config", type=Path, help="a TOML config file")


def daemon_config(
    args: argparse.Namespace, config: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> DaemonConfig:
    team = args.team or config.get("team_id")
    command = args.executor or config.get("command")
    if not team or not command:
        raise DaemonRefused("The daemon needs --team and an executor command (after --)")
    task_types = args.task_types.split(",") if args.task_types else config.get("task_types", [])
    return DaemonConfig(
        team_id=UUID(str(team)),
        command=[str(part) for part in command],
        task_types=tuple(t.strip() for t in task_types if t.strip()),
        slots=args.slots or int(config.get("slots", 1)),
        once=bool(args.once),
        lease_ttl_sec=args.lease_ttl_sec
        or int(config.get("lease_ttl_sec", limits.TASK_LEASE_DEFAULT_SEC)),
        poll_max_sec=float(config.get("poll_max_sec", 30.0)),
        grace_sec=float(config.get("grace_sec", 10.0)),
        byte_limit=int(config.get("byte_limit", limits.DAEMON_LOCAL_BYTE_LIMIT)),
        workdir=Path(str(config.get("workdir") or tempfile.gettempdir())),
        **({"runtime_id": rid} if (rid := args.runtime_id or config.get("runtime_id")) else {}),
        runtime_profile_id=_profile_id(args, config, environ or {}),
    )


def _profile_id(
    args: argparse.Namespace, config: Mapping[str, Any], environ: Mapping[str, str]
) -> UUID | None:
    value = (
        getattr(args, "profile", None)
        or environ.get(RUNTIME_PROFILE_ENV)
        or config.get("runtime_profile_id")
    )
    if not value:
        return None
    try:
        return UUID(str(value).strip())
    except ValueError:
        raise DaemonRefused(f"The runtime profile must be a uuid, not {value!r}") from None


def run_daemon(args: argparse.Namespace) -> None:
    source = SecretSource.from_environment()
    try:
        config = load_config(args.config)
        key = daemon_agent_key(source, config)
        base_url = api_url(args, config, source)
        require_safe_transport(base_url)
        settings = daemon_config(args, config, source.environ)
        private_key = signing_key(source, config)
    except (SecretError, DaemonRefused, ValueError) as exc:
        refuse(exc)
    if private_key is None:
        log.warning("no SERVICE_SIGNING_KEY_REF: outputs are completed unsigned")

    async def main() -> int:
        async with CairnClient(base_url, bearer=key) as api:
            daemon = Daemon(api, settings, signing_key=private_key)
            await daemon.run()
            return daemon.completed

    try:
        completed = asyncio.run(main())
    except DaemonRefused as exc:
        refuse(exc)
    log.info("daemon stopped after %d completed task(s)", completed)


def run_whoami(args: argparse.Namespace) -> None:
    source = SecretSource.from_environment()
    try:
        config = load_config(args.config)
        credential = cli_credential(source, explicit_key_ref=args.agent_key_ref, config=config)
        base_url = api_url(args, config, source)
        if credential.agent_key is not None:
            require_safe_transport(base_url)
    except (SecretError, ValueError) as exc:
        refuse(exc)

    async def main() -> dict[str, Any]:
        async with CairnClient(
            base_url, credentials=credential.client, bearer=credential.agent_key
        ) as api:
            me = Whoami.model_validate(await api.request("GET", "/agents/whoami", team=args.team))
            return me.model_dump(mode="json", exclude_none=True)

    try:
        print(json.dumps(asyncio.run(main()), indent=2))
    except ApiError as exc:  # the selected credential failed: terminal, no fall-through
        refuse(exc)
