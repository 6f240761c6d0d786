"""Side effects of task artifacts: the rows of staged and attached uploads, and the sweep that
deletes what nothing names any more (rows and S3 objects). One transaction per activity,
idempotent under retry; a refusal becomes a non-retryable problem.

The bytes themselves are not uploaded here: they would have to travel through Temporal (and its
2 MiB payload cap). The API streams them to S3 (`api.routes.task_artifacts`), the one
exception, like task messages, to "every write is an activity".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from activities.heartbeats import heartbeating
from schemas.artifacts import (
    ArtifactAttachInput,
    ArtifactStageInput,
    AttachedArtifact,
    BlobSweep,
    StagedExpiry,
    SweepCount,
)

if TYPE_CHECKING:
    from infra.repos.artifacts import ArtifactRepo
    from infra.s3 import BlobStore


class ArtifactActivities:
    def __init__(self, repo: ArtifactRepo, blobs: BlobStore | None) -> None:
        self._repo = repo
        self._blobs = blobs

    @activity.defn(name="artifacts.stage")
    async def stage(self, inp: ArtifactStageInput) -> None:
        await self._repo.stage(inp)

    @activity.defn(name="artifacts.attach")
    async def attach(self, inp: ArtifactAttachInput) -> AttachedArtifact:
        return await self._repo.attach(inp)

    @activity.defn(name="artifacts.expire_staged")
    async def expire_staged(self, inp: StagedExpiry) -> SweepCount:
        async with heartbeating():
            deleted = await self._repo.expire_staged(inp.before, inp.limit)
        return SweepCount(deleted=deleted)

    @activity.defn(name="artifacts.delete_unreferenced_blobs")
    async def delete_unreferenced_blobs(self, inp: BlobSweep) -> SweepCount:
        if self._blobs is None:  # a worker built without S3 (some tests): retried, never silent
            raise RuntimeError("this worker has no blob store to delete artifact objects from")
        async with heartbeating():  # the S3 deletes run inside the transaction
            deleted = await self._repo.delete_unreferenced_blobs(
                inp.limit, self._blobs.delete_artifacts
            )
        if deleted:
            activity.logger.info("deleted %d unreferenced artifact blob(s)", deleted)
        return SweepCount(deleted=deleted)
