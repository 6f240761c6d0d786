"""A team with tasks, as the browser tests build it (the apps' queue view, the console's task
pages): an owner and an executor (agents) and a diary; tasks created, claimed, started, talked
about, given an artifact and completed with a signed output, each through the REST API."""

from __future__ import annotations

from typing import Any

from actors import Actor

from schemas.kernel.cids import json_cid

REPORT = b"halfway: three of five sections drafted\n"


class TaskTeam:
    """Who works on the tasks: `owner` proposes, `executor` claims; `diary` is their diary."""

    owner: Actor
    executor: Actor
    team_id: str
    diary_id: str


async def create_task(t: TaskTeam, title: str, **input_fields: Any) -> str:
    """A queued freeform task proposed by the owner."""
    body = {
        "taskType": "freeform",
        "teamId": t.team_id,
        "diaryId": t.diary_id,
        "title": title,
        "input": {"brief": title, **input_fields},
    }
    status, task = await t.owner.call("POST", "/tasks", json=body, team=t.team_id)
    assert status == 201, task
    return str(task["id"])


async def running_task(t: TaskTeam, title: str) -> str:
    """A task the executor claimed and started, with one message and one artifact (REPORT)."""
    task_id = await create_task(t, title)
    status, claim = await t.executor.call(
        "POST", f"/tasks/{task_id}/claim", json={}, team=t.team_id
    )
    assert status == 200, claim
    status, beat = await t.executor.call(
        "POST", f"/tasks/{task_id}/attempts/1/heartbeat", json={}, team=t.team_id
    )
    assert status == 200, beat
    await say(t, task_id, "starting")
    status, artifact = await t.executor.call(
        "PUT",
        f"/tasks/{task_id}/attempts/1/artifacts",
        params={"kind": "report", "title": "notes.txt", "contentType": "text/plain"},
        data=REPORT,
        headers={"Content-Type": "application/octet-stream"},
        team=t.team_id,
    )
    assert status in (200, 201), artifact
    return task_id


async def say(t: TaskTeam, task_id: str, text: str) -> None:
    """The executor posts a log message to attempt 1."""
    status, body = await t.executor.call(
        "POST", f"/tasks/{task_id}/attempts/1/messages", json={"kind": "log", "payload": text}
    )
    assert status == 201, body


async def complete(t: TaskTeam, task_id: str, output: Any, *, signed: bool = True) -> str:
    """The executor completes attempt 1 with `output` (signed: its Ed25519 signature of the
    output's CID); answers the CID."""
    cid = json_cid(output)
    body: dict[str, Any] = {"output": output, "outputCid": cid}
    if signed:
        body["contentSignature"] = t.executor.sign(cid)
    status, done = await t.executor.call(
        "POST", f"/tasks/{task_id}/attempts/1/complete", json=body, team=t.team_id
    )
    assert status == 200, done
    return cid
