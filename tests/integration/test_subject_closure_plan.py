"""A lookup's walk (`subject_closure`, infra/sql/tuples.sql) reads relation_tuples by index
probes, whatever the table holds beside the caller's tuples. Each entry's parent tuple lives
there too: at a million entries the planner hashed the whole table twice for a caller of one
team (bench/scale.py: 490 ms for every `GET /diaries` and team search, 0.6 ms as probes).

The test loads 200 000 entry parent tuples and ANALYZEs them inside a transaction it rolls
back, then reads the plan the statement gets for an agent of one team: no sequential scan of
relation_tuples anywhere in it, and the same closure as without the load."""

from __future__ import annotations

import json
import uuid
from typing import Any

from infra.db import Q
from infra.permissions import PostgresPermissionEngine
from schemas.kernel.permissions import PERMISSION_MODEL

ENTRY_TUPLES = 200_000
DIARIES = 200


def _lookup_args(engine: PostgresPermissionEngine, agent: str) -> tuple[Any, ...]:
    """The parameters `PostgresPermissionEngine.lookup(Diary, read)` sends for `agent`."""
    arrows = sorted(PERMISSION_MODEL.arrows_of("Diary", "read"))
    steps = PERMISSION_MODEL.follow_steps()
    return (
        "Agent", agent, "", engine._max_depth + 1,
        [ns for ns, _ in arrows], [via for _, via in arrows], None, steps + 1,
    )  # fmt: skip


def _scans(plan: Any) -> list[tuple[str, str | None]]:
    """Every (node type, relation) of an EXPLAIN (FORMAT JSON) plan."""
    found = [(plan["Node Type"], plan.get("Relation Name"))]
    for child in plan.get("Plans", ()):
        found.extend(_scans(child))
    return found


async def test_a_lookup_probes_the_tuples_at_any_table_size(db_pool: Any) -> None:
    agent, team = str(uuid.uuid4()), str(uuid.uuid4())
    diaries = [str(uuid.uuid4()) for _ in range(DIARIES)]
    engine = PostgresPermissionEngine(db_pool)
    args = _lookup_args(engine, agent)
    async with db_pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            await conn.executemany(
                "INSERT INTO relation_tuples (namespace, object_id, relation, subject_ns,"
                " subject_id) VALUES ($1, $2, $3, $4, $5)",
                [("Team", team, "managers", "Agent", agent)]
                + [("Diary", diary, "team", "Team", team) for diary in diaries[:20]],
            )
            before = sorted(tuple(row) for row in await conn.fetch(Q.subject_closure, *args))
            await conn.copy_records_to_table(
                "relation_tuples",
                records=[
                    ("DiaryEntry", str(uuid.uuid4()), "parent", "Diary", diaries[n % DIARIES])
                    for n in range(ENTRY_TUPLES)
                ],
                columns=["namespace", "object_id", "relation", "subject_ns", "subject_id"],
            )
            await conn.execute("ANALYZE relation_tuples")
            explained = await conn.fetchval("EXPLAIN (FORMAT JSON) " + Q.subject_closure, *args)
            if isinstance(explained, str):  # without the pool's json codec
                explained = json.loads(explained)
            plan = explained[0]["Plan"]
            after = sorted(tuple(row) for row in await conn.fetch(Q.subject_closure, *args))
        finally:
            await tx.rollback()
    assert ("Seq Scan", "relation_tuples") not in _scans(plan)
    assert after == before
    assert sum(1 for row in after if row[0] == "related") == 20  # the team's diaries
