"""Ed25519 keys, fingerprints, signatures, recovery challenges and secrets."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import uuid
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from nacl.signing import SigningKey

from schemas.kernel.crypto import (
    FINGERPRINT_PATTERN,
    VOUCHER_CODE_PATTERN,
    RecoveryChallengeError,
    RecoveryFailure,
    check_recovery_challenge,
    fingerprint,
    format_public_key,
    hash_secret,
    is_voucher_code,
    new_recovery_challenge,
    new_secret,
    new_voucher_code,
    normalize_fingerprint,
    parse_public_key,
    recovery_hmac,
    recovery_signature_ok,
    secrets_match,
    signing_payload,
    verify_signature,
)

# RFC 8032 section 7.1, TEST 1 (empty message).
RFC_SECRET = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC_SIGNATURE = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555"
    "fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)
RFC_PUBLIC_STR = "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
RFC_FINGERPRINT = "21FE-31DF-A154-A261"

SECRET = b"recovery-secret-for-tests-only-0123456789"
NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
FIVE_MIN_MS = 300_000


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# --- keys and fingerprints --------------------------------------------------------------------


def test_rfc8032_vector_verifies() -> None:
    assert SigningKey(RFC_SECRET).verify_key.encode() == RFC_PUBLIC
    assert verify_signature(RFC_PUBLIC, b"", _b64(RFC_SIGNATURE))
    assert not verify_signature(RFC_PUBLIC, b"x", _b64(RFC_SIGNATURE))


def test_public_key_round_trip_and_fingerprint_vector() -> None:
    assert format_public_key(RFC_PUBLIC) == RFC_PUBLIC_STR
    assert parse_public_key(RFC_PUBLIC_STR) == RFC_PUBLIC
    assert fingerprint(RFC_PUBLIC) == RFC_FINGERPRINT
    by_hand = hashlib.sha256(RFC_PUBLIC).hexdigest()[:16].upper()
    assert RFC_FINGERPRINT.replace("-", "") == by_hand
    assert re.fullmatch(FINGERPRINT_PATTERN, RFC_FINGERPRINT)


def test_fingerprint_hashes_raw_bytes_not_text() -> None:
    key = SigningKey.generate().verify_key.encode()
    assert fingerprint(key) == fingerprint(parse_public_key(format_public_key(key)))
    assert fingerprint(key) != fingerprint(RFC_PUBLIC)


def _spki_wrapped(raw: bytes) -> bytes:
    return bytes.fromhex("302a300506032b6570032100") + raw


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (_b64(RFC_PUBLIC), "prefix"),
        ("ED25519:" + _b64(RFC_PUBLIC), "prefix"),
        ("ed25519:not base64!", "base64"),
        ("ed25519:" + _b64(RFC_PUBLIC).rstrip("="), "base64"),
        ("ed25519:" + _b64(RFC_PUBLIC[:31]), "31 bytes"),
        ("ed25519:" + _b64(RFC_PUBLIC + b"\x00"), "33 bytes"),
        ("ed25519:" + _b64(_spki_wrapped(RFC_PUBLIC)), "44 bytes"),
        ("ed25519:" + base64.urlsafe_b64encode(b"\xfb" * 32).decode(), "base64"),
        # same 32 bytes, but non-zero unused trailing bits: not the canonical spelling
        ("ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURp=", "canonical"),
    ],
)
def test_parse_public_key_rejects(value: str, why: str) -> None:
    with pytest.raises(ValueError, match="Provide the raw Ed25519 public key") as info:
        parse_public_key(value)
    assert why in str(info.value)


def test_raw_key_length_is_checked() -> None:
    for bad in (b"", RFC_PUBLIC[:31], RFC_PUBLIC + b"\x00"):
        with pytest.raises(ValueError, match="expected 32"):
            format_public_key(bad)
        with pytest.raises(ValueError, match="expected 32"):
            fingerprint(bad)


def test_normalize_fingerprint() -> None:
    assert normalize_fingerprint(RFC_FINGERPRINT.lower()) == RFC_FINGERPRINT
    for bad in ("21FE31DFA154A261", "21FE-31DF-A154", "21FE-31DF-A154-A26G", ""):
        with pytest.raises(ValueError):
            normalize_fingerprint(bad)


# --- signatures -------------------------------------------------------------------------------


def test_pynacl_signature_verifies_and_binds_message_and_key() -> None:
    key = SigningKey.generate()
    public = key.verify_key.encode()
    signature = _b64(key.sign(b"payload").signature)
    assert verify_signature(public, b"payload", signature)
    assert not verify_signature(public, b"payload!", signature)
    assert not verify_signature(SigningKey.generate().verify_key.encode(), b"payload", signature)


def test_signature_from_independent_implementation_verifies() -> None:
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    message = b"bafkreid3h7nvm34bjb2vfj3wi2ju5aiuz7b6obz4rjgg5lb3nw4rbhav5y"
    signature = _b64(private.sign(message))
    assert verify_signature(public, message, signature)
    assert not verify_signature(public, message + b"x", signature)


@pytest.mark.parametrize(
    "signature",
    [
        "",
        "not base64!",
        _b64(b"\x00" * 63),
        _b64(b"\x00" * 65),
        _b64(b"\x00" * 64),
        _b64(RFC_SIGNATURE).rstrip("="),
        "A" * 10_000,
        "é" * 10,
    ],
)
def test_bad_signatures_are_false_not_errors(signature: str) -> None:
    assert verify_signature(RFC_PUBLIC, b"", signature) is False


def test_bad_keys_are_false_not_errors() -> None:
    signature = _b64(RFC_SIGNATURE)
    assert verify_signature(b"", b"", signature) is False
    assert verify_signature(RFC_PUBLIC[:31], b"", signature) is False
    assert verify_signature(b"\xff" * 32, b"", signature) is False
    assert verify_signature("not bytes", b"", signature) is False  # type: ignore[arg-type]


def test_signing_payload_is_message_period_nonce() -> None:
    nonce = uuid.UUID("5f1b7c6e-0d2a-4e3b-9a8c-7d6e5f4a3b2c")
    payload = signing_payload("bafkreiabc", nonce)
    assert payload == "bafkreiabc.5f1b7c6e-0d2a-4e3b-9a8c-7d6e5f4a3b2c"
    assert signing_payload("bafkreiabc", str(nonce)) == payload
    key = SigningKey.generate()
    signature = _b64(key.sign(payload.encode()).signature)
    assert verify_signature(key.verify_key.encode(), payload.encode(), signature)
    other = signing_payload("bafkreiabc", uuid.uuid4()).encode()
    assert not verify_signature(key.verify_key.encode(), other, signature)


# --- recovery challenges ----------------------------------------------------------------------


def _challenge(now_ms: int = NOW_MS, key: str = RFC_PUBLIC_STR) -> tuple[str, str]:
    return new_recovery_challenge(key, SECRET, now_ms)


def _reason(challenge: str, mac: str, key: str = RFC_PUBLIC_STR, now: int = NOW_MS) -> str:
    with pytest.raises(RecoveryChallengeError) as info:
        check_recovery_challenge(challenge, mac, key, SECRET, now)
    return info.value.reason


def test_new_challenge_format_and_hmac() -> None:
    challenge, mac = _challenge()
    match = re.fullmatch(
        r"service:recovery:ed25519:([A-Za-z0-9+/=]+):([0-9a-f]{64}):(\d+)", challenge
    )
    assert match is not None
    assert match[1] == RFC_PUBLIC_STR.removeprefix("ed25519:")
    assert match[3] == str(NOW_MS)
    assert mac == hmac.new(SECRET, challenge.encode(), hashlib.sha256).hexdigest()
    assert _challenge()[0] != challenge  # fresh random part each time


def test_new_challenge_rejects_malformed_key_and_empty_secret() -> None:
    with pytest.raises(ValueError):
        new_recovery_challenge("ed25519:abc", SECRET, NOW_MS)
    with pytest.raises(ValueError):
        new_recovery_challenge(RFC_PUBLIC_STR, b"", NOW_MS)


def test_valid_challenge_passes_and_yields_nonce_and_times() -> None:
    challenge, mac = _challenge()
    checked = check_recovery_challenge(challenge, mac, RFC_PUBLIC_STR, SECRET, NOW_MS + 1000)
    assert checked.nonce == challenge.split(":")[4]
    assert checked.issued_at_ms == NOW_MS
    assert checked.expires_at_ms == NOW_MS + FIVE_MIN_MS
    assert checked.public_key == RFC_PUBLIC_STR
    assert checked.public_key_raw == RFC_PUBLIC


def test_challenge_exactly_five_minutes_old_is_accepted() -> None:
    challenge, mac = _challenge()
    checked = check_recovery_challenge(challenge, mac, RFC_PUBLIC_STR, SECRET, NOW_MS + FIVE_MIN_MS)
    assert checked.issued_at_ms == NOW_MS


@pytest.mark.parametrize(
    "mangle",
    [
        lambda c: "",
        lambda c: c.replace("service:", "moltnet:", 1),
        lambda c: c.replace(":recovery:", ":recover:", 1),
        lambda c: c.replace("ed25519:", "rsa:", 1),
        lambda c: c + ":extra",
        lambda c: c.rsplit(":", 1)[0],
        lambda c: c.rsplit(":", 1)[0] + ":-5",
        lambda c: c.rsplit(":", 1)[0] + ":01767225600000",
        lambda c: c.rsplit(":", 1)[0] + ":12x",
        lambda c: c.replace(c.split(":")[4], c.split(":")[4].upper()),
        lambda c: c + " " * 600,
    ],
)
def test_malformed_challenge(mangle: Callable[[str], str]) -> None:
    challenge, mac = _challenge()
    assert _reason(mangle(challenge), mac) == RecoveryFailure.MALFORMED


def test_challenge_embedding_a_non_canonical_key_is_malformed() -> None:
    key = "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURp="
    challenge = f"service:recovery:{key}:{'0' * 64}:{NOW_MS}"
    mac = recovery_hmac(challenge, SECRET)
    assert _reason(challenge, mac, key=key) == RecoveryFailure.MALFORMED


def test_challenge_for_another_key() -> None:
    other = format_public_key(SigningKey.generate().verify_key.encode())
    challenge, mac = _challenge(key=other)
    assert _reason(challenge, mac) == RecoveryFailure.KEY_MISMATCH


def test_hmac_is_checked_before_key_binding() -> None:
    """The spec's order (4.1): HMAC, then expiry, then the binding to the public key."""
    other = format_public_key(SigningKey.generate().verify_key.encode())
    challenge, _ = _challenge(key=other)
    assert _reason(challenge, "0" * 64) == RecoveryFailure.BAD_HMAC


def test_wrong_hmac() -> None:
    challenge, mac = _challenge()
    flipped = ("1" if mac[0] == "0" else "0") + mac[1:]
    assert _reason(challenge, flipped) == RecoveryFailure.BAD_HMAC


def test_malformed_hmac() -> None:
    challenge, mac = _challenge()
    for bad in ("", mac.upper(), mac[:-1], mac + "0", "z" * 64):
        assert _reason(challenge, bad) == RecoveryFailure.BAD_HMAC


def test_hmac_under_another_secret() -> None:
    challenge, _ = _challenge()
    forged = recovery_hmac(challenge, b"some-other-secret")
    assert _reason(challenge, forged) == RecoveryFailure.BAD_HMAC


def test_tampered_timestamp_fails_hmac_before_age() -> None:
    challenge, mac = _challenge(now_ms=NOW_MS - 10 * FIVE_MIN_MS)
    refreshed = challenge.rsplit(":", 1)[0] + f":{NOW_MS}"
    assert _reason(refreshed, mac) == RecoveryFailure.BAD_HMAC
    assert _reason(challenge, mac) == RecoveryFailure.EXPIRED


def test_expired_challenge() -> None:
    challenge, mac = _challenge()
    assert _reason(challenge, mac, now=NOW_MS + FIVE_MIN_MS + 1) == RecoveryFailure.EXPIRED


def test_challenge_from_the_future() -> None:
    challenge, mac = _challenge()
    assert _reason(challenge, mac, now=NOW_MS - 1) == RecoveryFailure.FROM_FUTURE


def test_failure_reasons_are_distinct_codes() -> None:
    codes = [reason.value for reason in RecoveryFailure]
    assert len(codes) == len(set(codes)) == 5


def test_recovery_signature_over_utf8_challenge() -> None:
    key = SigningKey.generate()
    public_str = format_public_key(key.verify_key.encode())
    challenge, mac = new_recovery_challenge(public_str, SECRET, NOW_MS)
    checked = check_recovery_challenge(challenge, mac, public_str, SECRET, NOW_MS)
    signature = _b64(key.sign(challenge.encode()).signature)
    assert recovery_signature_ok(checked.public_key_raw, challenge, signature)
    assert not recovery_signature_ok(RFC_PUBLIC, challenge, signature)
    other, _ = new_recovery_challenge(public_str, SECRET, NOW_MS)
    assert not recovery_signature_ok(checked.public_key_raw, other, signature)


# --- secrets ----------------------------------------------------------------------------------


def test_new_secret_has_256_bits_and_prefix() -> None:
    secret = new_secret("service_ak_")
    assert secret.startswith("service_ak_")
    body = secret.removeprefix("service_ak_")
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", body)
    assert len(base64.urlsafe_b64decode(body + "=")) == 32
    assert len({new_secret() for _ in range(100)}) == 100


def test_hash_secret_is_keyed_hmac() -> None:
    key = b"k" * 32
    expected = hmac.new(key, b"s3cret", hashlib.sha256).hexdigest()
    assert hash_secret("s3cret", key) == expected
    assert hash_secret("s3cret", b"j" * 32) != expected
    with pytest.raises(ValueError):
        hash_secret("s3cret", b"")


def test_secrets_match() -> None:
    key = b"k" * 32
    secret = new_secret("service_ak_")
    stored = hash_secret(secret, key)
    assert secrets_match(secret, stored, key)
    assert not secrets_match(secret + "x", stored, key)
    assert not secrets_match(secret, stored, b"j" * 32)
    assert not secrets_match(secret, stored.upper(), key)
    assert not secrets_match(secret, "é" * 64, key)
    assert not secrets_match("\ud800", stored, key)


def test_voucher_codes() -> None:
    code = new_voucher_code()
    assert re.fullmatch(r"[0-9a-f]{64}", code)
    assert re.search(VOUCHER_CODE_PATTERN, code)
    assert is_voucher_code(code)
    assert new_voucher_code() != code
    for bad in (code.upper(), code[:-1], code + "0", code + "\n", ""):
        assert not is_voucher_code(bad)
