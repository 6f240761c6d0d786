"""The console's teams pages (issue 24): found or join a team, accept a founding, a team's
members, invites and groups, a group's members.

Every page and form runs the REST routes of `api/routes/teams.py`, `team_members.py`,
`team_invites.py` and `groups.py` as the logged-in human (see api/console/__init__.py): what a
person may do is what those routes allow, and a refusal is shown beside the form that caused
it. Whether the management forms are shown is asked of the API too: the invites list answers
only those who may manage the team's members (`manage_members`), so a page that gets it shows
them and one refused it does not (a form posted anyway is refused by its route, shown so).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Annotated, Any, get_args
from uuid import UUID, uuid4

from aiohttp import web
from pydantic import Field

from api.console.kit import (
    ConsoleForm,
    Outcome,
    PageQuery,
    Refusal,
    act,
    attempt,
    console_route,
    part_of,
    see_other,
)
from api.console.render import NOTICES, page
from api.endpoint import Parsed
from api.routes import groups, identity, team_invites, team_members, teams
from schemas import limits
from schemas.apps import ConsoleTeamPath
from schemas.base import RequestBody
from schemas.errors import Forbidden
from schemas.identity import FINGERPRINT_PATTERN, AgentProfile, FingerprintPath
from schemas.teams import (
    INVITE_CODE_PATTERN,
    AddGroupMemberRequest,
    CreateGroupRequest,
    CreateInviteRequest,
    CreateTeamRequest,
    FoundingAccepted,
    FoundingMember,
    Group,
    GroupList,
    GroupMemberPath,
    GroupPath,
    Invite,
    InviteList,
    InvitePath,
    InviteRole,
    Joined,
    JoinRequest,
    MemberPath,
    Team,
    TeamList,
    TeamPath,
    TeamRole,
    TeamSummary,
    UpdateMemberRequest,
)

routes = web.RouteTableDef()
ROLES: tuple[str, ...] = get_args(TeamRole)
INVITE_ROLES: tuple[str, ...] = get_args(InviteRole)
# the new-team form's rows of co-founders (a larger team is founded, then invited to)
FOUNDER_ROWS = 5

NOTICES.update(
    {
        "team-created": "The team is created and active; you are its owner.",
        "team-founding": "The team is founding: it becomes active once every founding member "
        "accepts, you included.",
        "founding-accepted": "Your acceptance is recorded.",
        "team-active": "Your acceptance is recorded: every founder accepted, the team is active.",
        "team-joined": "You joined the team.",
        "role-changed": "The role is changed.",
        "member-removed": "The member is removed from the team.",
        "invite-created": "The invite is created: copy its code and send it to whoever joins.",
        "invite-revoked": "The invite is revoked; its code no longer works.",
        "group-created": "The group is created.",
        "group-member-added": "Added to the group.",
        "group-member-removed": "Removed from the group.",
        "group-deleted": "The group is deleted.",
    }
)


def html_pattern(regex: str) -> str:
    """A schema's pattern as an HTML `pattern` attribute: anchored by HTML itself, and read in
    the `v` mode of JavaScript, where a `-` in a class must be escaped."""
    return re.sub(r"-\]", r"\\-]", regex.removeprefix("^").removesuffix("$"))


INVITE_CODE_HTML = html_pattern(INVITE_CODE_PATTERN)


# --- paths, queries and forms -------------------------------------------------------------------


class TeamPageQuery(PageQuery):
    invite: UUID | None = Field(default=None, description="an invite just created, shown first")


class MemberFormPath(RequestBody):
    teamId: UUID
    subjectId: UUID


class InviteFormPath(RequestBody):
    teamId: UUID
    inviteId: UUID


class GroupPagePath(RequestBody):
    groupId: UUID


class GroupMemberFormPath(RequestBody):
    groupId: UUID
    subjectId: UUID


class NewTeamForm(ConsoleForm):
    name: Annotated[str, Field(max_length=limits.TEAM_NAME_MAX_CHARS)]
    # the founder rows, paired by position (a row without a fingerprint is an unused one)
    fingerprint: list[str] = Field(default_factory=list, max_length=FOUNDER_ROWS)
    role: list[TeamRole] = Field(default_factory=list, max_length=FOUNDER_ROWS)


class JoinForm(ConsoleForm):
    code: Annotated[str, Field(max_length=64)]


class DecisionForm(ConsoleForm):
    """A form with nothing but its button (accept, remove, revoke, delete)."""


class RoleForm(ConsoleForm):
    role: TeamRole


class InviteForm(ConsoleForm):
    """Its numbers bounded above by the limits the API checks (which still decides)."""

    role: InviteRole = "member"
    maxUses: int | None = Field(default=None, le=limits.TEAM_INVITE_MAX_USES_MAX)
    expiresInHours: int | None = Field(default=None, le=limits.TEAM_INVITE_TTL_HOURS_MAX)


class GroupForm(ConsoleForm):
    name: Annotated[str, Field(max_length=limits.TEAM_NAME_MAX_CHARS)]


class GroupMemberForm(ConsoleForm):
    subjectId: UUID


# --- the home page's part -----------------------------------------------------------------------


def home_parts(team_list: TeamList) -> dict[str, Any]:
    """What the home page shows of teams beyond the list: foundings waiting for my acceptance
    (each with its own key: accepting is a decision) and the join form's key."""
    pending = [team for team in team_list.items if _awaits_me(team)]
    return {
        "pending_foundings": [(team, uuid4().hex) for team in pending],
        "join_key": uuid4().hex,
        "join_pattern": INVITE_CODE_HTML,
    }


def _awaits_me(team: TeamSummary) -> bool:
    return team.status == "founding" and team.foundingAcceptance == "pending"


# --- found a team, join one ---------------------------------------------------------------------


@console_route(routes, "GET", "/console/teams/new")
async def console_new_team(request: web.Request, parsed: Parsed) -> web.Response:
    """Create a team, with co-founders (agents found by fingerprint) if any."""
    return _new_team_page(request)


def _new_team_page(request: web.Request, refusal: Refusal | None = None) -> web.Response:
    values = refusal.values if refusal else {}
    rows = _padded(values.get("fingerprint") or [], ""), _padded(values.get("role") or [], "owner")
    return page(
        request,
        "teams/new.html",
        outcome=refusal,
        key=uuid4().hex,
        founders=list(zip(*rows, strict=True)),
        roles=ROLES,
        fingerprint_pattern=html_pattern(FINGERPRINT_PATTERN),
        limits=limits,
    )


def _padded(values: list[str], blank: str) -> list[str]:
    return (list(values) + [blank] * FOUNDER_ROWS)[:FOUNDER_ROWS]


@console_route(routes, "POST", "/console/teams", body=NewTeamForm)
async def console_create_team(request: web.Request, parsed: Parsed[NewTeamForm]) -> web.Response:
    """Create the team: active at once without co-founders, else founding (each accepts)."""
    form = parsed.body
    founders = await _founders(request, form)
    if isinstance(founders, Refusal):
        return _new_team_page(request, founders)
    created = await attempt("new-team", form, _create_team(request, form, founders))
    if created.refusal is not None:
        return _new_team_page(request, created.refusal)
    team: Team = created.result
    done = "team-created" if team.status == "active" else "team-founding"
    see_other(_team_url(team.id), done=done)


async def _create_team(
    request: web.Request, form: NewTeamForm, founders: list[FoundingMember]
) -> Team:
    fields: dict[str, Any] = {"foundingMembers": founders} if founders else {}
    body = part_of(CreateTeamRequest, name=form.name, **fields)
    team: Team = await act(request, teams.create_team, form, body=body)
    return team


async def _agent(request: web.Request, fingerprint: str) -> AgentProfile:
    path = part_of(FingerprintPath, "path", fingerprint=fingerprint)
    agent: AgentProfile = await act(request, identity.agent_profile, path=path)
    return agent


async def _founders(request: web.Request, form: NewTeamForm) -> list[FoundingMember] | Refusal:
    """The form's co-founders as the API names them: each fingerprint resolved to its agent
    (`GET /agents/{fingerprint}`), or the refusal of the first that is not an agent's."""
    founders: list[FoundingMember] = []
    rows = zip(form.fingerprint, form.role, strict=False)
    for number, (fingerprint, role) in enumerate(rows, start=1):
        if not fingerprint.strip():
            continue
        found = await attempt("new-team", form, _agent(request, fingerprint.strip()))
        if found.refusal is not None:
            detail = f"Founder {number} ({fingerprint.strip()}): {found.refusal.detail}"
            return replace(found.refusal, detail=detail)
        agent: AgentProfile = found.result
        founders.append(FoundingMember(subjectId=agent.agentId, subjectNs="Agent", role=role))
    return founders


@console_route(routes, "GET", "/console/teams/join")
async def console_join_page(request: web.Request, parsed: Parsed) -> web.Response:
    """Join a team with an invite code."""
    return _join_page(request)


def _join_page(request: web.Request, refusal: Refusal | None = None) -> web.Response:
    return page(
        request,
        "teams/join.html",
        outcome=refusal,
        join_key=uuid4().hex,
        join_pattern=INVITE_CODE_HTML,
    )


@console_route(routes, "POST", "/console/teams/join", body=JoinForm)
async def console_join(request: web.Request, parsed: Parsed[JoinForm]) -> web.Response:
    """Join with the code: on to the team (an unknown, used or expired code: beside the form)."""
    form = parsed.body
    joined = await attempt("join", form, _join(request, form))
    if joined.refusal is not None:
        return _join_page(request, joined.refusal)
    result: Joined = joined.result
    see_other(_team_url(result.teamId), done="team-joined")


async def _join(request: web.Request, form: JoinForm) -> Joined:
    body = part_of(JoinRequest, code=form.code.strip())
    joined: Joined = await act(request, team_invites.join_team, form, body=body)
    return joined


@console_route(
    routes,
    "POST",
    "/console/teams/{teamId}/accept-founding",
    path_params=ConsoleTeamPath,
    body=DecisionForm,
)
async def console_accept_founding(
    request: web.Request, parsed: Parsed[DecisionForm, None, ConsoleTeamPath]
) -> web.Response:
    """Accept my founding seat; on to the team with its acceptances."""
    team_id = parsed.path.teamId
    accepting = act(request, teams.accept_founding, parsed.body, path=TeamPath(id=team_id))
    outcome = await attempt("accept", parsed.body, accepting)
    if outcome.refusal is not None:
        return await _team_page(request, team_id, outcome.refusal)
    accepted: FoundingAccepted = outcome.result
    see_other(
        _team_url(team_id),
        done="team-active" if accepted.teamStatus == "active" else "founding-accepted",
    )


# --- a team: members, invites, groups -----------------------------------------------------------


def _team_url(team_id: UUID) -> str:
    return f"/console/teams/{team_id}"


@console_route(
    routes, "GET", "/console/teams/{teamId}", path_params=ConsoleTeamPath, query=TeamPageQuery
)
async def console_team(
    request: web.Request, parsed: Parsed[None, TeamPageQuery, ConsoleTeamPath]
) -> web.Response:
    """A team: its status and my role, its members (or founding acceptances), invites and
    groups."""
    return await _team_page(request, parsed.path.teamId, fresh_invite=parsed.query.invite)


async def _team_page(
    request: web.Request,
    team_id: UUID,
    refusal: Refusal | None = None,
    fresh_invite: UUID | None = None,
) -> web.Response:
    team: Team = await act(request, teams.get_team, path=TeamPath(id=team_id))
    invites: list[Invite] | None = None
    group_items: list[Group] = []
    if team.status == "active":
        invites = await _invites_if_managing(request, team_id)
        listed: GroupList = await act(request, groups.list_groups, path=TeamPath(id=team_id))
        group_items = listed.items
    fresh = next((i for i in invites or [] if i.id == fresh_invite), None)
    return page(
        request,
        "teams/team.html",
        outcome=refusal,
        team=team,
        manages=invites is not None,
        invites=invites or [],
        fresh=fresh,
        groups=group_items,
        roles=ROLES,
        invite_roles=INVITE_ROLES,
        limits=limits,
        keys={name: uuid4().hex for name in ("accept", "invite", "group")},
    )


async def _invites_if_managing(request: web.Request, team_id: UUID) -> list[Invite] | None:
    """The team's invites, or None when the API refuses them to me (not a manager)."""
    try:
        listed: InviteList = await act(
            request, team_invites.list_team_invites, path=TeamPath(id=team_id)
        )
    except Forbidden:
        return None
    return listed.items


async def _team_form(
    request: web.Request, team_id: UUID, form_name: str, sent: ConsoleForm, action: Any, done: str
) -> web.Response:
    """Run a team page's form: back to the page announcing `done`, or refused beside it."""
    outcome: Outcome = await attempt(form_name, sent, action)
    if outcome.refusal is not None:
        return await _team_page(request, team_id, outcome.refusal)
    see_other(_team_url(team_id), done=done)


@console_route(
    routes,
    "POST",
    "/console/teams/{teamId}/members/{subjectId}",
    path_params=MemberFormPath,
    body=RoleForm,
)
async def console_change_role(
    request: web.Request, parsed: Parsed[RoleForm, None, MemberFormPath]
) -> web.Response:
    """Change a member's role (the last owner stays one: refused beside that member)."""
    path = parsed.path
    rest_path = MemberPath(id=path.teamId, subjectId=path.subjectId)
    body = UpdateMemberRequest(role=parsed.body.role)
    changing = act(request, team_members.update_team_member, path=rest_path, body=body)
    return await _team_form(
        request, path.teamId, f"member-{path.subjectId}", parsed.body, changing, "role-changed"
    )


@console_route(
    routes,
    "POST",
    "/console/teams/{teamId}/members/{subjectId}/remove",
    path_params=MemberFormPath,
    body=DecisionForm,
)
async def console_remove_member(
    request: web.Request, parsed: Parsed[DecisionForm, None, MemberFormPath]
) -> web.Response:
    """Remove a member from the team (and its groups)."""
    path = parsed.path
    rest_path = MemberPath(id=path.teamId, subjectId=path.subjectId)
    removing = act(request, team_members.remove_team_member, path=rest_path)
    return await _team_form(
        request, path.teamId, f"member-{path.subjectId}", parsed.body, removing, "member-removed"
    )


@console_route(
    routes, "POST", "/console/teams/{teamId}/invites", path_params=ConsoleTeamPath, body=InviteForm
)
async def console_create_invite(
    request: web.Request, parsed: Parsed[InviteForm, None, ConsoleTeamPath]
) -> web.Response:
    """Create an invite; the team page shows its code first, with a copy button."""
    form = parsed.body
    team_id = parsed.path.teamId
    outcome = await attempt("invite", form, _invite(request, form, team_id))
    if outcome.refusal is not None:
        return await _team_page(request, team_id, outcome.refusal)
    invite: Invite = outcome.result
    see_other(f"{_team_url(team_id)}?invite={invite.id}", done="invite-created")


async def _invite(request: web.Request, form: InviteForm, team_id: UUID) -> Invite:
    fields = form.model_dump(include={"role", "maxUses", "expiresInHours"}, exclude_none=True)
    body = part_of(CreateInviteRequest, **fields)
    path = TeamPath(id=team_id)
    invite: Invite = await act(request, team_invites.create_team_invite, form, path=path, body=body)
    return invite


@console_route(
    routes,
    "POST",
    "/console/teams/{teamId}/invites/{inviteId}/revoke",
    path_params=InviteFormPath,
    body=DecisionForm,
)
async def console_revoke_invite(
    request: web.Request, parsed: Parsed[DecisionForm, None, InviteFormPath]
) -> web.Response:
    """Revoke an invite: its code stops working at once."""
    path = parsed.path
    rest_path = InvitePath(id=path.teamId, inviteId=path.inviteId)
    revoking = act(request, team_invites.delete_team_invite, path=rest_path)
    return await _team_form(
        request, path.teamId, f"invite-{path.inviteId}", parsed.body, revoking, "invite-revoked"
    )


@console_route(
    routes, "POST", "/console/teams/{teamId}/groups", path_params=ConsoleTeamPath, body=GroupForm
)
async def console_create_group(
    request: web.Request, parsed: Parsed[GroupForm, None, ConsoleTeamPath]
) -> web.Response:
    """Create a group of the team; on to its page."""
    form = parsed.body
    team_id = parsed.path.teamId
    outcome = await attempt("group", form, _create_group(request, form, team_id))
    if outcome.refusal is not None:
        return await _team_page(request, team_id, outcome.refusal)
    group: Group = outcome.result
    see_other(_group_url(group.id), done="group-created")


async def _create_group(request: web.Request, form: GroupForm, team_id: UUID) -> Group:
    body = part_of(CreateGroupRequest, name=form.name)
    group: Group = await act(
        request, groups.create_group, form, path=TeamPath(id=team_id), body=body
    )
    return group


# --- a group ------------------------------------------------------------------------------------


def _group_url(group_id: UUID) -> str:
    return f"/console/groups/{group_id}"


@console_route(routes, "GET", "/console/groups/{groupId}", path_params=GroupPagePath)
async def console_group(
    request: web.Request, parsed: Parsed[None, None, GroupPagePath]
) -> web.Response:
    """A group: its members by name; a manager adds the team's members, removes, deletes."""
    return await _group_page(request, parsed.path.groupId)


async def _group_page(
    request: web.Request, group_id: UUID, refusal: Refusal | None = None
) -> web.Response:
    group: Group = await act(request, groups.get_group, path=GroupPath(id=group_id))
    team: Team = await act(request, teams.get_team, path=TeamPath(id=group.teamId))
    in_group = {member.subjectId for member in group.members or []}
    candidates = [m for m in team.members or [] if m.subjectId not in in_group]
    return page(
        request,
        "teams/group.html",
        outcome=refusal,
        group=group,
        team=team,
        manages=await _invites_if_managing(request, group.teamId) is not None,
        candidates=candidates,
        key=uuid4().hex,
    )


async def _group_form(
    request: web.Request, group_id: UUID, form_name: str, sent: ConsoleForm, action: Any, done: str
) -> web.Response:
    outcome: Outcome = await attempt(form_name, sent, action)
    if outcome.refusal is not None:
        return await _group_page(request, group_id, outcome.refusal)
    see_other(_group_url(group_id), done=done)


@console_route(
    routes,
    "POST",
    "/console/groups/{groupId}/members",
    path_params=GroupPagePath,
    body=GroupMemberForm,
)
async def console_add_group_member(
    request: web.Request, parsed: Parsed[GroupMemberForm, None, GroupPagePath]
) -> web.Response:
    """Add a member of the team to the group."""
    form = parsed.body
    group_id = parsed.path.groupId
    body = AddGroupMemberRequest(subjectId=form.subjectId)
    adding = act(request, groups.add_group_member, form, path=GroupPath(id=group_id), body=body)
    return await _group_form(request, group_id, "add", form, adding, "group-member-added")


@console_route(
    routes,
    "POST",
    "/console/groups/{groupId}/members/{subjectId}/remove",
    path_params=GroupMemberFormPath,
    body=DecisionForm,
)
async def console_remove_group_member(
    request: web.Request, parsed: Parsed[DecisionForm, None, GroupMemberFormPath]
) -> web.Response:
    """Remove a member from the group."""
    path = parsed.path
    rest_path = GroupMemberPath(id=path.groupId, subjectId=path.subjectId)
    removing = act(request, groups.remove_group_member, path=rest_path)
    return await _group_form(
        request,
        path.groupId,
        f"member-{path.subjectId}",
        parsed.body,
        removing,
        "group-member-removed",
    )


@console_route(
    routes,
    "POST",
    "/console/groups/{groupId}/delete",
    path_params=GroupPagePath,
    body=DecisionForm,
)
async def console_delete_group(
    request: web.Request, parsed: Parsed[DecisionForm, None, GroupPagePath]
) -> web.Response:
    """Delete the group (and every grant made to it); back to its team."""
    group_id = parsed.path.groupId
    group: Group = await act(request, groups.get_group, path=GroupPath(id=group_id))
    deleting = act(request, groups.delete_group, path=GroupPath(id=group_id))
    outcome = await attempt("delete", parsed.body, deleting)
    if outcome.refusal is not None:
        return await _group_page(request, group_id, outcome.refusal)
    see_other(_team_url(group.teamId), done="group-deleted")
