"""The console's sharing pages (issue 24): a diary's grants, its outgoing transfers, and the
transfers waiting for a team. See api/console/__init__.py.

Every page and form runs the REST routes (`api/routes/diaries.py` grants,
`api/routes/transfers.py`) as the logged-in human; a refusal is shown beside the form (or the
list) it belongs to. A grantee is picked the way the API names one: an agent by fingerprint
(resolved with `GET /agents/{fingerprint}`), a human or a group from the diary team's members
and groups (a human cannot know another human's subject id).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any, Literal, TypeVar
from uuid import UUID, uuid4

from aiohttp import web
from pydantic import Field

from api.console.kit import (
    PAGE_PROBLEMS,
    ConsoleForm,
    Outcome,
    Refusal,
    act,
    attempt,
    console_route,
    part_of,
    see_other,
)
from api.console.render import NOTICES, page
from api.endpoint import Parsed
from api.routes import diaries, groups, identity, team_members, teams, transfers
from schemas.apps import ConsoleTeamPath
from schemas.base import RequestBody
from schemas.errors import DomainError
from schemas.identity import AgentProfile, Done, FingerprintPath
from schemas.memory import Diary, DiaryPath, Grant, GrantList, GrantPath, GrantRequest, GrantRole
from schemas.teams import Team, TeamList, TeamPath
from schemas.transfers import (
    DiaryTransfersPath,
    Transfer,
    TransferCreateRequest,
    TransferList,
    TransferPath,
    WaitingTransfersQuery,
)

routes = web.RouteTableDef()

NOTICES.update(
    {
        "grant-added": "The grant is added.",
        "grant-revoked": "The grant is revoked.",
        "transfer-started": "The transfer is proposed; the other team's owners decide.",
        "transfer-accepted": "The transfer is accepted: the diary belongs to this team now.",
        "transfer-rejected": "The transfer is rejected: the diary stays with its team.",
    }
)

T = TypeVar("T")
# A grantee offered in the select: `Human:<id>` or `Group:<id>` (agents go by fingerprint).
GRANTEE_PATTERN = r"^(Human|Group):[0-9a-fA-F-]{36}$"
FINGERPRINT_PATTERN = r"[A-Fa-f0-9]{4}(-[A-Fa-f0-9]{4}){3}"


class GranteeGrantForm(ConsoleForm):
    grantee: Annotated[str | None, Field(default=None, max_length=64)]
    role: GrantRole


class AgentGrantForm(ConsoleForm):
    fingerprint: Annotated[str | None, Field(default=None, max_length=64)]
    role: GrantRole


class RevokeGrantForm(ConsoleForm):
    subjectId: UUID
    subjectNs: Literal["Agent", "Human", "Group"]
    role: GrantRole


class TransferStartForm(ConsoleForm):
    team: Annotated[str | None, Field(default=None, max_length=64)]
    teamId: Annotated[str | None, Field(default=None, max_length=64)]


class TransferDecisionForm(ConsoleForm):
    diaryId: UUID


class TeamTransferPath(RequestBody):
    teamId: UUID
    transferId: UUID


# --- reading around a refusal -----------------------------------------------------------------


async def _or_refusal(name: str, reading: Awaitable[T]) -> tuple[T | None, Refusal | None]:
    """A read a page can do without (a list the human may not see): its result, or the
    refusal to show in its place. A rate limit or an outage is still the page's problem."""
    try:
        return await reading, None
    except DomainError as error:
        if error.status in PAGE_PROBLEMS or error.status >= 500:
            raise
        return None, Refusal(name, error.title, error.detail, error.status)


async def _team_names(request: web.Request) -> tuple[TeamList, dict[UUID, str]]:
    mine: TeamList = await act(request, teams.list_teams)
    return mine, {team.id: team.name for team in mine.items}


# --- grants -------------------------------------------------------------------------------------


@console_route(routes, "GET", "/console/diaries/{diaryId}/grants", path_params=DiaryPath)
async def console_grants(
    request: web.Request, parsed: Parsed[None, None, DiaryPath]
) -> web.Response:
    """A diary's grants: who holds writer or manager, add one, revoke one."""
    return await _grants_page(request, parsed.path.diaryId)


async def _grants_page(
    request: web.Request, diary_id: UUID, outcome: Outcome | None = None
) -> web.Response:
    diary: Diary = await act(request, diaries.get_diary, path=DiaryPath(diaryId=diary_id))
    listed, list_refusal = await _or_refusal(
        "grants", act(request, diaries.list_grants, path=GrantPath(diaryId=diary_id))
    )
    _, team_names = await _team_names(request)
    team_path = TeamPath(id=diary.teamId)
    members, _ = await _or_refusal(
        "members", act(request, team_members.list_team_members, path=team_path)
    )
    team_groups, _ = await _or_refusal("groups", act(request, groups.list_groups, path=team_path))
    group_names = {group.id: group.name for group in (team_groups.items if team_groups else [])}
    return page(
        request,
        "sharing/grants.html",
        diary=diary,
        team_name=team_names.get(diary.teamId),
        grants=_grants_of(listed),
        list_refusal=list_refusal,
        humans=[m for m in (members.items if members else []) if m.subjectNs == "Human"],
        groups=team_groups.items if team_groups else [],
        group_names=group_names,
        outcome=outcome.refusal if outcome else None,
        key=uuid4().hex,
        fingerprint_pattern=FINGERPRINT_PATTERN,
    )


def _grants_of(listed: GrantList | None) -> list[Grant]:
    return listed.items if listed else []


def _grants_url(diary_id: UUID) -> str:
    return f"/console/diaries/{diary_id}/grants"


@console_route(
    routes,
    "POST",
    "/console/diaries/{diaryId}/grants",
    path_params=DiaryPath,
    body=GranteeGrantForm,
)
async def console_grant_add(
    request: web.Request, parsed: Parsed[GranteeGrantForm, None, DiaryPath]
) -> web.Response:
    """Grant a role to a human or a group of the diary's team."""
    form, diary_id = parsed.body, parsed.path.diaryId
    ns, _, subject = (form.grantee or "").partition(":")
    granting = _grant(request, form, diary_id, subjectNs=ns or None, subjectId=subject or None)
    outcome = await attempt("grant", form, granting)
    if outcome.refusal is not None:
        return await _grants_page(request, diary_id, outcome)
    see_other(_grants_url(diary_id), done="grant-added")


@console_route(
    routes,
    "POST",
    "/console/diaries/{diaryId}/grants/agent",
    path_params=DiaryPath,
    body=AgentGrantForm,
)
async def console_grant_agent(
    request: web.Request, parsed: Parsed[AgentGrantForm, None, DiaryPath]
) -> web.Response:
    """Grant a role to an agent named by its fingerprint."""
    form, diary_id = parsed.body, parsed.path.diaryId
    outcome = await attempt("grant-agent", form, _grant_agent(request, form, diary_id))
    if outcome.refusal is not None:
        return await _grants_page(request, diary_id, outcome)
    see_other(_grants_url(diary_id), done="grant-added")


async def _grant_agent(request: web.Request, form: AgentGrantForm, diary_id: UUID) -> Grant:
    path = part_of(FingerprintPath, "path", fingerprint=form.fingerprint)
    agent: AgentProfile = await act(request, identity.agent_profile, path=path)
    return await _grant(request, form, diary_id, subjectNs="Agent", subjectId=agent.agentId)


async def _grant(
    request: web.Request, form: GranteeGrantForm | AgentGrantForm, diary_id: UUID, **subject: Any
) -> Grant:
    """Grant the form's role to the subject (`subjectNs`, `subjectId`) the form names."""
    body = part_of(GrantRequest, role=form.role, **subject)
    granted: Grant = await act(
        request, diaries.create_grant, form, path=GrantPath(diaryId=diary_id), body=body
    )
    return granted


@console_route(
    routes,
    "POST",
    "/console/diaries/{diaryId}/grants/revoke",
    path_params=DiaryPath,
    body=RevokeGrantForm,
)
async def console_grant_revoke(
    request: web.Request, parsed: Parsed[RevokeGrantForm, None, DiaryPath]
) -> web.Response:
    """Revoke one grant."""
    form, diary_id = parsed.body, parsed.path.diaryId
    outcome = await attempt(
        f"revoke-{form.subjectId}-{form.role}", form, _revoke(request, form, diary_id)
    )
    if outcome.refusal is not None:
        return await _grants_page(request, diary_id, outcome)
    see_other(_grants_url(diary_id), done="grant-revoked")


async def _revoke(request: web.Request, form: RevokeGrantForm, diary_id: UUID) -> Done:
    body = part_of(GrantRequest, subjectNs=form.subjectNs, subjectId=form.subjectId, role=form.role)
    done: Done = await act(
        request, diaries.revoke_grant, path=GrantPath(diaryId=diary_id), body=body
    )
    return done


# --- outgoing transfers -------------------------------------------------------------------------


@console_route(routes, "GET", "/console/diaries/{diaryId}/transfers", path_params=DiaryPath)
async def console_diary_transfers(
    request: web.Request, parsed: Parsed[None, None, DiaryPath]
) -> web.Response:
    """A diary's transfers and their state; propose one to another team."""
    return await _diary_transfers_page(request, parsed.path.diaryId)


async def _diary_transfers_page(
    request: web.Request, diary_id: UUID, outcome: Outcome | None = None
) -> web.Response:
    diary: Diary = await act(request, diaries.get_diary, path=DiaryPath(diaryId=diary_id))
    history, list_refusal = await _or_refusal(
        "transfers",
        act(request, transfers.list_diary_transfers, path=DiaryTransfersPath(diaryId=diary_id)),
    )
    mine, team_names = await _team_names(request)
    # a personal team receives no diary, and the diary's own team is where it is already
    targets = [t for t in mine.items if not t.personal and t.id != diary.teamId]
    return page(
        request,
        "sharing/diary_transfers.html",
        diary=diary,
        team_name=team_names.get(diary.teamId),
        transfers=_transfers_of(history),
        list_refusal=list_refusal,
        targets=targets,
        outcome=outcome.refusal if outcome else None,
        key=uuid4().hex,
    )


def _transfers_of(listed: TransferList | None) -> list[Transfer]:
    return listed.items if listed else []


@console_route(
    routes,
    "POST",
    "/console/diaries/{diaryId}/transfers",
    path_params=DiaryPath,
    body=TransferStartForm,
)
async def console_transfer_start(
    request: web.Request, parsed: Parsed[TransferStartForm, None, DiaryPath]
) -> web.Response:
    """Propose to hand the diary to a team: one of the human's own, or one whose id they pasted
    (a pasted id wins; the API checks it)."""
    form, diary_id = parsed.body, parsed.path.diaryId
    outcome = await attempt("transfer", form, _start_transfer(request, form, diary_id))
    if outcome.refusal is not None:
        return await _diary_transfers_page(request, diary_id, outcome)
    see_other(f"/console/diaries/{diary_id}/transfers", done="transfer-started")


async def _start_transfer(
    request: web.Request, form: TransferStartForm, diary_id: UUID
) -> Transfer:
    body = part_of(TransferCreateRequest, destinationTeamId=form.teamId or form.team)
    path = DiaryTransfersPath(diaryId=diary_id)
    started: Transfer = await act(request, transfers.create_transfer, form, path=path, body=body)
    return started


# --- incoming transfers -------------------------------------------------------------------------


@console_route(routes, "GET", "/console/teams/{teamId}/transfers", path_params=ConsoleTeamPath)
async def console_team_transfers(
    request: web.Request, parsed: Parsed[None, None, ConsoleTeamPath]
) -> web.Response:
    """The transfers waiting for this team, with Accept and Reject."""
    return await _team_transfers_page(request, parsed.path.teamId)


async def _team_transfers_page(
    request: web.Request, team_id: UUID, outcome: Outcome | None = None
) -> web.Response:
    team: Team = await act(request, teams.get_team, path=TeamPath(id=team_id))
    waiting: TransferList = await act(
        request, transfers.list_pending_transfers, query=WaitingTransfersQuery(teamId=team_id)
    )
    refusal = outcome.refusal if outcome else None
    rows = {f"{decision}-{t.id}" for t in waiting.items for decision in ("accept", "reject")}
    return page(
        request,
        "sharing/team_transfers.html",
        team=team,
        transfers=waiting.items,
        outcome=refusal,
        # a refusal of a transfer no longer waiting (decided meanwhile) has no row: shown above
        orphan=refusal is not None and refusal.form not in rows,
        key=uuid4().hex,
    )


@console_route(
    routes,
    "POST",
    "/console/teams/{teamId}/transfers/{transferId}/accept",
    path_params=TeamTransferPath,
    body=TransferDecisionForm,
)
async def console_transfer_accept(
    request: web.Request, parsed: Parsed[TransferDecisionForm, None, TeamTransferPath]
) -> web.Response:
    """Accept a transfer: the diary moves to this team."""
    return await _decide(request, parsed.path, parsed.body, "accept")


@console_route(
    routes,
    "POST",
    "/console/teams/{teamId}/transfers/{transferId}/reject",
    path_params=TeamTransferPath,
    body=TransferDecisionForm,
)
async def console_transfer_reject(
    request: web.Request, parsed: Parsed[TransferDecisionForm, None, TeamTransferPath]
) -> web.Response:
    """Reject a transfer: the diary stays with its team."""
    return await _decide(request, parsed.path, parsed.body, "reject")


async def _decide(
    request: web.Request,
    path: TeamTransferPath,
    form: TransferDecisionForm,
    decision: Literal["accept", "reject"],
) -> web.Response:
    handler = transfers.accept_transfer if decision == "accept" else transfers.reject_transfer
    transfer_path = TransferPath(diaryId=form.diaryId, transferId=path.transferId)
    deciding = act(request, handler, form, path=transfer_path)
    outcome = await attempt(f"{decision}-{path.transferId}", form, deciding)
    if outcome.refusal is not None:
        return await _team_transfers_page(request, path.teamId, outcome)
    see_other(f"/console/teams/{path.teamId}/transfers", done=f"transfer-{decision}ed")
