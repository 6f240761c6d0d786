"""Committed workflow histories: recorded from real runs, replayed by today's code forever after
(`tests/replay`).

A history that no longer replays means the workflow changed what it does for runs already in
flight: version the change (`workflow.patched`) instead of editing the history. Before adding a
patch, keep the history recorded by the code before it under a name of its own (see
`tests/replay/test_replay.py`, `PRE_PATCH`); `make record-histories` only rewrites the files the
workflow tests name with `keep`.

Tests never write here on their own: `keep` writes only when `CAIRN_RECORD_HISTORIES` names a
directory (`make record-histories` names this one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from payload_keys import CONVERTER
from temporalio.client import WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer
from tree_guard import record_dir

from workers.registry import WORKFLOWS

HISTORIES = Path(__file__).parent / "replay" / "histories"
# how the SDK records a `workflow.patched` decision in history
PATCH = "core_patch"
PATCH_DATA = "patch-data"


def load_history(recorded: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(recorded.stem, json.loads(recorded.read_text()))


async def replay(recorded: Path) -> None:
    """Replay `recorded` with every workflow of the service; raises on non-determinism."""
    await Replayer(workflows=list(WORKFLOWS), data_converter=CONVERTER).replay_workflow(
        load_history(recorded)
    )


def workflow_type_of(history: WorkflowHistory) -> str:
    started = history.events[0].workflow_execution_started_event_attributes
    return str(started.workflow_type.name)


def patches_of(history: WorkflowHistory) -> set[str]:
    """The ids of the `workflow.patched` markers a run recorded: the patches it took."""
    ids: set[str] = set()
    for event in history.events:
        marker = event.marker_recorded_event_attributes
        if event.HasField("marker_recorded_event_attributes") and marker.marker_name == PATCH:
            for payload in marker.details[PATCH_DATA].payloads:
                ids.add(json.loads(payload.data)["id"])
    return ids


async def keep(handle: WorkflowHandle[Any, Any], name: str) -> None:
    """Under `make record-histories`, write the history of `handle`'s latest run as `<name>.json`
    (a test calls it once the run has ended the way its name says); otherwise nothing."""
    target = record_dir()
    if target is None:
        return
    target.mkdir(parents=True, exist_ok=True)
    history = await handle.fetch_history()
    (target / f"{name}.json").write_text(history.to_json())
