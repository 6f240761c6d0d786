"""The I/O checks task types declare by name (`CreateHook`, `CompleteHook` in
`schemas/kernel/task_types.py`), implemented here and run by the task routes.

A type switches a check on in its own declaration; the routes never look at a type's name.
Every declared hook name has exactly one implementation here (a unit test holds it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final
from uuid import UUID

from aiohttp import web

from api.pack_tasks import check_curated_output, check_judge_pack_input, check_rendered_output
from schemas.kernel.task_types import CompleteHook, CreateHook, TaskType
from schemas.tasks import TaskReference

CreateCheck = Callable[[web.Request, Mapping[str, Any], list[TaskReference]], Awaitable[None]]
"""(request, the task's input, its references) -> None, or a DomainError."""
CompleteCheck = Callable[
    [web.Request, UUID, Mapping[str, Any] | None, Mapping[str, Any]], Awaitable[None]
]
"""(request, task id, the task's input, the attempt's output) -> None, or a DomainError."""

CREATE_CHECKS: Final[Mapping[CreateHook, CreateCheck]] = {
    "judged_work_is_rendered_pack": check_judge_pack_input,
}
COMPLETE_CHECKS: Final[Mapping[CompleteHook, CompleteCheck]] = {
    "curated_pack_in_diary": check_curated_output,
    "rendered_pack_of_source": check_rendered_output,
}


async def run_create_checks(
    request: web.Request,
    task_type: TaskType,
    task_input: Mapping[str, Any],
    references: list[TaskReference],
) -> None:
    """The type's create-time I/O checks, after its schema and post-checks passed."""
    for hook in task_type.create_hooks:
        await CREATE_CHECKS[hook](request, task_input, references)


async def run_complete_checks(
    request: web.Request,
    task_type: TaskType,
    task_id: UUID,
    task_input: Mapping[str, Any] | None,
    output: Mapping[str, Any],
) -> None:
    """The type's complete-time I/O checks, after the output schema passed."""
    for hook in task_type.complete_hooks:
        await COMPLETE_CHECKS[hook](request, task_id, task_input, output)
