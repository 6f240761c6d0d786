"""A child that dies before its port opens, or a pg_upgrade that fails, says why: the error
carries the end of the log that holds the cause (both read it through `pgdata.log_tail`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infra import pgdata
from infra.devstack import free_port, wait_for_port


def test_the_tail_is_the_end_of_the_file(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    log.write_text("start\n" + "x" * 50 + "\nFATAL: port taken\n")
    assert pgdata.log_tail(log, 18) == "FATAL: port taken\n"
    assert pgdata.log_tail(tmp_path / "absent.log", 18) == ""
    assert pgdata.log_tail(None, 18) == ""


def test_a_child_that_exits_before_its_port_opens_says_why(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with log.open("w") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; print('FATAL: could not bind'); sys.exit(3)"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        child.wait()
    with pytest.raises(RuntimeError) as refused:
        wait_for_port(free_port(), timeout=10, process=child, log_path=log)
    assert "exited with 3" in str(refused.value)
    assert "the end of server.log" in str(refused.value)
    assert "FATAL: could not bind" in str(refused.value)
