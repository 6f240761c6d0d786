"""The commands the README and docs/ show, run as a reader runs them (issue 34 §9).

Each page's `<!-- run -->` blocks run in order in one `bash` (`set -euo pipefail`), after the
README's, so a page goes on from the README's first agent (`API`, `TOKEN`, `TEAM`, `DIARY`,
`agent.pem`). The shell gets what a reader has after `make run`: `VOUCHER` (a fresh bootstrap
voucher), `.venv` and the project's `cairn` on `PATH`, and this stack's address where the page says
`127.0.0.1:8000`. A wrong path, a refused body or a search that finds nothing fails the block
(`curl --fail-with-body`, `jq -e`), and so this test. The static checks of the pages (markers,
links, settings, `cairn` subcommands) are tests/test_docs.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from docs_pages import DEV_ADDRESSES, PAGES, README, ROOT, Block, shell_blocks

from workers.admin import issue_bootstrap_voucher

BLOCK_MARK = "::docs-block "
# what a reader's checkout holds besides the files (the blocks get their own)
REPOSITORY_STATE = frozenset({".git", ".venv", ".cairn"})
# only a hang reaches it: a `cairn` command starts in ~2 s, in 10 s on a busy machine
RUN_LIMIT_S = 240


def run_blocks(page: Path) -> list[Block]:
    return [block for block in shell_blocks(page) if block.run]


def script(blocks: list[Block], address: str) -> str:
    """One bash script of the blocks, each announced on stderr (so a failure names its block)."""
    parts = ["set -euo pipefail"]
    for block in blocks:
        text = block.text
        for dev in DEV_ADDRESSES:
            text = text.replace(dev, address)
        parts += [f"echo '{BLOCK_MARK}{block.where}' >&2", text]
    return "\n".join(parts) + "\n"


def checkout(home: Path) -> None:
    """A reader's directory: the repository's files (linked) and `.venv`, the project's Python
    (the one running the tests)."""
    home.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in REPOSITORY_STATE:
            (home / entry.name).symlink_to(entry)
    (home / ".venv").symlink_to(sys.prefix, target_is_directory=True)


def reader_env(home: Path, voucher: str) -> dict[str, str]:
    """A reader's shell after `make run`: the project's commands on PATH, the voucher it
    printed, and no settings of the test process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SERVICE_")}
    env.update(
        HOME=str(home),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        VOUCHER=voucher,
    )
    return env


def failed_block(stderr: str) -> str:
    marks = [line for line in stderr.splitlines() if line.startswith(BLOCK_MARK)]
    return marks[-1].removeprefix(BLOCK_MARK) if marks else "before the first block"


async def run(stack: Any, blocks: list[Block], where: Path) -> tuple[int, str, str]:
    """Run the blocks in a reader's directory under `where`; their output is kept in files, so
    a run that hangs still shows how far it got."""
    home, out, err = where / "reader", where / "stdout", where / "stderr"
    checkout(home)
    voucher = await issue_bootstrap_voucher(stack.temporal, stack.settings)
    address = stack.base_url.removeprefix("http://")
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            script(blocks, address),
            cwd=home,
            env=reader_env(home, voucher.code),
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # a block's own children (`cairn daemon`) go with it
        )
        try:
            code = await asyncio.wait_for(process.wait(), RUN_LIMIT_S)
        except TimeoutError:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
            code = -signal.SIGKILL
            stderr.write(f"\nstill running after {RUN_LIMIT_S} s\n".encode())
    return code, out.read_text(), err.read_text()


PAGES_THAT_RUN = [page for page in PAGES if run_blocks(page)]


@pytest.mark.parametrize("page", PAGES_THAT_RUN, ids=lambda p: str(p.relative_to(ROOT)))
async def test_the_pages_commands_run(stack: Any, page: Path, tmp_path: Path) -> None:
    blocks = run_blocks(README) + ([] if page == README else run_blocks(page))
    code, out, err = await run(stack, blocks, tmp_path)
    assert code == 0, f"{failed_block(err)} exited {code}\n{out[-3000:]}\n{err[-3000:]}"


def test_the_readme_walks_a_first_agent_to_a_search_hit() -> None:
    """The README's walkthrough is run, not only shown: register → token → diary → entry →
    search, in blocks marked to run."""
    walked = "\n".join(block.text for block in run_blocks(README))
    for step in ("/auth/register", "/oauth2/token", "/diaries", "/entries", "/diary/search"):
        assert step in walked, step


async def test_a_wrong_path_fails_the_run(stack: Any, tmp_path: Path) -> None:
    """What keeps the pages honest: a walkthrough whose path is wrong does not pass."""
    first = run_blocks(README)[0]
    assert "/auth/register" in first.text
    broken = dataclasses.replace(first, text=first.text.replace("/auth/register", "/auth/regist"))
    code, _, err = await run(stack, [broken], tmp_path)
    assert code != 0
    assert failed_block(err) == first.where
