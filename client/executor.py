"""The executor protocol of the bundled daemon (DECISIONS "Agent keys and the daemon").

For each claimed task the daemon runs the operator's executor command as a child process:

- stdin: the task as JSON (`{"task": …, "attemptN": n}`), then closed;
- stdout: JSON lines, each one of
  - `{"kind": "progress", "payload": {…}}`: a message streamed to the attempt,
  - `{"artifact": {"path": …, "kind": …, "title": …, "contentType": …}}`: a file to upload,
  - `{"output": {…}}`: the result (once; the last one counts);
  a line that is not a JSON object is streamed as a `log` message, so a plain `print` works;
- stderr: passed through to the daemon's own stderr.

The local byte limit (spec 8, 25 MiB by default) bounds what the daemon holds for the child: an
output line or an artifact file above it fails the attempt (not retryable) without being read
whole. Stopping is a ladder: SIGTERM to the child's process group, then SIGKILL after a grace
period, so a child that forks helpers does not leave them behind; and the child is killed when
the daemon dies (Linux's parent-death signal).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas import limits
from schemas.task_api import TaskMessageIn


class ExecutorMessage(TaskMessageIn):
    """One message line, exactly as `POST .../messages` takes it."""


class ArtifactSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1)
    kind: str = Field(default="output", min_length=1, max_length=limits.ARTIFACT_KIND_MAX_CHARS)
    title: str | None = Field(default=None, max_length=limits.ARTIFACT_TITLE_MAX_CHARS)
    contentType: str = Field(
        default="application/octet-stream", max_length=limits.ARTIFACT_CONTENT_TYPE_MAX_CHARS
    )


@dataclass(frozen=True)
class ExecutorArtifact:
    spec: ArtifactSpec
    path: Path
    size_bytes: int


@dataclass(frozen=True)
class ExecutorOutput:
    output: Any


ExecutorEvent = ExecutorMessage | ExecutorArtifact | ExecutorOutput


class ExecutorFailure(Exception):
    """The executor broke the protocol or a limit: the attempt fails with this error."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable

    def as_error(self) -> dict[str, Any]:
        return {"code": self.code, "message": str(self), "retryable": self.retryable}


def _die_with_parent() -> None:
    """In the child, before exec (Linux): SIGKILL it when the daemon dies, even by SIGKILL, so
    a killed daemon leaves no executor working on a task that requeues to another one."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1


class Executor:
    """One run of the executor command for one attempt."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        workdir: Path,
        byte_limit: int = limits.DAEMON_LOCAL_BYTE_LIMIT,
        grace_sec: float = 10.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self._command = list(command)
        self._workdir = workdir
        self._byte_limit = byte_limit
        self._grace_sec = grace_sec
        self._env = env
        self._process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    async def start(self, task: dict[str, Any]) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *self._command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=self._workdir,
            env=self._env,
            limit=self._byte_limit,
            start_new_session=True,  # its own process group, so stop() reaches its children
            preexec_fn=_die_with_parent,
        )
        stdin = self._process.stdin
        assert stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(json.dumps(task, separators=(",", ":")).encode())
            await stdin.drain()
        stdin.close()

    async def events(self) -> AsyncIterator[ExecutorEvent]:
        """The child's events, in order, until its stdout closes."""
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # asyncio's line limit: the line is over the byte limit
                raise ExecutorFailure(
                    "executor-line-too-large",
                    f"An executor output line is over the local byte limit ({self._byte_limit} B)",
                ) from None
            if not line:
                return
            event = self._parse(line)
            if event is not None:
                yield event

    def _parse(self, line: bytes) -> ExecutorEvent | None:
        text = line.decode(errors="replace").rstrip("\r\n")
        if not text.strip():
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            return ExecutorMessage(kind="log", payload={"text": text})
        try:
            if "output" in value and len(value) == 1:
                return ExecutorOutput(output=value["output"])
            if "artifact" in value and len(value) == 1:
                return self._artifact(ArtifactSpec.model_validate(value["artifact"]))
            return ExecutorMessage.model_validate(value)
        except ValidationError as exc:
            raise ExecutorFailure(
                "executor-protocol", f"A malformed executor line: {exc}"
            ) from None

    def _artifact(self, spec: ArtifactSpec) -> ExecutorArtifact:
        path = (self._workdir / spec.path).resolve()
        if not path.is_file():
            raise ExecutorFailure("executor-artifact-missing", f"No artifact file at {spec.path}")
        size = path.stat().st_size
        if size > self._byte_limit:
            raise ExecutorFailure(
                "executor-artifact-too-large",
                f"Artifact {spec.path} is {size} B, over the local byte limit "
                f"({self._byte_limit} B)",
            )
        return ExecutorArtifact(spec=spec, path=path, size_bytes=size)

    async def wait(self) -> int:
        assert self._process is not None
        return await self._process.wait()

    async def stop(self) -> int:
        """SIGTERM to the process group; SIGKILL when it outlives the grace period."""
        process = self._process
        if process is None or process.returncode is not None:
            return process.returncode if process and process.returncode is not None else 0
        self._signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(process.wait(), self._grace_sec)
        except TimeoutError:
            self._signal(signal.SIGKILL)
            return await process.wait()

    def _signal(self, sig: signal.Signals) -> None:
        assert self._process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, sig)
