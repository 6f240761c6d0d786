"""The README and the pages of docs/ as the doc tests read them (docs/contributing.md "Commands
in the docs are tested").

Every shell block (a fence of `sh`, `bash`, `shell` or `console`) carries a marker on the line
just before its fence: `<!-- run -->` (tests/e2e/test_docs_commands.py runs it against a live
stack) or `<!-- not run: <why> -->`. A block without one is an error, so no command is left
untested by oversight.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))
SHELL = frozenset({"sh", "bash", "shell", "console"})
# where a reader's `make run` listens: the tests put their own stack's address in its place
DEV_ADDRESSES = ("127.0.0.1:8000", "localhost:8000")

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_RUN = re.compile(r"^\s*<!--\s*run\s*-->\s*$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(\S.*?)\s*-->\s*$")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    run: bool
    marked: bool  # `run` or `not run: <why>` just before the fence

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Code:
    """A fenced block of any language, and the line its fence opens on."""

    line: int
    language: str
    text: str
    before: str  # the line just before the fence


def fenced(page: Path) -> list[Code]:
    lines = page.read_text().splitlines()
    found: list[Code] = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        fence, language = match.group(2), match.group(3).lower()
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        before = lines[index - 1] if index else ""
        body = "\n".join(line.removeprefix(match.group(1)) for line in lines[index + 1 : end])
        found.append(Code(index + 1, language, body, before))
        index = end + 1
    return found


def shell_blocks(page: Path) -> list[Block]:
    return [
        Block(
            page=page,
            line=code.line,
            language=code.language,
            text=code.text,
            run=bool(_RUN.match(code.before)),
            marked=bool(_RUN.match(code.before) or _NOT_RUN.match(code.before)),
        )
        for code in fenced(page)
        if code.language in SHELL
    ]


def prose(page: Path) -> str:
    """The page without its fenced blocks (links and headings live here)."""
    lines = page.read_text().splitlines()
    inside: str | None = None
    kept: list[str] = []
    for line in lines:
        match = _FENCE.match(line)
        if inside is None and match is not None:
            inside = match.group(2)
        elif inside is not None and line.strip().startswith(inside):
            inside = None
        elif inside is None:
            kept.append(line)
    return "\n".join(kept)


def relative_links(page: Path) -> list[str]:
    """Targets of the page's links and images that stay in the repository (no scheme)."""
    targets = [a or b for a, b in _LINK.findall(prose(page))]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of the page's headings: lower case, punctuation dropped, spaces to `-`."""
    slugs: set[str] = set()
    for line in prose(page).splitlines():
        match = _HEADING.match(line)
        if match is None:
            continue
        text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", match.group(2)).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        base, n = slug, 1
        while slug in slugs:  # GitHub numbers repeated headings
            slug, n = f"{base}-{n}", n + 1
        slugs.add(slug)
    return slugs
