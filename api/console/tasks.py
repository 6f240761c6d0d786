"""The console's tasks pages (issue 24): a new task, a task's page, cancelling one.

- `/console/teams/{teamId}/tasks/new`: pick a type; its input schema (`GET /tasks/schemas`)
  becomes a form (`task_forms`) checked in the browser, then by `POST /tasks` (its 400 with
  pointers shown beside the form); the team's recent tasks, each linked to its page.
- `/console/teams/{teamId}/tasks/{taskId}`: the one view of a task (issue 34 §8; the queue's
  rows open it): status, type, attempts with their executor's fingerprint and how each ended,
  an attempt's messages (the latest one's unless `?attempt=` names another: the first page
  here, then, while the task runs, polled live by `static/tasks.js` from the REST list with an
  `afterSeq` cursor), artifacts with their REST download links, the output with its CID and
  whether its signature verifies (`POST /crypto/verify` by the claimant's fingerprint); cancel
  with a reason.

Everything runs the REST routes as the logged-in human (see api/console/__init__.py).
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID, uuid4

from aiohttp import web
from pydantic import Field, model_validator

from api.console.kit import (
    ConsoleForm,
    Outcome,
    PageQuery,
    act,
    attempt,
    console_route,
    page,
    part_of,
    see_other,
)
from api.console.render import NOTICES
from api.console.task_forms import INPUT_PREFIX, InputField, input_fields, input_of, parsed_json
from api.endpoint import Parsed
from api.routes import crypto, diaries, task_artifacts, task_attempts, tasks, teams
from schemas import limits
from schemas.artifacts import ArtifactListQuery, TaskArtifactList, TaskArtifactsPath
from schemas.base import RequestBody
from schemas.errors import NotFound
from schemas.memory import DiaryList
from schemas.numbers import SqlOrdinal
from schemas.signing import VerifyRequest, VerifyResult
from schemas.task_api import (
    AttemptPath,
    CreateTaskRequest,
    MessagesQuery,
    Task,
    TaskAttempt,
    TaskAttemptList,
    TaskList,
    TaskListQuery,
    TaskMessageList,
    TaskPath,
    TaskSchema,
    TaskSchemaList,
)
from schemas.task_attempts import CancelRequest
from schemas.tasks import TERMINAL_TASK_STATUSES
from schemas.teams import Team, TeamPath

routes = web.RouteTableDef()

NOTICES.update(
    {
        "task-created": "The task is queued.",
        "task-cancelled": "The task is cancelled.",
    }
)
RECENT_TASKS = 20
MESSAGES_FIRST_PAGE = 50
ARTIFACTS_SHOWN = 50
NEW_TASK_FORM = "new-task"
CANCEL_FORM = "cancel"
# a task's page; the queue view links its rows here (api/console/pages.py)
TASK_PAGE = "/console/teams/{teamId}/tasks/{taskId}"


class TeamTasksPath(RequestBody):
    teamId: UUID


class TaskPagePath(RequestBody):
    teamId: UUID
    taskId: UUID


class TaskPageQuery(PageQuery):
    # numbered as the REST route's path numbers it (`/tasks/{id}/attempts/{n}/messages`)
    attempt: SqlOrdinal | None = Field(
        default=None, description="whose messages to show; the latest by default"
    )


class NewTaskQuery(PageQuery):
    type: Annotated[
        str | None, Field(default=None, min_length=1, max_length=limits.TASK_TYPE_MAX_CHARS)
    ]


class NewTaskForm(ConsoleForm):
    """`POST /tasks` as a form: the type's input fields arrive as `input.<property>` and are
    gathered into `input` (the route validates them against the type's schema)."""

    taskType: Annotated[str, Field(max_length=limits.TASK_TYPE_MAX_CHARS)]
    diaryId: Annotated[str | None, Field(default=None, max_length=64)]
    title: Annotated[str | None, Field(default=None, max_length=limits.TASK_TITLE_MAX_CHARS)]
    maxAttempts: Annotated[str | None, Field(default=None, max_length=16)]
    references: Annotated[str | None, Field(default=None, max_length=64_000)]
    input: Annotated[
        dict[str, Annotated[str, Field(max_length=64_000)]], Field(default_factory=dict)
    ]

    @model_validator(mode="before")
    @classmethod
    def _gather_input(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        rest = {k: v for k, v in data.items() if not k.startswith(INPUT_PREFIX)}
        typed = {
            k[len(INPUT_PREFIX) :]: v
            for k, v in data.items()
            if k.startswith(INPUT_PREFIX) and v != ""
        }
        return {**rest, "input": typed} if typed else rest


class CancelForm(ConsoleForm):
    reason: Annotated[str, Field(max_length=limits.TASK_REASON_MAX_CHARS)]


# --- a new task -------------------------------------------------------------------------------


@console_route(
    routes,
    "GET",
    "/console/teams/{teamId}/tasks/new",
    path_params=TeamTasksPath,
    query=NewTaskQuery,
)
async def console_new_task(
    request: web.Request, parsed: Parsed[None, NewTaskQuery, TeamTasksPath]
) -> web.Response:
    """A new task of the team: its type, a form from the type's input schema, the diary."""
    return await _new_task_page(request, parsed.path.teamId, parsed.query.type)


async def _new_task_page(
    request: web.Request, team_id: UUID, type_name: str | None, outcome: Outcome | None = None
) -> web.Response:
    team: Team = await act(request, teams.get_team, path=TeamPath(id=team_id))
    schemas: TaskSchemaList = await act(request, tasks.list_task_schemas)
    chosen = _chosen_type(schemas, type_name)
    team_diaries: DiaryList = await act(request, diaries.list_diaries, team=team_id)
    recent: TaskList = await act(
        request, tasks.list_tasks, query=TaskListQuery(limit=RECENT_TASKS), team=team_id
    )
    refusal = outcome.refusal if outcome else None
    return page(
        request,
        "tasks/new.html",
        team=team,
        types=[s.taskType for s in schemas.items],
        chosen=chosen,
        fields=input_fields(chosen.inputSchema),
        diaries=team_diaries.items,
        recent=recent.items,
        title_max=limits.TASK_TITLE_MAX_CHARS,
        attempts_max=limits.TASK_MAX_ATTEMPTS_MAX,
        outcome=refusal,
        key=uuid4().hex,
    )


def _chosen_type(schemas: TaskSchemaList, name: str | None) -> TaskSchema:
    """The type asked for, else the first registered one (freeform)."""
    by_name = {s.taskType: s for s in schemas.items}
    return by_name.get(name or "", schemas.items[0])


@console_route(
    routes,
    "POST",
    "/console/teams/{teamId}/tasks/new",
    path_params=TeamTasksPath,
    body=NewTaskForm,
)
async def console_create_task(
    request: web.Request, parsed: Parsed[NewTaskForm, None, TeamTasksPath]
) -> web.Response:
    """Create the task with `POST /tasks`; on to its page (or the refusal beside the form)."""
    form = parsed.body
    team_id = parsed.path.teamId
    schemas: TaskSchemaList = await act(request, tasks.list_task_schemas)
    chosen = _chosen_type(schemas, form.taskType)
    fields = input_fields(chosen.inputSchema)
    outcome = await attempt(NEW_TASK_FORM, form, _create(request, form, team_id, fields))
    if outcome.refusal is not None:
        return await _new_task_page(request, team_id, form.taskType, outcome)
    created: Task = outcome.result
    see_other(f"/console/teams/{team_id}/tasks/{created.id}", done="task-created")


async def _create(
    request: web.Request, form: NewTaskForm, team_id: UUID, fields: list[InputField]
) -> Task:
    body = _create_body(form, team_id, fields)
    created: Task = await act(request, tasks.create_task, form, body=body, team=team_id)
    return created


def _create_body(form: NewTaskForm, team_id: UUID, fields: list[InputField]) -> CreateTaskRequest:
    """The `POST /tasks` body, with the form's own type name (an unknown one is the route's
    400): values that do not convert are sent as typed, for the route to name them."""
    values: dict[str, Any] = {
        "taskType": form.taskType,
        "teamId": team_id,
        "diaryId": form.diaryId,
        "input": input_of(fields, form.input),
    }
    if form.title is not None:
        values["title"] = form.title
    if form.maxAttempts is not None:
        values["maxAttempts"] = parsed_json(form.maxAttempts)
    if form.references is not None:
        values["references"] = parsed_json(form.references)
    return part_of(CreateTaskRequest, **values)


# --- a task's page --------------------------------------------------------------------------


@console_route(routes, "GET", TASK_PAGE, path_params=TaskPagePath, query=TaskPageQuery)
async def console_task(
    request: web.Request, parsed: Parsed[None, TaskPageQuery, TaskPagePath]
) -> web.Response:
    """A task: status, attempts, the live message stream, artifacts, output, cancel."""
    return await _task_page(request, parsed.path, attempt_n=parsed.query.attempt)


async def _task_page(
    request: web.Request,
    path: TaskPagePath,
    outcome: Outcome | None = None,
    *,
    attempt_n: int | None = None,
) -> web.Response:
    team_id, task_id = path.teamId, path.taskId
    # the team header makes another team's task a 404 here, as in the API
    task: Task = await act(request, tasks.get_task, path=TaskPath(id=task_id), team=team_id)
    team = await _team_if_member(request, team_id)
    attempts: TaskAttemptList = await act(
        request, tasks.list_task_attempts, path=TaskPath(id=task_id), team=team_id
    )
    latest = attempts.items[-1] if attempts.items else None
    # the attempt asked for (a number that names none shows the latest, as the page does)
    shown = next((a for a in attempts.items if a.attemptN == attempt_n), latest)
    messages = await _first_messages(request, task_id, shown)
    artifacts: TaskArtifactList = await act(
        request,
        task_artifacts.list_task_artifacts,
        path=TaskArtifactsPath(id=task_id),
        query=ArtifactListQuery(limit=ARTIFACTS_SHOWN),
        team=team_id,
    )
    produced = next((a for a in reversed(attempts.items) if a.outputCid is not None), None)
    refusal = outcome.refusal if outcome else None
    return page(
        request,
        "tasks/task.html",
        team_id=team_id,
        team=team,
        task=task,
        ended=task.status in TERMINAL_TASK_STATUSES,
        attempts=attempts.items,
        latest=latest,
        shown=shown,
        messages=messages,
        artifacts=artifacts,
        produced=produced,
        signature=await _signature_check(request, produced),
        reason_max=limits.TASK_REASON_MAX_CHARS,
        outcome=refusal,
        key=uuid4().hex,
    )


async def _team_if_member(request: web.Request, team_id: UUID) -> Team | None:
    """The task's team, or None for someone who reads the task by an explicit grant only (the
    team itself is hidden from them: its page and queue are not theirs)."""
    try:
        team: Team = await act(request, teams.get_team, path=TeamPath(id=team_id))
    except NotFound:
        return None
    return team


async def _first_messages(
    request: web.Request, task_id: UUID, attempt: TaskAttempt | None
) -> TaskMessageList:
    """An attempt's first page of messages (the page's script polls for the rest)."""
    if attempt is None:
        return TaskMessageList(items=[], lastSeq=None)
    listed: TaskMessageList = await act(
        request,
        tasks.list_task_messages,
        path=AttemptPath(id=task_id, n=attempt.attemptN),
        query=MessagesQuery(limit=MESSAGES_FIRST_PAGE),
    )
    return listed


async def _signature_check(request: web.Request, produced: TaskAttempt | None) -> str | None:
    """`verified`, `not-verified` or `unsigned` for the output (None: no output yet): the
    claimant's Ed25519 signature of the UTF-8 `outputCid`, checked by `POST /crypto/verify`."""
    if produced is None or produced.outputCid is None:
        return None
    if produced.contentSignature is None or produced.claimedByFingerprint is None:
        return "unsigned"
    body = part_of(
        VerifyRequest,
        message=produced.outputCid,
        signature=produced.contentSignature,
        fingerprint=produced.claimedByFingerprint,
    )
    checked: VerifyResult = await act(request, crypto.verify, body=body)
    return "verified" if checked.valid else "not-verified"


# --- cancel -------------------------------------------------------------------------------------


@console_route(
    routes,
    "POST",
    "/console/teams/{teamId}/tasks/{taskId}/cancel",
    path_params=TaskPagePath,
    body=CancelForm,
)
async def console_cancel_task(
    request: web.Request, parsed: Parsed[CancelForm, None, TaskPagePath]
) -> web.Response:
    """Cancel the task with a reason (`POST /tasks/{id}/cancel`); a refusal beside the form."""
    form, path = parsed.body, parsed.path
    outcome = await attempt(CANCEL_FORM, form, _cancel(request, form, path))
    if outcome.refusal is not None:
        return await _task_page(request, path, outcome)
    see_other(f"/console/teams/{path.teamId}/tasks/{path.taskId}", done="task-cancelled")


async def _cancel(request: web.Request, form: CancelForm, path: TaskPagePath) -> Task:
    body = part_of(CancelRequest, reason=form.reason)
    task_path = TaskPath(id=path.taskId)
    cancelled: Task = await act(
        request, task_attempts.cancel_task, form, path=task_path, body=body, team=path.teamId
    )
    return cancelled
