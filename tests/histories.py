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

from google.protobuf.message import Message
from payload_keys import CONVERTER
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer
from tree_guard import record_dir

from workers.registry import WORKFLOWS
from workers.sandbox import SandboxedWorkflows

HISTORIES = Path(__file__).parent / "replay" / "histories"
# how the SDK records a `workflow.patched` decision in history
PATCH = "core_patch"
PATCH_DATA = "patch-data"


def load_history(recorded: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(recorded.stem, json.loads(recorded.read_text()))


async def replay(recorded: Path) -> None:
    """Replay `recorded` with every workflow of the service; raises on non-determinism."""
    await replay_history(load_history(recorded))


async def replay_history(history: WorkflowHistory) -> None:
    """Replay a run's history with every workflow of the service and the tests' payload codec
    (a history in the clear replays the same); raises on non-determinism."""
    replayer = Replayer(
        workflows=list(WORKFLOWS), data_converter=CONVERTER, workflow_runner=SandboxedWorkflows()
    )
    await replayer.replay_workflow(history)


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


def payloads_of(history: WorkflowHistory) -> dict[str, Payload]:
    """Every payload of the history's events by where it is (`event 3 marker_recorded...`)."""
    found: dict[str, Payload] = {}

    def walk(message: Message, path: str) -> None:
        for field, value in message.ListFields():
            if field.message_type is None:
                continue
            if field.message_type.GetOptions().map_entry:
                items = [(f"{field.name}[{key}]", item) for key, item in value.items()]
            elif isinstance(value, Message):
                items = [(field.name, value)]
            else:
                items = [(f"{field.name}[{n}]", item) for n, item in enumerate(value)]
            for name, item in items:
                if isinstance(item, Payload):
                    found[f"{path}.{name}"] = item
                elif isinstance(item, Message):
                    walk(item, f"{path}.{name}")

    for event in history.events:
        walk(event, f"event {event.event_id}")
    return found


async def opened_text(history: WorkflowHistory, client: Client) -> str:
    """Every payload of the history opened with `client`'s codec, as text: what the history
    says once decoded (the raw history shows sealed payloads only)."""
    codec = client.data_converter.payload_codec
    assert codec is not None
    opened = await codec.decode(list(payloads_of(history).values()))
    return "\n".join(payload.data.decode(errors="replace") for payload in opened)
