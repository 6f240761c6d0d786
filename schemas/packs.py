"""Context packs and rendered packs (SPEC 2.5, 4.7 Packs): wire models, workflow payloads and
the pure steps every layer shares (compile a selection, the stored payload, stats, diff and
provenance graphs).

A pack is a content-addressed selection of one diary's entries, each at a compression level
chosen to fit a token budget. Its CID (`schemas.kernel.cids.pack_cid`) hashes the diary, the
type, the params and each entry's CID, level and rank: never who made it or when, so the same
selection made twice is the same pack. A rendered pack is the immutable Markdown of a pack,
addressed by the CID of its content hash, render method and source pack CID.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, Final, Literal
from uuid import UUID

from pydantic import Field, StringConstraints, field_validator, model_validator

from schemas import limits
from schemas.base import DateTime, Payload, RequestBody, ResponseBody
from schemas.kernel.cids import (
    DAG_CBOR_CODEC,
    PACK_CID_VERSION,
    PackEntry,
    pack_cid,
    parse_cid,
)
from schemas.kernel.compression import CompressionLevel, FitCandidate, fit_entries
from schemas.memory import AsOf, as_of_text
from schemas.numbers import SqlCount, SqlOrdinal

PackType = Literal["optimized", "custom"]
PROVENANCE_FORMAT: Final = "service.provenance-graph/v1"
PackCid = Annotated[str, StringConstraints(min_length=2, max_length=120)]
RenderMethod = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.RENDER_METHOD_MAX_CHARS)
]
Description = Annotated[
    str, StringConstraints(max_length=limits.RENDERED_PACK_DESCRIPTION_MAX_CHARS)
]


# --- requests -----------------------------------------------------------------------------


class PackSelection(RequestBody):
    entryId: UUID
    rank: SqlOrdinal = Field(description="1 is the most important")


class PackCreateRequest(RequestBody):
    """`POST /diaries/{id}/packs` and its preview."""

    packType: Literal["custom"] = "custom"
    params: dict[str, Any] = Field(default_factory=dict, description="free-form, hashed")
    entries: list[PackSelection] = Field(
        min_length=limits.PACK_ENTRIES_MIN, max_length=limits.PACK_ENTRIES_MAX
    )
    tokenBudget: int | None = Field(
        default=None, ge=limits.PACK_TOKEN_BUDGET_MIN, le=limits.PACK_TOKEN_BUDGET_MAX
    )
    pinned: bool = False
    force: bool = Field(default=False, description="create even with injection-flagged entries")
    supersedesPackId: UUID | None = None
    asOf: AsOf | None = Field(
        default=None,
        description="Pack the diary as it stood at this instant: every selected entry must have "
        "been created by then (400 `pack-entry-after-as-of`). Recorded in `params.asOf`, so the "
        "pack CID pins it; entries are packed with their current content",
    )

    @field_validator("entries")
    @classmethod
    def _distinct(cls, entries: list[PackSelection]) -> list[PackSelection]:
        if len({e.entryId for e in entries}) != len(entries):
            raise ValueError("an entry is selected twice")
        if len({e.rank for e in entries}) != len(entries):
            raise ValueError("two entries share a rank")
        return entries

    @field_validator("params")
    @classmethod
    def _bounded_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        _check_addressable(params, "params")
        if len(json.dumps(params, ensure_ascii=False)) > limits.PACK_PARAMS_MAX_BYTES:
            raise ValueError(f"params exceed {limits.PACK_PARAMS_MAX_BYTES} bytes of JSON")
        return params

    @model_validator(mode="after")
    def _as_of_is_the_request_s(self) -> PackCreateRequest:
        """`params.asOf` is what `asOf` writes: a pack cannot claim an instant it was not made
        at. Sending back the params of a pack made `asOf` (with that `asOf`) is accepted."""
        given = self.params.get(PARAMS_AS_OF)
        if given is not None and (self.asOf is None or given != as_of_text(self.asOf)):
            raise ValueError("params.asOf is set from asOf (the same instant, in UTC with Z)")
        return self

    def hashed_params(self) -> dict[str, Any]:
        """The params the pack records and its CID hashes: the caller's, plus `asOf`."""
        if self.asOf is None:
            return self.params
        return {**self.params, PARAMS_AS_OF: as_of_text(self.asOf)}


PARAMS_AS_OF: Final = "asOf"


# JavaScript's exact integers: a pack CID must come out the same in every language
_SAFE_INTEGER: Final = 2**53 - 1


def _check_addressable(value: Any, path: str) -> None:
    """Refuse what a content address cannot carry the same way everywhere: NaN, infinities
    and integers beyond 2**53 (JSON would also turn NaN into null on its way to the worker)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if abs(value) > _SAFE_INTEGER:
            raise ValueError(f"{path}: integers beyond 2**53 cannot be content-addressed")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path}: NaN and infinities cannot be content-addressed")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_addressable(item, f"{path}/{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_addressable(item, f"{path}/{i}")


class PackPath(RequestBody):
    id: UUID


class PackCidPath(RequestBody):
    cid: PackCid


class PackDiffPath(RequestBody):
    id: UUID
    otherId: UUID


class PackCidDiffPath(RequestBody):
    cid: PackCid
    otherCid: PackCid


class PackGetQuery(RequestBody):
    expand: Literal["entries"] | None = None


class PackListQuery(RequestBody):
    limit: int = Field(default=limits.PACKS_PAGE.default, ge=1, le=limits.PACKS_PAGE.max)
    offset: SqlCount = 0
    expand: Literal["entries"] | None = None


class PackCatalogQuery(PackListQuery):
    """`GET /packs`: the packs of the team of `x-service-team-id` (a `diaryId` is refused)."""

    containsEntry: UUID | None = None
    includeRendered: bool = False


class ProvenanceQuery(RequestBody):
    depth: int = Field(
        default=limits.PACK_PROVENANCE_DEPTH_DEFAULT,
        ge=0,
        le=limits.PACK_PROVENANCE_DEPTH_MAX,
        description="supersedes hops to follow",
    )


class PackUpdateRequest(RequestBody):
    """Pinning clears the expiry; unpinning needs a future `expiresAt`."""

    pinned: bool | None = None
    expiresAt: DateTime | None = None

    @model_validator(mode="after")
    def _something(self) -> PackUpdateRequest:
        if not self.model_fields_set:
            raise ValueError("name at least one of pinned, expiresAt")
        return self


class RenderRequest(RequestBody):
    """`POST /packs/{id}/render` and its preview."""

    renderMethod: RenderMethod = Field(
        description="`server:pack-to-docs-v1`, or an agent-defined name with renderedMarkdown"
    )
    renderedMarkdown: (
        Annotated[str, StringConstraints(max_length=limits.RENDERED_MARKDOWN_MAX_CHARS)] | None
    ) = None
    pinned: bool = False
    description: Description | None = None


class RenderedListQuery(RequestBody):
    limit: int = Field(default=limits.PACKS_PAGE.default, ge=1, le=limits.PACKS_PAGE.max)
    offset: SqlCount = 0
    sourcePackId: UUID | None = None
    renderMethod: RenderMethod | None = None


class RenderedPackUpdateRequest(RequestBody):
    pinned: bool | None = None
    expiresAt: DateTime | None = None
    description: Description | None = None
    verifiedTaskId: UUID | None = None

    @model_validator(mode="after")
    def _something(self) -> RenderedPackUpdateRequest:
        if not self.model_fields_set:
            raise ValueError("name at least one field")
        return self


# --- responses ----------------------------------------------------------------------------


class PackEntryOut(ResponseBody):
    entryId: UUID
    entryCidSnapshot: str
    rank: int
    compressionLevel: CompressionLevel
    originalTokens: int
    packedTokens: int
    # what a person knows the entry by; not part of the pack (its CID does not hash it)
    title: str | None = Field(
        default=None,
        description="the entry's current title (absent when it has none or was deleted)",
    )


class CompileStats(ResponseBody):
    totalTokens: int
    entriesIncluded: int
    entriesCompressed: int
    compressionRatio: float
    budgetUtilization: float


class PackCompiled(ResponseBody):
    """A compiled selection: the preview (no `packId`) or the pack created (or found)."""

    packId: UUID | None = None
    created: bool | None = None
    diaryId: UUID
    packCid: str
    packType: PackType
    params: dict[str, Any]
    entries: list[PackEntryOut]
    droppedEntryIds: list[UUID] = Field(default_factory=list)
    compileStats: CompileStats


class RenderedSummary(ResponseBody):
    id: UUID
    packCid: str
    renderMethod: str
    totalTokens: int
    pinned: bool
    createdAt: datetime


class ContextPack(ResponseBody):
    id: UUID
    diaryId: UUID
    packCid: str
    packType: PackType
    params: dict[str, Any]
    payload: dict[str, Any]
    # absent when null, as the API renders it; the defaults let a client read it back
    tokenBudget: int | None = None
    createdBy: UUID
    supersedesPackId: UUID | None = None
    pinned: bool
    expiresAt: datetime | None = None
    createdAt: datetime
    updatedAt: datetime
    entryCount: int
    totalTokens: int
    entries: list[PackEntryOut] | None = None
    renderedPacks: list[RenderedSummary] | None = None


class PackList(ResponseBody):
    items: list[ContextPack]
    total: int
    limit: int
    offset: int


class ProvenanceNode(ResponseBody):
    id: str = Field(description="the node's CID")
    kind: Literal["pack", "entry"]
    packId: UUID | None = None
    entryId: UUID | None = None
    diaryId: UUID | None = None
    createdAt: datetime | None = None
    depth: int | None = Field(default=None, description="supersedes hops from the root pack")
    title: str | None = Field(
        default=None, description="an entry's current title (absent when it has none)"
    )


class ProvenanceEdge(ResponseBody):
    source: str
    target: str
    kind: Literal["includes", "supersedes"]
    rank: int | None = None
    compressionLevel: CompressionLevel | None = None


class ProvenanceMetadata(ResponseBody):
    format: str = PROVENANCE_FORMAT
    rootPackId: UUID
    rootPackCid: str
    depth: int
    truncated: bool = Field(description="an older pack lies beyond `depth`")


class ProvenanceGraph(ResponseBody):
    metadata: ProvenanceMetadata
    nodes: list[ProvenanceNode]
    edges: list[ProvenanceEdge]


class RankChange(ResponseBody):
    entryId: UUID
    fromRank: int
    toRank: int


class LevelChange(ResponseBody):
    entryId: UUID
    fromLevel: CompressionLevel
    toLevel: CompressionLevel


class DiffStats(ResponseBody):
    baseEntries: int
    otherEntries: int
    added: int
    removed: int
    reordered: int
    compressionChanged: int
    unchanged: int
    baseTokens: int
    otherTokens: int
    tokenDelta: int


class PackDiff(ResponseBody):
    basePackId: UUID
    basePackCid: str
    otherPackId: UUID
    otherPackCid: str
    added: list[PackEntryOut]
    removed: list[PackEntryOut]
    reordered: list[RankChange]
    compressionChanged: list[LevelChange]
    stats: DiffStats


class RenderedPack(ResponseBody):
    id: UUID | None = Field(default=None, description="absent on a preview")
    created: bool | None = None
    packCid: str
    sourcePackId: UUID
    sourcePackCid: str
    diaryId: UUID
    content: str | None = Field(default=None, description="the Markdown (absent in lists)")
    contentHash: str
    renderMethod: str
    totalTokens: int
    description: str | None = None
    createdBy: UUID | None = None
    verifiedTaskId: UUID | None = None
    pinned: bool
    expiresAt: datetime | None = None
    createdAt: datetime | None = None
    updatedAt: datetime | None = None


class RenderedPackList(ResponseBody):
    items: list[RenderedPack]
    total: int
    limit: int
    offset: int


# --- workflow payloads --------------------------------------------------------------------


class PackCreateInput(Payload):
    # None from the API: the workflow picks it (`workflow.uuid4()`, stable under replay)
    pack_id: UUID | None = None
    diary_id: UUID
    pack_type: PackType = "custom"
    params: dict[str, Any] = Field(default_factory=dict)
    selection: list[tuple[UUID, int]] = Field(default_factory=list)  # (entry id, rank)
    token_budget: int | None = None
    pinned: bool = False
    force: bool = False
    supersedes_pack_id: UUID | None = None
    created_by: UUID
    created_by_ns: str = "Agent"
    as_of: datetime | None = None  # every selected entry was created by then (params.asOf)


class PackCreated(Payload):
    pack_id: UUID
    created: bool = True


class PackUpdateInput(Payload):
    pack_id: UUID
    pinned: bool
    expires_at: datetime | None = None


class RenderInput(Payload):
    rendered_id: UUID | None = None  # as PackCreateInput.pack_id
    pack_id: UUID
    render_method: str
    # only for an agent-defined method: the server renders `server:*` methods itself
    markdown: str | None = None
    pinned: bool = False
    description: str | None = None
    created_by: UUID
    created_by_ns: str = "Agent"


class RenderCreated(Payload):
    rendered_id: UUID
    created: bool = True


class RenderedPackUpdateInput(Payload):
    rendered_id: UUID
    pinned: bool
    expires_at: datetime | None = None
    description: str | None = None
    set_description: bool = False
    verified_task_id: UUID | None = None


class PackSweepInput(Payload):
    batch_max: int = limits.PACK_SWEEP_BATCH_MAX


class PackSweepResult(Payload):
    packs_deleted: int = 0
    rendered_deleted: int = 0


class PackSweepStep(Payload):
    before: datetime
    limit: int


class SweepDeleted(Payload):
    deleted: int = 0


# --- pure steps ---------------------------------------------------------------------------


class PackSource(Payload):
    """A selected entry as compiling needs it: its rank, CID and current content."""

    entry_id: UUID
    rank: int
    cid: str
    content: str
    title: str | None = None


class CompiledPack(Payload):
    pack_cid: str
    payload: dict[str, Any]
    entries: list[PackEntryOut]
    dropped: list[UUID] = Field(default_factory=list)


def pack_payload(
    diary_id: UUID, pack_type: str, params: Mapping[str, Any], entries: Sequence[PackEntryOut]
) -> dict[str, Any]:
    """The hashed envelope as JSON (`context_packs.payload`): entry CIDs as strings, in the
    order the CID hashes them (rank, then CID)."""
    ordered = sorted(entries, key=lambda e: (e.rank, e.entryCidSnapshot))
    return {
        "v": PACK_CID_VERSION,
        "diaryId": str(diary_id),
        "packType": pack_type,
        "params": dict(params),
        "entries": [
            {"cid": e.entryCidSnapshot, "compressionLevel": e.compressionLevel, "rank": e.rank}
            for e in ordered
        ],
    }


def compile_pack(
    diary_id: UUID,
    pack_type: str,
    params: Mapping[str, Any],
    sources: Sequence[PackSource],
    token_budget: int | None,
) -> CompiledPack:
    """Fit the selection to the budget and address it. Raises ValueError when the params
    cannot be content-addressed (e.g. a non-finite number)."""
    by_id = {s.entry_id: s for s in sources}
    fit = fit_entries(
        [FitCandidate(entryId=s.entry_id, rank=s.rank, content=s.content) for s in sources],
        token_budget,
    )
    entries = [
        PackEntryOut(
            entryId=f.entryId,
            entryCidSnapshot=by_id[f.entryId].cid,
            rank=f.rank,
            compressionLevel=f.compressionLevel,
            originalTokens=f.originalTokens,
            packedTokens=f.packedTokens,
            title=by_id[f.entryId].title,
        )
        for f in fit.entries
    ]
    cid = pack_cid(
        diary_id,
        pack_type,
        params,
        [PackEntry(e.entryCidSnapshot, e.compressionLevel, e.rank) for e in entries],
    )
    return CompiledPack(
        pack_cid=cid,
        payload=pack_payload(diary_id, pack_type, params, entries),
        entries=entries,
        dropped=fit.dropped,
    )


def compile_stats(entries: Sequence[PackEntryOut], token_budget: int | None) -> CompileStats:
    """The figures of `schemas.kernel.compression.FitStats`, from stored entries."""
    packed = sum(e.packedTokens for e in entries)
    original = sum(e.originalTokens for e in entries)
    return CompileStats(
        totalTokens=packed,
        entriesIncluded=len(entries),
        entriesCompressed=sum(1 for e in entries if e.compressionLevel != "full"),
        compressionRatio=packed / original if original else 1.0,
        budgetUtilization=packed / token_budget if token_budget else float(packed > 0),
    )


def is_pack_cid(value: str) -> bool:
    """Whether `value` is a canonical dag-cbor CID (a pack's or a rendered pack's)."""
    try:
        parse_cid(value, codec=DAG_CBOR_CODEC)
    except ValueError:
        return False
    return True


def diff_packs(base: ContextPack, other: ContextPack) -> PackDiff:
    """What changed from `base` to `other`, entry by entry (both with entries expanded)."""
    before = {e.entryId: e for e in base.entries or []}
    after = {e.entryId: e for e in other.entries or []}
    added = [e for e in other.entries or [] if e.entryId not in before]
    removed = [e for e in base.entries or [] if e.entryId not in after]
    common = [(before[i], after[i]) for i in after if i in before]
    reordered = [
        RankChange(entryId=b.entryId, fromRank=b.rank, toRank=a.rank)
        for b, a in common
        if b.rank != a.rank
    ]
    leveled = [
        LevelChange(entryId=b.entryId, fromLevel=b.compressionLevel, toLevel=a.compressionLevel)
        for b, a in common
        if b.compressionLevel != a.compressionLevel
    ]
    unchanged = sum(
        1 for b, a in common if (b.rank, b.compressionLevel) == (a.rank, a.compressionLevel)
    )
    return PackDiff(
        basePackId=base.id,
        basePackCid=base.packCid,
        otherPackId=other.id,
        otherPackCid=other.packCid,
        added=added,
        removed=removed,
        reordered=reordered,
        compressionChanged=leveled,
        stats=DiffStats(
            baseEntries=len(before),
            otherEntries=len(after),
            added=len(added),
            removed=len(removed),
            reordered=len(reordered),
            compressionChanged=len(leveled),
            unchanged=unchanged,
            baseTokens=base.totalTokens,
            otherTokens=other.totalTokens,
            tokenDelta=other.totalTokens - base.totalTokens,
        ),
    )


def provenance_graph(
    root: ContextPack, ancestors: Sequence[tuple[int, ContextPack]], depth: int, truncated: bool
) -> ProvenanceGraph:
    """The Merkle DAG of `root`: packs linked by `supersedes`, each to the entry CIDs it
    includes. `ancestors` are (hops from root, pack with entries), root excluded."""
    nodes: dict[str, ProvenanceNode] = {}
    edges: list[ProvenanceEdge] = []
    for hops, pack in [(0, root), *ancestors]:
        nodes[pack.packCid] = ProvenanceNode(
            id=pack.packCid,
            kind="pack",
            packId=pack.id,
            diaryId=pack.diaryId,
            createdAt=pack.createdAt,
            depth=hops,
        )
        for e in sorted(pack.entries or [], key=lambda e: e.rank):
            nodes.setdefault(
                e.entryCidSnapshot,
                ProvenanceNode(
                    id=e.entryCidSnapshot, kind="entry", entryId=e.entryId, title=e.title
                ),
            )
            edges.append(
                ProvenanceEdge(
                    source=pack.packCid,
                    target=e.entryCidSnapshot,
                    kind="includes",
                    rank=e.rank,
                    compressionLevel=e.compressionLevel,
                )
            )
    by_id = {p.id: p for _, p in [(0, root), *ancestors]}
    for pack in by_id.values():
        parent = by_id.get(pack.supersedesPackId) if pack.supersedesPackId else None
        if parent is not None:
            edges.append(
                ProvenanceEdge(source=pack.packCid, target=parent.packCid, kind="supersedes")
            )
    return ProvenanceGraph(
        metadata=ProvenanceMetadata(
            rootPackId=root.id, rootPackCid=root.packCid, depth=depth, truncated=truncated
        ),
        nodes=list(nodes.values()),
        edges=edges,
    )
