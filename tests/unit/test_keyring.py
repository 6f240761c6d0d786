"""The server secret's keyring: the current key makes, every key verifies."""

from __future__ import annotations

import pytest

from infra.settings import Settings
from schemas.kernel.crypto import hash_secret
from schemas.kernel.keyring import SecretKeyring

OLD = b"keyring-old-secret-0123456789abcdef-xyz"
NEW = b"keyring-new-secret-0123456789abcdef-xyz"


def test_the_first_key_makes_and_every_key_verifies() -> None:
    ring = SecretKeyring((NEW, OLD))
    assert ring.hash("s3cret") == hash_secret("s3cret", NEW)
    assert ring.hashes("s3cret") == [hash_secret("s3cret", NEW), hash_secret("s3cret", OLD)]
    current = ring.match("s3cret", hash_secret("s3cret", NEW))
    older = ring.match("s3cret", hash_secret("s3cret", OLD))
    assert current and not current.stale
    assert older and older.stale
    assert not ring.match("other", hash_secret("s3cret", OLD))
    assert not SecretKeyring((NEW,)).match("s3cret", hash_secret("s3cret", OLD))


def test_a_mac_under_an_older_key_still_matches_until_it_is_dropped() -> None:
    made_before = SecretKeyring((OLD,)).mac(b"binding")
    assert SecretKeyring((NEW, OLD)).mac_matches(b"binding", made_before)
    assert not SecretKeyring((NEW,)).mac_matches(b"binding", made_before)
    assert SecretKeyring((NEW, OLD)).first(lambda key: key if key == OLD else None) == OLD


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "at least one key"),
        ("short", "at least 32 bytes"),
        ("x" * 32 + ",short", "at least 32 bytes"),
    ],
)
def test_a_ring_refuses_a_weak_or_empty_list(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        SecretKeyring.parse(text)


def test_a_ring_refuses_a_key_listed_twice_and_never_shows_one() -> None:
    with pytest.raises(ValueError, match="twice"):
        SecretKeyring.parse(f"{NEW.decode()}, {NEW.decode()}")
    assert NEW.decode() not in repr(SecretKeyring((NEW, OLD)))


def test_settings_read_the_ring_or_the_single_key() -> None:
    single = Settings(secret_key=OLD.decode())  # type: ignore[arg-type]
    assert single.secret_ring.keys == (OLD,)
    ring = Settings(
        secret_key=OLD.decode(),  # type: ignore[arg-type]
        secret_keys=f"{NEW.decode()},{OLD.decode()}",  # type: ignore[arg-type]
    )
    assert ring.secret_ring.keys == (NEW, OLD)
    assert ring.secret_bytes == NEW
    with pytest.raises(ValueError, match="SERVICE_SECRET_KEYS"):
        _ = Settings(secret_keys="too-short").secret_ring  # type: ignore[arg-type]
