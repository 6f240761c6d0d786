"""The server secret as a keyring, so it rotates without voiding what it protects.

`SERVICE_SECRET_KEYS` lists the secrets, current first. The current key makes everything new:
stored keyed hashes (sessions, client secrets, agent keys, connector codes), MACs (CSRF and
consent tokens, recovery challenges, cursors, the connector secret) and sealed signing keys.
Every key of the ring still verifies, so an operator adds a key in front, lets what is in use
move over (a stored hash found under an older key is re-hashed under the current one when it is
next presented, a signing key is re-sealed when a worker starts) and then drops the old key:
that voids only what nobody presented in between.

The payload codec's `SERVICE_PAYLOAD_KEYS` is a ring of the same shape (current first) over
another kind of key; the two stay separate types so neither secret can be used for the other.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from schemas.kernel.crypto import hash_secret, secrets_match

MIN_KEY_BYTES: Final = 32
T = TypeVar("T")


@dataclass(frozen=True, repr=False)
class SecretKeyring:
    """Server secrets, the current one first; `repr` never shows a key."""

    keys: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("the server secret keyring must hold at least one key")
        if any(len(key) < MIN_KEY_BYTES for key in self.keys):
            raise ValueError(f"every server secret must be at least {MIN_KEY_BYTES} bytes")
        if len(set(self.keys)) != len(self.keys):
            raise ValueError("the server secret keyring lists a key twice")

    @classmethod
    def parse(cls, text: str) -> SecretKeyring:
        """`current,older,...`: comma-separated secrets (none contains a comma)."""
        return cls(tuple(part.strip().encode() for part in text.split(",") if part.strip()))

    def __repr__(self) -> str:
        return f"SecretKeyring(<{len(self.keys)} keys>)"

    @property
    def current(self) -> bytes:
        return self.keys[0]

    def hash(self, secret: str) -> str:
        """The keyed hash to store for a new secret (current key)."""
        return hash_secret(secret, self.current)

    def hashes(self, secret: str) -> list[str]:
        """The secret's hash under every key, current first: what a lookup by hash matches."""
        return [hash_secret(secret, key) for key in self.keys]

    def match(self, secret: str, stored_hash: str) -> StoredMatch:
        """Whether a presented secret matches its stored hash under any key; every key is
        compared (constant time each), so a miss costs what a hit does."""
        hits = [secrets_match(secret, stored_hash, key) for key in self.keys]
        return StoredMatch(any(hits), stale=any(hits) and not hits[0])

    def mac(self, message: bytes) -> str:
        """HMAC-SHA256 hex under the current key."""
        return hmac.new(self.current, message, hashlib.sha256).hexdigest()

    def mac_matches(self, message: bytes, presented: str) -> bool:
        """Whether `presented` is the message's MAC under any key (constant time each)."""
        candidates = [hmac.new(key, message, hashlib.sha256).hexdigest() for key in self.keys]
        return any([hmac.compare_digest(c.encode(), presented.encode()) for c in candidates])

    def first(self, attempt: Callable[[bytes], T | None]) -> T | None:
        """The first non-None result of `attempt` over the keys, current first (opening a
        sealed value, reading a signed one)."""
        for key in self.keys:
            result = attempt(key)
            if result is not None:
                return result
        return None


@dataclass(frozen=True)
class StoredMatch:
    """A presented secret against its stored hash: whether it matched, and whether only an
    older key matched (then the caller re-hashes it under the current one)."""

    ok: bool
    stale: bool = False

    def __bool__(self) -> bool:
        return self.ok
