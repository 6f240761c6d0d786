"""Context packs and rendered packs (spec 4.7 Packs).

A pack is a content-addressed selection of a diary's entries, each at a compression level that
fits a token budget; a rendered pack is its immutable Markdown. Tool arguments are snake_case;
results are the REST JSON. An unset optional argument changes nothing (so `packs_update` sends
only what it was given).
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from client.rest import ApiError
from schemas import limits
from schemas.errors import PackInjectionFlagged, PacksListScope, RenderedPackRef
from schemas.kernel.task_types import VERIFYING_TYPE_NAMES
from schemas.packs import (
    ContextPack,
    PackCompiled,
    PackCreateRequest,
    PackDiff,
    PackList,
    PackSelection,
    PackUpdateRequest,
    ProvenanceGraph,
    RenderedPack,
    RenderedPackList,
    RenderedPackUpdateRequest,
    RenderRequest,
)
from toolserver.registry import Arguments, Call, tool

SERVER_RENDER = "server:pack-to-docs-v1"

PackId = UUID
RenderedId = UUID
DiaryId = UUID
Limit = Annotated[int, Field(ge=1, le=limits.PACKS_PAGE.max)]
Offset = Annotated[int, Field(ge=0)]
Expiry = Annotated[
    AwareDatetime,
    Field(description="Future; needed to unpin"),
]


def _page(noun: str) -> Any:
    return lambda r: f"{len(r['items'])} of {r['total']} {noun} (offset {r['offset']})"


def _compiled(r: dict[str, Any]) -> str:
    stats = r["compileStats"]
    head = f"Pack {r['packCid']}" + (f" ({r['packId']})" if "packId" in r else " (preview)")
    return f"{head}: {len(r['entries'])} entries, {stats['totalTokens']} tokens"


def _rendered(r: dict[str, Any]) -> str:
    return (
        f"Rendered pack {r.get('id', '(preview)')}: {r['totalTokens']} tokens ({r['renderMethod']})"
    )


# --- packs -----------------------------------------------------------------------------------


class PacksGet(Arguments):
    pack_id: PackId
    include_entries: bool = Field(default=False)


@tool(output=ContextPack, read_only=True, render=lambda r: f"Pack {r['packCid']} ({r['id']})")
async def packs_get(call: Call, args: PacksGet) -> ContextPack:
    """Read a context pack (with include_entries, its entries)."""
    return await call.api.get_pack(args.pack_id, entries=args.include_entries)


class PacksList(Arguments):
    diary_id: UUID | None = None
    team_id: UUID | None = None
    contains_entry: UUID | None = Field(default=None, description="With team_id only")
    include_rendered: bool = Field(default=False)
    include_entries: bool = Field(default=False)
    limit: Limit = limits.PACKS_PAGE.default
    offset: Offset = 0


@tool(output=PackList, read_only=True, render=_page("packs"))
async def packs_list(call: Call, args: PacksList) -> PackList:
    """List packs of a diary or of a team (give one)."""
    if (args.diary_id is None) == (args.team_id is None):
        raise PacksListScope("Give exactly one of diary_id or team_id")
    if args.diary_id is not None:
        if args.contains_entry is not None or args.include_rendered:
            raise PacksListScope(
                "contains_entry and include_rendered go with team_id, not diary_id"
            )
        return await call.api.list_diary_packs(
            args.diary_id, limit=args.limit, offset=args.offset, entries=args.include_entries
        )
    assert args.team_id is not None
    return await call.api.list_team_packs(
        args.team_id,
        limit=args.limit,
        offset=args.offset,
        contains_entry=args.contains_entry,
        include_rendered=args.include_rendered,
        entries=args.include_entries,
    )


class PackChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entry_id: UUID
    rank: int = Field(ge=1, description="1 = most important; distinct")


class PacksPreview(Arguments):
    diary_id: DiaryId
    entries: list[PackChoice] = Field(
        min_length=limits.PACK_ENTRIES_MIN,
        max_length=limits.PACK_ENTRIES_MAX,
    )
    token_budget: int | None = Field(
        default=None,
        ge=limits.PACK_TOKEN_BUDGET_MIN,
        le=limits.PACK_TOKEN_BUDGET_MAX,
    )
    params: dict[str, Any] = Field(default_factory=dict)
    supersedes_pack_id: UUID | None = None
    as_of: AwareDatetime | None = None  # no description: the catalogue budget (issue 25)


class PacksCreate(PacksPreview):
    pinned: bool = Field(default=False)
    force: bool = Field(
        default=False,
    )


def _request(args: PacksPreview, *, pinned: bool = False, force: bool = False) -> PackCreateRequest:
    return PackCreateRequest(
        params=args.params,
        entries=[PackSelection(entryId=e.entry_id, rank=e.rank) for e in args.entries],
        tokenBudget=args.token_budget,
        pinned=pinned,
        force=force,
        supersedesPackId=args.supersedes_pack_id,
        asOf=args.as_of,
    )


@tool(output=PackCompiled, read_only=True, render=_compiled)
async def packs_preview(call: Call, args: PacksPreview) -> PackCompiled:
    """Preview packs_create without storing."""
    return await call.api.preview_pack(args.diary_id, _request(args))


@tool(output=PackCompiled, idempotent=True, render=_compiled)
async def packs_create(call: Call, args: PacksCreate) -> PackCompiled:
    """Store entries as a context pack; injection-flagged ones are refused unless force."""
    try:
        return await call.api.create_pack(
            args.diary_id, _request(args, pinned=args.pinned, force=args.force)
        )
    except ApiError as error:
        if error.code != PackInjectionFlagged.code:
            raise
        flagged = error.body.get("flagged", [])
        raise PackInjectionFlagged(
            f"{error.detail} Review the flagged entries; call again with force: true to "
            "create the pack anyway.",
            extensions={"flagged": flagged},
        ) from error


class PacksUpdate(Arguments):
    pack_id: PackId
    pinned: bool | None = None
    expires_at: Expiry | None = None


@tool(output=ContextPack, idempotent=True, render=lambda r: f"Pack {r['id']} updated")
async def packs_update(call: Call, args: PacksUpdate) -> ContextPack:
    """Pin a pack, or unpin it with a future expires_at."""
    given = {"pinned": args.pinned, "expiresAt": args.expires_at}
    body = PackUpdateRequest(**{k: v for k, v in given.items() if v is not None})
    return await call.api.update_pack(args.pack_id, body)


class PacksProvenance(Arguments):
    pack_id: PackId
    depth: int = Field(
        default=limits.PACK_PROVENANCE_DEPTH_DEFAULT,
        ge=0,
        le=limits.PACK_PROVENANCE_DEPTH_MAX,
    )


@tool(
    output=ProvenanceGraph,
    read_only=True,
    render=lambda r: f"{len(r['nodes'])} nodes, {len(r['edges'])} edges",
)
async def packs_provenance(call: Call, args: PacksProvenance) -> ProvenanceGraph:
    """A pack's supersession DAG with entry CIDs."""
    return await call.api.pack_provenance(args.pack_id, depth=args.depth)


class PacksDiff(Arguments):
    pack_id: PackId
    other_pack_id: UUID


def _diff_text(r: dict[str, Any]) -> str:
    s = r["stats"]
    return f"+{s['added']} -{s['removed']} reordered {s['reordered']} unchanged {s['unchanged']}"


@tool(output=PackDiff, read_only=True, render=_diff_text)
async def packs_diff(call: Call, args: PacksDiff) -> PackDiff:
    """Compare two packs of one diary."""
    return await call.api.diff_packs(args.pack_id, args.other_pack_id)


# --- rendered packs --------------------------------------------------------------------------


class PacksRender(Arguments):
    pack_id: PackId
    render_method: str = Field(
        default=SERVER_RENDER,
        min_length=1,
        max_length=limits.RENDER_METHOD_MAX_CHARS,
        description=f"{SERVER_RENDER} (rendered here), or your own name with rendered_markdown",
    )
    rendered_markdown: str | None = Field(
        default=None,
        max_length=limits.RENDERED_MARKDOWN_MAX_CHARS,
        description="Only with your own render_method",
    )
    pinned: bool = Field(default=False)
    description: str | None = Field(
        default=None, max_length=limits.RENDERED_PACK_DESCRIPTION_MAX_CHARS
    )


def _render_request(args: PacksRender) -> RenderRequest:
    return RenderRequest(
        renderMethod=args.render_method,
        renderedMarkdown=args.rendered_markdown,
        pinned=args.pinned,
        description=args.description,
    )


@tool(output=RenderedPack, read_only=True, render=_rendered)
async def packs_render_preview(call: Call, args: PacksRender) -> RenderedPack:
    """Render a pack to Markdown without storing it."""
    return await call.api.preview_render(args.pack_id, _render_request(args))


@tool(output=RenderedPack, idempotent=True, render=_rendered)
async def packs_render(call: Call, args: PacksRender) -> RenderedPack:
    """Store a pack's Markdown rendering."""
    return await call.api.render_pack(args.pack_id, _render_request(args))


class RenderedPacksGet(Arguments):
    rendered_id: UUID | None = None
    pack_id: UUID | None = None


@tool(output=RenderedPack, read_only=True, render=_rendered)
async def rendered_packs_get(call: Call, args: RenderedPacksGet) -> RenderedPack:
    """Read a rendered pack (by id, or a pack's latest)."""
    if (args.rendered_id is None) == (args.pack_id is None):
        raise RenderedPackRef("Give exactly one of rendered_id or pack_id")
    if args.rendered_id is not None:
        return await call.api.get_rendered_pack(args.rendered_id)
    assert args.pack_id is not None
    return await call.api.latest_rendered_pack(args.pack_id)


class RenderedPacksList(Arguments):
    diary_id: DiaryId
    source_pack_id: UUID | None = None
    render_method: str | None = Field(
        default=None,
        min_length=1,
        max_length=limits.RENDER_METHOD_MAX_CHARS,
    )
    limit: Limit = limits.PACKS_PAGE.default
    offset: Offset = 0


@tool(output=RenderedPackList, read_only=True, render=_page("rendered packs"))
async def rendered_packs_list(call: Call, args: RenderedPacksList) -> RenderedPackList:
    """List a diary's rendered packs, newest first."""
    return await call.api.list_rendered_packs(
        args.diary_id,
        limit=args.limit,
        offset=args.offset,
        source_pack_id=args.source_pack_id,
        render_method=args.render_method,
    )


class RenderedPacksUpdate(Arguments):
    rendered_id: RenderedId
    pinned: bool | None = None
    expires_at: Expiry | None = None
    description: str | None = Field(
        default=None, max_length=limits.RENDERED_PACK_DESCRIPTION_MAX_CHARS
    )
    verified_task_id: UUID | None = Field(
        default=None,
        description=f"A completed {' or '.join(VERIFYING_TYPE_NAMES)} task (set once)",
    )


@tool(output=RenderedPack, idempotent=True, render=lambda r: f"Rendered pack {r['id']} updated")
async def rendered_packs_update(call: Call, args: RenderedPacksUpdate) -> RenderedPack:
    """Pin, unpin, describe or mark verified a rendered pack."""
    given = {
        "pinned": args.pinned,
        "expiresAt": args.expires_at,
        "description": args.description,
        "verifiedTaskId": args.verified_task_id,
    }
    body = RenderedPackUpdateRequest(**{k: v for k, v in given.items() if v is not None})
    return await call.api.update_rendered_pack(args.rendered_id, body)
