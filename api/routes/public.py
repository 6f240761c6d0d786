"""The public feed (SPEC 1, 5 "Public endpoints"): entries of `public` diaries, no credential.

- `GET /public/feed?limit&cursor&tag&includeSuspicious` → `{items, nextCursor}`, newest first
  by `(created_at, id)`. `nextCursor` (null on the last page) is opaque and signed with the
  server secret, bound to `tag` and `includeSuspicious` (`schemas.kernel.cursors`): a tampered
  cursor, or one reused with other filters, is 400 `invalid-cursor`. Keyset paging, so an entry
  written while a reader pages is never served twice nor shifts the pages.
- `GET /public/entry/{entryId}` (the reference path) and `GET /public/entries/{entryId}` (the
  same, in the plural of every other collection): one item. An entry of a `private` or
  `moltnet` diary is 404, as is an injection-flagged entry unless `includeSuspicious=true`
  (a link must not show what the feed hides by default).
- `GET /public/feed/search?q&limit&tag&entryTypes&excludeSuperseded&includeSuspicious` →
  `{items, query, search_type}`: the hybrid search of `POST /diary/search` over every public
  diary (rate bucket `public_search`).

Injection-flagged entries are hidden everywhere here unless `includeSuspicious=true`. Every
answer may be cached by shared caches for a minute (`Cache-Control: public, max-age=60`): it is
the same for every reader. Anonymous callers count against `global_anon` per address.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import numpy as np
from aiohttp import web
from numpy.typing import NDArray

from api import keys
from api.endpoint import Parsed, endpoint, render
from api.reads import reader
from infra.repos import public_reads
from infra.repos.search import SearchRepo
from schemas import limits
from schemas.embedding import SearchFilters
from schemas.errors import (
    EntryNotFound,
    RequestInvalid,
)
from schemas.kernel.cursors import Keyset
from schemas.public import (
    PublicEntry,
    PublicEntryPath,
    PublicEntryQuery,
    PublicFeed,
    PublicFeedQuery,
    PublicSearchQuery,
    PublicSearchResult,
)

routes = web.RouteTableDef()
TAG = "public"
FEED_CURSOR_SCOPE = "public-feed"
CACHE_CONTROL = f"public, max-age={limits.PUBLIC_CACHE_MAX_AGE_SEC}"
log = logging.getLogger(__name__)


def _cached(payload: Any) -> web.StreamResponse:
    response = render(payload)
    response.headers["Cache-Control"] = CACHE_CONTROL
    return response


# --- the feed ------------------------------------------------------------------------------------


@endpoint(
    routes,
    "GET",
    "/public/feed",
    tag=TAG,
    query=PublicFeedQuery,
    response=PublicFeed,
    auth="none",
    errors=(RequestInvalid,),
)
async def public_feed(
    request: web.Request, parsed: Parsed[None, PublicFeedQuery]
) -> web.StreamResponse:
    """Entries of public diaries, newest first, a page at a time."""
    query = parsed.query
    keyset = Keyset(
        request.app[keys.SETTINGS].secret_bytes, FEED_CURSOR_SCOPE, _feed_binding(query)
    )
    entries = await public_reads.feed_page(
        reader(request),
        query.tag,
        query.includeSuspicious,
        keyset.after(query.cursor),
        query.limit + 1,  # one more than asked tells whether another page follows
    )
    page, next_cursor = keyset.page(entries, query.limit, lambda e: (e.createdAt, e.id))
    feed = PublicFeed(items=page, nextCursor=next_cursor)
    payload = feed.model_dump(mode="json", exclude_none=True)
    payload["nextCursor"] = next_cursor  # null on the last page, not absent
    return _cached(payload)


def _feed_binding(query: PublicFeedQuery) -> dict[str, str | bool | None]:
    return {"tag": query.tag, "includeSuspicious": query.includeSuspicious}


# --- one entry -----------------------------------------------------------------------------------


async def _public_entry(
    request: web.Request, parsed: Parsed[None, PublicEntryQuery, PublicEntryPath]
) -> web.StreamResponse:
    path, query = parsed.path, parsed.query
    entry = await public_reads.public_entry(reader(request), path.entryId)
    if entry is None or (entry.injectionRisk and not query.includeSuspicious):
        raise EntryNotFound("No such public entry")
    return _cached(entry)


@endpoint(
    routes,
    "GET",
    "/public/entry/{entryId}",
    tag=TAG,
    path_params=PublicEntryPath,
    query=PublicEntryQuery,
    response=PublicEntry,
    auth="none",
    errors=(EntryNotFound,),
)
async def get_public_entry(
    request: web.Request, parsed: Parsed[None, PublicEntryQuery, PublicEntryPath]
) -> web.StreamResponse:
    """One entry of a public diary."""
    return await _public_entry(request, parsed)


@endpoint(
    routes,
    "GET",
    "/public/entries/{entryId}",
    tag=TAG,
    path_params=PublicEntryPath,
    query=PublicEntryQuery,
    response=PublicEntry,
    auth="none",
    errors=(EntryNotFound,),
)
async def get_public_entry_plural(
    request: web.Request, parsed: Parsed[None, PublicEntryQuery, PublicEntryPath]
) -> web.StreamResponse:
    """One entry of a public diary (same as `/public/entry/{entryId}`)."""
    return await _public_entry(request, parsed)


# --- search --------------------------------------------------------------------------------------


@endpoint(
    routes,
    "GET",
    "/public/feed/search",
    tag=TAG,
    query=PublicSearchQuery,
    response=PublicSearchResult,
    auth="none",
    rate_bucket="public_search",
    errors=(RequestInvalid,),
)
async def search_public_feed(
    request: web.Request, parsed: Parsed[None, PublicSearchQuery]
) -> web.StreamResponse:
    """Hybrid search over the entries of every public diary."""
    query = parsed.query
    pool = reader(request)
    scope = await public_reads.public_diary_ids(pool)
    filters = SearchFilters(
        diary_ids=scope,
        limit=query.limit,
        tags=(query.tag,) if query.tag else (),
        entry_types=query.entry_types(),
        exclude_superseded=query.excludeSuperseded,
        exclude_suspicious=not query.includeSuspicious,
    )
    vector = asyncio.create_task(_embed_query(request, query.q))
    try:
        outcome = await SearchRepo(pool).search(query.q, vector, filters)
    finally:
        if not vector.done():
            vector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await vector
    scores = {hit.entry_id: hit.score for hit in outcome.hits}
    # Re-read the hits as public items: the author's key, and only while still public.
    public = await public_reads.public_entries(pool, list(scores))
    items = [
        public[entry_id].model_copy(update={"score": round(score, 6)})
        for entry_id, score in scores.items()
        if entry_id in public
    ]
    return _cached(PublicSearchResult(items=items, query=query.q, search_type=outcome.search_type))


async def _embed_query(request: web.Request, text: str) -> NDArray[np.float32] | None:
    """The query's vector, or None (full-text search) when the embedder is missing or fails."""
    embedder = request.app[keys.EMBEDDER]
    if embedder is None:
        return None
    try:
        return await asyncio.to_thread(embedder.embed_one, text)
    except Exception:
        log.warning("public query embedding failed; searching full text only", exc_info=True)
        return None
