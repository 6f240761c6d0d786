"""Which credential the agent side uses (spec 5): the daemon's agent-key-only rule, the command
line's precedence, the signing key reference, and agent keys only over HTTPS or loopback."""

from __future__ import annotations

import base64
from pathlib import Path

import nacl.signing
import pytest

from client.credentials import (
    cli_credential,
    daemon_agent_key,
    require_safe_transport,
    signing_key,
)
from client.secrets import SecretError, SecretRefusal, SecretSource

KEY = "service_ak_1_" + "k" * 43
OTHER_KEY = "service_ak_2_" + "o" * 43


def refusal(call: object, *args: object, **kwargs: object) -> SecretRefusal:
    with pytest.raises(SecretError) as caught:
        call(*args, **kwargs)  # type: ignore[operator]
    return caught.value.reason


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "daemon.key").write_text(OTHER_KEY + "\n")
    (tmp_path / "daemon.key").chmod(0o600)
    return tmp_path


def env(root: Path, **values: str) -> SecretSource:
    return SecretSource({"SERVICE_SECRET_ROOT": str(root), **values})


def test_the_daemon_takes_an_agent_key_by_value_or_reference(root: Path) -> None:
    assert daemon_agent_key(env(root, SERVICE_AGENT_KEY=KEY), {}) == KEY
    by_ref = env(root, SERVICE_AGENT_KEY_REF="file:daemon.key")
    assert daemon_agent_key(by_ref, {}) == OTHER_KEY
    assert daemon_agent_key(env(root), {"agent_key_ref": "file:daemon.key"}) == OTHER_KEY
    assert daemon_agent_key(env(root, K=KEY), {"agent_key_ref": "env:K"}) == KEY


def test_the_daemon_refuses_a_value_with_a_reference(root: Path) -> None:
    both = env(root, SERVICE_AGENT_KEY=KEY, SERVICE_AGENT_KEY_REF="file:daemon.key")
    assert refusal(daemon_agent_key, both, {}) is SecretRefusal.VALUE_AND_REF
    value_and_config = env(root, SERVICE_AGENT_KEY=KEY)
    assert (
        refusal(daemon_agent_key, value_and_config, {"agent_key_ref": "file:daemon.key"})
        is SecretRefusal.VALUE_AND_REF
    )


def test_the_daemon_refuses_oauth_client_credentials(root: Path) -> None:
    oauth = env(root, SERVICE_CLIENT_ID="c", SERVICE_CLIENT_SECRET="s")
    assert refusal(daemon_agent_key, oauth, {}) is SecretRefusal.OAUTH_REFUSED
    config = {"client_id": "c", "client_secret": "s"}
    assert refusal(daemon_agent_key, env(root, SERVICE_AGENT_KEY=KEY), config) is (
        SecretRefusal.OAUTH_REFUSED
    )
    assert refusal(daemon_agent_key, env(root), {}) is SecretRefusal.NO_CREDENTIAL


def test_the_daemon_refuses_a_token_that_is_not_an_agent_key(root: Path) -> None:
    jwt = env(root, SERVICE_AGENT_KEY="eyJhbGciOiJFZERTQSJ9.e30.sig")
    assert refusal(daemon_agent_key, jwt, {}) is SecretRefusal.NOT_AN_AGENT_KEY


def test_the_command_line_prefers_explicit_key_then_oauth_then_configured_ref(root: Path) -> None:
    everything = env(
        root,
        SERVICE_CLIENT_ID="c",
        SERVICE_CLIENT_SECRET="s",
        SERVICE_AGENT_KEY_REF="file:daemon.key",
        K=KEY,
    )
    explicit = cli_credential(everything, explicit_key_ref="env:K", config={})
    assert (explicit.agent_key, explicit.client) == (KEY, None)
    oauth = cli_credential(everything, explicit_key_ref=None, config={})
    assert oauth.agent_key is None and oauth.client is not None
    assert (oauth.client.client_id, oauth.client.client_secret) == ("c", "s")
    configured = cli_credential(
        env(root, SERVICE_AGENT_KEY_REF="file:daemon.key"), explicit_key_ref=None, config={}
    )
    assert configured.agent_key == OTHER_KEY
    assert refusal(cli_credential, env(root), explicit_key_ref=None, config={}) is (
        SecretRefusal.NO_CREDENTIAL
    )


def test_a_failing_explicit_key_is_terminal(root: Path) -> None:
    """No fall-through: an explicit reference that cannot be read is an error, even with OAuth
    credentials at hand."""
    oauth = env(root, SERVICE_CLIENT_ID="c", SERVICE_CLIENT_SECRET="s")
    assert refusal(cli_credential, oauth, explicit_key_ref="env:MISSING", config={}) is (
        SecretRefusal.ENV_UNSET
    )


def test_the_signing_key_is_a_base64_seed_by_reference(root: Path) -> None:
    key = nacl.signing.SigningKey.generate()
    (root / "agent.seed").write_text("ed25519:" + base64.b64encode(bytes(key)).decode() + "\n")
    (root / "agent.seed").chmod(0o600)
    loaded = signing_key(env(root, SERVICE_SIGNING_KEY_REF="file:agent.seed"), {})
    assert loaded is not None and bytes(loaded.verify_key) == bytes(key.verify_key)
    assert signing_key(env(root), {}) is None
    (root / "bad.seed").write_text("bm90IGEga2V5")
    (root / "bad.seed").chmod(0o600)
    assert refusal(signing_key, env(root), {"signing_key_ref": "file:bad.seed"}) is (
        SecretRefusal.MALFORMED_REF
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://cairn.example",
        "http://127.0.0.1:8000",
        "http://localhost:8000",
        "http://[::1]:8000",
    ],
)
def test_agent_keys_travel_over_https_or_loopback(url: str) -> None:
    require_safe_transport(url)


@pytest.mark.parametrize("url", ["http://cairn.example", "http://10.0.0.5:8000", "ftp://127.0.0.1"])
def test_agent_keys_never_travel_in_the_clear(url: str) -> None:
    assert refusal(require_safe_transport, url) is SecretRefusal.INSECURE_TRANSPORT
