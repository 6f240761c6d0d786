"""Models of embeddings and hybrid search (DECISIONS "Memory": Embeddings, Hybrid search).

- `EmbedRequest` / `EmbedResult`: the payloads of the activity `embedding.embed_passages`, which
  runs on the embedding task queue (`schemas.queues`).
- `SearchRequest` / `SearchResponse`: the body and answer of `POST /diary/search`.
- `SearchFilters`: what the search repository needs, whoever calls it (the diary search route,
  the public feed search): the scope as diary ids and every filter, already validated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from pydantic import Field, StringConstraints

from schemas import limits
from schemas.base import Instant, Payload, RequestBody, ResponseBody
from schemas.memory import AsOf, Entry, EntryType, Tag

# --- the embedding activity ---------------------------------------------------------------


class EmbedRequest(Payload):
    """Texts to embed, as `schemas.kernel.embedding_text.entry_embedding_text` builds them."""

    texts: list[str] = Field(max_length=limits.EMBED_REQUEST_MAX_TEXTS)
    # The asking run's team (`schemas.priorities.fairness_key`): the worker's batcher takes the
    # teams' calls in turn. Temporal does not hand an activity its run's priority, so it travels
    # here.
    fairness_key: str | None = None


class EmbedResult(Payload):
    """One L2-normalised vector per text, in the order of the request."""

    vectors: list[list[float]]


# --- POST /diary/search -------------------------------------------------------------------

SearchType = Literal["hybrid", "fulltext", "vector"]
"""Which arms ran: both, full text only (no query vector, or no entry in scope has one), or the
vector arm only (the query has no searchable words, e.g. only stop words)."""

SearchMode = Literal["hybrid", "vector", "fulltext"]
"""Which arms a search may run: both (the default), or one of them alone, to measure each arm
(bench/quality.py). `vector` degrades to full text when the query cannot be embedded, as
`hybrid` does; `search_type` always says what ran."""

SearchQueryText = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.SEARCH_QUERY_MAX_CHARS)
]
FilterTags = Annotated[list[Tag], Field(max_length=limits.ENTRY_TAGS_MAX)]
Weight = Annotated[float, Field(ge=0, le=1)]


class SearchRequest(RequestBody):
    query: SearchQueryText
    diaryId: UUID | None = Field(
        default=None, description="One diary; omitted = every diary the caller can read"
    )
    tags: FilterTags | None = Field(default=None, description="Entries carry all of these")
    excludeTags: FilterTags | None = Field(default=None, description="Entries carry none")
    entryTypes: Annotated[list[EntryType], Field(max_length=4)] | None = None
    excludeSuperseded: bool = Field(
        default=False,
        description="Leave out entries an accepted `supersedes` relation targets (by default "
        "they rank just below the entry that superseded them)",
    )
    createdBefore: Instant | None = None
    createdAfter: Instant | None = None
    asOf: AsOf | None = None
    limit: int = Field(default=limits.SEARCH_PAGE.default, ge=1, le=limits.SEARCH_PAGE.max)
    wRelevance: Weight | None = Field(default=None, description="Default 1")
    wRecency: Weight | None = Field(default=None, description="Default 0")
    wImportance: Weight | None = Field(default=None, description="Default 0")
    mode: SearchMode = Field(
        default="hybrid",
        description="`hybrid` (default): vector and full text fused; `vector` or `fulltext`: "
        "that arm alone (for measuring retrieval quality; `vector` falls back to full text "
        "when the query cannot be embedded)",
    )


class SearchResponse(ResponseBody):
    results: list[Entry] = Field(description="Entries with their `score`, best first")
    total: int = Field(description="How many results this answer holds")
    search_type: SearchType


# --- what the repository takes ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchWeights:
    """combined = relevance·w_relevance + recency·w_recency + importance/10·w_importance."""

    relevance: float = limits.SEARCH_WEIGHT_RELEVANCE_DEFAULT
    recency: float = 0.0
    importance: float = 0.0


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """The scope (diary ids the caller may read) and the filters of one search."""

    diary_ids: tuple[UUID, ...]
    limit: int = limits.SEARCH_PAGE.default
    tags: tuple[str, ...] = ()
    exclude_tags: tuple[str, ...] = ()
    entry_types: tuple[str, ...] = ()
    exclude_superseded: bool = False
    exclude_suspicious: bool = False
    created_before: datetime | None = None
    created_after: datetime | None = None
    as_of: datetime | None = None  # None: now
    weights: SearchWeights = field(default_factory=SearchWeights)
    mode: SearchMode = "hybrid"
