"""Secret references and the credential rules of the agent side (spec 5, "Daemon credential
rules"; DECISIONS "Agent keys and the daemon").

A secret is given either as a value (`SERVICE_AGENT_KEY`) or as a reference to where it lives
(`SERVICE_AGENT_KEY_REF`, or `agent_key_ref` in the daemon's config): `env:NAME` reads another
environment variable, `file:relative/path` reads a file under `SERVICE_SECRET_ROOT`. A file is
accepted only when every rule of the spec holds, each checked here and refused with its own
reason, so an operator is told exactly what to fix and a secret is never read from a place
someone else could have written:

- the path is relative, has no `..`, and every segment matches `[A-Za-z0-9._-]+`;
- it resolves (symlinks followed) to a regular file inside the root;
- the file has no group or other write permission;
- it is at most `SERVICE_SECRET_MAX_BYTES` (default 65536) bytes, checked before reading;
- one trailing newline is stripped.

A value together with its reference is refused: which one wins would be a guess.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal

from schemas import limits

AGENT_KEY_ENV = "SERVICE_AGENT_KEY"
AGENT_KEY_REF_ENV = "SERVICE_AGENT_KEY_REF"
SECRET_ROOT_ENV = "SERVICE_SECRET_ROOT"
SECRET_MAX_BYTES_ENV = "SERVICE_SECRET_MAX_BYTES"
AGENT_KEY_PREFIX = "service_ak_"

_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SecretRefusal(StrEnum):
    """Why a secret or credential was refused (stable, for messages and tests)."""

    MALFORMED_REF = "malformed-ref"
    UNKNOWN_PROVIDER = "unknown-provider"
    ENV_UNSET = "env-unset"
    NO_SECRET_ROOT = "no-secret-root"
    UNSAFE_PATH = "unsafe-path"
    OUTSIDE_ROOT = "outside-root"
    NOT_A_FILE = "not-a-regular-file"
    WRITABLE_BY_OTHERS = "writable-by-others"
    TOO_LARGE = "too-large"
    EMPTY = "empty"
    VALUE_AND_REF = "value-and-ref"
    NOT_AN_AGENT_KEY = "not-an-agent-key"
    OAUTH_REFUSED = "oauth-refused"
    NO_CREDENTIAL = "no-credential"
    INSECURE_TRANSPORT = "insecure-transport"


class SecretError(ValueError):
    """A secret that may not be used; `reason` says which rule refused it. The message never
    contains the secret itself."""

    def __init__(self, reason: SecretRefusal, detail: str) -> None:
        super().__init__(f"{detail} ({reason.value})")
        self.reason = reason


@dataclass(frozen=True)
class SecretRef:
    provider: Literal["env", "file"]
    key: str

    @classmethod
    def parse(cls, text: str) -> SecretRef:
        provider, sep, key = text.strip().partition(":")
        if not sep or not key:
            raise SecretError(SecretRefusal.MALFORMED_REF, "A secret reference is <provider>:<key>")
        if provider == "env":
            if not _ENV_NAME.fullmatch(key):
                raise SecretError(SecretRefusal.MALFORMED_REF, "env: takes a variable name")
            return cls("env", key)
        if provider == "file":
            return cls("file", key)
        raise SecretError(
            SecretRefusal.UNKNOWN_PROVIDER, f"Unknown secret provider {provider!r} (env, file)"
        )


@dataclass(frozen=True)
class SecretSource:
    """Where `file:` and `env:` references are read: the environment and the secret root."""

    environ: Mapping[str, str]

    @classmethod
    def from_environment(cls) -> SecretSource:
        return cls(dict(os.environ))

    @property
    def root(self) -> Path | None:
        value = self.environ.get(SECRET_ROOT_ENV)
        return Path(value) if value else None

    @property
    def max_bytes(self) -> int:
        value = self.environ.get(SECRET_MAX_BYTES_ENV)
        return int(value) if value else limits.SECRET_FILE_MAX_BYTES

    def resolve(self, ref: SecretRef) -> str:
        if ref.provider == "env":
            value = self.environ.get(ref.key)
            if not value:
                raise SecretError(SecretRefusal.ENV_UNSET, f"${ref.key} is not set")
            return value
        return self._read_file(ref.key)

    def _read_file(self, relative: str) -> str:
        root = self.root
        if root is None:
            raise SecretError(
                SecretRefusal.NO_SECRET_ROOT, f"file: references need {SECRET_ROOT_ENV}"
            )
        path = _inside_root(root, relative)
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise SecretError(SecretRefusal.NOT_A_FILE, f"file:{relative} is not a regular file")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise SecretError(
                SecretRefusal.WRITABLE_BY_OTHERS,
                f"file:{relative} is writable by group or others (chmod go-w)",
            )
        if info.st_size > self.max_bytes:
            raise SecretError(
                SecretRefusal.TOO_LARGE, f"file:{relative} is over {self.max_bytes} bytes"
            )
        with path.open("rb") as handle:
            data = handle.read(self.max_bytes + 1)  # the file may have grown since stat
        if len(data) > self.max_bytes:
            raise SecretError(
                SecretRefusal.TOO_LARGE, f"file:{relative} is over {self.max_bytes} bytes"
            )
        text = data.decode()
        return text[:-1] if text.endswith("\n") else text


def _inside_root(root: Path, relative: str) -> Path:
    segments = relative.split("/")
    if relative.startswith("/") or any(
        segment in ("", ".", "..") or not _SEGMENT.fullmatch(segment) for segment in segments
    ):
        raise SecretError(
            SecretRefusal.UNSAFE_PATH,
            "file: paths are relative, without '..', segments of [A-Za-z0-9._-]",
        )
    resolved_root = root.resolve(strict=True)
    try:
        resolved = (resolved_root / relative).resolve(strict=True)
    except FileNotFoundError:
        raise SecretError(SecretRefusal.NOT_A_FILE, f"file:{relative} does not exist") from None
    if not resolved.is_relative_to(resolved_root):
        raise SecretError(SecretRefusal.OUTSIDE_ROOT, f"file:{relative} resolves outside the root")
    return resolved


def secret_from(
    value: str | None, ref: str | None, source: SecretSource, *, name: str = "the secret"
) -> str | None:
    """The secret given as `value` or as `ref`; None when neither; refused when both."""
    if value and ref:
        raise SecretError(SecretRefusal.VALUE_AND_REF, f"Set {name} or its reference, not both")
    if ref:
        secret = source.resolve(SecretRef.parse(ref))
        if not secret.strip():
            raise SecretError(SecretRefusal.EMPTY, f"The reference for {name} is empty")
        return secret.strip()
    return value.strip() if value else None


def require_agent_key(secret: str) -> str:
    if not secret.startswith(AGENT_KEY_PREFIX):
        raise SecretError(
            SecretRefusal.NOT_AN_AGENT_KEY, f"An agent key starts with {AGENT_KEY_PREFIX}"
        )
    return secret
