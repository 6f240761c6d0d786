"""No test writes into the repository's tree (issue 23, 5b): what a test makes goes to its tmp
dir (pytest's `tmp_path`, the session's base temp) or to a directory the environment names
(`CAIRN_RECORD_HISTORIES` under `make record-histories`).

`tests/conftest.py` takes `tree_state` when a session starts and fails the session when it
differs at the end. The state is what git reports as changed, untracked or ignored (but the
scratch of the interpreter and tools: `__pycache__/`, `.venv/`, caches), each with a digest of
its content, so an edit made before the run does not count but a test rewriting it does."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

TreeState = dict[str, str]
GONE = "(deleted)"
# The one directory tests write into on request: `make record-histories` names the committed
# histories (tests/histories.py `keep`), and the guard stands aside for that run.
RECORD_ENV = "CAIRN_RECORD_HISTORIES"


def record_dir() -> Path | None:
    """Where `histories.keep` writes (None: nowhere, the default of every test run)."""
    target = os.environ.get(RECORD_ENV)
    return Path(target) if target else None


# Ignored paths the interpreter and tools rewrite as they run (bytecode, the venv, caches, the
# dev stack's data of a `make run` beside the session): not the tests' doing. Every other path,
# ignored or not (a screenshot folder, say), counts.
SCRATCH = ("__pycache__", ".venv", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules")
SCRATCH_SUFFIXES = (".egg-info",)
DEV_DATA = ".cairn"


def tree_state(root: Path) -> TreeState | None:
    """Each changed, untracked or ignored path under `root` (but scratch) with a digest of its
    content; None when `root` is not a git checkout (or git is missing): nothing to compare."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain=v1", "-z", "--ignored=traditional"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    entries = listed.split(b"\0")
    state: TreeState = {}
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if not entry:
            continue
        if entry[:1] in (b"R", b"C"):
            index += 1  # a rename or copy: its source path follows; the new path is enough
        path = entry[3:].decode()
        if not _scratch(path):
            state[path] = _digest(root / path)
    return state


def _scratch(path: str) -> bool:
    parts = Path(path).parts
    return (
        parts[:1] == (DEV_DATA,)
        or any(part in SCRATCH for part in parts)
        or any(part.endswith(SCRATCH_SUFFIXES) for part in parts)
    )


def _digest(path: Path) -> str:
    """A file's content, or a folder's files (names and contents, scratch left out)."""
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    if not path.is_dir():
        return GONE
    folder = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        relative = file.relative_to(path)
        if not _scratch(str(relative)):
            folder.update(str(relative).encode() + b"\0" + file.read_bytes())
    return folder.hexdigest()


def written_paths(before: TreeState, after: TreeState) -> list[str]:
    """Paths created, changed or deleted between the two states."""
    return sorted(
        path for path in before.keys() | after.keys() if before.get(path) != after.get(path)
    )
