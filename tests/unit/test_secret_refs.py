"""Secret references (spec 5, "Daemon credential rules"): every rule of a `file:` reference
refuses with its own reason, and a value with its reference is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from client.secrets import (
    SECRET_MAX_BYTES_ENV,
    SECRET_ROOT_ENV,
    SecretError,
    SecretRef,
    SecretRefusal,
    SecretSource,
    require_agent_key,
    secret_from,
)

KEY = "service_ak_0f0e_" + "a" * 43


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "secrets"
    (folder / "agents").mkdir(parents=True)
    secret = folder / "agents" / "daemon.key"
    secret.write_text(KEY + "\n")
    secret.chmod(0o600)
    return folder


def source(root: Path, **extra: str) -> SecretSource:
    return SecretSource({SECRET_ROOT_ENV: str(root), **extra})


def refused(reason: SecretRefusal, call: object, *args: object) -> None:
    with pytest.raises(SecretError) as caught:
        call(*args)  # type: ignore[operator]
    assert caught.value.reason is reason
    assert KEY not in str(caught.value)


def test_a_file_reference_reads_the_secret_and_strips_one_newline(root: Path) -> None:
    assert source(root).resolve(SecretRef.parse("file:agents/daemon.key")) == KEY
    (root / "two").write_text("abc\n\n")
    (root / "two").chmod(0o600)
    assert source(root).resolve(SecretRef.parse("file:two")) == "abc\n"


def test_an_env_reference_reads_the_variable(root: Path) -> None:
    assert source(root, MY_KEY=KEY).resolve(SecretRef.parse("env:MY_KEY")) == KEY
    refused(SecretRefusal.ENV_UNSET, source(root).resolve, SecretRef.parse("env:MY_KEY"))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("agents/daemon.key", SecretRefusal.MALFORMED_REF),
        ("file:", SecretRefusal.MALFORMED_REF),
        ("env:1BAD", SecretRefusal.MALFORMED_REF),
        ("vault:agents/daemon", SecretRefusal.UNKNOWN_PROVIDER),
    ],
)
def test_malformed_references_are_refused(text: str, reason: SecretRefusal) -> None:
    refused(reason, SecretRef.parse, text)


@pytest.mark.parametrize(
    "path",
    [
        "../secrets/agents/daemon.key",
        "agents/../agents/daemon.key",
        "/etc/passwd",
        "agents//daemon.key",
        "agents/da emon.key",
        "./agents/daemon.key",
        "agents/dæmon.key",
    ],
)
def test_unsafe_paths_are_refused(root: Path, path: str) -> None:
    refused(SecretRefusal.UNSAFE_PATH, source(root).resolve, SecretRef("file", path))


def test_a_link_out_of_the_root_is_refused(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.key"
    outside.write_text(KEY)
    outside.chmod(0o600)
    (root / "link.key").symlink_to(outside)
    refused(SecretRefusal.OUTSIDE_ROOT, source(root).resolve, SecretRef("file", "link.key"))
    inside = root / "inside.key"
    inside.symlink_to(root / "agents" / "daemon.key")
    assert source(root).resolve(SecretRef("file", "inside.key")) == KEY


def test_a_directory_or_a_missing_file_is_refused(root: Path) -> None:
    refused(SecretRefusal.NOT_A_FILE, source(root).resolve, SecretRef("file", "agents"))
    refused(SecretRefusal.NOT_A_FILE, source(root).resolve, SecretRef("file", "nope.key"))


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_file_others_can_write_is_refused(root: Path, mode: int) -> None:
    path = root / "agents" / "daemon.key"
    path.chmod(mode)
    refused(
        SecretRefusal.WRITABLE_BY_OTHERS,
        source(root).resolve,
        SecretRef("file", "agents/daemon.key"),
    )
    path.chmod(0o640)  # group may read, not write
    assert source(root).resolve(SecretRef("file", "agents/daemon.key")) == KEY


def test_the_size_limit_is_checked_before_reading(root: Path) -> None:
    big = root / "big.key"
    big.write_bytes(b"x" * 65_537)
    big.chmod(0o600)
    refused(SecretRefusal.TOO_LARGE, source(root).resolve, SecretRef("file", "big.key"))
    smaller = source(root, **{SECRET_MAX_BYTES_ENV: "10"})
    refused(SecretRefusal.TOO_LARGE, smaller.resolve, SecretRef("file", "agents/daemon.key"))
    assert source(root, **{SECRET_MAX_BYTES_ENV: "70000"}).resolve(SecretRef("file", "big.key"))


def test_file_references_need_a_root(root: Path) -> None:
    refused(SecretRefusal.NO_SECRET_ROOT, SecretSource({}).resolve, SecretRef("file", "a.key"))


def test_a_value_with_its_reference_is_refused(root: Path) -> None:
    refused(SecretRefusal.VALUE_AND_REF, secret_from, KEY, "file:agents/daemon.key", source(root))
    assert secret_from(None, "file:agents/daemon.key", source(root), name="k") == KEY
    assert secret_from(KEY, None, source(root), name="k") == KEY
    assert secret_from(None, None, source(root), name="k") is None


def test_an_agent_key_has_the_prefix() -> None:
    assert require_agent_key(KEY) == KEY
    refused(SecretRefusal.NOT_AN_AGENT_KEY, require_agent_key, "eyJhbGciOiJFZERTQSJ9.x.y")


def test_the_process_umask_does_not_matter(root: Path) -> None:
    """Only the file's own mode counts, whatever the reading process's umask is."""
    previous = os.umask(0o000)
    try:
        assert source(root).resolve(SecretRef("file", "agents/daemon.key")) == KEY
    finally:
        os.umask(previous)
