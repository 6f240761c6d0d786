"""Which headers the MCP credential gate accepts, and what it refuses without a network call."""

from __future__ import annotations

import base64

import pytest
from starlette.datastructures import Headers

from client.rest import ClientCredentials
from toolserver.backend import AgentKey
from toolserver.gate import Malformed, Unauthorized, read_credential, read_team


def test_client_credentials_by_headers_or_basic() -> None:
    pair = ClientCredentials("client-1", "s3cret:with:colons")
    by_headers = Headers({"x-client-id": "client-1", "x-client-secret": "s3cret:with:colons"})
    assert read_credential(by_headers) == pair
    basic = base64.b64encode(b"client-1:s3cret:with:colons").decode()
    assert read_credential(Headers({"authorization": f"Basic {basic}"})) == pair


def test_an_agent_key_bearer_is_passed_on_unchanged() -> None:
    key = "service_ak_0123456789abcdef"
    assert read_credential(Headers({"authorization": f"Bearer {key}"})) == AgentKey(key)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"x-client-id": "client-1"},
        {"authorization": "Bearer eyJhbGciOiJFZERTQSJ9.e30.sig"},  # a REST JWT: never passed on
        {"authorization": "Basic !!!"},
        {"authorization": "Basic " + base64.b64encode(b"no-colon").decode()},
        {"authorization": "Digest abc"},
    ],
)
def test_everything_else_is_refused(headers: dict[str, str]) -> None:
    with pytest.raises(Unauthorized):
        read_credential(Headers(headers))


def test_secrets_stay_out_of_reprs() -> None:
    assert "s3cret" not in repr(ClientCredentials("client-1", "s3cret"))
    assert "service_ak_x" not in repr(AgentKey("service_ak_x"))


def test_the_team_header_is_a_uuid_in_canonical_form_or_absent() -> None:
    team = "8C2F6D0E-5B1A-4E2B-9C3D-1F0A2B3C4D5E"
    assert read_team(Headers({"x-service-team-id": f" {team} "})) == team.lower()
    assert read_team(Headers({})) is None


@pytest.mark.parametrize(
    "value", ["", "team-1", "8c2f6d0e", "8c2f6d0e-5b1a-4e2b-9c3d-1f0a2b3c4d5e;x"]
)
def test_a_malformed_team_header_is_refused(value: str) -> None:
    with pytest.raises(Malformed):
        read_team(Headers({"x-service-team-id": value}))
