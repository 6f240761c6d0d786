"""The one definition of a team key's confinement (`Principal.confined_team_id`)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from schemas.principals import Principal

TEAM, OTHER = uuid.uuid4(), uuid.uuid4()


def principal(**fields: Any) -> Principal:
    base: dict[str, Any] = {
        "subject_type": "agent",
        "identity_id": uuid.uuid4(),
        "credential": "oauth2",
        "scopes": frozenset(),
        "agent_id": uuid.uuid4(),
    }
    return Principal(**(base | fields))


@pytest.mark.parametrize(
    ("fields", "confined"),
    [
        pytest.param(
            {"credential": "agent_key", "binding_scope": "team", "bound_team_id": TEAM},
            TEAM,
            id="team-key",
        ),
        pytest.param({"credential": "agent_key", "binding_scope": "identity"}, None, id="identity"),
        pytest.param({}, None, id="oauth2"),
        pytest.param(
            {"subject_type": "human", "credential": "session", "human_id": uuid.uuid4()},
            None,
            id="human",
        ),
    ],
)
def test_only_a_team_key_is_confined(fields: dict[str, Any], confined: uuid.UUID | None) -> None:
    who = principal(**fields)
    assert who.confined_team_id == confined
    assert who.acts_in(TEAM)
    assert who.acts_in(OTHER) is (confined is None)
