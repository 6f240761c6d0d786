"""The agent's everyday commands of `cairn`, over the typed REST client (spec 4.2, 4.4-4.6).

cairn keys create|list|rotate|revoke     agent keys (team keys with --team, else identity keys)
cairn tasks create|list|get|cancel|messages|artifacts
cairn entries create|search
cairn import FILE --team T [--name N]    a diary from a Cairn CAR, Mem0, Letta or COGX file
cairn sign MESSAGE                       the asynchronous signing flow, with the local key

Each prints a readable table, or the API's JSON with `--json`. The credential is chosen as
spec 5 says (`client/credentials.py`): `--agent-key-ref`, then OAuth2 client credentials, then
a configured key reference; a refusal of the chosen one is final.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from client.config import api_url, load_config, refuse
from client.credentials import cli_credential, require_safe_transport, signing_key
from client.rest import ApiError, CairnClient
from client.secrets import SecretError, SecretRefusal, SecretSource
from schemas.embedding import SearchRequest
from schemas.imports.formats import OCTET_STREAM
from schemas.kernel.diary_car import CAR_MEDIA_TYPE
from schemas.kernel.task_types import DEFAULT_TASK_TYPE
from schemas.memory import EntryCreateRequest
from schemas.task_api import CreateTaskRequest

Command = Callable[[CairnClient, argparse.Namespace], Awaitable[Any]]


def register(commands: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    keys = _group(commands, "keys", "agent keys: create, list, rotate, revoke")
    create = _command(keys, "create", _keys_create, common, "mint a key (the secret shows once)")
    create.add_argument("--agent", type=UUID, help="the agent (default: yourself)")
    create.add_argument("--name", required=True)
    create.add_argument("--ttl-days", type=int)
    create.add_argument("--scopes", help="comma-separated (default: the daemon's six)")
    _binding(create)
    listing = _command(keys, "list", _keys_list, common, "list keys (metadata only)")
    listing.add_argument("--agent", type=UUID)
    listing.add_argument("--status", choices=["active", "revoked", "expired"])
    _binding(listing)
    rotate = _command(keys, "rotate", _keys_rotate, common, "a new secret; the old one dies")
    rotate.add_argument("id", type=UUID)
    _binding(rotate)
    revoke = _command(keys, "revoke", _keys_revoke, common, "revoke a key now")
    revoke.add_argument("id", type=UUID)
    revoke.add_argument("--reason", required=True)
    revoke.add_argument("--description")
    _binding(revoke)

    tasks = _group(commands, "tasks", "the task queue")
    tcreate = _command(tasks, "create", _tasks_create, common, "propose a task")
    tcreate.add_argument("--team", type=UUID, required=True)
    tcreate.add_argument("--diary", type=UUID, required=True)
    tcreate.add_argument("--type", default=DEFAULT_TASK_TYPE.name, dest="task_type")
    tcreate.add_argument("--input", required=True, help="the input object as JSON")
    tcreate.add_argument("--title")
    tcreate.add_argument("--max-attempts", type=int)
    tlist = _command(tasks, "list", _tasks_list, common, "a team's tasks")
    tlist.add_argument("--team", type=UUID, required=True)
    tlist.add_argument("--status")
    tlist.add_argument("--type", dest="task_type")
    tlist.add_argument("--limit", type=int, default=20)
    for name, run, what in (
        ("get", _tasks_get, "one task"),
        ("artifacts", _tasks_artifacts, "a task's artifacts"),
    ):
        one = _command(tasks, name, run, common, what)
        one.add_argument("id", type=UUID)
        one.add_argument("--team", type=UUID)
    cancel = _command(tasks, "cancel", _tasks_cancel, common, "cancel a task")
    cancel.add_argument("id", type=UUID)
    cancel.add_argument("--team", type=UUID, required=True)
    cancel.add_argument("--reason", required=True)
    messages = _command(tasks, "messages", _tasks_messages, common, "an attempt's messages")
    messages.add_argument("id", type=UUID)
    messages.add_argument("--attempt", type=int, default=1)
    messages.add_argument("--after-seq", type=int, default=0)
    messages.add_argument("--team", type=UUID)

    entries = _group(commands, "entries", "diary entries")
    ecreate = _command(entries, "create", _entries_create, common, "write an entry")
    ecreate.add_argument("--diary", type=UUID, required=True)
    ecreate.add_argument("--content", required=True)
    ecreate.add_argument("--title")
    ecreate.add_argument("--tags", help="comma-separated")
    search = _command(entries, "search", _entries_search, common, "hybrid search")
    search.add_argument("query")
    search.add_argument("--diary", type=UUID, help="one diary (default: all you can read)")
    search.add_argument("--limit", type=int, default=10)

    imports = _command(
        commands, "import", _import, common, "a new diary from a Cairn, Mem0, Letta or COGX file"
    )
    imports.add_argument("file", type=Path, help="a .car export, Mem0 JSON, Letta .af, COGX zip")
    imports.add_argument("--team", type=UUID, required=True)
    imports.add_argument("--name", help="the new diary's name (default: the file's)")

    sign = _command(commands, "sign", _sign, common, "sign a message with your key, via the API")
    sign.add_argument("message")


def _group(commands: Any, name: str, what: str) -> Any:
    parser = commands.add_parser(name, help=what)
    return parser.add_subparsers(dest=f"{name}_command", required=True)


def _command(
    group: Any,
    name: str,
    run: Command,
    common: Callable[[argparse.ArgumentParser], None],
    what: str,
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = group.add_parser(name, help=what)
    common(parser)
    parser.add_argument("--agent-key-ref", help="an agent key reference (env:NAME, file:path)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    parser.set_defaults(run=lambda args: _run(run, args))
    return parser


def _binding(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--team", type=UUID, help="a team key (x-service-team-id)")
    where.add_argument("--identity", action="store_true", help="an identity key")


# --- running one command ---------------------------------------------------------------------


def _run(command: Command, args: argparse.Namespace) -> None:
    source = SecretSource.from_environment()
    try:
        config = load_config(args.config)
        credential = cli_credential(source, explicit_key_ref=args.agent_key_ref, config=config)
        base_url = api_url(args, config, source)
        if credential.agent_key is not None:
            require_safe_transport(base_url)
        args.signing_key = signing_key(source, config)
    except (SecretError, ValueError) as exc:
        refuse(exc)

    async def main() -> Any:
        async with CairnClient(
            base_url, credentials=credential.client, bearer=credential.agent_key
        ) as api:
            return await command(api, args)

    try:
        result = asyncio.run(main())
    except (ApiError, SecretError) as exc:  # the chosen credential failed: no fall-through
        refuse(exc)
    _print(result, as_json=args.json)


def _print(result: Any, *, as_json: bool) -> None:
    data = (
        result.model_dump(mode="json", exclude_none=True)
        if isinstance(result, BaseModel)
        else result
    )
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    rows = _rows(data)
    print(_table(rows) if rows else json.dumps(data, indent=2, ensure_ascii=False))


def _rows(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, dict):
        for key in ("items", "results", "artifacts"):
            if isinstance(data.get(key), list):
                return [row for row in data[key] if isinstance(row, dict)]
        return [data]
    return []


TABLE_COLUMNS = (
    "id",
    "name",
    "title",
    "status",
    "taskType",
    "kind",
    "seq",
    "bindingScope",
    "teamId",
    "score",
    "cid",
    "expiresAt",
    "createdAt",
    "secret",
    "valid",
)
CELL_MAX = 40


def _table(rows: Sequence[dict[str, Any]]) -> str:
    columns = [c for c in TABLE_COLUMNS if any(c in row for row in rows)] or sorted(rows[0])
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def _cell(value: Any) -> str:
    text = "" if value is None else value if isinstance(value, str) else json.dumps(value)
    # the secret is shown whole (once): it is the point of `keys create` and `keys rotate`
    return (
        text
        if len(text) <= CELL_MAX or text.startswith("service_ak_")
        else text[: CELL_MAX - 1] + "…"
    )


# --- the commands ----------------------------------------------------------------------------


def _key_params(args: argparse.Namespace) -> tuple[UUID | None, dict[str, str]]:
    return (None, {"bindingScope": "identity"}) if args.identity else (args.team, {})


async def _keys_create(api: CairnClient, args: argparse.Namespace) -> Any:
    team, _ = _key_params(args)
    agent = args.agent or (await api.whoami()).agentId
    body: dict[str, Any] = {"agentId": str(agent), "name": args.name}
    if args.ttl_days is not None:
        body["ttlDays"] = args.ttl_days
    if args.scopes:
        body["scopes"] = [s.strip() for s in args.scopes.split(",") if s.strip()]
    if args.identity:
        body["bindingScope"] = "identity"
    # a resend after a lost answer is a 409 (SPEC 4.6: the secret is never stored twice)
    return await api.request("POST", "/agent-keys", json=body, team=team, idempotent=True)


async def _keys_list(api: CairnClient, args: argparse.Namespace) -> Any:
    team, params = _key_params(args)
    params |= {k: str(v) for k, v in (("agentId", args.agent), ("status", args.status)) if v}
    return await api.request("GET", "/agent-keys", params=params, team=team)


async def _keys_rotate(api: CairnClient, args: argparse.Namespace) -> Any:
    team, params = _key_params(args)
    return await api.request("POST", f"/agent-keys/{args.id}/rotate", params=params, team=team)


async def _keys_revoke(api: CairnClient, args: argparse.Namespace) -> Any:
    team, params = _key_params(args)
    body = {"reason": args.reason} | ({"description": args.description} if args.description else {})
    return await api.request(
        "POST",
        f"/agent-keys/{args.id}/revoke",
        json=body,
        params=params,
        team=team,
        idempotent=True,
    )


async def _tasks_create(api: CairnClient, args: argparse.Namespace) -> Any:
    body: dict[str, Any] = {
        "taskType": args.task_type,
        "teamId": str(args.team),
        "diaryId": str(args.diary),
        "input": json.loads(args.input),
    }
    if args.title:
        body["title"] = args.title
    if args.max_attempts:
        body["maxAttempts"] = args.max_attempts
    return await api.create_task(CreateTaskRequest.model_validate(body))


async def _tasks_list(api: CairnClient, args: argparse.Namespace) -> Any:
    filters = {"status": args.status, "taskType": args.task_type, "limit": args.limit}
    return await api.list_tasks(args.team, **{k: v for k, v in filters.items() if v is not None})


async def _tasks_get(api: CairnClient, args: argparse.Namespace) -> Any:
    return await api.get_task(args.id, team_id=args.team)


async def _tasks_cancel(api: CairnClient, args: argparse.Namespace) -> Any:
    return await api.cancel_task(args.id, args.team, args.reason)


async def _tasks_messages(api: CairnClient, args: argparse.Namespace) -> Any:
    return await api.list_messages(
        args.id, args.attempt, team_id=args.team, after_seq=args.after_seq
    )


async def _tasks_artifacts(api: CairnClient, args: argparse.Namespace) -> Any:
    return await api.request("GET", f"/tasks/{args.id}/artifacts", team=args.team)


async def _entries_create(api: CairnClient, args: argparse.Namespace) -> Any:
    body: dict[str, Any] = {"content": args.content}
    if args.title:
        body["title"] = args.title
    if args.tags:
        body["tags"] = [t.strip() for t in args.tags.split(",") if t.strip()]
    return await api.create_entry(args.diary, EntryCreateRequest.model_validate(body))


async def _entries_search(api: CairnClient, args: argparse.Namespace) -> Any:
    body: dict[str, Any] = {"query": args.query, "limit": args.limit}
    if args.diary:
        body["diaryId"] = str(args.diary)
    return await api.search_json(SearchRequest.model_validate(body))


async def _import(api: CairnClient, args: argparse.Namespace) -> Any:
    """The server tells the format from the bytes (docs/imports.md); a `.car` file is sent as
    what it is, so no first byte of it is ever taken for another format's."""
    content_type = CAR_MEDIA_TYPE if args.file.suffix == ".car" else OCTET_STREAM
    data = await asyncio.to_thread(args.file.read_bytes)
    return await api.import_diary(args.team, data, name=args.name, content_type=content_type)


async def _sign(api: CairnClient, args: argparse.Namespace) -> Any:
    """Prepare (the API adds a nonce), sign the payload locally, submit, report the verdict."""
    if args.signing_key is None:
        raise SecretError(
            SecretRefusal.NO_CREDENTIAL, "cairn sign needs SERVICE_SIGNING_KEY_REF (your seed)"
        )
    request = await api.create_signing_request(args.message)
    signature = args.signing_key.sign(request.signing_payload.encode()).signature
    await api.submit_signature(request.request_id, base64.b64encode(signature).decode())
    return await api.get_signing_request(request.request_id)
