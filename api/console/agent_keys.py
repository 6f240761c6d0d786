"""The console's agent keys pages (issue 24; SPEC 3.5, 4.6): a team's keys for its owners and
managers, a new team key for an agent member, rotation and revocation.

Everything runs the `/agent-keys` routes as the logged-in human, so they decide who may see and
manage which key (a plain member's list is their 403). A secret is shown once, in the answer to
the POST that minted it (create or rotate): never in a URL, a redirect or a later page. Sent
again under the same idempotency key (a reload, the back button), a create is the route's 409
`agent-key-duplicate`, which mints nothing: the page then says the key exists and its secret was
shown once, and shows no secret. A rotation sent again under its key is the route's 409
`agent-key-rotated`, shown beside the keys: nothing rotates twice.
"""

from __future__ import annotations

from typing import Annotated, get_args
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
    page,
    part_of,
    see_other,
)
from api.console.render import NOTICES
from api.endpoint import Parsed
from api.routes import agent_keys, teams
from schemas import limits
from schemas.agent_keys import (
    AgentKey,
    AgentKeyListQuery,
    AgentKeyPath,
    CreateAgentKeyRequest,
    IssuedAgentKey,
    RevocationReason,
    RevokeAgentKeyRequest,
)
from schemas.apps import ConsoleTeamPath
from schemas.base import RequestBody
from schemas.errors import AgentKeyDuplicate
from schemas.kernel.cursors import CURSOR_MAX_CHARS
from schemas.principals import AGENT_SCOPES, DAEMON_MIN_SCOPES
from schemas.teams import Team, TeamPath

routes = web.RouteTableDef()

NOTICES.update({"key-revoked": "The key is revoked: it no longer works."})
REASONS: tuple[str, ...] = get_args(RevocationReason)
PAGE_SIZE = limits.AGENT_KEYS_PAGE.default


class KeysQuery(PageQuery):
    cursor: Annotated[str | None, Field(default=None, max_length=CURSOR_MAX_CHARS)]


class KeyPath(RequestBody):
    teamId: UUID
    keyId: UUID


class CreateKeyForm(ConsoleForm):
    agentId: UUID
    name: Annotated[str, Field(max_length=limits.AGENT_KEY_NAME_MAX_CHARS)]
    # any whole number: the route's own range (SPEC 4.6 rule 3) is the one that decides, and
    # its refusal is shown beside the form
    ttlDays: Annotated[int | None, Field(default=None, le=limits.SQL_INT_MAX)]
    scopes: Annotated[list[str], Field(default_factory=list, max_length=len(AGENT_SCOPES))]


class RotateKeyForm(ConsoleForm):
    pass


class RevokeKeyForm(ConsoleForm):
    reason: Annotated[str | None, Field(default=None, max_length=64)]
    description: Annotated[
        str | None, Field(default=None, max_length=limits.AGENT_KEY_REVOCATION_MAX_CHARS)
    ]


def _keys_url(team_id: UUID) -> str:
    return f"/console/teams/{team_id}/keys"


@console_route(
    routes, "GET", "/console/teams/{teamId}/keys", path_params=ConsoleTeamPath, query=KeysQuery
)
async def console_keys(
    request: web.Request, parsed: Parsed[None, KeysQuery, ConsoleTeamPath]
) -> web.Response:
    """A team's agent keys (owners and managers) and the form for a new one."""
    return await _keys_page(request, parsed.path.teamId, cursor=parsed.query.cursor)


async def _keys_page(
    request: web.Request,
    team_id: UUID,
    *,
    cursor: str | None = None,
    outcome: Outcome | None = None,
    already_created: bool = False,
) -> web.Response:
    """The list (a page of it), the agents a key can be made for, and a refusal if any."""
    team: Team = await act(request, teams.get_team, path=TeamPath(id=team_id))
    query = AgentKeyListQuery(limit=PAGE_SIZE, cursor=cursor or None)
    listed = await act(request, agent_keys.list_agent_keys, query=query, team=team_id)
    agents = [m for m in team.members or [] if m.subjectNs == "Agent"]
    refusal = outcome.refusal if outcome else None
    status = refusal.status if refusal else (409 if already_created else 200)
    return page(
        request,
        "keys/list.html",
        status=status,
        team=team,
        keys=listed.items,
        next_cursor=listed.nextCursor,
        paged=cursor is not None,
        agents=agents,
        scopes=AGENT_SCOPES,
        default_scopes=DAEMON_MIN_SCOPES,
        reasons=REASONS,
        limits=limits,
        outcome=refusal,
        already_created=already_created,
        key=uuid4().hex,
    )


async def _issued_page(
    request: web.Request, team_id: UUID, issued: IssuedAgentKey, verb: str
) -> web.Response:
    """The one page that shows a secret: the answer to the POST that minted it (no redirect;
    `page` sends `Cache-Control: no-store`)."""
    team: Team = await act(request, teams.get_team, path=TeamPath(id=team_id))
    return page(request, "keys/issued.html", team=team, key=issued.root, verb=verb)


@console_route(
    routes, "POST", "/console/teams/{teamId}/keys", path_params=ConsoleTeamPath, body=CreateKeyForm
)
async def console_key_create(
    request: web.Request, parsed: Parsed[CreateKeyForm, None, ConsoleTeamPath]
) -> web.Response:
    """Issue a team key for an agent member; its secret is in this answer only."""
    form = parsed.body
    team_id = parsed.path.teamId
    outcome = await attempt("create", form, _create(request, team_id, form))
    if outcome.refusal is not None:
        return await _keys_page(request, team_id, outcome=outcome)
    if outcome.result is None:
        return await _keys_page(request, team_id, already_created=True)
    return await _issued_page(request, team_id, outcome.result, "created")


async def _create(
    request: web.Request, team_id: UUID, form: CreateKeyForm
) -> IssuedAgentKey | None:
    """The new key; None when this form's key was already issued (the route's 409: the secret
    was shown once and is stored nowhere)."""
    fields = form.model_dump(include={"agentId", "name", "ttlDays"}, exclude_none=True)
    if form.scopes:
        fields["scopes"] = form.scopes
    try:
        body = part_of(CreateAgentKeyRequest, **fields)
        issued: IssuedAgentKey = await act(
            request, agent_keys.create_agent_key, form, body=body, team=team_id
        )
    except AgentKeyDuplicate:
        return None
    return issued


@console_route(
    routes,
    "POST",
    "/console/teams/{teamId}/keys/{keyId}/rotate",
    path_params=KeyPath,
    body=RotateKeyForm,
)
async def console_key_rotate(
    request: web.Request, parsed: Parsed[RotateKeyForm, None, KeyPath]
) -> web.Response:
    """A new secret for the key, shown in this answer only; the old one stops working."""
    form = parsed.body
    path = parsed.path
    # the page's key goes with it: sent again (a reload, the back button), the route's 409
    # `agent-key-rotated` is shown beside the form and nothing rotates twice
    rotating = act(
        request,
        agent_keys.rotate_agent_key,
        form,
        path=AgentKeyPath(id=path.keyId),
        team=path.teamId,
    )
    outcome = await attempt(f"rotate-{path.keyId}", form, rotating)
    if outcome.refusal is not None:
        return await _keys_page(request, path.teamId, outcome=outcome)
    return await _issued_page(request, path.teamId, outcome.result, "rotated")


@console_route(
    routes,
    "POST",
    "/console/teams/{teamId}/keys/{keyId}/revoke",
    path_params=KeyPath,
    body=RevokeKeyForm,
)
async def console_key_revoke(
    request: web.Request, parsed: Parsed[RevokeKeyForm, None, KeyPath]
) -> web.Response:
    """Revoke the key with a reason; it stops working at once."""
    form = parsed.body
    path = parsed.path
    outcome = await attempt(f"revoke-{path.keyId}", form, _revoke(request, path, form))
    if outcome.refusal is not None:
        return await _keys_page(request, path.teamId, outcome=outcome)
    see_other(_keys_url(path.teamId), done="key-revoked")


async def _revoke(request: web.Request, path: KeyPath, form: RevokeKeyForm) -> AgentKey:
    fields = form.model_dump(include={"reason", "description"}, exclude_none=True)
    revoked: AgentKey = await act(
        request,
        agent_keys.revoke_agent_key,
        form,
        path=AgentKeyPath(id=path.keyId),
        body=part_of(RevokeAgentKeyRequest, **fields),
        team=path.teamId,
    )
    return revoked
