"""`.ci/run` is what CI executes on a clean clone: it must parse, and it must end by running the
README's test command (a merge once left a block inside its header comment, a syntax error that
only a CI run would have shown)."""

from __future__ import annotations

import subprocess
from pathlib import Path

CI_RUN = Path(__file__).resolve().parents[2] / ".ci" / "run"


def test_the_ci_script_parses() -> None:
    checked = subprocess.run(["bash", "-n", str(CI_RUN)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_a_broken_script_fails_the_parse_check(tmp_path: Path) -> None:
    broken = tmp_path / "run"
    # what the merge did: a comment's backquoted command split over two lines
    text = CI_RUN.read_text().replace("# `make test` creates", "# `\nmake test` creates")
    broken.write_text(text)
    checked = subprocess.run(["bash", "-n", str(broken)], capture_output=True, text=True)
    assert checked.returncode != 0


def test_the_ci_script_ends_with_the_readme_test_command() -> None:
    lines = [line.strip() for line in CI_RUN.read_text().splitlines() if line.strip()]
    assert lines[-1] == "make test"
