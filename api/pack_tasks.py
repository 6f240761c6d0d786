"""What the task routes check about packs (SPEC 2.6 curate_pack, render_pack, judge_pack); the
checks are the hooks those types declare in `schemas/kernel/task_types.py`, run through
`api/task_type_checks.py`.

- A `judged_work` reference may carry a rendered pack's CID (dag-cbor) instead of a staged
  artifact's: the rendered pack must exist and be readable by the proposer; it is recorded in
  the task's references but binds no artifact bytes (its content lives in `rendered_packs`).
  A `judge_pack` task's reference must carry the CID of `input.renderedPackId`, a rendering of
  `input.sourcePackId`.
- At complete, a `curate_pack` output's `packId` must be a pack of the task's provenance diary
  (with that `packCid`), and a `render_pack` output's `renderedPackId`, when not null, must be
  a rendering of `input.packId` (with that `renderedCid`). 400 otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

import asyncpg
from aiohttp import web

from api import keys
from api.access import readable_diary
from infra.repos import packs as repo
from schemas.errors import (
    CuratedPackCidMismatch,
    CuratedPackNotInDiary,
    JudgedWorkMismatch,
    JudgePackSourceMismatch,
    NotFound,
    ReferenceRoleInvalid,
    RenderedPackCidMismatch,
    RenderedPackInputNotFound,
    RenderedPackNotOfSource,
)
from schemas.packs import RenderedPack, is_pack_cid
from schemas.tasks import TaskReference


def _pool(request: web.Request) -> asyncpg.Pool:
    return request.app[keys.READ_POOL]


def names_rendered_pack(ref: TaskReference) -> bool:
    """Whether a reference's artifact CID is a rendered pack's rather than staged bytes'."""
    return ref.artifact is not None and is_pack_cid(ref.artifact.cid)


async def rendered_pack_reference(
    request: web.Request, ref: TaskReference, pointer: str
) -> dict[str, Any]:
    """The stored form of a `judged_work` reference carrying a rendered pack CID."""
    assert ref.artifact is not None
    if ref.role != "judged_work":
        raise ReferenceRoleInvalid.at(
            f"{pointer}/role", "Only a judged_work reference may carry a rendered pack CID"
        )
    rendered = await repo.get_rendered_by_cid(_pool(request), ref.artifact.cid)
    if rendered is None or not await _readable(request, rendered):
        raise RenderedPackInputNotFound.at(f"{pointer}/artifact/cid", "No such rendered pack")
    return {
        "cid": ref.artifact.cid,
        "contentType": ref.artifact.contentType or "text/markdown",
        "kind": ref.artifact.kind or "rendered_pack",
        "title": ref.artifact.title or ref.artifact.cid,
    }


async def _readable(request: web.Request, rendered: RenderedPack) -> bool:
    try:
        await readable_diary(request, rendered.diaryId)
    except NotFound:
        return False
    return True


async def check_judge_pack_input(
    request: web.Request, task_input: Mapping[str, Any], references: list[TaskReference]
) -> None:
    """The judged_work reference names `renderedPackId`, a rendering of `sourcePackId`."""
    rendered = await repo.get_rendered(
        _pool(request), UUID(str(task_input["renderedPackId"])), content=False
    )
    if rendered is None or not await _readable(request, rendered):
        raise RenderedPackInputNotFound.at("/input/renderedPackId", "No such rendered pack")
    if str(rendered.sourcePackId) != str(task_input["sourcePackId"]):
        raise JudgePackSourceMismatch.at(
            "/input/sourcePackId", "The rendered pack is not a rendering of this pack"
        )
    judged = [r for r in references if r.role == "judged_work" and r.artifact is not None]
    if not any(r.artifact is not None and r.artifact.cid == rendered.packCid for r in judged):
        raise JudgedWorkMismatch.at(
            "/references",
            f"The judged_work reference must carry the rendered pack's CID {rendered.packCid}",
        )


async def check_curated_output(
    request: web.Request,
    task_id: UUID,
    task_input: Mapping[str, Any] | None,
    output: Mapping[str, Any],
) -> None:
    """A curate_pack output's pack is one of the task's provenance diary, with its CID."""
    diary_id = await repo.task_diary(_pool(request), task_id)
    pack = await repo.get_pack(_pool(request), UUID(str(output["packId"])))
    if pack is None or pack.diaryId != diary_id:
        raise CuratedPackNotInDiary.at(
            "/output/packId", "Must name a pack of the task's provenance diary"
        )
    if pack.packCid != output["packCid"]:
        raise CuratedPackCidMismatch.at("/output/packCid", f"The pack's CID is {pack.packCid}")


async def check_rendered_output(
    request: web.Request,
    task_id: UUID,
    task_input: Mapping[str, Any] | None,
    output: Mapping[str, Any],
) -> None:
    """A render_pack output's persisted rendering (when any) renders `input.packId`."""
    if output.get("renderedPackId") is None:
        return
    rendered = await repo.get_rendered(
        _pool(request), UUID(str(output["renderedPackId"])), content=False
    )
    if rendered is None or str(rendered.sourcePackId) != str((task_input or {}).get("packId")):
        raise RenderedPackNotOfSource.at(
            "/output/renderedPackId",
            "Must name a rendered pack of the task's source pack (input.packId)",
        )
    if rendered.packCid != output["renderedCid"]:
        raise RenderedPackCidMismatch.at(
            "/output/renderedCid", f"The rendered pack's CID is {rendered.packCid}"
        )
