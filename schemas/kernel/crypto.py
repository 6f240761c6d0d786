"""Ed25519 keys, fingerprints, recovery challenges and server-side secrets.

Pure functions only: the caller supplies the clock (``now_ms``) and the server keys, so every
check here is deterministic under test and safe to call from a workflow validator.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Final

from nacl.exceptions import CryptoError
from nacl.signing import VerifyKey

from schemas.limits import (
    ED25519_PUBLIC_KEY_BYTES,
    ED25519_SIGNATURE_BYTES,
    RECOVERY_CHALLENGE_MAX_CHARS,
    RECOVERY_CHALLENGE_TTL_SEC,
    SIGNATURE_B64_MAX_CHARS,
)

PUBLIC_KEY_PREFIX: Final = "ed25519:"
FINGERPRINT_PATTERN: Final = r"^[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}$"
"""Fingerprints as we emit them (upper-case hex); usable as a pydantic ``pattern``."""
VOUCHER_CODE_PATTERN: Final = r"^[0-9a-f]{64}$"
"""A voucher code: 64 lower-case hex; usable as a pydantic ``pattern``."""

_KEY_ERROR = (
    "Provide the raw Ed25519 public key as ed25519:<base64 of 32 bytes>, "
    "not an SPKI/X.509 wrapper or another encoding"
)


# --- public keys and fingerprints -------------------------------------------------------------


def parse_public_key(value: str) -> bytes:
    """Decode ``ed25519:<base64>`` to the raw 32-byte key, or raise ``ValueError``.

    Only the canonical spelling is accepted (standard alphabet, padded, zero trailing bits), so
    one key has exactly one string form: the stored column, the recovery challenge and the
    registration request can then be compared as strings.
    """
    if not isinstance(value, str) or not value.startswith(PUBLIC_KEY_PREFIX):
        raise ValueError(f"{_KEY_ERROR}: missing the '{PUBLIC_KEY_PREFIX}' prefix")
    encoded = value[len(PUBLIC_KEY_PREFIX) :]
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{_KEY_ERROR}: the key is not valid base64") from exc
    if len(raw) != ED25519_PUBLIC_KEY_BYTES:
        raise ValueError(f"{_KEY_ERROR}: it decodes to {len(raw)} bytes, expected 32")
    if base64.b64encode(raw).decode("ascii") != encoded:
        raise ValueError(f"{_KEY_ERROR}: the base64 is not in canonical form")
    return raw


def _require_raw_key(public_key_raw: bytes) -> None:
    if len(public_key_raw) != ED25519_PUBLIC_KEY_BYTES:
        raise ValueError(f"{_KEY_ERROR}: got {len(public_key_raw)} bytes, expected 32")


def format_public_key(public_key_raw: bytes) -> str:
    """The canonical ``ed25519:<base64>`` form stored in ``agents.public_key``."""
    _require_raw_key(public_key_raw)
    return PUBLIC_KEY_PREFIX + base64.b64encode(public_key_raw).decode("ascii")


def fingerprint(public_key_raw: bytes) -> str:
    """Four groups of four upper-case hex digits (``21FE-31DF-A154-A261``).

    They are the first 64 bits of SHA-256 over the raw key.

    Short enough to read aloud and put in a URL (``GET /agents/{fingerprint}``); hashing the raw
    key, never its text form, keeps it independent of how the key was spelled.
    """
    _require_raw_key(public_key_raw)
    digest = hashlib.sha256(public_key_raw).hexdigest()[:16].upper()
    return "-".join(digest[i : i + 4] for i in range(0, 16, 4))


def normalize_fingerprint(value: str) -> str:
    """Upper-case a fingerprint given in either case, or raise ``ValueError`` if malformed.

    Lookups (``GET /agents/{fingerprint}``) accept lower-case, as people retype them.
    """
    upper = value.upper() if isinstance(value, str) else ""
    if re.fullmatch(FINGERPRINT_PATTERN, upper) is None:
        raise ValueError(
            "a fingerprint is four groups of four hex digits, e.g. 1A2B-3C4D-5E6F-7A8B"
        )
    return upper


# --- signatures -------------------------------------------------------------------------------


def _decode_signature(signature_b64: str) -> bytes | None:
    if not isinstance(signature_b64, str) or len(signature_b64) > SIGNATURE_B64_MAX_CHARS:
        return None
    try:
        raw = base64.b64decode(signature_b64, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == ED25519_SIGNATURE_BYTES else None


def verify_signature(public_key_raw: bytes, message: bytes, signature_b64: str) -> bool:
    """True when ``signature_b64`` is a valid Ed25519 signature of ``message`` by the key.

    Never raises: a malformed key or signature from a client is just an invalid signature, and
    callers record ``valid = false`` rather than failing the request.
    """
    signature = _decode_signature(signature_b64)
    if signature is None or not isinstance(public_key_raw, bytes):
        return False
    if len(public_key_raw) != ED25519_PUBLIC_KEY_BYTES or not isinstance(message, bytes):
        return False
    try:
        VerifyKey(public_key_raw).verify(message, signature)
    except (CryptoError, ValueError, TypeError):
        return False
    return True


def signing_payload(message: str, nonce: str | uuid.UUID) -> str:
    """What the agent signs for a signing request (SPEC 4.4): the message, a period, the nonce.

    The server-chosen nonce makes every signature unique to its request, so a signature cannot
    be replayed into another request for the same message. The signature covers its UTF-8 bytes.
    """
    return f"{message}.{nonce}"


# --- recovery challenges ----------------------------------------------------------------------

RECOVERY_CHALLENGE_PREFIX: Final = "service:recovery:"
_RECOVERY_CHALLENGE = re.compile(
    r"service:recovery:(?P<key>ed25519:[A-Za-z0-9+/]{43}=)"
    r":(?P<nonce>[0-9a-f]{64}):(?P<ts>0|[1-9][0-9]{0,15})"
)
_HMAC_HEX = re.compile(r"[0-9a-f]{64}")


class RecoveryFailure(enum.StrEnum):
    """Why :func:`check_recovery_challenge` refused a challenge; the route answers each with its
    `InvalidChallenge` of the problem catalogue (the caller's own checks, nonce, agent and
    signature, raise their problems themselves).
    """

    MALFORMED = "malformed"
    KEY_MISMATCH = "key-mismatch"
    BAD_HMAC = "hmac-invalid"
    EXPIRED = "expired"
    FROM_FUTURE = "from-future"


class RecoveryChallengeError(Exception):
    """A recovery challenge was refused; ``reason`` says which check failed."""

    def __init__(self, reason: RecoveryFailure, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CheckedChallenge:
    """What a challenge that passed the pure checks yields for the caller's remaining steps."""

    public_key: str
    public_key_raw: bytes  # for recovery_signature_ok
    nonce: str  # 64 hex; store in used_recovery_nonces to refuse replays
    issued_at_ms: int
    expires_at_ms: int  # keep the nonce at least until then


def _require_secret(secret: bytes) -> None:
    if not secret:
        raise ValueError("the server secret must not be empty")


def recovery_hmac(challenge: str, secret: bytes) -> str:
    """HMAC-SHA256 hex of the challenge: proof the server issued it, without storing it."""
    _require_secret(secret)
    return hmac.new(secret, challenge.encode("utf-8"), hashlib.sha256).hexdigest()


def new_recovery_challenge(public_key: str, secret: bytes, now_ms: int) -> tuple[str, str]:
    """Issue ``(challenge, hmac_hex)`` for a key, known or not (no account enumeration).

    The challenge is stateless: the HMAC lets verify trust the embedded key, nonce and time, and
    the nonce is only stored once it is used.
    """
    parse_public_key(public_key)
    challenge = f"{RECOVERY_CHALLENGE_PREFIX}{public_key}:{secrets.token_hex(32)}:{now_ms}"
    return challenge, recovery_hmac(challenge, secret)


def _parse_challenge(challenge: str) -> tuple[re.Match[str], bytes]:
    """Check 1, format: the exact shape we issue, embedding a valid canonical key."""
    match = None
    if isinstance(challenge, str) and len(challenge) <= RECOVERY_CHALLENGE_MAX_CHARS:
        match = _RECOVERY_CHALLENGE.fullmatch(challenge)
    if match is None:
        raise RecoveryChallengeError(RecoveryFailure.MALFORMED, "Challenge is malformed")
    try:
        return match, parse_public_key(match["key"])
    except ValueError as exc:
        raise RecoveryChallengeError(RecoveryFailure.MALFORMED, str(exc)) from exc


def _check_hmac(challenge: str, hmac_hex: str, secret: bytes) -> None:
    """Check 3: the server issued this exact challenge (constant-time comparison)."""
    if not isinstance(hmac_hex, str) or not _HMAC_HEX.fullmatch(hmac_hex):
        raise RecoveryChallengeError(RecoveryFailure.BAD_HMAC, "Challenge HMAC is malformed")
    if not hmac.compare_digest(recovery_hmac(challenge, secret), hmac_hex):
        raise RecoveryChallengeError(RecoveryFailure.BAD_HMAC, "Challenge HMAC does not match")


def _check_age(issued_at_ms: int, now_ms: int) -> None:
    """Check 4: at most five minutes old, and not from the future."""
    age_ms = now_ms - issued_at_ms
    if age_ms < 0:
        raise RecoveryChallengeError(
            RecoveryFailure.FROM_FUTURE, "Challenge timestamp is in the future"
        )
    if age_ms > RECOVERY_CHALLENGE_TTL_SEC * 1000:
        raise RecoveryChallengeError(RecoveryFailure.EXPIRED, "Challenge expired")


def check_recovery_challenge(
    challenge: str, hmac_hex: str, public_key: str, secret: bytes, now_ms: int
) -> CheckedChallenge:
    """Run the pure recovery checks in the spec's order (4.1): format, HMAC, age, key binding.

    Raises :class:`RecoveryChallengeError` naming the first check that failed. On success the
    caller continues with: nonce unused, agent exists, :func:`recovery_signature_ok`.
    """
    _require_secret(secret)
    match, public_key_raw = _parse_challenge(challenge)
    _check_hmac(challenge, hmac_hex, secret)
    issued_at_ms = int(match["ts"])
    _check_age(issued_at_ms, now_ms)
    if match["key"] != public_key:
        raise RecoveryChallengeError(
            RecoveryFailure.KEY_MISMATCH, "Challenge was issued for another public key"
        )
    return CheckedChallenge(
        public_key=public_key,
        public_key_raw=public_key_raw,
        nonce=match["nonce"],
        issued_at_ms=issued_at_ms,
        expires_at_ms=issued_at_ms + RECOVERY_CHALLENGE_TTL_SEC * 1000,
    )


def recovery_signature_ok(public_key_raw: bytes, challenge: str, signature_b64: str) -> bool:
    """The last recovery check: Ed25519 by the key over the UTF-8 challenge itself."""
    return verify_signature(public_key_raw, challenge.encode("utf-8"), signature_b64)


# --- secrets ----------------------------------------------------------------------------------


def new_secret(prefix: str = "") -> str:
    """A bearer secret: ``prefix`` + 256 random bits, URL-safe base64 (43 characters).

    The prefix (e.g. ``service_ak_``) lets secret scanners and humans recognise a leaked value.
    """
    return prefix + secrets.token_urlsafe(32)


def hash_secret(secret: str, server_key: bytes) -> str:
    """HMAC-SHA256 hex of a secret under the server key: what we store instead of it.

    Keyed rather than a bare hash so a leaked table alone cannot confirm guesses; the secrets
    carry 256 bits, so a slow password hash would only add latency.
    """
    _require_secret(server_key)
    # surrogatepass: a lone surrogate from a JSON body must hash (and fail to match), not raise
    data = secret.encode("utf-8", "surrogatepass")
    return hmac.new(server_key, data, hashlib.sha256).hexdigest()


def secrets_match(secret: str, stored_hash: str, server_key: bytes) -> bool:
    """Constant-time comparison of a presented secret against its stored hash."""
    if not isinstance(stored_hash, str) or not _HMAC_HEX.fullmatch(stored_hash):
        return False
    expected = hash_secret(secret, server_key)
    return hmac.compare_digest(expected.encode("ascii"), stored_hash.encode("ascii"))


def new_voucher_code() -> str:
    """A one-time registration voucher: 64 lower-case hex from 32 random bytes."""
    return secrets.token_hex(32)


def is_voucher_code(value: str) -> bool:
    """True for a well-formed voucher code (a malformed one is a 400, not a 403)."""
    return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value) is not None
