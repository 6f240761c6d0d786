"""The task queue over A2A v1.0 (`a2a-sdk`'s types): a third door to the same routes.

JSON-RPC is answered here on aiohttp (`dispatch`): the SDK's own dispatcher is a Starlette
handler, and the process runs one web framework; the SDK's protobuf types, error classes and
`build_error_response` give the wire format. docs/a2a-internals.md says what was kept of it.

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
- `SubscribeToTask` and the stream of `SendStreamingMessage` show the rows of the task that
  `GET /tasks/{id}` let the caller see (`TaskRows`, read by the route layer), until the task
  ends: a status event per state change and per attempt message, then the output as
  artifacts. The stream reads again when the task changes (`TaskRows.changes`), not on a clock.

A refusal of the caller (401, 403, 429) is answered over HTTP as the route's problem: `dispatch`
returns it as a `Refused` value. Every other refusal is a JSON-RPC error with the problem in
its `data`.

States: queued is `submitted`; dispatched and running are `working`; completed, failed and
cancelled are theirs; expired is `failed` (nobody took it in time). The completed attempt's
output is the artifact `output` (a data part) with `outputCid`, `contentSignature`, `attemptN`
and the executor's agent id in its metadata; a freeform output's own artifacts follow it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar
from uuid import UUID

from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.types.a2a_pb2 import (
    Artifact,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils import constants
from a2a.utils.errors import (
    A2AError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    VersionNotSupportedError,
)
from a2a.utils.proto_utils import to_stream_response
from aiohttp import web
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message as ProtoMessage
from google.protobuf.struct_pb2 import Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp
from jsonrpc.jsonrpc2 import JSONRPC20Request, JSONRPC20Response

from api.endpoint import Parsed, invoke, part_of
from api.headers import IDEMPOTENCY_HEADER, TEAM_HEADER
from api.routes import task_attempts, tasks
from schemas.errors import DomainError
from schemas.kernel.task_types import DEFAULT_TASK_TYPE
from schemas.task_api import CreateTaskRequest, TaskAttempt, TaskListQuery, TaskMessage, TaskPath
from schemas.task_api import Task as CairnTask
from schemas.task_attempts import CancelRequest
from schemas.tasks import TERMINAL_TASK_STATUSES

HTTP_REFUSALS: Final = frozenset({401, 403, 429})
B = TypeVar("B")
Q = TypeVar("Q")
P = TypeVar("P")
Reply = dict[str, Any]  # one JSON-RPC response object
Event = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent

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


class TaskRows(Protocol):
    """The rows of one task A2A shows, read by the route layer (`api/routes/a2a.py`) for a
    caller `GET /tasks/{id}` already let see the task."""

    async def task(self, task_id: UUID) -> CairnTask | None: ...

    async def attempts(self, task_id: UUID) -> list[TaskAttempt]: ...

    async def messages(self, attempt: TaskAttempt, after_seq: int) -> list[TaskMessage]: ...

    def changes(self, task_id: UUID) -> contextlib.AbstractAsyncContextManager[Changes]: ...


class Changes(Protocol):
    """Wake-ups on a task's changes (a status, an attempt, a message), from the first read on."""

    async def next(self) -> None:
        """Return once the task changed since the last call (or since the watch began)."""


@dataclass(frozen=True)
class Call:
    """One A2A call: the HTTP request it came in (unread: each route runs on a clone of it) and
    the route layer's reader of task rows."""

    request: web.Request
    rows: TaskRows


@dataclass(frozen=True)
class Refused:
    """The caller is refused (401, 403, 429): HTTP answers the route's problem, as for REST."""

    problem: DomainError


Answer = Reply | AsyncIterator[Reply] | Refused


# --- JSON-RPC -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Method:
    params: type[ProtoMessage]
    run: Callable[[Call, Any], Any]  # a result, or the events of a stream (`streams`)
    streams: bool = False


async def dispatch(call: Call, body: Mapping[str, Any]) -> Answer:
    """The answer to one JSON-RPC request object: a response, a stream of them (the two
    streaming methods; its first event already read, so a refusal comes before the stream
    opens), or the caller's refusal."""
    request_id = _request_id(body)
    try:
        method, params = _parsed(body)
        _check_version(call.request)
        if method.streams:
            events: AsyncIterator[Event] = method.run(call, params)
            first = await anext(events)
            return _replies(request_id, first, events)
        result = await method.run(call, params)
        return JSONRPC20Response(result=result, _id=request_id).data  # type: ignore[no-any-return]
    except DomainError as refused:
        if refused.status in HTTP_REFUSALS:
            return Refused(refused)
        return build_error_response(request_id, _a2a_error(refused))
    except A2AError as error:
        return build_error_response(request_id, error)


def _request_id(body: Mapping[str, Any]) -> str | int | None:
    found = body.get("id")
    # a bool is an int to Python, not to JSON-RPC
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def _parsed(body: Mapping[str, Any]) -> tuple[_Method, Any]:
    """The method and its params; JSON-RPC's own errors for a request it cannot run."""
    try:
        base = JSONRPC20Request.from_data(dict(body))
    except Exception as exc:  # the library's refusals are plain exceptions
        raise InvalidRequestError(data={"parseError": str(exc)}) from None
    if body.get("jsonrpc") != "2.0" or isinstance(body.get("id"), bool) or not base.method:
        raise InvalidRequestError(
            message='A JSON-RPC request has "jsonrpc": "2.0", a method and no boolean id'
        )
    method = METHODS.get(base.method)
    if method is None:
        raise MethodNotFoundError()
    try:
        params = ParseDict(body.get("params", {}), method.params(), ignore_unknown_fields=True)
    except Exception as exc:  # protobuf's ParseError and its TypeErrors alike
        raise InvalidParamsError(data={"parseError": str(exc)}) from None
    return method, params


def _check_version(request: web.Request) -> None:
    """A2A 1.x only: no `A2A-Version` header means 0.3, which this server does not speak."""
    version = request.headers.get(constants.VERSION_HEADER) or constants.PROTOCOL_VERSION_0_3
    if version.split(".")[0] != constants.PROTOCOL_VERSION_1_0.split(".")[0]:
        raise VersionNotSupportedError(
            message=f"A2A version '{version}' is not supported. "
            f"Expected version '{constants.PROTOCOL_VERSION_1_0}'."
        )


async def _replies(
    request_id: str | int | None, first: Event, events: AsyncIterator[Event]
) -> AsyncIterator[Reply]:
    """A stream's events as JSON-RPC responses; a refusal on the way is its last one."""

    def reply(event: Event) -> Reply:
        result = MessageToDict(to_stream_response(event), preserving_proto_field_name=False)
        return JSONRPC20Response(result=result, _id=request_id).data  # type: ignore[no-any-return]

    yield reply(first)
    try:
        async for event in events:
            yield reply(event)
    except DomainError as refused:
        yield build_error_response(request_id, _a2a_error(refused))
    except A2AError as error:
        yield build_error_response(request_id, error)


# --- the operations -----------------------------------------------------------------------------


async def _send(call: Call, params: SendMessageRequest) -> Any:
    task = await _create(call, params)
    return MessageToDict(SendMessageResponse(task=await _a2a_task(call, task, history=0)))


async def _send_streaming(call: Call, params: SendMessageRequest) -> AsyncIterator[Event]:
    task = await _create(call, params)
    async for event in _follow(call, task):
        yield event


async def _subscribe(call: Call, params: SubscribeToTaskRequest) -> AsyncIterator[Event]:
    task = await _get(call, params.id)
    async for event in _follow(call, task):
        yield event


async def _get_task(call: Call, params: GetTaskRequest) -> Any:
    task = await _get(call, params.id)
    history = params.history_length if params.HasField("history_length") else None
    return MessageToDict(await _a2a_task(call, task, history=history))


async def _list_tasks(call: Call, params: ListTasksRequest) -> Any:
    asked: dict[str, Any] = {}
    if params.page_size:
        asked["limit"] = params.page_size
    if params.page_token:
        asked["cursor"] = params.page_token
    if params.status:
        asked["statuses"] = STATUSES.get(params.status, [])
    if params.context_id:
        asked["correlationId"] = params.context_id
    # the team: the x-service-team-id header, or the request's A2A `tenant`
    headers = {TEAM_HEADER: params.tenant} if params.tenant else {}
    query = part_of(TaskListQuery, "query", **asked)
    listing = await _call(call, tasks.list_tasks, query=query, headers=headers)
    found = [await _a2a_task(call, t, history=0) for t in listing.items]
    response = ListTasksResponse(
        tasks=found,
        next_page_token=listing.nextCursor or "",
        page_size=len(found),
        total_size=len(found),
    )
    result = MessageToDict(
        response, preserving_proto_field_name=False, always_print_fields_with_no_presence=True
    )
    if not params.include_artifacts:
        for task in result["tasks"]:
            task.pop("artifacts", None)
    return result


async def _cancel_task(call: Call, params: CancelTaskRequest) -> Any:
    reason = _metadata(params.metadata).get("reason") or "cancelled over A2A"
    task = await _call(
        call,
        task_attempts.cancel_task,
        path=TaskPath(id=_task_id(params.id)),
        body=part_of(CancelRequest, reason=str(reason)),
        conflict=TaskNotCancelableError,
    )
    return MessageToDict(await _a2a_task(call, task, history=0))


async def _no_push(call: Call, params: Any) -> Any:
    raise PushNotificationNotSupportedError


async def _no_extended_card(call: Call, params: Any) -> Any:
    raise ExtendedAgentCardNotConfiguredError


METHODS: Final[Mapping[str, _Method]] = {
    "SendMessage": _Method(SendMessageRequest, _send),
    "SendStreamingMessage": _Method(SendMessageRequest, _send_streaming, streams=True),
    "GetTask": _Method(GetTaskRequest, _get_task),
    "ListTasks": _Method(ListTasksRequest, _list_tasks),
    "CancelTask": _Method(CancelTaskRequest, _cancel_task),
    "SubscribeToTask": _Method(SubscribeToTaskRequest, _subscribe, streams=True),
    "GetExtendedAgentCard": _Method(GetExtendedAgentCardRequest, _no_extended_card),
    "CreateTaskPushNotificationConfig": _Method(TaskPushNotificationConfig, _no_push),
    "GetTaskPushNotificationConfig": _Method(GetTaskPushNotificationConfigRequest, _no_push),
    "ListTaskPushNotificationConfigs": _Method(ListTaskPushNotificationConfigsRequest, _no_push),
    "DeleteTaskPushNotificationConfig": _Method(DeleteTaskPushNotificationConfigRequest, _no_push),
}


# --- calls of the routes --------------------------------------------------------------------


async def _call(
    call: Call,
    handler: Callable[[web.Request, Parsed[B, Q, P]], Awaitable[Any]],
    *,
    body: B | None = None,
    query: Q | None = None,
    path: P | None = None,
    headers: Mapping[str, str] | None = None,
    conflict: type[A2AError] = InvalidParamsError,
    missing: type[A2AError] = TaskNotFoundError,
) -> Any:
    """Run a route with its own models (`part_of` makes one of a request's values: a value the
    model refuses is the route's 400, invalid params); its refusal as the A2A error that says
    the same (`_a2a_error`), a refusal of the caller as it is (HTTP answers it)."""
    try:
        # a route that renders its answer (`POST /tasks`' 201) is read back as its model
        return await invoke(
            call.request, handler, body=body, query=query, path=path, headers=headers
        )
    except DomainError as exc:
        if exc.status in HTTP_REFUSALS:
            raise
        raise _a2a_error(exc, conflict=conflict, missing=missing) from None


def _a2a_error(
    exc: DomainError,
    *,
    conflict: type[A2AError] = InvalidParamsError,
    missing: type[A2AError] = TaskNotFoundError,
) -> A2AError:
    """400 is invalid params, 404 the operation's not-found, 409 its conflict; the problem rides
    along as `data`."""
    data = {"problem": exc.to_problem().model_dump(mode="json", exclude_none=True)}
    by_status: dict[int, type[A2AError]] = {400: InvalidParamsError, 404: missing, 409: conflict}
    return by_status.get(exc.status, InternalError)(exc.detail, data=data)


def _task_id(value: str) -> str:
    if not _is_uuid(value):
        raise TaskNotFoundError(f"No task {value!r}")
    return value


async def _get(call: Call, task_id: str) -> CairnTask:
    task: CairnTask = await _call(call, tasks.get_task, path=TaskPath(id=_task_id(task_id)))
    return task


async def _create(call: Call, params: SendMessageRequest) -> CairnTask:
    """`POST /tasks` for a message, keyed by its id."""
    message = params.message
    meta = {**_metadata(params.metadata), **_metadata(message.metadata)}
    diary_id = meta.get("diaryId")
    if not diary_id:
        raise InvalidParamsError(
            "The message metadata needs diaryId: the task's provenance diary (SPEC 4.5)"
        )
    sent_team = call.request.headers.get(TEAM_HEADER)
    team_id = meta.get("teamId") or sent_team
    if not team_id:
        raise InvalidParamsError(f"Name the team in the {TEAM_HEADER} header or metadata teamId")
    asked: dict[str, Any] = {"teamId": team_id, "diaryId": diary_id, **_task_of(message)}
    if _is_uuid(message.context_id):
        asked.setdefault("correlationId", message.context_id)
    # a header naming another team than teamId stays, for the route's 400 `team-mismatch`
    headers = {} if sent_team else {TEAM_HEADER: str(team_id)}
    if message.message_id:
        headers[IDEMPOTENCY_HEADER] = message.message_id
    body = part_of(CreateTaskRequest, **asked)
    task: CairnTask = await _call(
        call, tasks.create_task, body=body, headers=headers, missing=InvalidParamsError
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


async def _a2a_task(call: Call, task: CairnTask, *, history: int | None) -> Task:
    attempts = await call.rows.attempts(task.id)
    messages: list[TaskMessage] = []
    if attempts and history != 0:
        messages = await call.rows.messages(attempts[-1], 0)
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


async def _follow(call: Call, task: CairnTask) -> AsyncIterator[Event]:
    """The task, then a status event per change and per attempt message, then its artifacts and
    the final status. Reads the task's rows (the caller was checked once) when it changes."""
    rows = call.rows
    async with rows.changes(task.id) as changes:
        yield await _a2a_task(call, task, history=0)
        status, seen = task.status, {0: 0}
        while True:
            current = await rows.task(task.id)
            if current is None:
                raise TaskNotFoundError
            for attempt in await rows.attempts(task.id):
                for message in await rows.messages(attempt, seen.get(attempt.attemptN, 0)):
                    seen[attempt.attemptN] = message.seq
                    # the executor posted it while working, whatever the task's state is by now
                    yield _update(current, _message(current, message), final=False, working=True)
            if current.status != status:
                status = current.status
                if status not in TERMINAL_TASK_STATUSES:
                    yield _update(current, None, final=False)
            if current.status in TERMINAL_TASK_STATUSES:
                done = await _a2a_task(call, current, history=0)
                for artifact in done.artifacts:
                    yield TaskArtifactUpdateEvent(
                        task_id=done.id,
                        context_id=done.context_id,
                        artifact=artifact,
                        last_chunk=True,
                    )
                yield _update(current, None, final=True)
                return
            await changes.next()


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
