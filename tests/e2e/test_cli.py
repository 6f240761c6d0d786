"""The agent's `cairn` commands as a person runs them: the real command in a subprocess against
the real stack, with OAuth2 client credentials or an agent key from the environment."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from actors import Actor
from fixtures.peer_files import LETTA


async def cairn(env: dict[str, str], *args: str, expect: int = 0) -> tuple[Any, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cairn",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == expect, (args, out.decode(), err.decode())
    text = out.decode()
    return (json.loads(text) if "--json" in args and expect == 0 else text), err.decode()


def environment(stack: Any, agent: Actor, root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(
        SERVICE_API_URL=stack.base_url,
        SERVICE_CLIENT_ID=agent.client_id,
        SERVICE_CLIENT_SECRET=agent.client_secret,
        SERVICE_SECRET_ROOT=str(root),
        **extra,
    )
    return env


@pytest.fixture(scope="module")
async def agent(actors: Any) -> Actor:
    return await actors.agent()


@pytest.fixture(scope="module")
async def team(agent: Actor) -> tuple[str, str]:
    status, body = await agent.call("POST", "/teams", json={"name": "cli"})
    assert status == 201, body
    status, diary = await agent.call(
        "POST", "/diaries", json={"name": "notes", "visibility": "private"}, team=body["id"]
    )
    assert status == 201, diary
    return str(body["id"]), str(diary["id"])


@pytest.fixture
def root(tmp_path: Path, agent: Actor) -> Path:
    folder = tmp_path / "secrets"
    folder.mkdir(mode=0o700)
    assert agent.signing_key is not None
    seed = folder / "agent.seed"
    seed.write_text(base64.b64encode(bytes(agent.signing_key)).decode() + "\n")
    seed.chmod(0o600)
    return folder


async def test_whoami_with_oauth_client_credentials(stack: Any, agent: Actor, root: Path) -> None:
    me, _ = await cairn(environment(stack, agent, root), "whoami")
    assert me  # pretty JSON on stdout
    body = json.loads(me)
    assert body["agentId"] == str(agent.subject_id)
    assert "credentialBinding" not in body


async def test_keys_create_list_rotate_revoke(
    stack: Any, agent: Actor, team: tuple[str, str], root: Path
) -> None:
    env = environment(stack, agent, root)
    team_id, _ = team
    created, _ = await cairn(env, "keys", "create", "--team", team_id, "--name", "cli", "--json")
    assert created["secret"].startswith("service_ak_")
    assert created["bindingScope"] == "team" and created["teamId"] == team_id
    listed, _ = await cairn(env, "keys", "list", "--team", team_id, "--json")
    assert created["id"] in [key["id"] for key in listed["items"]]
    assert all("secret" not in key for key in listed["items"])
    table, _ = await cairn(env, "keys", "list", "--team", team_id)
    assert created["id"] in table and "bindingScope" in table.splitlines()[0]

    (root / "cli.key").write_text(created["secret"])
    (root / "cli.key").chmod(0o600)
    by_key = {**env, "SERVICE_AGENT_KEY_REF": "file:cli.key"}
    by_key.pop("SERVICE_CLIENT_ID")
    # a team key needs its team's header: without it the key is refused (and not retried)
    _, err = await cairn(by_key, "whoami", expect=2)
    assert "key-team-header-required" in err
    me, _ = await cairn(by_key, "whoami", "--team", team_id)
    assert json.loads(me)["credentialBinding"]["boundTeamId"] == team_id

    rotated, _ = await cairn(env, "keys", "rotate", created["id"], "--team", team_id, "--json")
    assert rotated["secret"] != created["secret"]
    revoked, _ = await cairn(
        env, "keys", "revoke", created["id"], "--team", team_id, "--reason", "superseded", "--json"
    )
    assert revoked["status"] == "revoked"


async def test_an_explicit_key_that_fails_does_not_fall_back_to_oauth(
    stack: Any, agent: Actor, root: Path
) -> None:
    bad_key = f"service_ak_{uuid.uuid4()}_{'x' * 43}"
    env = environment(stack, agent, root, BAD_KEY=bad_key)
    _, err = await cairn(env, "whoami", "--agent-key-ref", "env:BAD_KEY", expect=2)
    assert "401" in err
    assert bad_key not in err and "x" * 43 not in err  # the key itself is never printed


async def test_entries_create_and_search(
    stack: Any, agent: Actor, team: tuple[str, str], root: Path
) -> None:
    env = environment(stack, agent, root)
    _, diary_id = team
    entry, _ = await cairn(
        env,
        "entries",
        "create",
        "--diary",
        diary_id,
        "--content",
        "The lighthouse keeper logs the fog horn schedule every evening.",
        "--title",
        "Fog horn",
        "--tags",
        "ops,fog",
        "--json",
    )
    assert entry["title"] == "Fog horn" and sorted(entry["tags"]) == ["fog", "ops"]
    found, _ = await cairn(
        env, "entries", "search", "fog horn schedule", "--diary", diary_id, "--json"
    )
    assert entry["id"] in [result["id"] for result in found["results"]]


async def test_import_reads_a_peer_file_by_its_bytes(
    stack: Any, agent: Actor, team: tuple[str, str], root: Path
) -> None:
    env = environment(stack, agent, root)
    team_id, _ = team
    diary, _ = await cairn(env, "import", str(LETTA), "--team", team_id, "--json")
    assert diary["name"] == "support-bot" and diary["teamId"] == team_id
    found, _ = await cairn(
        env, "entries", "search", "night shift operator", "--diary", diary["id"], "--json"
    )
    assert found["results"][0]["origin"]["format"] == "letta"


async def test_tasks_create_list_get_cancel_messages_artifacts(
    stack: Any, agent: Actor, team: tuple[str, str], root: Path
) -> None:
    env = environment(stack, agent, root)
    team_id, diary_id = team
    task, _ = await cairn(
        env,
        "tasks",
        "create",
        "--team",
        team_id,
        "--diary",
        diary_id,
        "--input",
        json.dumps({"brief": "Summarise the fog log"}),
        "--title",
        "Fog",
        "--json",
    )
    assert task["status"] == "queued"
    table, _ = await cairn(env, "tasks", "list", "--team", team_id)
    assert task["id"] in table
    got, _ = await cairn(env, "tasks", "get", task["id"], "--team", team_id, "--json")
    assert got["title"] == "Fog"
    artifacts, _ = await cairn(env, "tasks", "artifacts", task["id"], "--team", team_id, "--json")
    assert artifacts["artifacts"] == []
    cancelled, _ = await cairn(
        env, "tasks", "cancel", task["id"], "--team", team_id, "--reason", "no longer", "--json"
    )
    assert cancelled["status"] == "cancelled"
    _, err = await cairn(env, "tasks", "messages", task["id"], "--team", team_id, expect=2)
    assert "404" in err or "409" in err  # no attempt 1 was ever claimed


async def test_sign_runs_the_signing_flow_with_the_local_key(
    stack: Any, agent: Actor, root: Path
) -> None:
    env = environment(stack, agent, root, SERVICE_SIGNING_KEY_REF="file:agent.seed")
    signed, _ = await cairn(env, "sign", "I wrote this", "--json")
    assert signed["status"] == "completed" and signed["valid"] is True
    assert signed["message"] == "I wrote this"
    _, err = await cairn(environment(stack, agent, root), "sign", "unsigned", expect=2)
    assert "SERVICE_SIGNING_KEY_REF" in err
