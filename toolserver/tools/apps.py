"""The two apps of spec 4.7 (MCP Apps extension, `io.modelcontextprotocol/ui`). Each opener
names its `ui://` page in `_meta.ui.resourceUri` (toolserver/resources.py serves it), so a
host that mounts apps shows the interactive view; every other host gets the opener's
structured text: what the app would show first, and the tools that page further. The page
reads its data through tool calls; the two tools only the page needs are marked app-only
(`_meta.ui.visibility: ["app"]`), so hosts keep them away from the model."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from schemas import limits
from schemas.apps import EntryMap, TaskCounts, app_uri
from schemas.memory import Diary, EntryType, TagCount
from schemas.tasks import TaskStatus
from toolserver.registry import Arguments, Call, tool

TASKS_APP_URI = app_uri("tasks")
ENTRIES_MAP_URI = app_uri("entries-map")
MAP_SAMPLE = 50


def _opens(uri: str) -> dict[str, Any]:
    return {"ui": {"resourceUri": uri, "visibility": ["model", "app"]}}


def _app_only(uri: str) -> dict[str, Any]:
    return {"ui": {"resourceUri": uri, "visibility": ["app"]}}


class TaskLine(BaseModel):
    id: UUID
    taskType: str
    title: str | None = None
    status: TaskStatus
    attemptCount: int
    createdAt: str


class TasksAppView(BaseModel):
    app: Literal["tasks"]
    resourceUri: str
    teamId: UUID
    filters: dict[str, Any]
    tasks: list[TaskLine]
    nextCursor: str | None = None
    tools: list[str]


class TasksAppOpen(Arguments):
    team_id: UUID
    status: TaskStatus | None = None
    task_type: str | None = Field(default=None, max_length=64)
    project_id: str | None = Field(default=None, description="Or `none` for General")


def _queue_text(result: dict[str, Any]) -> str:
    lines = [f"Task queue of team {result['teamId']} ({len(result['tasks'])} shown):"]
    lines += [
        f"- {t['status']:<10} {t['taskType']:<14} {t.get('title') or ''} ({t['id']})"
        for t in result["tasks"]
    ]
    return "\n".join(lines)


@tool(
    output=TasksAppView,
    read_only=True,
    render=_queue_text,
    meta=_opens(TASKS_APP_URI),
    toolset="tasks",
)
async def tasks_app_open(call: Call, args: TasksAppOpen) -> TasksAppView:
    """Open a team's task queue view."""
    page = await call.api.list_tasks(
        args.team_id,
        status=args.status,
        taskType=args.task_type,
        projectId=args.project_id,
        limit=limits.TASKS_PAGE.default,
    )
    filters = {"status": args.status, "task_type": args.task_type, "project_id": args.project_id}
    return TasksAppView(
        app="tasks",
        resourceUri=TASKS_APP_URI,
        teamId=args.team_id,
        filters={k: v for k, v in filters.items() if v is not None},
        tasks=[
            TaskLine(
                id=t.id,
                taskType=t.taskType,
                title=t.title,
                status=t.status,
                attemptCount=t.attemptCount,
                createdAt=t.createdAt.isoformat(),
            )
            for t in page.items
        ],
        nextCursor=page.nextCursor,
        tools=[
            "tasks_list",
            "tasks_get",
            "tasks_attempts_list",
            "tasks_messages_list",
            "tasks_artifacts_list",
            "tasks_console_link",
        ],
    )


class EntryPoint(BaseModel):
    id: UUID
    title: str | None = None
    entryType: EntryType
    tags: list[str]
    importance: int
    injectionRisk: bool


class EntriesMapView(BaseModel):
    app: Literal["entries_map"]
    resourceUri: str
    diary: Diary
    total: int
    tags: list[TagCount]
    entries: list[EntryPoint]
    tools: list[str]


class EntriesMapOpen(Arguments):
    diary_id: UUID
    entry_type: EntryType | None = None


def _map_text(result: dict[str, Any]) -> str:
    flagged = sum(1 for e in result["entries"] if e["injectionRisk"])
    top = ", ".join(f"{t['tag']} ({t['count']})" for t in result["tags"][:10])
    return (
        f"Diary {result['diary']['name']}: {result['total']} entries, "
        f"{len(result['entries'])} shown, {flagged} flagged for prompt injection. Tags: {top}"
    )


@tool(
    output=EntriesMapView,
    read_only=True,
    render=_map_text,
    meta=_opens(ENTRIES_MAP_URI),
    toolset="memory",
)
async def entries_map_open(call: Call, args: EntriesMapOpen) -> EntriesMapView:
    """Open a diary's map of entries."""
    diary = await call.api.get_diary(args.diary_id)
    page = await call.api.list_entries(args.diary_id, limit=MAP_SAMPLE, entry_type=args.entry_type)
    tags = await call.api.diary_tags(args.diary_id, entry_type=args.entry_type)
    return EntriesMapView(
        app="entries_map",
        resourceUri=ENTRIES_MAP_URI,
        diary=diary,
        total=page.total,
        tags=tags.tags[:50],
        entries=[
            EntryPoint(
                id=e.id,
                title=e.title,
                entryType=e.entryType,
                tags=e.tags,
                importance=e.importance,
                injectionRisk=e.injectionRisk,
            )
            for e in page.items
        ],
        tools=["entries_list", "entries_search", "entries_get", "diary_tags"],
    )


# --- app-only tools: what the pages read that no model-facing tool returns -------------------


class TaskCountsArgs(Arguments):
    team_id: UUID = Field(description="The team whose queue to count")
    task_type: str | None = Field(default=None, max_length=64)
    project_id: str | None = Field(default=None, description="Or `none` for General")


def _counts_text(result: dict[str, Any]) -> str:
    counts = ", ".join(f"{status} {n}" for status, n in result["counts"].items() if n)
    return f"{result['total']} tasks: {counts or 'none'}"


@tool(
    output=TaskCounts,
    read_only=True,
    render=_counts_text,
    meta=_app_only(TASKS_APP_URI),
    toolset="tasks",
)
async def tasks_app_counts(call: Call, args: TaskCountsArgs) -> TaskCounts:
    """Count a team's tasks by status (the task queue view's header), filtered by type and
    project."""
    return await call.api.task_counts(
        args.team_id, taskType=args.task_type, projectId=args.project_id
    )


class MapPointsArgs(Arguments):
    diary_id: UUID = Field(description="The diary to lay out")


def _points_text(result: dict[str, Any]) -> str:
    return (
        f"{result['count']} of {result['total']} entries laid out ({result['method']}, "
        f"version {result['version']})"
    )


@tool(
    output=EntryMap,
    read_only=True,
    render=_points_text,
    meta=_app_only(ENTRIES_MAP_URI),
    toolset="memory",
)
async def entries_map_points(call: Call, args: MapPointsArgs) -> dict[str, Any]:
    """The diary map's points: the newest 10 000 entries laid out in 2D from their
    embeddings, with type, tags, token estimate and injection flag, column-wise."""
    return await call.api.entry_map_json(args.diary_id)
