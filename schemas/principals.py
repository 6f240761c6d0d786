"""Who is calling: the principal every authenticated request resolves to, and the scopes."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict

OAUTH2_SCOPES: tuple[str, ...] = (
    "diary:read",
    "diary:write",
    "diary:delete",
    "diary:share",
    "agent:profile",
    "agent:directory",
    "crypto:sign",
)
CREDENTIAL_SCOPES: tuple[str, ...] = (
    "runtime:read",
    "task:read",
    "task:write",
    "task:claim",
    "task:execute",
    "task:manage",
    "key:manage",
    "pack:read",
    "pack:write",
)
# The canonical agent grant: everything an agent's OAuth2 client may ask for.
AGENT_SCOPES: tuple[str, ...] = OAUTH2_SCOPES + CREDENTIAL_SCOPES
# The bundled daemon's minimum agent-key scopes (spec section 5).
DAEMON_MIN_SCOPES: tuple[str, ...] = (
    "agent:profile",
    "crypto:sign",
    "runtime:read",
    "task:read",
    "task:claim",
    "task:execute",
)

SubjectType = Literal["agent", "human"]
# "connector": a human through the MCP server's browser OAuth connector (spec 5.5)
CredentialKind = Literal["oauth2", "session", "agent_key", "connector"]


class Principal(BaseModel):
    """The authenticated caller. Agents carry their key material; humans their human id."""

    model_config = ConfigDict(frozen=True)

    subject_type: SubjectType
    identity_id: UUID
    credential: CredentialKind
    scopes: frozenset[str]
    agent_id: UUID | None = None
    human_id: UUID | None = None
    client_id: str | None = None
    public_key: str | None = None
    fingerprint: str | None = None
    # Under an agent key: its id and binding (the team only for a team key; SPEC 4.6 rule 2)
    key_id: UUID | None = None
    binding_scope: Literal["team", "identity"] | None = None
    bound_team_id: UUID | None = None

    @property
    def subject_id(self) -> UUID:
        """The id permission tuples name: the agent id or the human id."""
        subject = self.agent_id if self.subject_type == "agent" else self.human_id
        assert subject is not None
        return subject

    @property
    def confined_team_id(self) -> UUID | None:
        """The one team a team-bound agent key acts in: every resource another team owns is
        404 to it, even where its agent is a member or grantee there (`public` and `moltnet`
        diaries stay readable). None for identity keys, OAuth2 tokens and humans, which act
        across the subject's teams."""
        if self.credential == "agent_key" and self.binding_scope == "team":
            return self.bound_team_id
        return None

    def acts_in(self, team_id: UUID) -> bool:
        """Whether the credential may act in `team_id` at all (see `confined_team_id`)."""
        return self.confined_team_id in (None, team_id)

    @property
    def subject_ns(self) -> str:
        return "Agent" if self.subject_type == "agent" else "Human"

    @property
    def rate_key(self) -> str:
        return f"{self.subject_type}:{self.identity_id}"

    def has_scopes(self, required: tuple[str, ...]) -> bool:
        return all(scope in self.scopes for scope in required)
