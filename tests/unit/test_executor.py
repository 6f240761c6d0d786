"""The daemon's executor protocol, with real child processes: task JSON in, JSON lines out,
the local byte limit, and the SIGTERM-then-SIGKILL ladder reaching the child's own children."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from processes import alive
from waiting import wait_until

from client.executor import (
    Executor,
    ExecutorArtifact,
    ExecutorEvent,
    ExecutorFailure,
    ExecutorMessage,
    ExecutorOutput,
)


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "executor.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


async def run(executor: Executor, task: dict[str, object]) -> list[ExecutorEvent]:
    await executor.start(task)
    events = [event async for event in executor.events()]
    await executor.wait()
    return events


async def test_messages_artifacts_and_output_in_order(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        """
        import json, sys
        task = json.load(sys.stdin)
        print(json.dumps({"kind": "progress", "payload": {"step": 1}}))
        print("plain text is a log line")
        open("report.md", "w").write("# done\\n")
        print(json.dumps({"artifact": {"path": "report.md", "kind": "report", "title": "R",
                                        "contentType": "text/markdown"}}))
        print(json.dumps({"output": {"echo": task["task"]["id"]}}))
        """,
    )
    events = await run(Executor(command, workdir=tmp_path), {"task": {"id": "t1"}, "attemptN": 1})
    assert events[0] == ExecutorMessage(kind="progress", payload={"step": 1})
    assert events[1] == ExecutorMessage(kind="log", payload={"text": "plain text is a log line"})
    artifact = events[2]
    assert isinstance(artifact, ExecutorArtifact)
    assert (artifact.spec.kind, artifact.spec.title, artifact.size_bytes) == ("report", "R", 7)
    assert artifact.path == (tmp_path / "report.md").resolve()
    assert events[3] == ExecutorOutput(output={"echo": "t1"})


async def test_a_line_over_the_byte_limit_fails_without_being_held(tmp_path: Path) -> None:
    command = script(tmp_path, 'import sys; sys.stdout.write("x" * 5000 + "\\n")')
    executor = Executor(command, workdir=tmp_path, byte_limit=1024)
    with pytest.raises(ExecutorFailure) as caught:
        await run(executor, {})
    assert caught.value.code == "executor-line-too-large"
    assert caught.value.retryable is False
    await executor.stop()


async def test_an_artifact_over_the_byte_limit_fails(tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"\0" * 2048)
    command = script(tmp_path, 'print(\'{"artifact": {"path": "big.bin"}}\')')
    with pytest.raises(ExecutorFailure) as caught:
        await run(Executor(command, workdir=tmp_path, byte_limit=1024), {})
    assert caught.value.code == "executor-artifact-too-large"


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ('{"artifact": {"path": "missing.bin"}}', "executor-artifact-missing"),
        ('{"artifact": {"kind": "report"}}', "executor-protocol"),
        ('{"kind": "Not A Kind", "payload": 1}', "executor-protocol"),
    ],
)
async def test_malformed_lines_fail_the_attempt(tmp_path: Path, line: str, code: str) -> None:
    command = script(tmp_path, f"print({line!r})")
    with pytest.raises(ExecutorFailure) as caught:
        await run(Executor(command, workdir=tmp_path), {})
    assert caught.value.code == code


async def test_stop_kills_a_child_that_ignores_sigterm_and_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    term_file = tmp_path / "sigterm"
    command = script(
        tmp_path,
        f"""
        import signal, subprocess, sys, time
        # the SIGTERM is noted and ignored
        signal.signal(signal.SIGTERM, lambda *_: open({str(term_file)!r}, "w").close())
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print('{{"kind": "progress", "payload": "started"}}', flush=True)
        time.sleep(60)
        """,
    )
    # a grace long enough for the noted SIGTERM to land even on a loaded machine
    executor = Executor(command, workdir=tmp_path, grace_sec=2)
    await executor.start({})
    first = await anext(aiter(executor.events()))
    assert first == ExecutorMessage(kind="progress", payload="started")
    returncode = await executor.stop()
    # the ladder, not its timing: SIGTERM first (received, ignored), then SIGKILL
    assert term_file.exists() and returncode == -9
    grandchild = int(pid_file.read_text())
    await wait_until(lambda: not alive(grandchild), what="the grandchild to be gone")


async def test_stop_lets_a_polite_child_exit_on_sigterm(tmp_path: Path) -> None:
    command = script(tmp_path, "import time; print('up', flush=True); time.sleep(60)")
    executor = Executor(command, workdir=tmp_path, grace_sec=10)
    await executor.start({})
    await anext(aiter(executor.events()))
    # it ends by the SIGTERM (-15), not by a SIGKILL after the 10 s grace
    assert await executor.stop() == -15
