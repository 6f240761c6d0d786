"""Runtime profiles (DECISIONS "Runtime profiles"): the reads the API serves and the writes of
the RuntimeProfile* workflows, one transaction each and idempotent under retry.

Reads take a pool or a connection first and return `schemas.runtime_profiles.RuntimeProfile`.
"""

from __future__ import annotations

from uuid import UUID

import asyncpg

from infra.db import Q
from infra.repos.rows import Db
from schemas import limits
from schemas.errors import (
    Conflict,
    NotFound,
    RuntimeProfileChanged,
    RuntimeProfileLimit,
    RuntimeProfileNameTaken,
    RuntimeProfileNotFound,
    TeamNotFound,
)
from schemas.runtime_profiles import (
    ProfileChanged,
    ProfileCreate,
    ProfileDelete,
    ProfileUpdate,
    RuntimeProfile,
    profile_from_row,
)

# --- reads -------------------------------------------------------------------------------------


async def get_profile(db: Db, profile_id: UUID) -> RuntimeProfile | None:
    row = await db.fetchrow(Q.runtime_profile_get, profile_id)
    return None if row is None else profile_from_row(row)


async def team_profile(db: Db, team_id: UUID, profile_id: UUID) -> RuntimeProfile | None:
    """The profile if it is one of the team's (None for another team's, as for none at all)."""
    profile = await get_profile(db, profile_id)
    return profile if profile is not None and profile.teamId == team_id else None


async def list_profiles(db: Db, team_id: UUID) -> list[RuntimeProfile]:
    """The team's profiles, oldest first (at most `RUNTIME_PROFILES_PER_TEAM_MAX`)."""
    return [profile_from_row(row) for row in await db.fetch(Q.runtime_profile_list, team_id)]


async def team_profile_ids(db: Db, team_id: UUID) -> set[UUID]:
    return {profile.id for profile in await list_profiles(db, team_id)}


# --- writes ------------------------------------------------------------------------------------


def _not_found() -> NotFound:
    return RuntimeProfileNotFound("No such runtime profile")


class RuntimeProfileRepo:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create(self, create: ProfileCreate) -> ProfileChanged:
        """Insert the profile (revision 1); a retry finds its row and changes nothing."""
        assert create.profile_id is not None
        async with self._pool.acquire() as conn, conn.transaction():
            if await conn.fetchrow(Q.runtime_profile_lock_team, create.team_id) is None:
                raise TeamNotFound("No such team")
            existing = await get_profile(conn, create.profile_id)
            if existing is not None:
                return ProfileChanged(profile_id=existing.id, revision=existing.revision)
            if await conn.fetchval(Q.runtime_profile_count, create.team_id) >= (
                limits.RUNTIME_PROFILES_PER_TEAM_MAX
            ):
                raise RuntimeProfileLimit(
                    f"A team has at most {limits.RUNTIME_PROFILES_PER_TEAM_MAX} runtime profiles"
                )
            try:
                async with conn.transaction():
                    revision = await conn.fetchval(
                        Q.runtime_profile_insert,
                        create.profile_id,
                        create.team_id,
                        create.name,
                        create.policy,
                        create.created_by_agent_id,
                        create.created_by_human_id,
                    )
            except asyncpg.UniqueViolationError:
                same = await _same_create(conn, create)
                if same is None:
                    raise _name_taken() from None
                return same
        return ProfileChanged(profile_id=create.profile_id, revision=revision)

    async def update(self, update: ProfileUpdate) -> ProfileChanged:
        """Apply the change to revision `update.revision`, making it the next one. Another
        update that came first is a 409; this update's own earlier commit (a retry) is done."""
        async with self._pool.acquire() as conn, conn.transaction():
            try:
                async with conn.transaction():
                    revision = await conn.fetchval(
                        Q.runtime_profile_update,
                        update.profile_id,
                        update.revision,
                        update.name,
                        update.policy,
                    )
            except asyncpg.UniqueViolationError:
                raise _name_taken() from None
            if revision is not None:
                return ProfileChanged(profile_id=update.profile_id, revision=revision)
            current = await get_profile(conn, update.profile_id)
        if current is None:
            raise _not_found()
        if current.revision == update.revision + 1 and _applied(current, update):
            return ProfileChanged(profile_id=current.id, revision=current.revision)
        raise RuntimeProfileChanged(
            f"The profile changed since revision {update.revision}; read it and retry"
        )

    async def delete(self, delete: ProfileDelete) -> None:
        """Remove the profile; attempts claimed under it keep their record. Idempotent."""
        await self._pool.execute(Q.runtime_profile_delete, delete.profile_id)


async def _same_create(conn: asyncpg.Connection, create: ProfileCreate) -> ProfileChanged | None:
    """The profile a retried request already made: same name, policy and creator, untouched
    since (revision 1). Anything else under the name is another profile (409)."""
    row = await conn.fetchrow(Q.runtime_profile_by_name, create.team_id, create.name)
    if row is None:
        return None
    found = profile_from_row(row)
    same = (
        found.revision == 1
        and found.policy.model_dump(exclude_none=True) == create.policy
        and found.createdByAgentId == create.created_by_agent_id
        and found.createdByHumanId == create.created_by_human_id
    )
    return ProfileChanged(profile_id=found.id, revision=1) if same else None


def _applied(current: RuntimeProfile, update: ProfileUpdate) -> bool:
    policy = current.policy.model_dump(exclude_none=True)
    return (update.name is None or update.name == current.name) and (
        update.policy is None or update.policy == policy
    )


def _name_taken() -> Conflict:
    return RuntimeProfileNameTaken("The team has a runtime profile of this name")
