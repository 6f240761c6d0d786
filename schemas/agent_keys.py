"""Agent keys (SPEC 2.3, 3.5, 4.6, 9): the secret's format, the versioned binding metadata, the
scope rule, the wire models of `/agent-keys` and the payloads of the agent-key workflows.

A secret is `service_ak_<key id>_<43 characters of base64url>` (256 random bits). It embeds the
key id so that verifying it is one primary-key read and a constant-time compare of its keyed
hash (DECISIONS "Agent keys"); the secret itself is shown once and stored nowhere, and workflow
payloads carry only its hash.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated, Any, Final, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, RootModel, StringConstraints, model_validator

from schemas import limits
from schemas.base import Payload, RequestBody, ResponseBody
from schemas.errors import ScopeEscalation, ScopeNotGrantable
from schemas.kernel.cursors import CURSOR_MAX_CHARS
from schemas.principals import AGENT_SCOPES, DAEMON_MIN_SCOPES

AGENT_KEY_PREFIX: Final = "service_ak_"
_UUID_CHARS: Final = 36

BindingScope = Literal["team", "identity"]
KeyStatus = Literal["active", "revoked", "expired"]
# SPEC 4.6 lists the values seen; the full list is not shown, so the set stays closed.
RevocationReason = Literal["privilege_withdrawn", "superseded", "key_compromise"]
METADATA_V1: Final = "v1"
METADATA_V2: Final = "v2"


# --- the secret ----------------------------------------------------------------------------------


def new_agent_key_secret(key_id: UUID) -> str:
    """A fresh secret for `key_id`: shown to the caller once, then only its hash is kept."""
    return f"{AGENT_KEY_PREFIX}{key_id}_{secrets.token_urlsafe(limits.AGENT_KEY_SECRET_BYTES)}"


def is_agent_key(token: str) -> bool:
    """Whether a bearer token is meant as an agent key (else it is a JWT)."""
    return token.startswith(AGENT_KEY_PREFIX)


def agent_key_id(token: str) -> UUID | None:
    """The key id an agent-key secret embeds; None when it is not shaped like one."""
    rest = token[len(AGENT_KEY_PREFIX) :]
    if len(rest) <= _UUID_CHARS + 1 or rest[_UUID_CHARS] != "_":
        return None
    try:
        key_id = uuid.UUID(rest[:_UUID_CHARS])
    except ValueError:
        return None
    # only the canonical spelling: one key, one secret string
    return key_id if str(key_id) == rest[:_UUID_CHARS] else None


# --- binding metadata (SPEC 9) -------------------------------------------------------------------


class InvalidKeyMetadata(ValueError):
    """A stored record that is neither valid v2 nor valid v1: rejected, never guessed."""


class KeyBinding(BaseModel):
    model_config = ConfigDict(frozen=True)

    binding_scope: BindingScope
    team_id: UUID | None = None


def metadata_v2(binding_scope: BindingScope, team_id: UUID | None) -> dict[str, str]:
    """What a new key stores: schema v2, team keys with their team, identity keys without."""
    record = {"version": METADATA_V2, "binding_scope": binding_scope}
    if binding_scope == "team":
        assert team_id is not None, "a team key is bound to a team"
        record["team_id"] = str(team_id)
    return record


def binding_of(metadata: Mapping[str, Any], *, actor_is_agent: bool) -> KeyBinding:
    """The binding a stored record declares (SPEC 9).

    v2: `binding_scope` `team` with a `team_id`, or `identity` without one. v1: accepted only
    with a valid agent actor and a `team_id`, and then a team binding. Anything else, including
    a record without a version, raises InvalidKeyMetadata.
    """
    version = metadata.get("version")
    team_id = _team_id(metadata)
    if version == METADATA_V2:
        scope = metadata.get("binding_scope")
        if scope == "team" and team_id is not None:
            return KeyBinding(binding_scope="team", team_id=team_id)
        if scope == "identity" and "team_id" not in metadata:
            return KeyBinding(binding_scope="identity")
        raise InvalidKeyMetadata("a v2 record needs team + team_id, or identity without team_id")
    if version == METADATA_V1:
        if actor_is_agent and team_id is not None:
            return KeyBinding(binding_scope="team", team_id=team_id)
        raise InvalidKeyMetadata("a v1 record needs a valid agent actor and a team_id")
    raise InvalidKeyMetadata(f"unknown metadata version {version!r}")


def _team_id(metadata: Mapping[str, Any]) -> UUID | None:
    raw = metadata.get("team_id")
    if not isinstance(raw, str):
        return None
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None


# --- scopes (SPEC 4.6 rule 4) --------------------------------------------------------------------


def granted_scopes(requested: Iterable[str] | None, caller_scopes: Iterable[str]) -> list[str]:
    """The scopes a new key gets: the daemon minimum when none are asked for; what is asked must
    be part of the canonical agent grant (else 400) and of the caller's own scopes (else 403)."""
    wanted = sorted(set(DAEMON_MIN_SCOPES if requested is None else requested))
    unknown = [scope for scope in wanted if scope not in AGENT_SCOPES]
    if unknown:
        raise ScopeNotGrantable(f"Not part of the agent grant: {', '.join(unknown)}")
    held = set(caller_scopes)
    beyond = [scope for scope in wanted if scope not in held]
    if beyond:
        raise ScopeEscalation(f"Your credential does not hold: {', '.join(beyond)}")
    return wanted


# --- HTTP ----------------------------------------------------------------------------------------

KeyName = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.AGENT_KEY_NAME_MAX_CHARS)
]
ScopeName = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class CreateAgentKeyRequest(RequestBody):
    agentId: UUID
    name: KeyName
    ttlDays: int = Field(
        default=limits.AGENT_KEY_TTL_DAYS_DEFAULT,
        ge=limits.AGENT_KEY_TTL_DAYS_MIN,
        le=limits.AGENT_KEY_TTL_DAYS_MAX,
    )
    scopes: list[ScopeName] | None = Field(default=None, max_length=len(AGENT_SCOPES))
    bindingScope: BindingScope | None = Field(
        default=None, description="`identity` for an identity key; omitted means a team key"
    )


class RevokeAgentKeyRequest(RequestBody):
    reason: RevocationReason
    description: (
        Annotated[
            str,
            StringConstraints(min_length=1, max_length=limits.AGENT_KEY_REVOCATION_MAX_CHARS),
        ]
        | None
    ) = Field(default=None, description="only with reason `privilege_withdrawn`")

    @model_validator(mode="after")
    def _description_only_when_withdrawn(self) -> RevokeAgentKeyRequest:
        if self.description is not None and self.reason != "privilege_withdrawn":
            raise ValueError("description is only accepted with reason privilege_withdrawn")
        return self


class AgentKeyPath(RequestBody):
    id: UUID


class BindingScopeQuery(RequestBody):
    bindingScope: BindingScope | None = None


class AgentKeyListQuery(RequestBody):
    agentId: UUID | None = None
    status: KeyStatus | None = None
    bindingScope: BindingScope | None = None
    limit: int = Field(default=limits.AGENT_KEYS_PAGE.default, ge=1, le=limits.AGENT_KEYS_PAGE.max)
    cursor: Annotated[str, StringConstraints(max_length=CURSOR_MAX_CHARS)] | None = None


class _AgentKeyFields(ResponseBody):
    id: UUID
    agentId: UUID
    agentFingerprint: str | None = Field(default=None, description="The agent's fingerprint")
    name: str
    status: KeyStatus
    scopes: list[str]
    expiresAt: datetime
    createdAt: datetime
    rotatedAt: datetime | None = None
    revokedAt: datetime | None = None
    revocationReason: str | None = None
    revocationDescription: str | None = None


class TeamAgentKey(_AgentKeyFields):
    bindingScope: Literal["team"] = "team"
    teamId: UUID


class IdentityAgentKey(_AgentKeyFields):
    bindingScope: Literal["identity"] = "identity"


class IssuedTeamAgentKey(TeamAgentKey):
    secret: str = Field(description="shown once: store it now")


class IssuedIdentityAgentKey(IdentityAgentKey):
    secret: str = Field(description="shown once: store it now")


class AgentKey(RootModel[TeamAgentKey | IdentityAgentKey]):
    """A key's metadata, a union on `bindingScope` (team keys carry `teamId`)."""

    root: Annotated[TeamAgentKey | IdentityAgentKey, Field(discriminator="bindingScope")]


class IssuedAgentKey(RootModel[IssuedTeamAgentKey | IssuedIdentityAgentKey]):
    """A created or rotated key with its secret (the only time the secret is shown)."""

    root: Annotated[
        IssuedTeamAgentKey | IssuedIdentityAgentKey, Field(discriminator="bindingScope")
    ]


class AgentKeyList(ResponseBody):
    items: list[Annotated[TeamAgentKey | IdentityAgentKey, Field(discriminator="bindingScope")]]
    nextCursor: str | None = Field(
        default=None, description="pass as `cursor` with the same filters; null on the last page"
    )


# --- rows and workflow payloads -------------------------------------------------------------------


class AgentKeyRow(Payload):
    """A stored key without its secret hash: what reads return and workflows report."""

    id: UUID
    actor_id: UUID
    name: str
    metadata: dict[str, Any]
    status: KeyStatus
    scopes: list[str]
    expires_at: datetime
    created_at: datetime
    rotated_at: datetime | None = None
    revoked_at: datetime | None = None
    revocation_reason: str | None = None
    revocation_description: str | None = None
    agent_fingerprint: str | None = None  # joined by the reads

    @property
    def binding(self) -> KeyBinding:
        return binding_of(self.metadata, actor_is_agent=True)


class AgentKeyAuthRow(BaseModel):
    """What authentication reads: the key, its hash and its actor (None fields: no agent)."""

    id: UUID
    actor_id: UUID
    metadata: dict[str, Any]
    secret_hash: str
    scopes: list[str]
    status: KeyStatus
    identity_id: UUID | None = None
    public_key: str | None = None
    fingerprint: str | None = None


class AgentKeyCreate(Payload):
    key_id: UUID
    actor_id: UUID
    name: str
    metadata: dict[str, Any]
    scopes: list[str]
    secret_hash: str
    expires_at: datetime
    created_by_ns: Literal["Agent", "Human"]
    created_by_id: UUID
    idempotency_key_hash: str | None = None


class AgentKeyRotate(Payload):
    key_id: UUID
    secret_hash: str


class AgentKeyRevoke(Payload):
    key_id: UUID
    reason: str
    description: str | None = None


class AgentKeyExpire(Payload):
    key_id: UUID
    expires_at: datetime


class AgentKeyExpired(Payload):
    key_id: UUID
    expired: bool


def key_to_wire(row: AgentKeyRow, secret: str | None = None) -> AgentKey | IssuedAgentKey:
    """The response shape of a stored key: a team or identity record, with the secret when
    it was just issued."""
    binding = row.binding
    fields: dict[str, Any] = {
        "id": row.id,
        "agentId": row.actor_id,
        "agentFingerprint": row.agent_fingerprint,
        "name": row.name,
        "status": row.status,
        "scopes": sorted(row.scopes),
        "expiresAt": row.expires_at,
        "createdAt": row.created_at,
        "rotatedAt": row.rotated_at,
        "revokedAt": row.revoked_at,
        "revocationReason": row.revocation_reason,
        "revocationDescription": row.revocation_description,
    }
    if binding.binding_scope == "team":
        fields["teamId"] = binding.team_id
    if secret is None:
        return AgentKey.model_validate({**fields, "bindingScope": binding.binding_scope})
    return IssuedAgentKey.model_validate(
        {**fields, "bindingScope": binding.binding_scope, "secret": secret}
    )
