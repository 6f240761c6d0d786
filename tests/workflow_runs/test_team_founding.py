"""The team founding workflow on the time-skipping server with the real activities (Postgres):
the 24 h wait of SPEC 3.2 both ways (archived without every acceptance, active as soon as the
last member accepts, long before the timer), the creator's own acceptance required like every
founding member's, and acceptance validation."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from histories import keep
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from infra.db import create_pool
from infra.temporal import problem_from_failure
from schemas import limits
from schemas.kernel.keyring import SecretKeyring
from schemas.teams import (
    FOUNDING_ACCEPT_EVENT,
    FOUNDING_SEEDED,
    FoundingAccept,
    FoundingAccepted,
    FoundingState,
    Seat,
    TeamCreate,
)
from workers.interceptors import DomainErrorInterceptor
from workers.registry import WORKFLOWS, ActivityDeps, activities
from workflows.teams import TeamFoundingWorkflow, team_founding_workflow_id

SECRET = b"workflow-test-secret-0123456789abcdef"


@pytest.fixture(scope="module")
async def worker(
    time_skipping_env: WorkflowEnvironment, database_url: str
) -> AsyncIterator[tuple[str, Any]]:
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


async def new_agent(pool: Any) -> uuid.UUID:
    agent_id = uuid.uuid4()
    fp = "-".join(secrets.token_hex(2).upper() for _ in range(4))
    await pool.execute(
        "INSERT INTO agents (id, public_key, fingerprint) VALUES ($1, $2, $3)",
        agent_id,
        f"ed25519:{secrets.token_hex(16)}",
        fp,
    )
    return agent_id


async def start_founding(
    env: WorkflowEnvironment, queue: str, pool: Any, members: int
) -> tuple[WorkflowHandle[Any, FoundingState], TeamCreate]:
    team_id = uuid.uuid4()
    creator = Seat(subject_id=await new_agent(pool), subject_ns="Agent", role="owner")
    others = [
        Seat(subject_id=await new_agent(pool), subject_ns="Agent", role=role)
        for role in ("owner", "member")[:members]
    ]
    inp = TeamCreate(
        team_id=team_id,
        name="founders",
        creator=creator,
        seats=[creator, *others],
        workflow_id=team_founding_workflow_id(team_id),
    )
    handle = await env.client.start_workflow(
        TeamFoundingWorkflow.run, inp, id=inp.workflow_id or "", task_queue=queue
    )
    seeded = await handle.execute_update(FOUNDING_SEEDED, result_type=FoundingState)
    assert seeded.status == "founding"
    return handle, inp


async def accept(handle: WorkflowHandle[Any, Any], subject_id: uuid.UUID) -> FoundingAccepted:
    result: FoundingAccepted = await handle.execute_update(
        FOUNDING_ACCEPT_EVENT, FoundingAccept(subject_id=subject_id), result_type=FoundingAccepted
    )
    return result


async def run_time(handle: WorkflowHandle[Any, Any]) -> timedelta:
    """Workflow time from start to completion, from the history (the server's skipped clock)."""
    events = (await handle.fetch_history()).events
    return events[-1].event_time.ToDatetime() - events[0].event_time.ToDatetime()


async def team_state(pool: Any, inp: TeamCreate) -> tuple[str, set[str], dict[uuid.UUID, str]]:
    status = await pool.fetchval("SELECT status FROM teams WHERE id = $1", inp.team_id)
    rows = await pool.fetch(
        "SELECT relation, subject_id FROM relation_tuples WHERE namespace = 'Team'"
        " AND object_id = $1",
        str(inp.team_id),
    )
    seats = await pool.fetch(
        "SELECT subject_id, status FROM founding_acceptances WHERE team_id = $1", inp.team_id
    )
    return (
        status,
        {f"{r['relation']}@{r['subject_id']}" for r in rows},
        {r["subject_id"]: r["status"] for r in seats},
    )


async def test_founding_without_every_acceptance_is_archived_after_24_hours(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, Any]
) -> None:
    queue, pool = worker
    handle, inp = await start_founding(time_skipping_env, queue, pool, members=2)
    creator, cofounder, member = inp.seats
    assert await accept(handle, cofounder.subject_id) == FoundingAccepted(
        accepted=True, teamStatus="founding"
    )
    assert (await accept(handle, creator.subject_id)).teamStatus == "founding"
    result = await handle.result()  # the server skips the day
    assert result.status == "archived"
    assert limits.TEAM_FOUNDING_WAIT <= await run_time(handle) < limits.TEAM_FOUNDING_WAIT * 1.01
    status, tuples, seats = await team_state(pool, inp)
    assert status == "archived" and tuples == set()
    assert seats == {
        creator.subject_id: "accepted",
        cofounder.subject_id: "accepted",
        member.subject_id: "pending",
    }
    await keep(handle, "team_founding_archived")


async def test_founding_is_active_as_soon_as_the_last_member_accepts(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, Any]
) -> None:
    queue, pool = worker
    handle, inp = await start_founding(time_skipping_env, queue, pool, members=2)
    creator, cofounder, member = inp.seats
    assert (await accept(handle, member.subject_id)).teamStatus == "founding"
    assert (await accept(handle, member.subject_id)).teamStatus == "founding"  # idempotent
    assert (await accept(handle, creator.subject_id)).teamStatus == "founding"
    assert await accept(handle, cofounder.subject_id) == FoundingAccepted(
        accepted=True, teamStatus="active"
    )
    assert (await handle.result()).status == "active"
    assert await run_time(handle) < timedelta(hours=1)
    status, tuples, seats = await team_state(pool, inp)
    assert status == "active"
    assert tuples == {
        f"owners@{creator.subject_id}",
        f"owners@{cofounder.subject_id}",
        f"members@{member.subject_id}",
    }
    assert set(seats.values()) == {"accepted"}
    await keep(handle, "team_founding_creator_accepts")


async def test_the_creator_is_seeded_pending_and_its_acceptance_is_required(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, Any]
) -> None:
    """SPEC 3.2: rows are seeded for the creator too; every other founder's acceptance alone
    leaves the team founding, and the creator's own acceptance is the last one needed."""
    queue, pool = worker
    handle, inp = await start_founding(time_skipping_env, queue, pool, members=2)
    creator, cofounder, member = inp.seats
    _, _, seats = await team_state(pool, inp)
    assert seats == {seat.subject_id: "pending" for seat in inp.seats}
    for founder in (cofounder, member):
        assert (await accept(handle, founder.subject_id)).teamStatus == "founding"
    status, tuples, seats = await team_state(pool, inp)
    assert status == "founding" and tuples == set() and seats[creator.subject_id] == "pending"
    assert await accept(handle, creator.subject_id) == FoundingAccepted(
        accepted=True, teamStatus="active"
    )
    assert (await handle.result()).status == "active"
    status, _, seats = await team_state(pool, inp)
    assert status == "active" and seats[creator.subject_id] == "accepted"


async def test_only_founding_members_may_accept(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, Any]
) -> None:
    queue, pool = worker
    handle, inp = await start_founding(time_skipping_env, queue, pool, members=1)
    with pytest.raises(WorkflowUpdateFailedError) as rejected:
        await accept(handle, uuid.uuid4())
    problem = problem_from_failure(rejected.value)
    assert problem is not None and problem.status == 404
    for seat in inp.seats:
        await accept(handle, seat.subject_id)
    assert (await handle.result()).status == "active"


async def test_seeding_with_an_unknown_member_fails_and_writes_nothing(
    time_skipping_env: WorkflowEnvironment, worker: tuple[str, Any]
) -> None:
    queue, pool = worker
    team_id = uuid.uuid4()
    creator = Seat(subject_id=await new_agent(pool), subject_ns="Agent", role="owner")
    ghost = Seat(subject_id=uuid.uuid4(), subject_ns="Human", role="owner")
    inp = TeamCreate(
        team_id=team_id, name="ghosts", creator=creator, seats=[creator, ghost], workflow_id="w"
    )
    handle = await time_skipping_env.client.start_workflow(
        TeamFoundingWorkflow.run, inp, id=team_founding_workflow_id(team_id), task_queue=queue
    )
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await handle.execute_update(FOUNDING_SEEDED, result_type=FoundingState)
    problem = problem_from_failure(failed.value)
    assert problem is not None and problem.instance_code == "unknown-subject"
    assert await pool.fetchval("SELECT count(*) FROM teams WHERE id = $1", team_id) == 0
