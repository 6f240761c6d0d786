"""The DiaryTransfer workflow on the time-skipping server with the real activities (Postgres):
seven days without a decision expire the transfer and leave the diary where it was; a decision
resolves it once, and a second or late one is refused by the update's validator."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from histories import keep
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from infra.db import create_pool
from infra.temporal import problem_from_failure
from schemas.kernel.keyring import SecretKeyring
from schemas.transfers import TransferDecision, TransferInput
from workers.interceptors import DomainErrorInterceptor
from workers.registry import WORKFLOWS, ActivityDeps, activities
from workflows.transfers import DiaryTransferWorkflow, transfer_workflow_id

SECRET = b"workflow-test-secret-0123456789abcdef"


@pytest.fixture(scope="module")
async def worker(
    time_skipping_env: WorkflowEnvironment, database_url: str
) -> AsyncIterator[tuple[str, asyncpg.Pool]]:
    pool = await create_pool(database_url, read_only=False)
    queue = f"wf-{uuid.uuid4().hex[:8]}"
    async with Worker(
        time_skipping_env.client,
        task_queue=queue,
        workflows=list(WORKFLOWS),
        activities=activities(ActivityDeps(pool, SecretKeyring((SECRET,)))),
        interceptors=[DomainErrorInterceptor()],
    ):
        yield queue, pool
    await pool.close()


async def seed(pool: asyncpg.Pool) -> TransferInput:
    """Two active teams and a diary of the first, bound to it by its Diary `team` tuple."""
    owner = uuid.uuid4()
    source, destination, diary = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    async with pool.acquire() as conn, conn.transaction():
        for team, personal in ((source, True), (destination, False)):
            await conn.execute(
                "INSERT INTO teams (id, name, personal, created_by, created_by_ns, status)"
                " VALUES ($1, 'crew', $2, $3, 'Agent', 'active')",
                team,
                personal,
                uuid.uuid4() if team == destination else owner,
            )
        await conn.execute(
            "INSERT INTO diaries (id, created_by, team_id, name, visibility)"
            " VALUES ($1, $2, $3, 'notes', 'private')",
            diary,
            owner,
            source,
        )
        await conn.execute(
            "INSERT INTO relation_tuples (namespace, object_id, relation, subject_ns, subject_id)"
            " VALUES ('Diary', $1, 'team', 'Team', $2)",
            str(diary),
            str(source),
        )
    return TransferInput(
        transfer_id=uuid.uuid4(),
        diary_id=diary,
        source_team_id=source,
        destination_team_id=destination,
        initiated_by=owner,
    )


async def start(
    env: WorkflowEnvironment, queue: str, inp: TransferInput
) -> WorkflowHandle[Any, Any]:
    return await env.client.start_workflow(
        DiaryTransferWorkflow.run, inp, id=transfer_workflow_id(inp.transfer_id), task_queue=queue
    )


async def stored(handle: WorkflowHandle[Any, Any]) -> None:
    """Wait until the pending row exists (the API's update-with-start waits the same way)."""
    record = await handle.execute_update(DiaryTransferWorkflow.stored)
    assert record.status == "pending"


async def where(pool: asyncpg.Pool, inp: TransferInput) -> tuple[Any, set[str], Any]:
    """The diary's team, its team tuples, and the transfer row."""
    team = await pool.fetchval("SELECT team_id FROM diaries WHERE id = $1", inp.diary_id)
    bindings = {
        row["subject_id"]
        for row in await pool.fetch(
            "SELECT subject_id FROM relation_tuples"
            " WHERE namespace = 'Diary' AND object_id = $1 AND relation = 'team'",
            str(inp.diary_id),
        )
    }
    row = await pool.fetchrow(
        "SELECT status, created_at, resolved_at, expires_at FROM diary_transfers WHERE id = $1",
        inp.transfer_id,
    )
    return team, bindings, row


async def test_seven_days_without_a_decision_expire_and_leave_the_diary(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, asyncpg.Pool]
) -> None:
    queue, pool = worker
    inp = await seed(pool)
    handle = await start(time_skipping_env, queue, inp)
    await stored(handle)
    before = await time_skipping_env.get_current_time()

    result = await handle.result()  # the server skips the 7-day timer

    assert result.status == "expired" and result.resolved_at is not None
    assert await time_skipping_env.get_current_time() - before >= timedelta(days=7) - timedelta(
        minutes=1
    )
    team, bindings, row = await where(pool, inp)
    assert team == inp.source_team_id and bindings == {str(inp.source_team_id)}
    assert row["status"] == "expired" and row["resolved_at"] is not None
    await keep(handle, "transfer_expired")

    # the run is over: a late decision cannot reach it, and nothing changes
    with pytest.raises(RPCError) as late:
        await handle.execute_update(
            DiaryTransferWorkflow.decide,
            TransferDecision(decision="accepted", decided_by=uuid.uuid4()),
        )
    assert late.value.status == RPCStatusCode.NOT_FOUND
    assert (await where(pool, inp))[0] == inp.source_team_id


async def test_six_days_in_an_accept_still_moves_the_diary(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, asyncpg.Pool]
) -> None:
    queue, pool = worker
    inp = await seed(pool)
    handle = await start(time_skipping_env, queue, inp)
    await stored(handle)
    await time_skipping_env.sleep(timedelta(days=6))

    record = await handle.execute_update(
        DiaryTransferWorkflow.decide,
        TransferDecision(decision="accepted", decided_by=uuid.uuid4()),
    )
    assert record.status == "accepted"
    assert (await handle.result()).status == "accepted"
    team, bindings, row = await where(pool, inp)
    assert team == inp.destination_team_id and bindings == {str(inp.destination_team_id)}
    assert row["status"] == "accepted"
    await keep(handle, "transfer_accepted")


async def test_a_second_decision_is_refused_before_anything_is_written(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, asyncpg.Pool]
) -> None:
    queue, pool = worker
    inp = await seed(pool)
    handle = await start(time_skipping_env, queue, inp)
    await stored(handle)
    rejected = await handle.execute_update(
        DiaryTransferWorkflow.decide,
        TransferDecision(decision="rejected", decided_by=uuid.uuid4()),
    )
    assert rejected.status == "rejected"
    # The run ends with its decision, so the second one usually finds it gone (the API then
    # answers 409 from the row); a run still finishing refuses it in the validator.
    with pytest.raises((WorkflowUpdateFailedError, RPCError)) as refused:
        await handle.execute_update(
            DiaryTransferWorkflow.decide,
            TransferDecision(decision="accepted", decided_by=uuid.uuid4()),
        )
    if isinstance(refused.value, RPCError):
        assert refused.value.status == RPCStatusCode.NOT_FOUND
    else:
        problem = problem_from_failure(refused.value)
        assert problem is not None and problem.instance_code == "diary-transfer-already-resolved"
    team, bindings, row = await where(pool, inp)
    assert team == inp.source_team_id and bindings == {str(inp.source_team_id)}
    assert row["status"] == "rejected"


async def test_a_refused_proposal_fails_the_run_and_stores_nothing(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, asyncpg.Pool]
) -> None:
    queue, pool = worker
    first = await seed(pool)
    handle = await start(time_skipping_env, queue, first)
    await stored(handle)
    second = first.model_copy(update={"transfer_id": uuid.uuid4()})
    other = await start(time_skipping_env, queue, second)
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await other.execute_update(DiaryTransferWorkflow.stored)
    problem = problem_from_failure(refused.value)
    assert problem is not None and problem.instance_code == "diary-transfer-pending"
    count = await pool.fetchval(
        "SELECT count(*) FROM diary_transfers WHERE id = $1", second.transfer_id
    )
    assert count == 0


async def test_an_accept_into_an_archived_team_is_refused_and_the_transfer_stays_pending(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, asyncpg.Pool]
) -> None:
    queue, pool = worker
    inp = await seed(pool)
    handle = await start(time_skipping_env, queue, inp)
    await stored(handle)
    archive = "UPDATE teams SET status = 'archived' WHERE id = $1"
    await pool.execute(archive, inp.destination_team_id)

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(
            DiaryTransferWorkflow.decide,
            TransferDecision(decision="accepted", decided_by=uuid.uuid4()),
        )
    problem = problem_from_failure(refused.value)
    assert problem is not None and problem.instance_code == "diary-transfer-team-not-active"
    team, bindings, row = await where(pool, inp)
    assert team == inp.source_team_id and bindings == {str(inp.source_team_id)}
    assert row["status"] == "pending"

    # nothing was written, so the transfer still takes a decision
    rejected = await handle.execute_update(
        DiaryTransferWorkflow.decide,
        TransferDecision(decision="rejected", decided_by=uuid.uuid4()),
    )
    assert rejected.status == "rejected"
