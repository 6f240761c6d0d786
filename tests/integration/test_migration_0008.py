"""Migration 0008 on a database that holds rows from before it: an agent's OAuth2 client gains
`proof` naming the voucher its agent redeemed (SPEC 2.3), a client with no redeemed voucher
behind it is left alone, and every existing task message gets its own `id` (SPEC 2.6)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from migration_support import database_before

from infra.db import migrate
from infra.devstack import Postgres

PROOF_MIGRATION = 8


@pytest.fixture
async def before_0008(postgres: Postgres) -> AsyncIterator[str]:
    """A database migrated up to, not including, 0008 (the way a deployed one was)."""
    name, dsn = await database_before(postgres, PROOF_MIGRATION)
    yield dsn
    postgres.drop_database(name)


async def registered_agent(conn: asyncpg.Connection, *, voucher: bool) -> tuple[str, uuid.UUID]:
    """Rows as registration left them before 0008: a client whose metadata has no `proof`."""
    identity, agent, client_id = uuid.uuid4(), uuid.uuid4(), f"client-{uuid.uuid4().hex[:8]}"
    await conn.execute(
        "INSERT INTO identities (id, schema_id, traits, password_hash)"
        " VALUES ($1, 'agent', '{}', 'x')",
        identity,
    )
    await conn.execute(
        "INSERT INTO agents (id, identity_id, public_key, fingerprint) VALUES ($1, $2, $3, $4)",
        agent,
        identity,
        f"ed25519:{agent.hex}",
        agent.hex[:19],
    )
    voucher_id = uuid.uuid4()
    if voucher:
        await conn.execute(
            "INSERT INTO agent_vouchers (id, code, expires_at, redeemed_by, redeemed_at)"
            " VALUES ($1, $2, now() + interval '1 day', $3, now())",
            voucher_id,
            (voucher_id.hex * 2)[:64],
            agent,
        )
    metadata = (
        f'{{"agent_id": "{agent}", "identity_id": "{identity}", "fingerprint": "f",'
        ' "public_key": "k"}'
    )
    await conn.execute(
        "INSERT INTO oauth_clients (client_id, identity_id, secret_hash, scope, metadata)"
        " VALUES ($1, $2, 'h', 'diary:read', $3::jsonb)",
        client_id,
        identity,
        metadata,
    )
    return client_id, voucher_id


async def messages_of_a_task(conn: asyncpg.Connection) -> uuid.UUID:
    owner, team, diary, task, attempt = (uuid.uuid4() for _ in range(5))
    await conn.execute(
        "INSERT INTO teams (id, name, personal, created_by, created_by_ns, status)"
        " VALUES ($1, 'crew', false, $2, 'Agent', 'active')",
        team,
        owner,
    )
    await conn.execute(
        "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
        " VALUES ($1, $2, $3, 'notes', 'private')",
        diary,
        owner,
        team,
    )
    await conn.execute(
        "INSERT INTO tasks (id, team_id, diary_id, task_type, input, input_cid, input_schema_cid,"
        " output_kind, dispatch_timeout_sec, running_timeout_sec, proposed_by_agent_id,"
        " workflow_id) VALUES ($1, $2, $3, 'freeform', '{}', 'b', 'b', 'artifact', 300, 7200,"
        " $4, $5)",
        task,
        team,
        diary,
        owner,
        f"task/{task}",
    )
    await conn.execute(
        "INSERT INTO task_attempts (id, task_id, attempt_n, workflow_id, lease_id,"
        " claimed_by_agent_id, status, lease_ttl_sec) VALUES ($1, $2, 1, $3, $4, $5,"
        " 'running', 300)",
        attempt,
        task,
        f"task/{task}",
        uuid.uuid4(),
        owner,
    )
    for seq in (1, 2, 3):
        await conn.execute(
            "INSERT INTO task_messages (attempt_id, seq, kind, payload)"
            " VALUES ($1, $2, 'log', '\"x\"')",
            attempt,
            seq,
        )
    return attempt


async def test_0008_gives_old_clients_their_proof_and_old_messages_an_id(before_0008: str) -> None:
    conn = await asyncpg.connect(before_0008)
    try:
        with_voucher, voucher_id = await registered_agent(conn, voucher=True)
        without_voucher, _ = await registered_agent(conn, voucher=False)
        attempt = await messages_of_a_task(conn)
        columns = await conn.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'task_messages'"
        )
        assert "id" not in {c["column_name"] for c in columns}

        applied = await migrate(before_0008)
        assert applied[0] == "0008_proof_message_ids"

        metadata = await conn.fetchval(
            "SELECT metadata::text FROM oauth_clients WHERE client_id = $1", with_voucher
        )
        assert json.loads(metadata)["proof"] == {"kind": "voucher", "voucherId": str(voucher_id)}
        untouched = await conn.fetchval(
            "SELECT metadata::text FROM oauth_clients WHERE client_id = $1", without_voucher
        )
        assert "proof" not in json.loads(untouched)

        ids = await conn.fetch(
            "SELECT id FROM task_messages WHERE attempt_id = $1 ORDER BY seq", attempt
        )
        assert len({row["id"] for row in ids}) == 3 and all(row["id"] for row in ids)
    finally:
        await conn.close()
