"""Memory hygiene (issue 26): consolidation payloads, retrieval batches and the diary's report."""

from __future__ import annotations

from uuid import UUID

from pydantic import Field

from schemas import limits
from schemas.base import Payload, ResponseBody


class NearDuplicateProbe(Payload):
    """Propose, for each entry, a relation to its nearest older live entry, if near enough."""

    entry_ids: list[UUID]
    workflow_id: str
    min_similarity: float = limits.NEAR_DUPLICATE_MIN_SIMILARITY


class NearDuplicateProposals(Payload):
    relation_ids: list[UUID]  # the relations proposed (none for an entry with nothing near)


class ConsolidationInput(Payload):
    """The consolidation of entries created since the API's last flush (`api.hygiene`)."""

    entry_ids: list[UUID]
    min_similarity: float = limits.NEAR_DUPLICATE_MIN_SIMILARITY


class ConsolidationSweepInput(Payload):
    """The sweep's input, and what it carries into its next run when it continues as new. Where
    it stands is kept in the database (`consolidation_pending`, migration 0025), not here: a
    run takes the entries whose vector changed since the sweep last probed them. (Runs started
    before carried a `cursor`, which is ignored now.)"""

    page: int = limits.CONSOLIDATION_PAGE
    pages_per_run: int = limits.CONSOLIDATION_PAGES_PER_RUN
    min_similarity: float = limits.NEAR_DUPLICATE_MIN_SIMILARITY
    scanned: int = 0  # totals of the runs before this one
    proposed: int = 0


class ConsolidationPage(Payload):
    limit: int
    min_similarity: float
    workflow_id: str


class ConsolidationPageResult(Payload):
    scanned: int  # entries probed: one nearest-neighbour query each
    proposed: int


class ConsolidationSweepResult(Payload):
    scanned: int
    proposed: int


class Retrievals(Payload):
    """Entry ids searches and packs returned, as the API batched them."""

    entry_ids: list[UUID]


class HygieneReport(ResponseBody):
    """How clean a diary is: what it holds, what was kept out, and what waits for a decision."""

    diaryId: UUID
    entries: int
    duplicatesRefused: int = Field(
        description="Creates refused as exact duplicates of a live entry"
    )
    openProposals: int = Field(description="Relations between its entries still `proposed`")
    superseded: int = Field(description="Entries an accepted `supersedes` relation replaced")
    injectionFlagged: int
    unretrieved: int = Field(
        description="Entries no search or pack returned in the last 30 days (counted in batches, "
        "so up to a minute behind)"
    )
    unretrievedDays: int = limits.HYGIENE_UNRETRIEVED_SEC // limits.DAY_SEC
