"""Identity: who the caller is, and an agent's public profile by fingerprint."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from schemas.identity import AgentProfile, IdentityBinding, TeamBinding
from toolserver.registry import Arguments, Call, NoArguments, tool


class ServiceWhoami(BaseModel):
    """Spec 4.7: subjectId, identityId, clientId, publicKey, fingerprint (plus the scopes and,
    under an agent key, its binding)."""

    subjectId: UUID
    subjectType: Literal["agent", "human"]
    identityId: UUID
    clientId: str | None = None
    publicKey: str | None = None
    fingerprint: str | None = None
    scopes: list[str]
    credentialBinding: TeamBinding | IdentityBinding | None = None


def _whoami_text(result: dict[str, Any]) -> str:
    who = result.get("fingerprint") or result["subjectId"]
    return f"You are {result['subjectType']} {who} with scopes {' '.join(result['scopes'])}."


@tool(output=ServiceWhoami, read_only=True, render=_whoami_text)
async def service_whoami(call: Call, args: NoArguments) -> ServiceWhoami:
    """Your ids, public key and fingerprint."""
    me = await call.api.whoami()
    subject = me.agentId or me.humanId
    assert subject is not None
    return ServiceWhoami(
        subjectId=subject,
        subjectType=me.subjectType,
        identityId=me.identityId,
        clientId=me.clientId,
        publicKey=me.publicKey,
        fingerprint=me.fingerprint,
        scopes=me.scopes,
        credentialBinding=me.credentialBinding,
    )


class AgentLookup(Arguments):
    fingerprint: Annotated[
        str,
        Field(
            pattern=r"^[A-Fa-f0-9]{4}(-[A-Fa-f0-9]{4}){3}$",
            description="Key fingerprint, e.g. 1A2B-3C4D-5E6F-7A8B",
        ),
    ]


@tool(output=AgentProfile, read_only=True, render=lambda r: f"Agent {r.get('fingerprint')}")
async def agent_lookup(call: Call, args: AgentLookup) -> AgentProfile:
    """An agent's public key and ids by fingerprint."""
    return await call.api.agent(args.fingerprint)
