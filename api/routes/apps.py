"""The data of the two interactive apps (spec 4.7) that no other route serves: the diary map
(entries laid out in 2D from their embeddings, cached per diary version) and the task queue
view's counts by status. The tool server's app-only tools and the console call these."""

from __future__ import annotations

import asyncio
import time
from uuid import UUID

from aiohttp import web

from api import keys
from api.access import readable_diary, require_team_visible
from api.endpoint import Parsed, endpoint
from api.headers import require_team_header
from infra.repos import app_reads
from schemas.apps import EntryMap, TaskCounts, TaskCountsQuery
from schemas.errors import (
    AuthenticationRequired,
    DiaryNotFound,
    RequestInvalid,
    TeamNotFound,
    TeamRequired,
)
from schemas.memory import DiaryPath
from schemas.task_api import NO_PROJECT

routes = web.RouteTableDef()
TAG = "apps"


@endpoint(
    routes,
    "GET",
    "/diaries/{diaryId}/map",
    tag=TAG,
    path_params=DiaryPath,
    response=EntryMap,
    auth="optional",
    scopes=("diary:read",),
    errors=(DiaryNotFound, AuthenticationRequired),
)
async def diary_map(request: web.Request, parsed: Parsed[None, None, DiaryPath]) -> web.Response:
    """The diary's newest 10 000 entries laid out in 2D from their embeddings (PCA), with
    type, tags, token estimate and injection flag; the layout is cached per diary version."""
    started = time.perf_counter()
    diary_id = parsed.path.diaryId
    await readable_diary(request, diary_id)
    pool = request.app[keys.READ_POOL]
    cache = request.app[keys.MAP_CACHE]
    version = await app_reads.diary_version(pool, diary_id)
    body = cache.get(diary_id, version.tag)
    steps = ""
    if body is None:
        read_at = time.perf_counter()
        source = await app_reads.map_source(pool, diary_id)
        layout_at = time.perf_counter()
        # ~0.1 s of numpy and serialisation: off the event loop, other requests go on
        body = await asyncio.to_thread(_rendered, source, diary_id, version)
        cache.put(diary_id, version.tag, body)
        done_at = time.perf_counter()
        steps = f", read;dur={_ms(layout_at - read_at)}, layout;dur={_ms(done_at - layout_at)}"
    outcome = "miss" if steps else "hit"
    timing = f'map;dur={_ms(time.perf_counter() - started)};desc="projection {outcome}"{steps}'
    return web.Response(
        body=body,
        content_type="application/json",
        headers={"Server-Timing": timing, "ETag": f'"{version.tag}"'},
    )


def _rendered(
    source: app_reads.MapSource, diary_id: UUID, version: app_reads.DiaryVersion
) -> bytes:
    laid_out = app_reads.lay_out(source, diary_id, version.tag, version.entries)
    return laid_out.model_dump_json(by_alias=True).encode()


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


@endpoint(
    routes,
    "GET",
    "/task-counts",
    tag=TAG,
    query=TaskCountsQuery,
    response=TaskCounts,
    scopes=("task:read",),
    errors=(RequestInvalid, TeamRequired, TeamNotFound),
)
async def task_counts(request: web.Request, parsed: Parsed[None, TaskCountsQuery]) -> TaskCounts:
    """The team's tasks (`x-service-team-id`) counted by status, filtered by type and project."""
    query = parsed.query
    team_id = require_team_header(request)
    await require_team_visible(request, team_id)
    project_id = query.projectId if isinstance(query.projectId, UUID) else None
    return await app_reads.task_counts(
        request.app[keys.READ_POOL],
        team_id,
        query.taskType,
        query.projectId == NO_PROJECT,
        project_id,
    )
