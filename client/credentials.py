"""Which credential an agent-side command uses (spec 5, "Daemon credential rules").

- The daemon accepts only an agent key: `SERVICE_AGENT_KEY`, or a reference to it
  (`SERVICE_AGENT_KEY_REF`, or `agent_key_ref` in its config file). OAuth2 client credentials
  are refused at start-up, and so is a value together with a reference.
- Command-line tools prefer an explicitly supplied agent key (`--agent-key-ref`), then OAuth2
  client credentials (`SERVICE_CLIENT_ID` + `SERVICE_CLIENT_SECRET`), then a configured key
  reference. The selected credential is the only one tried: if the server refuses it, the
  command fails (no silent fall-through to the next).
- An agent key travels only over HTTPS, or plain HTTP to a loopback address (spec 5.4).
- The agent's Ed25519 private key (to sign outputs and messages) is a secret too: only by
  reference (`SERVICE_SIGNING_KEY_REF`, or `signing_key_ref`), holding the base64 32-byte seed,
  optionally prefixed `ed25519:`.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import nacl.signing

from client.rest import ClientCredentials
from client.secrets import (
    AGENT_KEY_ENV,
    AGENT_KEY_REF_ENV,
    SecretError,
    SecretRef,
    SecretRefusal,
    SecretSource,
    require_agent_key,
    secret_from,
)

CLIENT_ID_ENV = "SERVICE_CLIENT_ID"
CLIENT_SECRET_ENV = "SERVICE_CLIENT_SECRET"
SIGNING_KEY_REF_ENV = "SERVICE_SIGNING_KEY_REF"
ED25519_SEED_BYTES = 32


@dataclass(frozen=True)
class Credential:
    """Exactly one of the two kinds."""

    agent_key: str | None = None
    client: ClientCredentials | None = None


def daemon_agent_key(source: SecretSource, config: Mapping[str, Any]) -> str:
    env = source.environ
    if config.get("client_id") or config.get("client_secret"):
        raise SecretError(
            SecretRefusal.OAUTH_REFUSED, "The daemon runs only with an agent key, not OAuth2"
        )
    ref = _one_ref(env.get(AGENT_KEY_REF_ENV), config.get("agent_key_ref"))
    key = secret_from(env.get(AGENT_KEY_ENV), ref, source, name=AGENT_KEY_ENV)
    if key is None:
        if env.get(CLIENT_ID_ENV) or env.get(CLIENT_SECRET_ENV):
            raise SecretError(
                SecretRefusal.OAUTH_REFUSED,
                "The daemon runs only with an agent key: set SERVICE_AGENT_KEY(_REF); "
                "OAuth2 client credentials are refused",
            )
        raise SecretError(
            SecretRefusal.NO_CREDENTIAL, f"Set {AGENT_KEY_ENV} or {AGENT_KEY_REF_ENV}"
        )
    return require_agent_key(key)


def cli_credential(
    source: SecretSource, *, explicit_key_ref: str | None, config: Mapping[str, Any]
) -> Credential:
    """Spec 5: an explicit agent key, then OAuth2 client credentials, then a configured key
    reference."""
    env = source.environ
    if explicit_key_ref:
        return Credential(
            agent_key=require_agent_key(source.resolve(SecretRef.parse(explicit_key_ref)))
        )
    client_id, client_secret = env.get(CLIENT_ID_ENV), env.get(CLIENT_SECRET_ENV)
    if client_id and client_secret:
        return Credential(client=ClientCredentials(client_id, client_secret))
    ref = _one_ref(env.get(AGENT_KEY_REF_ENV), config.get("agent_key_ref"))
    key = secret_from(env.get(AGENT_KEY_ENV), ref, source, name=AGENT_KEY_ENV)
    if key is not None:
        return Credential(agent_key=require_agent_key(key))
    raise SecretError(
        SecretRefusal.NO_CREDENTIAL,
        f"Give --agent-key-ref, or {CLIENT_ID_ENV} and {CLIENT_SECRET_ENV}, or {AGENT_KEY_REF_ENV}",
    )


def signing_key(source: SecretSource, config: Mapping[str, Any]) -> nacl.signing.SigningKey | None:
    ref = _one_ref(
        source.environ.get(SIGNING_KEY_REF_ENV),
        config.get("signing_key_ref"),
        name=SIGNING_KEY_REF_ENV,
    )
    if ref is None:
        return None
    text = source.resolve(SecretRef.parse(ref)).strip().removeprefix("ed25519:")
    try:
        seed = base64.b64decode(text, validate=True)
    except binascii.Error:
        seed = b""
    if len(seed) != ED25519_SEED_BYTES:
        raise SecretError(
            SecretRefusal.MALFORMED_REF, "The signing key is the base64 of a 32-byte Ed25519 seed"
        )
    return nacl.signing.SigningKey(seed)


def require_safe_transport(base_url: str) -> None:
    """Spec 5.4: agent keys only over HTTPS, except plain HTTP to a loopback address."""
    parts = urlsplit(base_url)
    if parts.scheme == "https":
        return
    host = parts.hostname or ""
    if parts.scheme == "http" and (host == "localhost" or _is_loopback(host)):
        return
    raise SecretError(
        SecretRefusal.INSECURE_TRANSPORT,
        f"An agent key is sent only over HTTPS or to a loopback address, not to {base_url}",
    )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _one_ref(env_ref: str | None, config_ref: Any, *, name: str = AGENT_KEY_REF_ENV) -> str | None:
    if env_ref and config_ref and env_ref != config_ref:
        raise SecretError(
            SecretRefusal.VALUE_AND_REF, f"{name} and the config's reference disagree; set one"
        )
    return env_ref or (str(config_ref) if config_ref else None)
