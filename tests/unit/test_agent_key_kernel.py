"""The pure agent-key kernel: the secret's format, v1/v2 metadata, the scope rule."""

from __future__ import annotations

import uuid

import pytest

from schemas.agent_keys import (
    InvalidKeyMetadata,
    KeyBinding,
    RevokeAgentKeyRequest,
    agent_key_id,
    binding_of,
    granted_scopes,
    is_agent_key,
    metadata_v2,
    new_agent_key_secret,
)
from schemas.errors import ScopeEscalation, ScopeNotGrantable
from schemas.principals import AGENT_SCOPES, DAEMON_MIN_SCOPES

TEAM = uuid.uuid4()


def test_a_secret_embeds_its_key_id_and_256_random_bits() -> None:
    key_id = uuid.uuid4()
    secret = new_agent_key_secret(key_id)
    assert is_agent_key(secret) and secret.startswith(f"service_ak_{key_id}_")
    assert len(secret) == len("service_ak_") + 36 + 1 + 43  # 32 bytes as unpadded base64url
    assert agent_key_id(secret) == key_id
    assert new_agent_key_secret(key_id) != secret


@pytest.mark.parametrize(
    "token",
    [
        "service_ak_",
        "service_ak_not-a-uuid_xxxx",
        f"service_ak_{uuid.uuid4()}",
        f"service_ak_{uuid.uuid4()}_",
        f"service_ak_{str(uuid.uuid4()).upper()}_abc",
        f"service_ak_{uuid.uuid4().hex}_abc",
    ],
)
def test_malformed_secrets_carry_no_key_id(token: str) -> None:
    assert agent_key_id(token) is None


def test_jwts_are_not_agent_keys() -> None:
    assert not is_agent_key("eyJhbGciOiJFZERTQSJ9.e30.sig")


def test_v2_team_and_identity_records() -> None:
    assert binding_of(metadata_v2("team", TEAM), actor_is_agent=True) == KeyBinding(
        binding_scope="team", team_id=TEAM
    )
    assert metadata_v2("identity", None) == {"version": "v2", "binding_scope": "identity"}
    assert binding_of(metadata_v2("identity", None), actor_is_agent=True) == KeyBinding(
        binding_scope="identity"
    )


def test_v1_records_need_an_agent_actor_and_a_team() -> None:
    record = {"version": "v1", "team_id": str(TEAM)}
    assert binding_of(record, actor_is_agent=True) == KeyBinding(binding_scope="team", team_id=TEAM)
    with pytest.raises(InvalidKeyMetadata):
        binding_of(record, actor_is_agent=False)
    with pytest.raises(InvalidKeyMetadata):
        binding_of({"version": "v1"}, actor_is_agent=True)


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"team_id": str(TEAM)},
        {"version": "v2", "binding_scope": "identity", "team_id": str(TEAM)},
        {"version": "v2", "binding_scope": "team"},
        {"version": "v2", "binding_scope": "team", "team_id": "not-a-uuid"},
        {"version": "v2", "binding_scope": "global"},
        {"version": "v3", "binding_scope": "team", "team_id": str(TEAM)},
    ],
)
def test_records_that_are_neither_are_rejected_not_guessed(record: dict[str, str]) -> None:
    with pytest.raises(InvalidKeyMetadata):
        binding_of(record, actor_is_agent=True)


def test_omitted_scopes_are_the_daemon_minimum() -> None:
    assert granted_scopes(None, AGENT_SCOPES) == sorted(DAEMON_MIN_SCOPES)
    with pytest.raises(ScopeEscalation):
        granted_scopes(None, ["agent:profile", "key:manage"])


def test_scopes_stay_within_the_grant_and_the_callers_scopes() -> None:
    assert granted_scopes(["task:read", "task:read"], ["task:read"]) == ["task:read"]
    with pytest.raises(ScopeNotGrantable):
        granted_scopes(["task:read", "admin"], AGENT_SCOPES)
    with pytest.raises(ScopeEscalation):
        granted_scopes(["task:read", "diary:write"], ["task:read"])


def test_a_description_goes_only_with_privilege_withdrawn() -> None:
    RevokeAgentKeyRequest(reason="privilege_withdrawn", description="left")
    RevokeAgentKeyRequest(reason="key_compromise")
    with pytest.raises(ValueError):
        RevokeAgentKeyRequest(reason="superseded", description="why")
