"""Side effects of packs: the pack and rendered-pack rows with their tuples, and the sweep of
expired ones. One repository unit of work per activity; its problems pass through as they are
(`DomainError`s become non-retryable failures in the worker interceptor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from activities.heartbeats import heartbeating
from schemas.packs import (
    PackCreated,
    PackCreateInput,
    PackSweepStep,
    PackUpdateInput,
    RenderCreated,
    RenderedPackUpdateInput,
    RenderInput,
    SweepDeleted,
)

if TYPE_CHECKING:
    from infra.repos.packs import PackRepo


class PackActivities:
    def __init__(self, repo: PackRepo) -> None:
        self._repo = repo

    @activity.defn(name="packs.create")
    async def create_pack(self, inp: PackCreateInput) -> PackCreated:
        return await self._repo.create_pack(inp)

    @activity.defn(name="packs.update")
    async def update_pack(self, inp: PackUpdateInput) -> None:
        await self._repo.update_pack(inp)

    @activity.defn(name="packs.render")
    async def render(self, inp: RenderInput) -> RenderCreated:
        return await self._repo.render(inp)

    @activity.defn(name="packs.update_rendered")
    async def update_rendered(self, inp: RenderedPackUpdateInput) -> None:
        await self._repo.update_rendered(inp)

    @activity.defn(name="packs.delete_expired_rendered")
    async def delete_expired_rendered(self, inp: PackSweepStep) -> SweepDeleted:
        async with heartbeating():
            deleted = await self._repo.delete_expired_rendered(inp.before, inp.limit)
        if deleted:
            activity.logger.info("deleted %d expired rendered pack(s)", deleted)
        return SweepDeleted(deleted=deleted)

    @activity.defn(name="packs.delete_expired_packs")
    async def delete_expired_packs(self, inp: PackSweepStep) -> SweepDeleted:
        async with heartbeating():
            deleted = await self._repo.delete_expired_packs(inp.before, inp.limit)
        if deleted:
            activity.logger.info("deleted %d expired pack(s)", deleted)
        return SweepDeleted(deleted=deleted)
