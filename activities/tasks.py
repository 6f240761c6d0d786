"""Side effects of the attempt workflow (SPEC 3.1): the task row with its tuples, and one
projection of the workflow's state per transition. One transaction per activity, idempotent
under retry (see `infra.repos.tasks`). The workflow runs them as local activities on its
hot path (claim, heartbeat, result), so a transition costs one workflow task, not three."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from schemas.task_attempts import TaskInserted, TaskProjection
from schemas.tasks import TaskStart

if TYPE_CHECKING:
    from infra.repos.tasks import TaskRepo


class TaskActivities:
    def __init__(self, repo: TaskRepo) -> None:
        self._repo = repo

    @activity.defn(name="tasks.insert_task")
    async def insert_task(self, start: TaskStart) -> TaskInserted:
        created = await self._repo.insert(start)
        return TaskInserted(task_id=start.task_id, created=created)

    @activity.defn(name="tasks.project")
    async def project(self, projection: TaskProjection) -> None:
        await self._repo.project(projection)
