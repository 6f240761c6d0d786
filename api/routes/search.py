"""`POST /diary/search`: hybrid (vector + full-text) search over the diaries a caller can read.

The scope:

- with `diaryId`: that diary under its visibility rule (`public` and `moltnet` diaries are
  readable by any authenticated caller; a `private` one needs Diary `read`, else 404);
- without: every diary the caller can read *through its teams and grants* (the permission
  engine's `lookup(Diary, read)`), the same set `GET /diaries` lists. `public` and `moltnet`
  diaries of other teams are not included: cross-diary search is the caller's own memory, and
  other teams' open diaries are one `diaryId` (or the public feed search) away.

The API embeds the query itself, in a thread, while it reads the caller's scope, then sends the
search as one statement (infra/repos/search.py): a search reads and never starts a workflow.
When the query cannot be embedded the search degrades to full text (`search_type: fulltext`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING
from uuid import UUID

import numpy as np
from aiohttp import web
from numpy.typing import NDArray

from api import keys
from api.access import allowed_ids, readable_diary
from api.endpoint import Parsed, endpoint
from api.reads import reader
from infra.repos.search import SearchRepo
from schemas import limits
from schemas.embedding import (
    SearchFilters,
    SearchRequest,
    SearchResponse,
    SearchWeights,
)
from schemas.errors import DiaryNotFound

if TYPE_CHECKING:
    from infra.embeddings import OnnxEmbedder

routes = web.RouteTableDef()
TAG = "search"
log = logging.getLogger(__name__)


@endpoint(
    routes,
    "POST",
    "/diary/search",
    tag=TAG,
    memory="search_memory",
    body=SearchRequest,
    response=SearchResponse,
    scopes=("diary:read",),
    rate_bucket="search",
    errors=(DiaryNotFound,),
    read_only=True,
)
async def search_diaries(request: web.Request, parsed: Parsed[SearchRequest]) -> SearchResponse:
    """Hybrid search over one diary or every diary the caller can read."""
    body = parsed.body
    # the query embeds (in a thread) while the scope is read: the search's one statement waits
    # for the vector, so this is the overlap left
    query_vector = (
        None if body.mode == "fulltext" else asyncio.create_task(_embed_query(request, body.query))
    )
    try:
        filters = _filters(body, await _scope(request, body.diaryId))
        outcome = await SearchRepo(reader(request)).search(body.query, query_vector, filters)
    finally:
        if query_vector is not None and not query_vector.done():
            query_vector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await query_vector
    results = [hit.entry() for hit in outcome.hits]
    request.app[keys.HYGIENE].retrieved(
        entry.id for entry in results
    )  # batched, never written here
    return SearchResponse(results=results, total=len(results), search_type=outcome.search_type)


async def _scope(request: web.Request, diary_id: UUID | None) -> tuple[UUID, ...]:
    if diary_id is not None:
        diary = await readable_diary(request, diary_id)  # 404 unless the caller may read it
        return (diary.id,)
    return tuple(sorted(await allowed_ids(request, "Diary", "read")))


def _filters(body: SearchRequest, diary_ids: tuple[UUID, ...]) -> SearchFilters:
    return SearchFilters(
        diary_ids=diary_ids,
        limit=body.limit,
        tags=tuple(body.tags or ()),
        exclude_tags=tuple(body.excludeTags or ()),
        entry_types=tuple(body.entryTypes or ()),
        exclude_superseded=body.excludeSuperseded,
        created_before=body.createdBefore,
        created_after=body.createdAfter,
        as_of=body.asOf,
        mode=body.mode,
        weights=SearchWeights(
            relevance=_weight(body.wRelevance, limits.SEARCH_WEIGHT_RELEVANCE_DEFAULT),
            recency=_weight(body.wRecency, 0.0),
            importance=_weight(body.wImportance, 0.0),
        ),
    )


def _weight(given: float | None, default: float) -> float:
    return default if given is None else given


async def load_query_embedder() -> OnnxEmbedder | None:
    """The model the API embeds queries with (~0.3 s, in a thread); None when its files are
    missing or altered: search then answers with full text only, and says so in the log."""
    from infra.embeddings import OnnxEmbedder, WeightsIntegrityError

    try:
        return await asyncio.to_thread(OnnxEmbedder.load)
    except (FileNotFoundError, WeightsIntegrityError, ValueError):
        log.error("no query embedder: search falls back to full text", exc_info=True)
        return None


async def _embed_query(request: web.Request, query: str) -> NDArray[np.float32] | None:
    """The query's vector, or None (full-text search) when the embedder is missing or fails."""
    embedder = request.app[keys.EMBEDDER]
    if embedder is None:
        return None
    try:
        return await asyncio.to_thread(embedder.embed_one, query)
    except Exception:
        log.warning("query embedding failed; searching full text only", exc_info=True)
        return None
