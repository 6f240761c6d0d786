"""The task queue over A2A v1.0 (`a2a-sdk`): a third door to the same routes.

Every A2A operation runs the REST route that does the same thing through `api.endpoint.invoke`,
so permissions, scopes, rate limits, validation and idempotency are the routes' own, and the
attempt workflow stays the one state machine:

- `SendMessage` / `SendStreamingMessage` is `POST /tasks` in the caller's team (the
  `x-service-team-id` header or the message metadata's `teamId`) with the provenance diary of
  the metadata's `diaryId` (invalid params without it). A message of text parts is a task of the
  default type with the text as `brief`; a data part `{"taskType", "input", "title"?}` names
  another type and its input. The message id is the `Idempotency-Key`: a resent message answers
  the task it created.
- `GetTask` is `GET /tasks/{id}` (+ attempts and the last attempt's messages as history),
  `ListTasks` is `GET /tasks` of the team (the header, or the request's `tenant`),
  `CancelTask` is `POST /tasks/{id}/cancel`.
- `SubscribeToTask` and the stream of `SendStreamingMessage` read the same rows as the REST
  reads after one visibility check, until the task ends: a status event per state change and
  per attempt message, then the output as artifacts.

States: queued is `submitted`; dispatched and running are `working`; completed, failed and
cancelled are theirs; expired is `failed` (nobody took it in time). The completed attempt's
output is the artifact `output` (a data part) with `outputCid`, `contentSignature`, `attemptN`
and the executor's agent id in its metadata; a freeform output's own artifacts follow it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Final
from uuid import UUID

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import (
    AgentCard,
    Artifact,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from aiohttp import web
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp

from api import keys
from api.endpoint import invoke
from api.headers import IDEMPOTENCY_HEADER, TEAM_HEADER
from api.routes import task_attempts, tasks
from infra.repos import task_reads
from schemas import limits
from schemas.errors import DomainError
from schemas.kernel.task_types import DEFAULT_TASK_TYPE
from schemas.task_api import Task as CairnTask
from schemas.task_api import TaskAttempt, TaskMessage
from schemas.tasks import TERMINAL_TASK_STATUSES

REQUEST: Final = "cairn.request"  # the aiohttp request, in the call context's state
REFUSALS: Final = "cairn.refusals"  # 401/403/429 the route answers as problem+json over HTTP
HTTP_REFUSALS: Final = frozenset({401, 403, 429})

STATES: Final[Mapping[str, TaskState]] = {
    "queued": TaskState.TASK_STATE_SUBMITTED,
    "dispatched": TaskState.TASK_STATE_WORKING,
    "running": TaskState.TASK_STATE_WORKING,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
    "expired": TaskState.TASK_STATE_FAILED,
}
# an A2A state filter of ListTasks as our statuses
STATUSES: Final[Mapping[TaskState, list[str]]] = {
    state: [s for s, mapped in STATES.items() if mapped == state] for state in set(STATES.values())
}


class CairnRequestHandler(RequestHandler):
    """A2A operations as calls of the task routes (see the module docstring)."""

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        task = await _create(params, context)
        return await _a2a_task(_request(context), task, history=0)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        task = await _create(params, context)
        async for event in _follow(_request(context), task):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        task = await _get(context, params.id)
        async for event in _follow(_request(context), task):
            yield event

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        task = await _get(context, params.id)
        history = params.history_length if params.HasField("history_length") else None
        return await _a2a_task(_request(context), task, history=history)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        request = _request(context)
        query: dict[str, Any] = {}
        if params.page_size:
            query["limit"] = params.page_size
        if params.page_token:
            query["cursor"] = params.page_token
        if params.status:
            query["statuses"] = STATUSES.get(params.status, [])
        if params.context_id:
            query["correlationId"] = params.context_id
        # the team: the x-service-team-id header, or the request's A2A `tenant`
        headers = {TEAM_HEADER: params.tenant} if params.tenant else {}
        listing = await _call(context, tasks.list_tasks, query=query, headers=headers)
        found = [await _a2a_task(request, t, history=0) for t in listing.items]
        return ListTasksResponse(
            tasks=found,
            next_page_token=listing.nextCursor or "",
            page_size=len(found),
            total_size=len(found),
        )

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        reason = _metadata(params.metadata).get("reason") or "cancelled over A2A"
        task = await _call(
            context,
            task_attempts.cancel_task,
            path={"id": _task_id(params.id)},
            body={"reason": str(reason)},
            conflict=TaskNotCancelableError,
        )
        return await _a2a_task(_request(context), task, history=0)

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError


# --- calls of the routes --------------------------------------------------------------------


def _request(context: ServerCallContext) -> web.Request:
    request = context.state[REQUEST]
    assert isinstance(request, web.Request)
    return request


async def _call(
    context: ServerCallContext,
    handler: Any,
    *,
    conflict: type[A2AError] = InvalidParamsError,
    missing: type[A2AError] = TaskNotFoundError,
    **parts: Any,
) -> Any:
    """Run a route; its refusal as the A2A error that says the same (see `_a2a_error`)."""
    try:
        return await invoke(_request(context), handler, **parts)
    except DomainError as exc:
        raise _a2a_error(context, exc, conflict=conflict, missing=missing) from None


def _a2a_error(
    context: ServerCallContext,
    exc: DomainError,
    *,
    conflict: type[A2AError],
    missing: type[A2AError],
) -> A2AError:
    """400 is invalid params, 404 the operation's not-found, 409 its conflict; the problem rides
    along as `data`. 401, 403 and 429 are left to HTTP: the route answers them as problems."""
    data = {"problem": exc.to_problem().model_dump(mode="json", exclude_none=True)}
    if exc.status in HTTP_REFUSALS:
        context.state[REFUSALS].append(exc)
        return InternalError(exc.detail)
    by_status: dict[int, type[A2AError]] = {400: InvalidParamsError, 404: missing, 409: conflict}
    return by_status.get(exc.status, InternalError)(exc.detail, data=data)


def _task_id(value: str) -> str:
    if not _is_uuid(value):
        raise TaskNotFoundError(f"No task {value!r}")
    return value


async def _get(context: ServerCallContext, task_id: str) -> CairnTask:
    task: CairnTask = await _call(context, tasks.get_task, path={"id": _task_id(task_id)})
    return task


async def _create(params: SendMessageRequest, context: ServerCallContext) -> CairnTask:
    """`POST /tasks` for a message, keyed by its id."""
    message = params.message
    meta = {**_metadata(params.metadata), **_metadata(message.metadata)}
    diary_id = meta.get("diaryId")
    if not diary_id:
        raise InvalidParamsError(
            "The message metadata needs diaryId: the task's provenance diary (SPEC 4.5)"
        )
    request = _request(context)
    team_id = meta.get("teamId") or request.headers.get(TEAM_HEADER)
    if not team_id:
        raise InvalidParamsError(f"Name the team in the {TEAM_HEADER} header or metadata teamId")
    body: dict[str, Any] = {"teamId": team_id, "diaryId": diary_id, **_task_of(message)}
    if _is_uuid(message.context_id):
        body.setdefault("correlationId", message.context_id)
    # a header naming another team than teamId stays, for the route's 400 `team-mismatch`
    headers = {} if request.headers.get(TEAM_HEADER) else {TEAM_HEADER: str(team_id)}
    if message.message_id:
        headers[IDEMPOTENCY_HEADER] = message.message_id
    task: CairnTask = await _call(
        context, tasks.create_task, body=body, headers=headers, missing=InvalidParamsError
    )
    return task


def _is_uuid(value: str) -> bool:
    try:
        UUID(value)
    except ValueError:
        return False
    return True


def _task_of(message: Message) -> dict[str, Any]:
    """The type, input and title a message asks for: a data part's, else a brief of its text."""
    for part in message.parts:
        if part.HasField("data"):
            data = MessageToDict(part.data)
            if isinstance(data, dict) and "taskType" in data:
                return {k: data[k] for k in ("taskType", "input", "title") if k in data}
    text = "\n".join(part.text for part in message.parts if part.HasField("text")).strip()
    if not text:
        raise InvalidParamsError("The message has neither text nor a data part naming a taskType")
    return {"taskType": DEFAULT_TASK_TYPE.name, "input": {"brief": text}}


def _metadata(struct: Struct) -> dict[str, Any]:
    found = MessageToDict(struct)
    return found if isinstance(found, dict) else {}


# --- our task as A2A's ------------------------------------------------------------------------


async def _a2a_task(request: web.Request, task: CairnTask, *, history: int | None) -> Task:
    pool = request.app[keys.READ_POOL]
    attempts = await task_reads.list_attempts(pool, task.id)
    messages: list[TaskMessage] = []
    if attempts and history != 0:
        messages = await task_reads.list_messages(
            pool, _ref(attempts[-1]), 0, limits.TASK_MESSAGES_PAGE.max
        )
        if history is not None:
            messages = messages[-history:]
    return Task(
        id=str(task.id),
        context_id=str(task.correlationId or task.id),
        status=_status(task),
        artifacts=_artifacts(task, attempts),
        history=[_message(task, m) for m in messages],
        metadata=_struct(
            {"taskType": task.taskType, "teamId": str(task.teamId), "status": task.status}
        ),
    )


def _status(task: CairnTask, message: Message | None = None) -> TaskStatus:
    stamp = Timestamp()
    stamp.FromDatetime(task.updatedAt)
    status = TaskStatus(state=STATES[task.status], timestamp=stamp)
    if message is not None:
        status.message.CopyFrom(message)
    return status


def _message(task: CairnTask, message: TaskMessage) -> Message:
    payload = message.payload
    part = Part(text=payload) if isinstance(payload, str) else Part(data=_value(payload))
    return Message(
        message_id=str(message.id),
        task_id=str(task.id),
        context_id=str(task.correlationId or task.id),
        role=Role.ROLE_AGENT,
        parts=[part],
        metadata=_struct({"kind": message.kind, "attemptN": message.attemptN, "seq": message.seq}),
    )


def _artifacts(task: CairnTask, attempts: list[TaskAttempt]) -> list[Artifact]:
    done = [a for a in attempts if a.status == "completed" and a.outputCid is not None]
    if task.status != "completed" or not done:
        return []
    attempt = done[-1]
    signed = {
        "outputCid": attempt.outputCid,
        "contentSignature": attempt.contentSignature,
        "attemptN": attempt.attemptN,
        "executorAgentId": str(attempt.claimedByAgentId),
    }
    found = [
        Artifact(
            artifact_id=str(attempt.outputCid),
            name="output",
            description=f"the {task.taskType} output, content-addressed and signed",
            parts=[Part(data=_value(attempt.output), media_type="application/json")],
            metadata=_struct(signed),
        )
    ]
    output = attempt.output if isinstance(attempt.output, dict) else {}
    for i, item in enumerate(output.get("artifacts") or []):
        found.append(_output_artifact(attempt, i, item))
    return found


def _output_artifact(attempt: TaskAttempt, i: int, item: Mapping[str, Any]) -> Artifact:
    """One of the output's own artifacts: its body as text, else its url."""
    part = Part(media_type=str(item.get("contentType") or "text/plain"))
    if "body" in item:
        part.text = str(item["body"])
    else:
        part.url = str(item.get("url") or item.get("path") or "")
    meta = {k: v for k, v in item.items() if k not in ("body", "title", "description")}
    return Artifact(
        artifact_id=f"{attempt.outputCid}/artifacts/{i}",
        name=str(item.get("title", "")),
        description=str(item.get("description", "")),
        parts=[part],
        metadata=_struct({**meta, "outputCid": attempt.outputCid}),
    )


def _struct(values: Mapping[str, Any]) -> Struct:
    struct = Struct()
    ParseDict({k: v for k, v in values.items() if v is not None}, struct)
    return struct


def _value(value: Any) -> Value:
    found = Value()
    ParseDict(value, found)
    return found


# --- following a task -------------------------------------------------------------------------


async def _follow(request: web.Request, task: CairnTask) -> AsyncGenerator[Event]:
    """The task, then a status event per change and per attempt message, then its artifacts and
    the final status. Reads the rows the REST reads read; the caller was checked once."""
    pool = request.app[keys.READ_POOL]
    yield await _a2a_task(request, task, history=0)
    status, seen = task.status, {0: 0}
    while True:
        current = await task_reads.get_task(pool, task.id)
        if current is None:
            raise TaskNotFoundError
        for attempt in await task_reads.list_attempts(pool, task.id):
            after = seen.get(attempt.attemptN, 0)
            for message in await task_reads.list_messages(
                pool, _ref(attempt), after, limits.TASK_MESSAGES_PAGE.max
            ):
                seen[attempt.attemptN] = message.seq
                # the executor posted it while working, whatever the task's state is by now
                yield _update(current, _message(current, message), final=False, working=True)
        if current.status != status:
            status = current.status
            if status not in TERMINAL_TASK_STATUSES:
                yield _update(current, None, final=False)
        if current.status in TERMINAL_TASK_STATUSES:
            done = await _a2a_task(request, current, history=0)
            for artifact in done.artifacts:
                yield TaskArtifactUpdateEvent(
                    task_id=done.id, context_id=done.context_id, artifact=artifact, last_chunk=True
                )
            yield _update(current, None, final=True)
            return
        if request.transport is None or request.transport.is_closing():
            return  # the client left: aiohttp does not cancel the handler, so stop reading
        await asyncio.sleep(limits.A2A_STREAM_POLL_SEC)


def _ref(attempt: TaskAttempt) -> task_reads.AttemptRef:
    return task_reads.AttemptRef(
        id=attempt.id,
        task_id=attempt.taskId,
        attempt_n=attempt.attemptN,
        status=attempt.status,
        claimed_by_agent_id=attempt.claimedByAgentId,
    )


def _update(
    task: CairnTask, message: Message | None, *, final: bool, working: bool = False
) -> TaskStatusUpdateEvent:
    status = _status(task, message)
    if working:
        status.state = TaskState.TASK_STATE_WORKING
    return TaskStatusUpdateEvent(
        task_id=str(task.id),
        context_id=str(task.correlationId or task.id),
        status=status,
        metadata=_struct({"status": task.status, "final": final}),
    )
