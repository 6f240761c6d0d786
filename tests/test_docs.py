"""The README and docs/ against the code, without a stack (issue 34 §9): every shell block says
whether it is run, every relative link lands, every setting a page names exists and every
setting is documented for operators, every `cairn …` command shown exists. The runnable blocks
themselves run in tests/e2e/test_docs_commands.py."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from docs_pages import (
    PAGES,
    README,
    ROOT,
    anchors,
    fenced,
    prose,
    relative_links,
    shell_blocks,
)
from pydantic import AliasChoices

import cairn
from client import cli, config, credentials, secrets
from infra.settings import Settings

SETTINGS_PAGE = ROOT / "docs" / "settings.md"
README_MAX_LINES = 250
# the agent side's own variables (client/), read by `cairn daemon`, `whoami` and the CLI
CLIENT_SETTINGS = {
    cli.RUNTIME_PROFILE_ENV,
    config.API_URL_ENV,
    credentials.CLIENT_ID_ENV,
    credentials.CLIENT_SECRET_ENV,
    credentials.SIGNING_KEY_REF_ENV,
    secrets.AGENT_KEY_ENV,
    secrets.AGENT_KEY_REF_ENV,
    secrets.SECRET_ROOT_ENV,
    secrets.SECRET_MAX_BYTES_ENV,
}
# a name followed by one of these is a family (`SERVICE_S3_*`, `SERVICE_RATE_LIMIT_<BUCKET>`)
_SETTING = re.compile(r"\b(SERVICE_[A-Z0-9_]*[A-Z0-9])(_?[*<…])?")
_CAPITALS = re.compile(r"\b[A-Z][A-Z0-9_]*[A-Z0-9]\b")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_WORD = re.compile(r"^[a-z][a-z-]*$")
_ASSIGNMENT = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+")


def server_settings() -> set[str]:
    """Every environment variable `Settings` reads (its prefix, or a field's aliases)."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    names: set[str] = set()
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {c.upper() for c in alias.choices if isinstance(c, str) and c.isupper()}
        else:
            names.add((prefix + name).upper())
    return names


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_readme_is_a_front_door() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES
    first = fenced(README)[0]
    assert first.text.splitlines()[0].startswith("make run")
    assert first.text.splitlines()[1].startswith("make test")


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_fence_names_its_language(page: Path) -> None:
    """A block without a language is most often a stray fence that turns the prose after it
    into code (and the code after that into prose, unmarked and never run)."""
    assert [code.line for code in fenced(page) if not code.language] == []


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_shell_block_says_whether_it_runs(page: Path) -> None:
    unmarked = [block.where for block in shell_blocks(page) if not block.marked]
    assert unmarked == [], "mark each with <!-- run --> or <!-- not run: why -->"


def lands_on(anchor: str, page: Path) -> bool:
    return not anchor or anchor in anchors(page)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_lands(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        landing = (page.parent / path).resolve() if path else page
        if not landing.exists() or (landing.suffix == ".md" and not lands_on(anchor, landing)):
            broken.append(target)
    assert broken == []


def named_settings(page: Path) -> set[tuple[str, bool]]:
    """(name, is a family) of every setting the page names."""
    return {(m.group(1), bool(m.group(2))) for m in _SETTING.finditer(page.read_text())}


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_setting_named_exists(page: Path) -> None:
    known = server_settings() | CLIENT_SETTINGS
    unknown = [
        name
        for name, family in named_settings(page)
        if not (any(k.startswith(name) for k in known) if family else name in known)
    ]
    assert sorted(unknown) == []


def test_every_setting_is_documented_for_operators() -> None:
    documented = set(_CAPITALS.findall(SETTINGS_PAGE.read_text()))
    assert sorted(server_settings() - documented) == []


def shown_commands(page: Path) -> set[tuple[str, ...]]:
    """`cairn <sub> [<word>]` as the page shows it: a code span or a shell line that starts
    with it (after `VAR=value` assignments)."""
    candidates = _CODE_SPAN.findall(prose(page))
    for code in fenced(page):
        candidates += code.text.splitlines()
    shown: set[tuple[str, ...]] = set()
    for text in candidates:
        words = _ASSIGNMENT.sub("", text.replace("\\|", "|").strip()).split()
        if len(words) < 2 or words[0] != "cairn" or not _WORD.match(words[1]):
            continue
        after = words[2] if len(words) > 2 else ""
        shown |= {(words[1], part) for part in after.split("|") if _WORD.match(part)}
        shown.add((words[1],))
    return shown


def cairn_help(*words: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        cairn.main([*words, "--help"])
    assert exited.value.code == 0, words
    return out.getvalue()


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_cairn_command_shown_exists(page: Path) -> None:
    for shown in sorted(shown_commands(page)):
        help_text = cairn_help(shown[0])
        if len(shown) == 2:  # a subcommand of a group, or an action's choice
            assert re.search(rf"\b{re.escape(shown[1])}\b", help_text), (page_id(page), shown)


def test_the_readme_leads_to_every_page() -> None:
    linked = {(README.parent / link.partition("#")[0]).resolve() for link in relative_links(README)}
    assert [page_id(page) for page in PAGES if page != README and page not in linked] == []
