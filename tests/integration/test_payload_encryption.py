"""Workflow payloads are sealed in Temporal (issue 31 §1): an entry's text is nowhere in its run's
raw history (as `temporal workflow show` prints it, and in the history's bytes), yet the service
reads it back and the sealed run replays; a keyed run's memo is sealed too; a rotated keyring
(new key first, old kept) still reads the old runs and seals new runs with the new key."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from actors import Actor, new_diary
from histories import payloads_of, replay_history
from payload_keys import PAYLOAD_KEYS
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowHistory

from infra.devstack import venv_binary
from infra.payload_codec import PayloadKeyring, encrypting_converter, is_encrypted, key_id_of
from infra.temporal import connect
from schemas.memory import EntryDraft
from workers.admin import issue_bootstrap_voucher
from workers.main import running_worker
from workflows.entries import entry_create_workflow_id

# Payloads that never pass through a codec: the search attributes (indexed by the cluster; ids
# only, tests/test_workflow_metadata.py), the trace context the tracing interceptor puts in the
# headers (trace and span ids) and the SDK's own local-activity marker (sequence number, activity
# type, attempt and times; the activity's result sits beside it, sealed).
ENGINE_OWN = (
    ".search_attributes.indexed_fields[DiaryId]",
    ".header.fields[_tracer-data]",
    ".details[data].payloads[0]",
)
STARTED = "workflow_execution_started_event_attributes"
ROTATED = PayloadKeyring.new_entry("rotated")


async def show_raw(temporal_address: str, workflow_id: str) -> str:
    """`temporal workflow show --output json`: the history as anyone with Temporal access reads
    it, without the codec."""
    process = await asyncio.create_subprocess_exec(
        str(venv_binary("temporal")),
        *("workflow", "show", "--output", "json", "--workflow-id", workflow_id),
        *("--address", temporal_address),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def raw_history(temporal_address: str, workflow_id: str) -> WorkflowHistory:
    """The history through a client with no codec: its payloads exactly as stored."""
    client = await Client.connect(temporal_address)
    return await client.get_workflow_handle(workflow_id).fetch_history()


def key_ids(payloads: dict[str, Payload]) -> set[str | None]:
    return {key_id_of(payload) for payload in payloads.values() if is_encrypted(payload)}


@pytest.fixture(scope="module")
async def owner(actors: Any) -> Actor:
    return await actors.agent()


async def new_entry(owner: Actor, text: str, **headers: str) -> str:
    diary = await new_diary(owner)
    status, entry = await owner.call(
        "POST", f"/diaries/{diary['id']}/entries", json={"content": text}, headers=headers
    )
    assert status == 201, entry
    return str(entry["id"])


async def test_an_entrys_text_is_absent_from_its_raw_history_and_read_by_the_service(
    stack: Any, owner: Actor
) -> None:
    text = f"the locksmith's code is {uuid.uuid4().hex}"
    workflow_id = entry_create_workflow_id(uuid.UUID(await new_entry(owner, text)))
    address = stack.settings.temporal_address

    shown = await show_raw(address, workflow_id)
    assert "WORKFLOW_EXECUTION_COMPLETED" in shown  # the whole run is there
    assert text not in shown
    history = await raw_history(address, workflow_id)
    assert text.encode() not in history.to_json().encode()
    payloads = payloads_of(history)
    clear = [
        where
        for where, payload in payloads.items()
        if not is_encrypted(payload) and not where.endswith(ENGINE_OWN)
    ]
    assert payloads and not clear, clear
    assert key_ids(payloads) == {PAYLOAD_KEYS.split(":")[0]}

    # a sealed run replays with today's workflows, as the committed (clear) histories do
    await replay_history(history)

    # the service's own client opens them
    started = (await stack.temporal.get_workflow_handle(workflow_id).fetch_history()).events[0]
    inputs = started.workflow_execution_started_event_attributes.input
    [draft] = await stack.temporal.data_converter.decode(inputs.payloads, [EntryDraft])
    assert draft.content == text


async def test_a_keyed_runs_memo_is_sealed(stack: Any, owner: Actor) -> None:
    entry_id = await new_entry(
        owner, f"keyed {uuid.uuid4().hex}", **{"Idempotency-Key": uuid.uuid4().hex}
    )
    client = await Client.connect(stack.settings.temporal_address)
    described = await client.get_workflow_handle(
        entry_create_workflow_id(uuid.UUID(entry_id))
    ).describe()
    memo = described.raw_description.workflow_execution_info.memo.fields
    assert memo, "a keyed run carries its request's fingerprint in its memo"
    assert all(is_encrypted(payload) for payload in memo.values())


async def test_a_rotated_keyring_reads_old_runs_and_seals_new_runs_with_the_new_key(
    stack: Any, owner: Actor
) -> None:
    text = f"written under the old key {uuid.uuid4().hex}"
    old_run = entry_create_workflow_id(uuid.UUID(await new_entry(owner, text)))
    rotated = stack.settings.model_copy(
        update={
            "payload_keys": type(stack.settings.payload_keys)(f"{ROTATED},{PAYLOAD_KEYS}"),
            "temporal_task_queue": f"rotated-{uuid.uuid4().hex[:8]}",
            "worker_queues": "service",
        }
    )
    client = await connect(rotated)
    async with running_worker(rotated, client):
        voucher = await issue_bootstrap_voucher(client, rotated)
    queue = rotated.temporal_task_queue
    [new_run] = [
        run.id
        async for run in client.list_workflows(
            f"TaskQueue = '{queue}' AND WorkflowType = 'VoucherIssue'"
        )
    ]
    address = stack.settings.temporal_address

    history = await raw_history(address, old_run)
    started = history.events[0].workflow_execution_started_event_attributes
    [draft] = await client.data_converter.decode(started.input.payloads, [EntryDraft])
    assert draft.content == text

    shown = await show_raw(address, new_run)
    assert voucher.code not in shown
    payloads = payloads_of(await raw_history(address, new_run))
    assert key_ids(payloads) == {"rotated"}
    # a process still on the old keyring alone cannot read what the new key sealed
    old_only = encrypting_converter(PayloadKeyring.parse(PAYLOAD_KEYS))
    with pytest.raises(ValueError, match="'rotated' is not in"):
        await old_only.decode([payloads[f"event 1.{STARTED}.input.payloads[0]"]])
    assert json.loads(shown)  # the CLI's JSON is whole
