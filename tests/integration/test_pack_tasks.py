"""Tasks that work on packs (SPEC 2.6): a judge_pack task needs its judged_work reference, which
carries the rendered pack's CID (no staged bytes); completing a curate_pack task needs a pack of
its provenance diary, a render_pack task a rendering of its source pack; a rendered pack records
as verifier only a completed judge_pack task that judged exactly it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from actors import Actor

from schemas.kernel.cids import json_cid

RUBRIC = {
    "version": 1,
    "rubric": {
        "rubricId": "pack-quality",
        "version": "1",
        "criteria": [
            {"id": "coverage", "description": "covers", "weight": 1, "scoring": "llm_score"}
        ],
    },
}
JUDGMENT = {"scores": [{"criterionId": "coverage", "score": 1}], "composite": 1, "verdict": "ok"}


@dataclass
class World:
    owner: Actor
    executor: Actor
    team_id: str
    diary_id: str
    other_diary_id: str
    pack: dict[str, Any]
    other_pack: dict[str, Any]
    rendered: dict[str, Any]
    other_rendered: dict[str, Any]


async def _entry(owner: Actor, diary_id: str, content: str) -> dict[str, Any]:
    status, entry = await owner.call(
        "POST", f"/diaries/{diary_id}/entries", json={"content": content}
    )
    assert status == 201, entry
    return dict(entry)


async def _pack(owner: Actor, diary_id: str, content: str) -> dict[str, Any]:
    entry = await _entry(owner, diary_id, content)
    status, pack = await owner.call(
        "POST",
        f"/diaries/{diary_id}/packs",
        json={"entries": [{"entryId": entry["id"], "rank": 1}]},
    )
    assert status == 201, pack
    return dict(pack)


async def _render(owner: Actor, pack_id: str, markdown: str) -> dict[str, Any]:
    status, rendered = await owner.call(
        "POST",
        f"/packs/{pack_id}/render",
        json={"renderMethod": "agent:test-v1", "renderedMarkdown": markdown},
    )
    assert status == 201, rendered
    return dict(rendered)


@pytest.fixture(scope="module")
async def world(actors: Any) -> World:
    owner, executor = await actors.agent(), await actors.agent()
    status, team = await owner.call("POST", "/teams", json={"name": "packers"})
    assert status == 201, team
    team_id = str(team["id"])
    status, invite = await owner.call(
        "POST", f"/teams/{team_id}/invites", json={"role": "executor"}
    )
    assert status == 201, invite
    status, _ = await executor.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 200
    diaries = []
    for name in ("work", "elsewhere"):
        status, diary = await owner.call(
            "POST", "/diaries", json={"name": name, "visibility": "private"}, team=team_id
        )
        assert status == 201, diary
        diaries.append(str(diary["id"]))
    pack = await _pack(owner, diaries[0], "Deploys switch fleets at the balancer.")
    other_pack = await _pack(owner, diaries[1], "Another diary's knowledge.")
    return World(
        owner=owner,
        executor=executor,
        team_id=team_id,
        diary_id=diaries[0],
        other_diary_id=diaries[1],
        pack=pack,
        other_pack=other_pack,
        rendered=await _render(owner, pack["packId"], "# Deploys\n"),
        other_rendered=await _render(owner, other_pack["packId"], "# Elsewhere\n"),
    )


async def propose(
    w: World, task_type: str, task_input: dict[str, Any], references: list[Any] | None = None
) -> tuple[int, Any]:
    body = {
        "taskType": task_type,
        "teamId": w.team_id,
        "diaryId": w.diary_id,
        "input": task_input,
        "references": references or [],
    }
    return await w.owner.call("POST", "/tasks", json=body, team=w.team_id)


def judged(cid: str) -> dict[str, Any]:
    return {"artifact": {"cid": cid}, "role": "judged_work"}


def judge_input(w: World) -> dict[str, Any]:
    return {
        "renderedPackId": w.rendered["id"],
        "sourcePackId": w.pack["packId"],
        "successCriteria": RUBRIC,
    }


async def run_to_completion(w: World, task_id: str, output: dict[str, Any]) -> tuple[int, Any]:
    status, body = await w.executor.call("POST", f"/tasks/{task_id}/claim", json={})
    assert status == 200, body
    status, body = await w.executor.call("POST", f"/tasks/{task_id}/attempts/1/heartbeat", json={})
    assert status == 200, body
    return await w.executor.call(
        "POST",
        f"/tasks/{task_id}/attempts/1/complete",
        json={"output": output, "outputCid": json_cid(output)},
    )


# --- judge_pack -------------------------------------------------------------------------------


async def test_judge_pack_needs_its_judged_work_reference(world: World, db_pool: Any) -> None:
    status, problem = await propose(world, "judge_pack", judge_input(world))
    assert status == 400 and problem["code"] == "references-required", problem
    context_only = [{"taskId": str(uuid.uuid4()), "role": "context"}]
    status, problem = await propose(world, "judge_pack", judge_input(world), context_only)
    assert status == 400 and problem["code"] == "references-required", problem
    before = await db_pool.fetchval(
        "SELECT count(*) FROM tasks WHERE team_id = $1", uuid.UUID(world.team_id)
    )
    status, problem = await propose(
        world, "judge_pack", judge_input(world), [judged(world.other_rendered["packCid"])]
    )
    assert status == 400 and problem["code"] == "judged-work-mismatch", problem
    unknown = "bafyreigzjrsd2ptwpaix37jo4eqpun6gdx2sk74ezklsvkv7iybz73fd2y"
    status, problem = await propose(world, "judge_pack", judge_input(world), [judged(unknown)])
    assert status == 400 and problem["code"] == "rendered-pack-input-not-found", problem
    mismatched = {**judge_input(world), "sourcePackId": world.other_pack["packId"]}
    status, problem = await propose(
        world, "judge_pack", mismatched, [judged(world.rendered["packCid"])]
    )
    assert status == 400 and problem["code"] == "judge-pack-source-mismatch", problem
    after = await db_pool.fetchval(
        "SELECT count(*) FROM tasks WHERE team_id = $1", uuid.UUID(world.team_id)
    )
    assert after == before


async def test_a_judged_rendered_pack_records_its_verifier(world: World, db_pool: Any) -> None:
    refs = [judged(world.rendered["packCid"])]
    status, task = await propose(world, "judge_pack", judge_input(world), refs)
    assert status == 201, task
    assert task["references"][0]["artifact"]["cid"] == world.rendered["packCid"]
    bound = await db_pool.fetchval(
        "SELECT count(*) FROM task_artifacts WHERE task_id = $1", uuid.UUID(task["id"])
    )
    assert bound == 0  # a rendered pack is not staged bytes
    path = f"/rendered-packs/{world.rendered['id']}"
    status, problem = await world.owner.call("PATCH", path, json={"verifiedTaskId": task["id"]})
    assert status == 400 and problem["code"] == "verification-task-invalid"  # not completed

    status, done = await run_to_completion(world, task["id"], JUDGMENT)
    assert status == 200, done
    status, other = await world.owner.call(
        "PATCH",
        f"/rendered-packs/{world.other_rendered['id']}",
        json={"verifiedTaskId": task["id"]},
    )
    assert status == 400 and other["code"] == "verification-task-invalid"  # judged another one
    status, verified = await world.owner.call("PATCH", path, json={"verifiedTaskId": task["id"]})
    assert status == 200, verified
    assert verified["verifiedTaskId"] == task["id"]


# --- curate_pack and render_pack ----------------------------------------------------------------


async def test_a_curate_pack_output_names_a_pack_of_the_provenance_diary(world: World) -> None:
    def output(pack: dict[str, Any]) -> dict[str, Any]:
        return {
            "packId": pack["packId"],
            "packCid": pack["packCid"],
            "entries": [{"entryId": pack["entries"][0]["entryId"], "rank": 1, "rationale": "r"}],
            "recipeParams": {},
            "summary": "Picked one.",
        }

    status, task = await propose(
        world, "curate_pack", {"diaryId": world.diary_id, "taskPrompt": "Pick deploy notes."}
    )
    assert status == 201, task
    status, problem = await run_to_completion(world, task["id"], output(world.other_pack))
    assert status == 400 and problem["code"] == "curated-pack-not-in-diary", problem
    wrong_cid = {**output(world.pack), "packCid": world.other_pack["packCid"]}
    status, problem = await world.executor.call(
        "POST",
        f"/tasks/{task['id']}/attempts/1/complete",
        json={"output": wrong_cid, "outputCid": json_cid(wrong_cid)},
    )
    assert status == 400 and problem["code"] == "curated-pack-cid-mismatch", problem
    good = output(world.pack)
    status, body = await world.executor.call(
        "POST",
        f"/tasks/{task['id']}/attempts/1/complete",
        json={"output": good, "outputCid": json_cid(good)},
    )
    assert status == 200 and body["status"] == "completed", body


async def test_a_render_pack_output_names_a_rendering_of_its_source(world: World) -> None:
    def output(rendered: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "renderedPackId": rendered["id"] if rendered else None,
            "renderedCid": rendered["packCid"] if rendered else world.rendered["packCid"],
            "renderMethod": "agent:test-v1",
            "byteSize": 10,
            "entriesRendered": 1,
            "summary": "Rendered.",
        }

    status, task = await propose(world, "render_pack", {"packId": world.pack["packId"]})
    assert status == 201, task
    status, problem = await run_to_completion(world, task["id"], output(world.other_rendered))
    assert status == 400 and problem["code"] == "rendered-pack-not-of-source", problem
    good = output(world.rendered)
    status, body = await world.executor.call(
        "POST",
        f"/tasks/{task['id']}/attempts/1/complete",
        json={"output": good, "outputCid": json_cid(good)},
    )
    assert status == 200 and body["status"] == "completed", body
