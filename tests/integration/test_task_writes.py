"""The attempt workflow's writes (`infra.repos.tasks.TaskRepo`), one statement each while a
request waits on them: the task's insert with its tuples (it was five round trips: begin, diary
lock, row, tuples, commit), and every transition, a claim with the claimant tuple it grants
and a result with the tuple it revokes (they were four: begin, projection, tuple, commit)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from infra.repos.tasks import TaskRepo
from schemas.errors import TaskOwnerGone
from schemas.task_attempts import AttemptState, TaskProjection, TaskState
from schemas.tasks import TaskStart

NOW = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)
LEASE = timedelta(seconds=300)


async def new_task(db_pool: Any) -> TaskStart:
    """A task of a fresh team and diary, not inserted yet."""
    owner, team_id, diary_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await db_pool.execute(
        "INSERT INTO teams (id, name, personal, created_by, created_by_ns, status)"
        " VALUES ($1, 'crew', false, $2, 'Agent', 'active')",
        team_id,
        owner,
    )
    await db_pool.execute(
        "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
        " VALUES ($1, $2, $3, 'provenance', 'private')",
        diary_id,
        owner,
        team_id,
    )
    return TaskStart(
        task_id=uuid.uuid4(),
        team_id=team_id,
        diary_id=diary_id,
        task_type="freeform",
        input={"brief": "project me"},
        input_cid="bafyinput",
        input_schema_cid="bafyschema",
        output_kind="artifact",
        proposed_by_agent_id=owner,
    )


@pytest.fixture
async def queued(db_pool: Any) -> TaskStart:
    """A queued task of a fresh team and diary, inserted as the workflow inserts it."""
    start = await new_task(db_pool)
    assert await TaskRepo(db_pool).insert(start)
    return start


async def task_tuples(db_pool: Any, task_id: uuid.UUID) -> set[str]:
    rows = await db_pool.fetch(
        "SELECT relation, subject_ns, subject_id FROM relation_tuples"
        " WHERE namespace = 'Task' AND object_id = $1",
        str(task_id),
    )
    return {f"{r['relation']}@{r['subject_ns']}:{r['subject_id']}" for r in rows}


async def test_an_insert_is_one_statement_and_once(db_pool: Any) -> None:
    start = await new_task(db_pool)
    before = db_pool.tally.sent
    assert await TaskRepo(db_pool).insert(start) is True
    assert db_pool.tally.sent - before == 1
    assert await task_tuples(db_pool, start.task_id) == {
        f"team@Team:{start.team_id}",
        f"parent@Diary:{start.diary_id}",
    }
    status = await db_pool.fetchval("SELECT status FROM tasks WHERE id = $1", start.task_id)
    assert status == "queued"

    # the workflow's retry after a committed insert finds the row: nothing written again
    assert await TaskRepo(db_pool).insert(start) is False
    count = await db_pool.fetchval("SELECT count(*) FROM tasks WHERE id = $1", start.task_id)
    assert count == 1


async def test_an_insert_after_its_diary_is_gone_writes_nothing(db_pool: Any) -> None:
    start = await new_task(db_pool)
    await db_pool.execute("DELETE FROM diaries WHERE id = $1", start.diary_id)
    with pytest.raises(TaskOwnerGone):
        await TaskRepo(db_pool).insert(start)
    assert await db_pool.fetchval("SELECT count(*) FROM tasks WHERE id = $1", start.task_id) == 0
    assert await task_tuples(db_pool, start.task_id) == set()


async def claimants(db_pool: Any, task_id: uuid.UUID) -> set[str]:
    rows = await db_pool.fetch(
        "SELECT subject_id FROM relation_tuples"
        " WHERE namespace = 'Task' AND object_id = $1 AND relation = 'claimant'"
        " AND subject_ns = 'Agent' AND subject_relation = ''",
        str(task_id),
    )
    return {row["subject_id"] for row in rows}


def claim_by(task: TaskStart, agent: uuid.UUID) -> TaskProjection:
    """The projection of attempt 1's claim by `agent`, as the workflow sends it."""
    attempt = AttemptState(
        attempt_id=uuid.uuid4(),
        attempt_n=1,
        agent_id=agent,
        lease_id=uuid.uuid4(),
        status="claimed",
        lease_ttl_sec=300,
        claimed_at=NOW,
        claim_expires_at=NOW + LEASE,
        traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01",
    )
    claimed = TaskState(
        status="dispatched", attempt_count=1, claim_agent_id=agent, claim_expires_at=NOW + LEASE
    )
    return TaskProjection(task_id=task.task_id, task=claimed, attempt=attempt, grant_claimant=agent)


async def statements(db_pool: Any, projection: TaskProjection) -> int:
    """How many statements the projection sent (`infra.db.StatementTally`)."""
    before = db_pool.tally.sent
    await TaskRepo(db_pool).project(projection)
    return int(db_pool.tally.sent - before)


async def test_a_claim_and_its_result_are_one_statement_each(
    db_pool: Any, queued: TaskStart
) -> None:
    agent = uuid.uuid4()
    claim = claim_by(queued, agent)
    attempt = claim.attempt
    assert attempt is not None
    assert await statements(db_pool, claim) == 1
    assert await claimants(db_pool, queued.task_id) == {str(agent)}
    row = await db_pool.fetchrow(
        "SELECT t.status, t.claim_agent_id, a.status AS attempt_status"
        " FROM tasks t JOIN task_attempts a ON a.task_id = t.id WHERE t.id = $1",
        queued.task_id,
    )
    assert (row["status"], row["claim_agent_id"], row["attempt_status"]) == (
        "dispatched",
        agent,
        "claimed",
    )

    # a retried claim projection (the workflow retries until it lands) changes nothing
    assert await statements(db_pool, claim) == 1
    assert await claimants(db_pool, queued.task_id) == {str(agent)}

    done = attempt.model_copy(
        update={
            "status": "completed",
            "started_at": NOW,
            "last_heartbeat_at": NOW,
            "finished_at": NOW + timedelta(seconds=5),
            "output": {"ok": True},
            "output_cid": "bafyoutput",
        }
    )
    completed = TaskState(status="completed", attempt_count=1, completed_at=done.finished_at)
    result = TaskProjection(
        task_id=queued.task_id, task=completed, attempt=done, revoke_claimant=agent
    )
    assert await statements(db_pool, result) == 1
    assert await claimants(db_pool, queued.task_id) == set()
    row = await db_pool.fetchrow(
        "SELECT t.status, t.claim_agent_id, a.status AS attempt_status, a.output_cid"
        " FROM tasks t JOIN task_attempts a ON a.task_id = t.id WHERE t.id = $1",
        queued.task_id,
    )
    assert dict(row) == {
        "status": "completed",
        "claim_agent_id": None,
        "attempt_status": "completed",
        "output_cid": "bafyoutput",
    }
    # and so does a retried result
    assert await statements(db_pool, result) == 1
    assert await claimants(db_pool, queued.task_id) == set()


async def test_a_claim_grants_only_its_own_tuple(db_pool: Any, queued: TaskStart) -> None:
    """The other tuples of the task (its team, its provenance diary) stay as they were, through
    a claim and through the end of its attempt."""
    before = await db_pool.fetch(
        "SELECT relation, subject_ns, subject_id FROM relation_tuples"
        " WHERE namespace = 'Task' AND object_id = $1 ORDER BY relation",
        str(queued.task_id),
    )
    agent = uuid.uuid4()
    claim = claim_by(queued, agent)
    attempt = claim.attempt
    assert attempt is not None
    await TaskRepo(db_pool).project(claim)
    timed_out = attempt.model_copy(update={"status": "timed_out", "finished_at": NOW + LEASE})
    await TaskRepo(db_pool).project(
        TaskProjection(
            task_id=queued.task_id,
            task=TaskState(status="queued", attempt_count=1),
            attempt=timed_out,
            revoke_claimant=agent,
        )
    )
    after = await db_pool.fetch(
        "SELECT relation, subject_ns, subject_id FROM relation_tuples"
        " WHERE namespace = 'Task' AND object_id = $1 ORDER BY relation",
        str(queued.task_id),
    )
    assert [tuple(r) for r in after] == [tuple(r) for r in before]
    assert {r["relation"] for r in before} == {"team", "parent"}
