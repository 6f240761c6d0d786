"""Side effects of runtime profiles: one repository unit of work per activity (DomainErrors
pass through and become non-retryable failures in the worker interceptor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from schemas.runtime_profiles import ProfileChanged, ProfileCreate, ProfileDelete, ProfileUpdate

if TYPE_CHECKING:
    from infra.repos.runtime_profiles import RuntimeProfileRepo


class RuntimeProfileActivities:
    def __init__(self, repo: RuntimeProfileRepo) -> None:
        self._repo = repo

    @activity.defn(name="runtime_profiles.create")
    async def create(self, inp: ProfileCreate) -> ProfileChanged:
        return await self._repo.create(inp)

    @activity.defn(name="runtime_profiles.update")
    async def update(self, inp: ProfileUpdate) -> ProfileChanged:
        return await self._repo.update(inp)

    @activity.defn(name="runtime_profiles.delete")
    async def delete(self, inp: ProfileDelete) -> None:
        await self._repo.delete(inp)
