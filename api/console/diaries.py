"""The console's diaries and entries (issue 24): a team's diaries and a new one; a diary's
entries newest first, a page at a time; an entry with its relations and its signature check;
writing and editing entries; hybrid search with the query's terms marked.

Every page runs the REST routes as the logged-in human (see api/console/__init__.py): what a
person may write is what `GET /diaries/{id}` says they may (`yourPermissions`), and a form the
API refuses shows the problem beside it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, TypeVar
from uuid import UUID, uuid4

from aiohttp import web
from markupsafe import Markup, escape
from pydantic import Field

from api.console.kit import (
    ConsoleForm,
    Outcome,
    PageQuery,
    act,
    attempt,
    console_route,
    page,
    part_of,
    see_other,
)
from api.console.render import NOTICES
from api.endpoint import Parsed
from api.headers import DUPLICATE_HEADER
from api.routes import diaries, entries, search, teams
from schemas import limits
from schemas.apps import ConsoleTeamPath
from schemas.embedding import SearchRequest, SearchResponse
from schemas.memory import (
    Diary,
    DiaryCreateRequest,
    DiaryEntryPath,
    DiaryList,
    DiaryPath,
    Entry,
    EntryCreateRequest,
    EntryList,
    EntryListQuery,
    EntryPath,
    EntryType,
    EntryUpdateRequest,
    EntryVerification,
    RelationList,
    RelationListQuery,
    Visibility,
)
from schemas.numbers import SqlCount
from schemas.teams import Team, TeamList, TeamPath

routes = web.RouteTableDef()

EntryBody = TypeVar("EntryBody", EntryCreateRequest, EntryUpdateRequest)
PAGE_SIZE = 50  # entries a diary page lists
EXCERPT_CHARS = 360  # of a search hit's content, around its first marked term
ENTRY_TYPES: tuple[EntryType, ...] = ("semantic", "episodic", "procedural", "reflection")
VISIBILITIES: tuple[Visibility, ...] = ("private", "moltnet", "public")
# what a person types in the tags field: every tag and its comma
TAGS_FIELD_MAX_CHARS = limits.ENTRY_TAGS_MAX * (limits.ENTRY_TAG_MAX_CHARS + 2)

NOTICES.update(
    {
        "diary-created": "The diary is created.",
        "entry-written": "The entry is written.",
        "entry-saved": "The entry is saved.",
    }
)


class DiaryForm(ConsoleForm):
    name: Annotated[str | None, Field(default=None, max_length=255)]
    visibility: Visibility = "private"


class EntryForm(ConsoleForm):
    title: Annotated[str | None, Field(default=None, max_length=limits.ENTRY_TITLE_MAX_CHARS)]
    content: Annotated[
        str | None, Field(default=None, max_length=limits.ENTRY_CONTENT_MAX_CHARS + 100)
    ]
    tags: Annotated[str | None, Field(default=None, max_length=TAGS_FIELD_MAX_CHARS)]
    entryType: EntryType = "semantic"
    # any whole number: the API says which are allowed, beside the form
    importance: Annotated[
        int | None, Field(default=None, ge=-limits.SQL_INT_MAX, le=limits.SQL_INT_MAX)
    ]

    def tag_list(self) -> list[str]:
        return [tag.strip() for tag in (self.tags or "").split(",") if tag.strip()]


class DiaryPageQuery(PageQuery):
    offset: SqlCount = 0


class SearchPageQuery(PageQuery):
    q: Annotated[str | None, Field(default=None, max_length=limits.SEARCH_QUERY_MAX_CHARS)]


# --- a team's diaries -----------------------------------------------------------------------


@console_route(routes, "GET", "/console/teams/{teamId}/diaries", path_params=ConsoleTeamPath)
async def console_team_diaries(
    request: web.Request, parsed: Parsed[None, None, ConsoleTeamPath]
) -> web.Response:
    """A team's diaries (name, visibility, signed), and a form for a new one."""
    return await _team_page(request, parsed.path.teamId)


@console_route(
    routes, "POST", "/console/teams/{teamId}/diaries", path_params=ConsoleTeamPath, body=DiaryForm
)
async def console_create_diary(
    request: web.Request, parsed: Parsed[DiaryForm, None, ConsoleTeamPath]
) -> web.Response:
    """Create a diary in the team, then on to its page."""
    form, team_id = parsed.body, parsed.path.teamId
    outcome = await attempt("new-diary", form, _create_diary(request, form, team_id))
    if outcome.refusal is not None:
        return await _team_page(request, team_id, outcome)
    created: Diary = outcome.result
    see_other(f"/console/diaries/{created.id}", done="diary-created")


async def _create_diary(request: web.Request, form: DiaryForm, team_id: UUID) -> Diary:
    body = part_of(DiaryCreateRequest, name=form.name or "", visibility=form.visibility)
    created: Diary = await act(request, diaries.create_diary, form, body=body, team=team_id)
    return created


async def _team_page(
    request: web.Request, team_id: UUID, outcome: Outcome | None = None
) -> web.Response:
    team: Team = await act(request, teams.get_team, path=TeamPath(id=team_id))
    listed: DiaryList = await act(request, diaries.list_diaries, team=team_id)
    refusal = outcome.refusal if outcome else None
    return page(
        request,
        "diaries/team.html",
        team=team,
        diaries=listed.items,
        visibilities=VISIBILITIES,
        outcome=refusal,
        key=uuid4().hex,
    )


# --- a diary's entries ----------------------------------------------------------------------


@console_route(
    routes, "GET", "/console/diaries/{diaryId}", path_params=DiaryPath, query=DiaryPageQuery
)
async def console_diary(
    request: web.Request, parsed: Parsed[None, DiaryPageQuery, DiaryPath]
) -> web.Response:
    """A diary's entries, newest first, `PAGE_SIZE` at a time (*Older* / *Newer*)."""
    diary = await _diary(request, parsed.path.diaryId)
    offset = parsed.query.offset
    listed: EntryList = await act(
        request,
        entries.list_entries,
        path=DiaryPath(diaryId=diary.id),
        query=EntryListQuery(limit=PAGE_SIZE, offset=offset),
    )
    older = offset + len(listed.items) if offset + len(listed.items) < listed.total else None
    newer = max(0, offset - PAGE_SIZE) if offset > 0 else None
    return page(
        request,
        "diaries/diary.html",
        diary=diary,
        team_name=await _team_name(request, diary.teamId),
        entries=listed.items,
        total=listed.total,
        offset=offset,
        older=older,
        newer=newer,
    )


async def _diary(request: web.Request, diary_id: UUID) -> Diary:
    diary: Diary = await act(request, diaries.get_diary, path=DiaryPath(diaryId=diary_id))
    return diary


async def _team_name(request: web.Request, team_id: UUID) -> str | None:
    """The diary's team by name, when the human is one of its members (else no crumb)."""
    mine: TeamList = await act(request, teams.list_teams)
    return next((team.name for team in mine.items if team.id == team_id), None)


# --- an entry ---------------------------------------------------------------------------------


@console_route(routes, "GET", "/console/entries/{entryId}", path_params=EntryPath)
async def console_entry(
    request: web.Request, parsed: Parsed[None, None, EntryPath]
) -> web.Response:
    """An entry: its content, CID, relations (by title) and its signature check."""
    entry: Entry = await act(request, entries.get_entry, path=parsed.path)
    diary = await _diary(request, entry.diaryId)
    relations: RelationList = await act(
        request,
        entries.list_relations,
        path=EntryPath(entryId=entry.id),
        query=RelationListQuery(limit=limits.RELATIONS_PAGE.max),
    )
    return page(
        request,
        "diaries/entry.html",
        entry=entry,
        diary=diary,
        relations=relations,
        verification=await _verification(request, entry),
    )


async def _verification(request: web.Request, entry: Entry) -> EntryVerification | None:
    """The API's check of a signed entry (None: the entry is not signed)."""
    if not entry.signed:
        return None
    checked: EntryVerification = await act(
        request,
        diaries.verify_entry,
        path=DiaryEntryPath(diaryId=entry.diaryId, entryId=entry.id),
    )
    return checked


# --- writing and editing ----------------------------------------------------------------------


@console_route(routes, "GET", "/console/diaries/{diaryId}/entries/new", path_params=DiaryPath)
async def console_new_entry(
    request: web.Request, parsed: Parsed[None, None, DiaryPath]
) -> web.Response:
    """The form for a new entry of the diary."""
    diary = await _diary(request, parsed.path.diaryId)
    return _write_page(request, diary, None, {})


@console_route(
    routes, "POST", "/console/diaries/{diaryId}/entries/new", path_params=DiaryPath, body=EntryForm
)
async def console_write_entry(
    request: web.Request, parsed: Parsed[EntryForm, None, DiaryPath]
) -> web.Response:
    """Write the entry; an exact duplicate of one the diary holds is named instead."""
    form = parsed.body
    diary = await _diary(request, parsed.path.diaryId)
    answer: dict[str, str] = {}
    outcome = await attempt("entry", form, _write(request, diary, form, answer))
    if outcome.refusal is not None:
        return _write_page(request, diary, None, outcome.refusal.values, outcome)
    written: Entry = outcome.result
    if DUPLICATE_HEADER in answer:
        typed = form.model_dump(exclude={"csrf", "idempotencyKey"})
        return _write_page(request, diary, None, typed, duplicate=written)
    see_other(f"/console/entries/{written.id}", done="entry-written")


async def _write(
    request: web.Request, diary: Diary, form: EntryForm, answer: dict[str, str]
) -> Entry:
    """The written entry (or, `DUPLICATE_HEADER` in `answer`, the one it duplicates)."""
    written = await act(
        request,
        entries.create_entry,
        form,
        path=DiaryPath(diaryId=diary.id),
        body=_entry_body(EntryCreateRequest, form),
        answer_headers=answer,
    )
    # the route's rendered 201 (its `Location`, a duplicate's header) comes back as its Entry
    assert isinstance(written, Entry)
    return written


@console_route(routes, "GET", "/console/entries/{entryId}/edit", path_params=EntryPath)
async def console_edit_entry(
    request: web.Request, parsed: Parsed[None, None, EntryPath]
) -> web.Response:
    """The form to change an entry, filled with what it holds."""
    entry: Entry = await act(request, entries.get_entry, path=parsed.path)
    diary = await _diary(request, entry.diaryId)
    return _write_page(request, diary, entry, _entry_values(entry))


@console_route(
    routes, "POST", "/console/entries/{entryId}/edit", path_params=EntryPath, body=EntryForm
)
async def console_save_entry(
    request: web.Request, parsed: Parsed[EntryForm, None, EntryPath]
) -> web.Response:
    """Save the changed entry (a signed one is refused by the API: immutable)."""
    form = parsed.body
    entry_id = parsed.path.entryId
    entry: Entry = await act(request, entries.get_entry, path=parsed.path)
    outcome = await attempt("entry", form, _save(request, parsed.path, form))
    if outcome.refusal is not None:
        diary = await _diary(request, entry.diaryId)
        return _write_page(request, diary, entry, outcome.refusal.values, outcome)
    see_other(f"/console/entries/{entry_id}", done="entry-saved")


async def _save(request: web.Request, path: EntryPath, form: EntryForm) -> Entry:
    body = _entry_body(EntryUpdateRequest, form)
    saved: Entry = await act(request, entries.update_entry, path=path, body=body)
    return saved


def _entry_body(model: type[EntryBody], form: EntryForm) -> EntryBody:
    """The REST body of an entry form: every field, so an emptied title is cleared and an
    emptied content refused by the API (beside the form) rather than kept silently."""
    return part_of(
        model,
        content=form.content or "",
        title=form.title,
        tags=form.tag_list(),
        entryType=form.entryType,
        importance=(
            form.importance if form.importance is not None else limits.ENTRY_IMPORTANCE_DEFAULT
        ),
    )


def _entry_values(entry: Entry) -> dict[str, Any]:
    return {
        "title": entry.title,
        "content": entry.content,
        "tags": ", ".join(entry.tags),
        "entryType": entry.entryType,
        "importance": entry.importance,
    }


def _write_page(
    request: web.Request,
    diary: Diary,
    entry: Entry | None,
    values: dict[str, Any],
    outcome: Outcome | None = None,
    *,
    duplicate: Entry | None = None,
) -> web.Response:
    refusal = outcome.refusal if outcome else None
    return page(
        request,
        "diaries/write.html",
        diary=diary,
        entry=entry,
        values=values,
        outcome=refusal,
        duplicate=duplicate,
        entry_types=ENTRY_TYPES,
        limits=limits,
        tags_max_chars=TAGS_FIELD_MAX_CHARS,
        key=uuid4().hex,
    )


# --- search -----------------------------------------------------------------------------------


@console_route(
    routes,
    "GET",
    "/console/diaries/{diaryId}/search",
    path_params=DiaryPath,
    query=SearchPageQuery,
)
async def console_search(
    request: web.Request, parsed: Parsed[None, SearchPageQuery, DiaryPath]
) -> web.Response:
    """Hybrid search in the diary: hits best first, with their score and the terms marked."""
    diary = await _diary(request, parsed.path.diaryId)
    query = (parsed.query.q or "").strip()
    found: SearchResponse | None = None
    if query:
        body = part_of(SearchRequest, query=query, diaryId=diary.id)
        found = await act(request, search.search_diaries, body=body)
    terms = query_terms(query)
    hits = [
        {"entry": hit, "title": marked(hit.title or "", terms), "excerpt": excerpt(hit, terms)}
        for hit in (found.results if found else [])
    ]
    return page(
        request,
        "diaries/search.html",
        diary=diary,
        query=query,
        found=found,
        hits=hits,
        query_max=limits.SEARCH_QUERY_MAX_CHARS,
    )


def query_terms(query: str) -> list[str]:
    """The words of a query worth marking (two characters or more), longest first, so a term
    inside another is never marked instead of it."""
    words = {word.casefold() for word in re.findall(r"\w{2,}", query)}
    return sorted(words, key=lambda word: (-len(word), word))


def marked(text: str, terms: list[str]) -> Markup:
    """`text` escaped, with every occurrence of a term wrapped in <mark>: the text is split
    at the terms first and each piece escaped on its own, so neither the content nor the query
    can inject markup (and a term can never match inside an escape such as `&amp;`)."""
    if not terms:
        return Markup(escape(text))
    pattern = re.compile("(" + "|".join(re.escape(term) for term in terms) + ")", re.IGNORECASE)
    pieces = pattern.split(text)  # odd positions: the matched terms
    return Markup("").join(
        Markup("<mark>{}</mark>").format(piece) if n % 2 else escape(piece)
        for n, piece in enumerate(pieces)
    )


def excerpt(entry: Entry, terms: list[str]) -> Markup:
    """About `EXCERPT_CHARS` of the content around its first term, marked."""
    content = entry.content
    first = min((at for term in terms if (at := content.casefold().find(term)) >= 0), default=0)
    start = max(0, first - EXCERPT_CHARS // 3)
    end = start + EXCERPT_CHARS
    head = "…" if start > 0 else ""
    tail = "…" if end < len(content) else ""
    return Markup(escape(head)) + marked(content[start:end], terms) + Markup(escape(tail))
