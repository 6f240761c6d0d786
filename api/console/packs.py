"""The console's packs pages (issue 24): a diary's packs, a pack with its entries, its
renderings, pinning, provenance and a diff against another pack of the diary.

Every page and form runs the packs REST routes (api/routes/packs.py) as the logged-in human, so
who may render or pin is what the API says; a refusal is shown beside the form that caused it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar
from uuid import UUID, uuid4

from aiohttp import web
from pydantic import Field

from api.console.kit import (
    ConsoleForm,
    Outcome,
    PageQuery,
    act,
    attempt,
    console_route,
    part_of,
    see_other,
)
from api.console.render import NOTICES, page
from api.endpoint import Parsed
from api.routes import diaries, packs
from schemas import limits
from schemas.kernel.pack_render import PACK_TO_DOCS_V1
from schemas.memory import Diary, DiaryPath
from schemas.numbers import SqlCount
from schemas.packs import (
    ContextPack,
    PackDiff,
    PackDiffPath,
    PackEntryOut,
    PackGetQuery,
    PackList,
    PackListQuery,
    PackPath,
    PackUpdateRequest,
    ProvenanceEdge,
    ProvenanceGraph,
    ProvenanceNode,
    ProvenanceQuery,
    RenderedListQuery,
    RenderedPack,
    RenderedPackList,
    RenderMethod,
    RenderRequest,
)

routes = web.RouteTableDef()

PackBody = TypeVar("PackBody", PackUpdateRequest, RenderRequest)

PAGE = limits.PACKS_PAGE.default  # packs a list page shows
RENDERINGS_SHOWN = limits.PACKS_PAGE.max  # a pack's renderings on its page, newest first
CHOICES_SHOWN = limits.PACKS_PAGE.max  # the diary's newest packs offered to compare with

NOTICES.update(
    {
        "pack-pinned": "The pack is pinned: it does not expire.",
        "pack-unpinned": "The pack is unpinned: it expires at the time shown.",
        "pack-rendered": "The pack is rendered.",
    }
)


class PacksQuery(PageQuery):
    offset: SqlCount = 0


class ProvenancePageQuery(PageQuery):
    depth: int = Field(
        default=limits.PACK_PROVENANCE_DEPTH_DEFAULT, ge=0, le=limits.PACK_PROVENANCE_DEPTH_MAX
    )


class DiffPageQuery(PageQuery):
    other: UUID = Field(description="the pack of the same diary to compare with")


# what a datetime-local field sends: a wall-clock time without a zone (seconds optional)
LOCAL_DATE_TIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?$"


class PinForm(ConsoleForm):
    pinned: bool
    # read as UTC (the form says so); the REST route's own guard reads the instant
    expiresAt: Annotated[str | None, Field(default=None, pattern=LOCAL_DATE_TIME)]


class RenderForm(ConsoleForm):
    renderMethod: RenderMethod
    renderedMarkdown: (
        Annotated[str, Field(max_length=limits.RENDERED_MARKDOWN_MAX_CHARS)] | None
    ) = None
    description: Annotated[
        str | None, Field(default=None, max_length=limits.RENDERED_PACK_DESCRIPTION_MAX_CHARS)
    ]
    pinned: bool = False


# --- a diary's packs -------------------------------------------------------------------------


@console_route(
    routes, "GET", "/console/diaries/{diaryId}/packs", path_params=DiaryPath, query=PacksQuery
)
async def console_diary_packs(
    request: web.Request, parsed: Parsed[None, PacksQuery, DiaryPath]
) -> web.Response:
    """A diary's packs, newest first, a page at a time."""
    diary: Diary = await act(request, diaries.get_diary, path=parsed.path)
    offset = parsed.query.offset
    listed: PackList = await act(
        request,
        packs.list_diary_packs,
        path=parsed.path,
        query=PackListQuery(limit=PAGE, offset=offset),
    )
    return page(request, "packs/list.html", diary=diary, listed=listed, page_size=PAGE)


# --- a pack ----------------------------------------------------------------------------------


@console_route(routes, "GET", "/console/packs/{id}", path_params=PackPath, query=PageQuery)
async def console_pack(
    request: web.Request, parsed: Parsed[None, PageQuery, PackPath]
) -> web.Response:
    """A pack: its entries with their compression and tokens, CID, pin and expiry, its
    renderings, and the forms to render, pin or unpin it and to compare it."""
    return await _pack_page(request, parsed.path.id)


async def _pack_page(
    request: web.Request, pack_id: UUID, outcome: Outcome | None = None
) -> web.Response:
    pack: ContextPack = await act(
        request, packs.get_pack, path=PackPath(id=pack_id), query=PackGetQuery(expand="entries")
    )
    diary_path = DiaryPath(diaryId=pack.diaryId)
    diary: Diary = await act(request, diaries.get_diary, path=diary_path)
    renderings: RenderedPackList = await act(
        request,
        packs.list_rendered_packs,
        path=diary_path,
        query=RenderedListQuery(sourcePackId=pack.id, limit=RENDERINGS_SHOWN),
    )
    neighbours: PackList = await act(
        request,
        packs.list_diary_packs,
        path=diary_path,
        query=PackListQuery(limit=CHOICES_SHOWN),
    )
    refusal = outcome.refusal if outcome else None
    now = datetime.now(UTC)
    return page(
        request,
        "packs/pack.html",
        outcome=refusal,
        pack=pack,
        diary=diary,
        renderings=renderings,
        others=[p for p in neighbours.items if p.id != pack.id],
        server_method=PACK_TO_DOCS_V1,
        # an unpinned pack needs a future expiry: the form offers the default lifetime
        expiry_default=_local(now + limits.PACK_LIFETIME),
        expiry_min=_local(now),
        key=uuid4().hex,
        limits=limits,
    )


def _utc_text(local: str) -> str:
    """A datetime-local value as the RFC 3339 UTC instant the API reads (seconds added)."""
    return f"{local}:00Z" if local.count(":") == 1 else f"{local}Z"


def _local(moment: datetime) -> str:
    """A UTC instant as a datetime-local field holds it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")


@console_route(routes, "POST", "/console/packs/{id}/pin", path_params=PackPath, body=PinForm)
async def console_pin_pack(
    request: web.Request, parsed: Parsed[PinForm, None, PackPath]
) -> web.Response:
    """Pin the pack (its expiry is cleared) or unpin it with an expiry (read as UTC)."""
    form = parsed.body
    pack_id = parsed.path.id
    fields: dict[str, Any] = {"pinned": form.pinned}
    if form.expiresAt is not None:
        fields["expiresAt"] = _utc_text(form.expiresAt)
    outcome = await _pack_action(
        request, "pin", form, packs.update_pack, pack_id, PackUpdateRequest, fields
    )
    if outcome.refusal is not None:
        return await _pack_page(request, pack_id, outcome)
    see_other(f"/console/packs/{pack_id}", done="pack-pinned" if form.pinned else "pack-unpinned")


@console_route(routes, "POST", "/console/packs/{id}/render", path_params=PackPath, body=RenderForm)
async def console_render_pack(
    request: web.Request, parsed: Parsed[RenderForm, None, PackPath]
) -> web.Response:
    """Store a rendering of the pack, then read it."""
    form = parsed.body
    pack_id = parsed.path.id
    fields = form.model_dump(exclude={"csrf", "idempotencyKey"}, exclude_none=True)
    outcome = await _pack_action(
        request, "render", form, packs.render_pack, pack_id, RenderRequest, fields
    )
    if outcome.refusal is not None:
        return await _pack_page(request, pack_id, outcome)
    rendered: RenderedPack = outcome.result
    see_other(f"/console/rendered/{rendered.id}", done="pack-rendered")


async def _pack_action(
    request: web.Request,
    name: str,
    form: ConsoleForm,
    route: Callable[[web.Request, Parsed[PackBody, None, PackPath]], Awaitable[Any]],
    pack_id: UUID,
    model: type[PackBody],
    fields: dict[str, Any],
) -> Outcome:
    """Run the pack form `name`'s REST route on the pack with the body `model` makes of the
    form's `fields`: its result, or the refusal (the body's too) to show beside that form."""

    async def run() -> Any:
        body = part_of(model, **fields)
        return await act(request, route, form, path=PackPath(id=pack_id), body=body)

    return await attempt(name, form, run())


# --- a rendering -----------------------------------------------------------------------------


@console_route(routes, "GET", "/console/rendered/{id}", path_params=PackPath, query=PageQuery)
async def console_rendered(
    request: web.Request, parsed: Parsed[None, PageQuery, PackPath]
) -> web.Response:
    """A rendered pack: its Markdown as text, its CID and where it came from."""
    rendered: RenderedPack = await act(request, packs.get_rendered_pack, path=parsed.path)
    diary: Diary = await act(request, diaries.get_diary, path=DiaryPath(diaryId=rendered.diaryId))
    return page(request, "packs/rendered.html", rendered=rendered, diary=diary)


# --- provenance ------------------------------------------------------------------------------


@dataclass
class PackLineage:
    """A pack of a provenance graph as a person reads it: what it includes, and the pack it
    supersedes (nested)."""

    node: ProvenanceNode
    includes: list[tuple[ProvenanceEdge, ProvenanceNode]] = field(default_factory=list)
    supersedes: PackLineage | None = None


def lineage(graph: ProvenanceGraph) -> PackLineage:
    """The graph as a nested chain from its root pack (a pack supersedes at most one)."""
    nodes = {n.id: n for n in graph.nodes}
    packs_by_cid = {n.id: PackLineage(n) for n in graph.nodes if n.kind == "pack"}
    for edge in graph.edges:
        source = packs_by_cid[edge.source]
        if edge.kind == "includes":
            source.includes.append((edge, nodes[edge.target]))
        else:
            source.supersedes = packs_by_cid[edge.target]
    return packs_by_cid[graph.metadata.rootPackCid]


@console_route(
    routes,
    "GET",
    "/console/packs/{id}/provenance",
    path_params=PackPath,
    query=ProvenancePageQuery,
)
async def console_pack_provenance(
    request: web.Request, parsed: Parsed[None, ProvenancePageQuery, PackPath]
) -> web.Response:
    """A pack's provenance: the packs it supersedes, each with the entries it includes."""
    depth = ProvenanceQuery(depth=parsed.query.depth)
    graph: ProvenanceGraph = await act(
        request, packs.pack_provenance, path=parsed.path, query=depth
    )
    pack: ContextPack = await act(request, packs.get_pack, path=parsed.path)
    diary: Diary = await act(request, diaries.get_diary, path=DiaryPath(diaryId=pack.diaryId))
    return page(
        request,
        "packs/provenance.html",
        pack=pack,
        diary=diary,
        graph=graph,
        root=lineage(graph),
        depth=parsed.query.depth,
        depth_max=limits.PACK_PROVENANCE_DEPTH_MAX,
    )


# --- diff ------------------------------------------------------------------------------------


@console_route(routes, "GET", "/console/packs/{id}/diff", path_params=PackPath, query=DiffPageQuery)
async def console_pack_diff(
    request: web.Request, parsed: Parsed[None, DiffPageQuery, PackPath]
) -> web.Response:
    """What changed from this pack to another of its diary: entries added, removed,
    reordered and compressed differently."""
    pair = PackDiffPath(id=parsed.path.id, otherId=parsed.query.other)
    diff: PackDiff = await act(request, packs.diff_pack, path=pair)
    base: ContextPack = await act(
        request, packs.get_pack, path=parsed.path, query=PackGetQuery(expand="entries")
    )
    diary: Diary = await act(request, diaries.get_diary, path=DiaryPath(diaryId=base.diaryId))
    return page(
        request,
        "packs/diff.html",
        diff=diff,
        base=base,
        diary=diary,
        titles=_titles(base.entries or []),
    )


def _titles(entries: list[PackEntryOut]) -> dict[UUID, str | None]:
    """The base pack's entries by id: what a reordered or recompressed entry is named by (it is
    in both packs)."""
    return {e.entryId: e.title for e in entries}
