"""Agent keys (SPEC 4.6): issue, list, rotate and revoke long-lived agent bearer keys.

Every route needs scope `key:manage`. A team operation names its team in `x-service-team-id`
(400 without) and acts on keys bound to that team; an identity operation says
`bindingScope=identity` and refuses that header (400). Who may do what (rule 8):

- team keys: the agent itself (any of its credentials), or a caller holding `manage_credentials`
  on the team (its owners and managers, humans included), for any agent member of the team
  (else 403 `key-manage-forbidden`). Issue and rotation need the agent to be a current member
  (else 403 `agent-not-team-member`); revocation does not, so managers can still revoke the
  keys of an agent who left.
- identity keys: only the agent itself, through OAuth2 or one of its identity keys (403
  `identity-key-forbidden` for humans, team managers and team-bound keys); another agent's
  identity key does not exist for the caller (404).
- scopes: omitted means the daemon minimum; each must be in the agent grant (400
  `scope-not-grantable`) and held by the requesting credential (403 `scope-escalation`).
  Rotation keeps scopes and expiry and is refused to the key being rotated (403
  `self-rotation-forbidden`); only an active key rotates (409 `agent-key-not-active`).
- create needs an `Idempotency-Key` (1..200 characters): the create workflow's id, and so the
  key id, derive from the caller and that key, and a second create under it is a 409
  `agent-key-duplicate` that mints nothing (the secret is never stored: list, then rotate or
  revoke). A create that failed may be retried under the same key.
- rotate honours an `Idempotency-Key` when one is sent (DECISIONS): the key rotates once, and
  the same request again is a 409 `agent-key-rotated` that mints nothing, so a reloaded page
  that showed the new secret does not rotate again. Without one, each call rotates.

Choices where the spec is terse: a key revokes itself if asked (a holder who finds it leaked
must be able to kill it at once); revoking a revoked key answers the key as it is (200).
The store filters by binding itself, so every page is full (DECISIONS "Agent keys").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final
from uuid import UUID

import asyncpg
from aiohttp import web
from temporalio.common import SearchAttributePair, WorkflowIDReusePolicy

from api import keys
from api.access import allowed
from api.auth import require_principal
from api.endpoint import Parsed, endpoint
from api.flows import execute
from api.headers import IDEMPOTENCY_HEADER, require_team_header, team_header
from api.idempotency import idempotency_key, keyed_workflow_id, run_key
from infra.repos.agent_keys import KeyFilter, get_key, list_keys
from schemas import limits
from schemas.agent_keys import (
    AgentKey,
    AgentKeyCreate,
    AgentKeyList,
    AgentKeyListQuery,
    AgentKeyPath,
    AgentKeyRevoke,
    AgentKeyRotate,
    AgentKeyRow,
    BindingScope,
    BindingScopeQuery,
    CreateAgentKeyRequest,
    InvalidKeyMetadata,
    IssuedAgentKey,
    RevokeAgentKeyRequest,
    granted_scopes,
    key_to_wire,
    metadata_v2,
    new_agent_key_secret,
)
from schemas.errors import (
    AgentKeyDuplicate,
    AgentKeyNotActive,
    AgentKeyNotFound,
    AgentKeyRevocationRunning,
    AgentKeyRotated,
    AgentKeyRotationRunning,
    AgentNotTeamMember,
    DomainError,
    IdempotencyKeyRequired,
    IdentityKeyForbidden,
    InvalidIdempotencyKey,
    InvalidTeamHeader,
    KeyManageForbidden,
    RequestInvalid,
    ScopeEscalation,
    ScopeNotGrantable,
    SelfRotationForbidden,
    TeamHeaderNotAllowed,
    TeamRequired,
)
from schemas.kernel.crypto import hash_secret
from schemas.kernel.cursors import Keyset
from schemas.kernel.permissions import Subject
from schemas.principals import Principal
from workflows.agent_keys import (
    AgentKeyCreateWorkflow,
    AgentKeyRevokeWorkflow,
    AgentKeyRotateWorkflow,
    create_workflow_id,
    idempotency_key_hash,
    key_id_for,
    keyed_rotate_workflow_id,
    revoke_workflow_id,
    rotate_workflow_id,
)
from workflows.common import AGENT_ID, TEAM_ID

routes = web.RouteTableDef()
TAG = "agent-keys"
SCOPES: Final = ("key:manage",)
TEAM_HEADER_DOC: Final = ("x-service-team-id",)
LIST_CURSOR_SCOPE: Final = "agent-keys"


def _pool(request: web.Request) -> asyncpg.Pool:
    return request.app[keys.READ_POOL]


# --- who may manage which key ----------------------------------------------------------------


def _operation_team(request: web.Request, binding_scope: BindingScope | None) -> UUID | None:
    """The team of a team operation; None for an identity operation (rule 1)."""
    if binding_scope == "identity":
        if team_header(request) is not None:
            raise TeamHeaderNotAllowed("Identity-key operations take no x-service-team-id header")
        return None
    return require_team_header(request)


def _is_self(principal: Principal, agent_id: UUID) -> bool:
    return principal.subject_type == "agent" and principal.agent_id == agent_id


def _require_identity_authority(principal: Principal) -> UUID:
    """The caller's agent id when it may manage its identity keys: an agent through OAuth2 or
    through one of its identity keys, never a human or a team-bound key (rule 8)."""
    by_oauth2 = principal.credential == "oauth2"
    by_identity_key = principal.credential == "agent_key" and principal.binding_scope == "identity"
    if principal.subject_type != "agent" or principal.agent_id is None:
        raise IdentityKeyForbidden("Only the agent itself manages its identity keys")
    if not (by_oauth2 or by_identity_key):
        raise IdentityKeyForbidden("Use OAuth2 or an identity key, not a team-bound key")
    return principal.agent_id


async def _require_team_authority(
    request: web.Request, principal: Principal, team_id: UUID, agent_id: UUID
) -> None:
    """The agent itself, or a credential manager of the team (rule 8)."""
    if _is_self(principal, agent_id):
        return
    if not await allowed(request, "Team", team_id, "manage_credentials"):
        raise KeyManageForbidden("Only the agent or the team's owners and managers may")


async def _require_member(request: web.Request, team_id: UUID, agent_id: UUID) -> None:
    """The key's agent is a member of the team right now (issue and rotation stop at removal)."""
    agent = Subject(ns="Agent", id=str(agent_id))
    if not await request.app[keys.PERMISSIONS].check("Team", team_id, "verify_claim", agent):
        raise AgentNotTeamMember("The agent is not a current member of this team")


async def _key_in_scope(request: web.Request, key_id: UUID, team_id: UUID | None) -> AgentKeyRow:
    """The key when it belongs to this operation's binding (this team, or identity)."""
    row = await get_key(_pool(request), key_id)
    if row is None:
        raise AgentKeyNotFound("No such agent key")
    try:
        binding = row.binding
    except InvalidKeyMetadata:
        raise AgentKeyNotFound("No such agent key") from None
    wanted: BindingScope = "identity" if team_id is None else "team"
    if binding.binding_scope != wanted or binding.team_id != team_id:
        raise AgentKeyNotFound("No such agent key in this binding")
    return row


async def _managed_key(
    request: web.Request, key_id: UUID, binding_scope: BindingScope | None
) -> tuple[AgentKeyRow, UUID | None]:
    """The key a rotate or revoke names, once the caller may manage it; and its team."""
    principal = require_principal(request)
    team_id = _operation_team(request, binding_scope)
    if team_id is None:
        agent_id = _require_identity_authority(principal)
        key = await _key_in_scope(request, key_id, None)
        if key.actor_id != agent_id:
            raise AgentKeyNotFound("No such agent key")
        return key, None
    key = await _key_in_scope(request, key_id, team_id)
    await _require_team_authority(request, principal, team_id, key.actor_id)
    return key, team_id


def _required_idempotency_key(request: web.Request) -> str:
    value = idempotency_key(request)
    if value is None:
        raise IdempotencyKeyRequired(
            f"Creating a key needs an {IDEMPOTENCY_HEADER} header of 1 to "
            f"{limits.IDEMPOTENCY_KEY_MAX_CHARS} characters"
        )
    return value


def _server_secret(request: web.Request) -> bytes:
    return request.app[keys.SETTINGS].secret_bytes


# --- routes -----------------------------------------------------------------------------------


@endpoint(
    routes,
    "POST",
    "/agent-keys",
    tag=TAG,
    status=201,
    body=CreateAgentKeyRequest,
    response=IssuedAgentKey,
    scopes=SCOPES,
    rate_bucket="agent_key",
    headers=TEAM_HEADER_DOC,
    # SPEC 4.6's own rule (required; a retry is 409: the secret is never stored)
    idempotent=True,
    errors=(
        TeamRequired,
        InvalidTeamHeader,
        TeamHeaderNotAllowed,
        IdempotencyKeyRequired,
        InvalidIdempotencyKey,
        ScopeNotGrantable,
        ScopeEscalation,
        KeyManageForbidden,
        IdentityKeyForbidden,
        AgentNotTeamMember,
        AgentKeyDuplicate,
    ),
)
async def create_agent_key(
    request: web.Request, parsed: Parsed[CreateAgentKeyRequest]
) -> IssuedAgentKey:
    """Issue an agent key bound to a team (header) or to the agent identity; the secret is
    in this response only."""
    body = parsed.body
    principal = require_principal(request)
    key = _required_idempotency_key(request)
    team_id = _operation_team(request, body.bindingScope)
    if team_id is None:
        if _require_identity_authority(principal) != body.agentId:
            raise IdentityKeyForbidden("Only the agent itself issues its identity keys")
    else:
        await _require_team_authority(request, principal, team_id, body.agentId)
        await _require_member(request, team_id, body.agentId)
    scopes = granted_scopes(body.scopes, principal.scopes)
    workflow_id = create_workflow_id(principal.subject_ns, principal.subject_id, key)
    key_id = key_id_for(workflow_id)
    secret = new_agent_key_secret(key_id)
    created = await execute(
        request,
        AgentKeyCreateWorkflow.run,
        AgentKeyCreate(
            key_id=key_id,
            actor_id=body.agentId,
            name=body.name,
            metadata=metadata_v2("identity" if team_id is None else "team", team_id),
            scopes=scopes,
            secret_hash=hash_secret(secret, _server_secret(request)),
            expires_at=datetime.now(UTC) + timedelta(days=body.ttlDays),
            created_by_ns="Agent" if principal.subject_type == "agent" else "Human",
            created_by_id=principal.subject_id,
            idempotency_key_hash=idempotency_key_hash(key),
        ),
        workflow_id=workflow_id,
        # a create that failed (nothing stored) may be retried; any other second start is a 409
        reuse=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
        on_duplicate=AgentKeyDuplicate(
            "A key was already issued for this Idempotency-Key; list the keys, then rotate or "
            "revoke"
        ),
        search=[SearchAttributePair(AGENT_ID, str(body.agentId))]
        + ([SearchAttributePair(TEAM_ID, str(team_id))] if team_id else []),
    )
    issued = key_to_wire(created, secret)
    assert isinstance(issued, IssuedAgentKey)
    return issued


@endpoint(
    routes,
    "GET",
    "/agent-keys",
    tag=TAG,
    query=AgentKeyListQuery,
    response=AgentKeyList,
    scopes=SCOPES,
    headers=TEAM_HEADER_DOC,
    errors=(RequestInvalid, KeyManageForbidden, IdentityKeyForbidden),
)
async def list_agent_keys(
    request: web.Request, parsed: Parsed[None, AgentKeyListQuery]
) -> AgentKeyList:
    """Keys of a team (all of them for its credential managers, else the caller's own), or the
    caller's identity keys; metadata only, newest first, cursor-paged."""
    query = parsed.query
    principal = require_principal(request)
    team_id = _operation_team(request, query.bindingScope)
    if team_id is None:
        agent_id: UUID | None = _require_identity_authority(principal)
        if query.agentId not in (None, agent_id):
            raise IdentityKeyForbidden("Only the agent itself lists its identity keys")
    elif await allowed(request, "Team", team_id, "manage_credentials"):
        agent_id = query.agentId
    elif principal.subject_type == "agent" and query.agentId in (None, principal.agent_id):
        agent_id = principal.agent_id
    else:
        raise KeyManageForbidden("Only the team's owners and managers list other agents' keys")
    binding = {
        "bindingScope": query.bindingScope or "team",
        "teamId": str(team_id) if team_id else None,
        "agentId": str(query.agentId) if query.agentId else None,
        "status": query.status,
    }
    keyset = Keyset(_server_secret(request), LIST_CURSOR_SCOPE, binding, fields=("at", "id"))
    rows = await list_keys(
        _pool(request),
        KeyFilter(
            binding_scope=query.bindingScope or "team",
            team_id=team_id,
            agent_id=agent_id,
            status=query.status,
        ),
        keyset.after(query.cursor),
        query.limit + 1,
    )
    page, next_cursor = keyset.page(rows, query.limit, lambda row: (row.created_at, row.id))
    items = []
    for row in page:
        wire = key_to_wire(row)
        assert isinstance(wire, AgentKey)
        items.append(wire.root)
    return AgentKeyList(items=items, nextCursor=next_cursor)


@endpoint(
    routes,
    "POST",
    "/agent-keys/{id}/rotate",
    tag=TAG,
    path_params=AgentKeyPath,
    query=BindingScopeQuery,
    response=IssuedAgentKey,
    scopes=SCOPES,
    rate_bucket="agent_key",
    headers=TEAM_HEADER_DOC,
    errors=(
        TeamRequired,
        InvalidTeamHeader,
        TeamHeaderNotAllowed,
        InvalidIdempotencyKey,
        KeyManageForbidden,
        IdentityKeyForbidden,
        SelfRotationForbidden,
        AgentNotTeamMember,
        AgentKeyNotFound,
        AgentKeyNotActive,
        AgentKeyRotationRunning,
        AgentKeyRotated,
    ),
    idempotent=True,  # with a key: one rotation, and every repeat a 409 that mints nothing
)
async def rotate_agent_key(
    request: web.Request, parsed: Parsed[None, BindingScopeQuery, AgentKeyPath]
) -> IssuedAgentKey:
    """A new secret for the key; the old one fails from now on. Scopes and expiry stay. With an
    `Idempotency-Key`, the key rotates once: sent again, 409 `agent-key-rotated` (the secret
    was shown once and is stored nowhere)."""
    path = parsed.path
    query = parsed.query
    principal = require_principal(request)
    key, team_id = await _managed_key(request, path.id, query.bindingScope)
    if principal.key_id == key.id:
        raise SelfRotationForbidden("Rotate this key with another credential of the agent")
    if team_id is not None:
        await _require_member(request, team_id, key.actor_id)
    if key.status != "active":
        raise AgentKeyNotActive(f"The key is {key.status}")
    secret = new_agent_key_secret(key.id)
    rotation = _rotation_run(request, principal, key.id)
    rotated = await execute(
        request,
        AgentKeyRotateWorkflow.run,
        AgentKeyRotate(key_id=key.id, secret_hash=hash_secret(secret, _server_secret(request))),
        workflow_id=rotation.workflow_id,
        reuse=rotation.reuse,
        on_duplicate=rotation.on_duplicate,
        search=[SearchAttributePair(AGENT_ID, str(key.actor_id))],
    )
    issued = key_to_wire(rotated, secret)
    assert isinstance(issued, IssuedAgentKey)
    return issued


def _rotation_run(request: web.Request, principal: Principal, key_id: UUID) -> RotationRun:
    """Without an Idempotency-Key, each call rotates (one at a time: a second while one runs is
    409 `agent-key-rotation-running`); with one, the first call rotates and every later one
    (a reload of the page that showed the secret) is 409 `agent-key-rotated`, minting nothing.
    A rotation that failed (nothing stored) may be sent again under its key."""
    key = idempotency_key(request)
    if key is None:
        return RotationRun(
            workflow_id=rotate_workflow_id(key_id),
            on_duplicate=AgentKeyRotationRunning("This key is being rotated"),
        )
    return RotationRun(
        workflow_id=keyed_rotate_workflow_id(
            principal.subject_ns, principal.subject_id, key_id, key
        ),
        reuse=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
        on_duplicate=AgentKeyRotated(
            "This key was already rotated for this Idempotency-Key; its new secret was shown "
            "once. Rotate it again if that secret was not kept"
        ),
    )


@dataclass(frozen=True)
class RotationRun:
    workflow_id: str
    on_duplicate: DomainError
    reuse: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE


@endpoint(
    routes,
    "POST",
    "/agent-keys/{id}/revoke",
    tag=TAG,
    path_params=AgentKeyPath,
    query=BindingScopeQuery,
    body=RevokeAgentKeyRequest,
    response=AgentKey,
    scopes=SCOPES,
    rate_bucket="agent_key",
    headers=TEAM_HEADER_DOC,
    errors=(RequestInvalid, KeyManageForbidden, IdentityKeyForbidden, AgentKeyNotFound),
    idempotent=True,  # a decision: revoking a revoked key answers it (the first reason stays)
)
async def revoke_agent_key(
    request: web.Request, parsed: Parsed[RevokeAgentKeyRequest, BindingScopeQuery, AgentKeyPath]
) -> AgentKey:
    """Revoke the key at once (managers can, even after the agent left the team)."""
    path = parsed.path
    query = parsed.query
    body = parsed.body
    key, _ = await _managed_key(request, path.id, query.bindingScope)
    run = run_key(request, "agent-key-revoke")
    revoked = await execute(
        request,
        AgentKeyRevokeWorkflow.run,
        AgentKeyRevoke(key_id=key.id, reason=body.reason, description=body.description),
        workflow_id=keyed_workflow_id(run, revoke_workflow_id(key.id)),
        on_duplicate=AgentKeyRevocationRunning("This key is being revoked"),
        key=run,
        search=[SearchAttributePair(AGENT_ID, str(key.actor_id))],
    )
    wire = key_to_wire(revoked)
    assert isinstance(wire, AgentKey)
    return wire
