"""The guard that fails a session whose tests wrote into the repository's tree
(tests/tree_guard.py), on a git checkout of its own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tree_guard import tree_state, written_paths


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("__pycache__/\nartifacts/\n")
    (tmp_path / "kept.txt").write_text("as committed\n")
    (tmp_path / "edited.txt").write_text("as committed\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "x")
    (tmp_path / "edited.txt").write_text("edited before the session\n")
    return tmp_path


def test_a_new_changed_or_deleted_file_is_reported(checkout: Path) -> None:
    before = tree_state(checkout)
    assert before is not None
    (checkout / "new" / "screenshot.png").parent.mkdir()
    (checkout / "new" / "screenshot.png").write_bytes(b"png")
    (checkout / "kept.txt").write_text("rewritten by a test\n")
    (checkout / "edited.txt").unlink()
    after = tree_state(checkout)
    assert after is not None
    assert written_paths(before, after) == ["edited.txt", "kept.txt", "new/"]


def test_a_screenshot_in_an_ignored_folder_is_reported(checkout: Path) -> None:
    (checkout / "artifacts").mkdir()
    (checkout / "artifacts" / "old.png").write_bytes(b"from an earlier run")
    before = tree_state(checkout)
    (checkout / "artifacts" / "new.png").write_bytes(b"png")
    after = tree_state(checkout)
    assert before is not None and after is not None
    assert written_paths(before, after) == ["artifacts/"]


def test_edits_from_before_and_bytecode_are_not(checkout: Path) -> None:
    before = tree_state(checkout)
    (checkout / "__pycache__").mkdir()
    (checkout / "__pycache__" / "x.pyc").write_bytes(b"\0")
    after = tree_state(checkout)
    assert before is not None and after is not None
    assert "edited.txt" in after and written_paths(before, after) == []


def test_outside_a_checkout_there_is_nothing_to_compare(tmp_path: Path) -> None:
    assert tree_state(tmp_path / "nowhere") is None
