"""The two interactive apps of spec 4.7 (task queue view, diary map): their wire models and
their HTML, one source for both hosts that mount them.

The MCP server serves each page as a `ui://` resource of the MCP Apps extension
(`io.modelcontextprotocol/ui`, mime type `text/html;profile=mcp-app`); the REST app serves the
very same bytes under `/console/apps/` to its console page, which hosts the app for a logged-in
human (DECISIONS "Tool-protocol server"). The pages are self-contained (inline script and
style, nothing fetched at run time) and reach data only through the host's tool calls, so
they live here, in the kernel both the tool server and the API may import.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Annotated, Literal
from uuid import UUID

from pydantic import AfterValidator, Field

from schemas import limits
from schemas.base import RequestBody, ResponseBody
from schemas.memory import EntryType
from schemas.task_api import TaskTypeName
from schemas.tasks import TaskStatus

AppName = Literal["tasks", "entries-map"]
APP_NAMES: tuple[AppName, ...] = ("tasks", "entries-map")
APP_MIME_TYPE = "text/html;profile=mcp-app"
EXTENSION_ID = "io.modelcontextprotocol/ui"


def app_uri(name: AppName) -> str:
    return f"ui://cairn/{name}.html"


BRIDGE_MARK = "/*{{bridge}}*/"


@cache
def app_html(name: AppName) -> str:
    """The page of one app, with the protocol bridge (bridge.js) inlined: one document,
    nothing to fetch. Read once per process."""
    folder = resources.files(__package__)
    page = folder.joinpath(f"{name}.html").read_text(encoding="utf-8")
    bridge = folder.joinpath("bridge.js").read_text(encoding="utf-8")
    return page.replace(BRIDGE_MARK, bridge)


# --- the task queue view ------------------------------------------------------------------


class TaskCountsQuery(RequestBody):
    """`GET /task-counts`: the team's tasks counted by status, under the view's filters."""

    taskType: TaskTypeName | None = None
    projectId: UUID | Literal["none"] | None = Field(
        default=None, description="a project id, or `none` for General tasks only"
    )


class TaskCounts(ResponseBody):
    teamId: UUID
    counts: dict[TaskStatus, int] = Field(description="every status, zero included")
    total: int


# --- the diary map -----------------------------------------------------------------------


class EntryMap(ResponseBody):
    """A diary's entries laid out in 2D, column-wise (one array per field, index i is one
    entry) so that 10 000 entries stay a compact document. `x`/`y` lie in [-1, 1]; an entry
    without an embedding yet has null coordinates. `version` names the diary state the
    projection was computed for; the same version always gives the same layout."""

    diaryId: UUID
    version: str
    method: str = Field(description="how the 2D layout was computed")
    count: int = Field(description="entries laid out: the newest, at most 10 000")
    total: int = Field(description="entries in the diary")
    ids: list[UUID]
    x: list[float | None]
    y: list[float | None]
    titles: list[str]
    entryTypes: list[EntryType]
    tags: list[list[str]]
    tokens: list[int] = Field(description="estimated tokens of each entry's content")
    flagged: list[bool] = Field(description="the entry is flagged for prompt injection")


# --- the human console ------------------------------------------------------------------

NEXT_MAX_CHARS = limits.CONSOLE_NEXT_MAX_CHARS


def is_local_path(target: str) -> bool:
    """Whether `target` is a path on this origin (`/console/…`, `/oauth2/…?x=y`): what a
    login may send the browser on to. Anything a browser could read as another origin is
    refused: a scheme, `//host`, a backslash (browsers read `/\\host` as `//host`), control
    characters."""
    return (
        target.startswith("/")
        and not target.startswith("//")
        and "\\" not in target
        and not any(ord(char) < 0x20 or ord(char) == 0x7F for char in target)
        and len(target) <= NEXT_MAX_CHARS
    )


def _local(value: str) -> str:
    if not is_local_path(value):
        raise ValueError("next must be a path on this site, starting with a single /")
    return value


# Where to go after login: a path on this origin only
NextPath = Annotated[
    str,
    Field(max_length=NEXT_MAX_CHARS, description="a path on this origin only"),
    AfterValidator(_local),
]


class ConsoleTeamPath(RequestBody):
    teamId: UUID


class ConsoleAppPath(RequestBody):
    name: AppName
