"""Committed workflow histories: recorded once by a test, replayed by today's code forever after.

A history that no longer replays means the workflow changed what it does for runs already in
flight: version the change (`workflow.patched`) instead of editing the history."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from workers.registry import WORKFLOWS

HISTORIES = Path(__file__).parent / "replay" / "histories"


def load_history(recorded: Path) -> WorkflowHistory:
    assert recorded.exists(), f"run the workflow's tests once to record {recorded.name}"
    return WorkflowHistory.from_json(recorded.stem, json.loads(recorded.read_text()))


async def replay(recorded: Path) -> None:
    """Replay `recorded` with every workflow of the service; raises on non-determinism."""
    await Replayer(
        workflows=list(WORKFLOWS), data_converter=pydantic_data_converter
    ).replay_workflow(load_history(recorded))
