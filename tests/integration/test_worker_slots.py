"""The embedding queue's worker runs at most `SERVICE_EMBEDDING_WORKFLOW_TASK_SLOTS` entry
writes at once; the rest wait in Temporal's task queue, where teams take turns (issue 30 §5),
instead of in the worker, where every write taken waits for the whole model run.

The stack here has two slots. Six writes of one content to one diary are held at their insert
(the test holds the advisory lock the insert takes on the diary and the content), so each write
the worker took keeps its slot: two runs have their workflow task started, and the other four
stay scheduled in Temporal until the lock is let go. Then all six end: one entry, five exact
duplicates of it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from actors import Actor, new_diary
from temporalio.api.enums.v1 import PendingWorkflowTaskState
from temporalio.client import Client
from waiting import wait_until

from infra.db import Q

SLOTS = 2
WRITES = 6


@pytest.fixture(scope="module")
def stack_settings() -> dict[str, object]:
    return {"embedding_workflow_task_slots": SLOTS}


async def task_states(temporal: Client, diary_id: str) -> list[int]:
    """The state of the pending workflow task of each running run that writes to the diary."""
    query = f'DiaryId = "{diary_id}" AND ExecutionStatus = "Running"'
    states = []
    async for run in temporal.list_workflows(query):
        described = await temporal.get_workflow_handle(run.id, run_id=run.run_id).describe()
        states.append(described.raw_description.pending_workflow_task.state)
    return states


async def test_writes_beyond_the_slots_wait_in_temporals_queue(
    actors: Any, stack: Any, db_pool: Any
) -> None:
    agent: Actor = await actors.agent()
    diary = await new_diary(agent)
    content = f"held at the insert {uuid.uuid4()}"
    started = PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED
    scheduled = PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED

    async def slots_full() -> bool:
        states = await task_states(stack.temporal, diary["id"])
        return sorted(states) == sorted([started] * SLOTS + [scheduled] * (WRITES - SLOTS))

    async with db_pool.acquire() as conn:
        transaction = conn.transaction()
        await transaction.start()
        try:
            await conn.execute(Q.memory_lock_content_digest, diary["id"], content)
            writes = [
                asyncio.create_task(
                    agent.call("POST", f"/diaries/{diary['id']}/entries", json={"content": content})
                )
                for _ in range(WRITES)
            ]
            await wait_until(slots_full, what=f"{SLOTS} writes in the worker, the rest queued")
        finally:
            await transaction.rollback()
    answers = await asyncio.gather(*writes)
    assert sorted(status for status, _ in answers) == [200] * (WRITES - 1) + [201]
    assert len({entry["id"] for _, entry in answers}) == 1
