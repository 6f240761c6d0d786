"""Units of work on teams. Each public method is one transaction that writes the team's rows and
its relation tuples together, so a team never exists without its owner, a group never without
its parent tuple, and a member never leaves half-removed.

Invariants that concurrent requests could break (the last owner, invite use counts) are checked
under a row lock on the team (or the invite), so two requests cannot both pass the check. A
refusal raises the DomainError the API answers with; raising inside the transaction rolls it back.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from infra import permissions as tuples
from infra.db import Q
from schemas.errors import (
    AlreadyMember,
    Conflict,
    GroupExists,
    GroupMemberExists,
    GroupNotFound,
    InviteExhausted,
    InviteExpired,
    InviteNotFound,
    NotAGroupMember,
    NotATeamMember,
    OwnerRequired,
    ProjectExists,
    TeamHasDiaries,
    TeamInUse,
    TeamLastOwner,
    TeamNotActive,
    TeamNotFound,
    TeamPersonalImmutable,
    UnknownSubject,
    ValidationFailed,
)
from schemas.kernel.permissions import RelationTuple, Subject
from schemas.teams import (
    RELATION_ROLES,
    ROLE_RELATIONS,
    FoundingOutcome,
    Group,
    Invite,
    InviteRole,
    Joined,
    MemberNs,
    Project,
    Seat,
    TeamRole,
)


def role_tuple(
    team_id: uuid.UUID, role: str, subject_ns: str, subject_id: uuid.UUID
) -> RelationTuple:
    return RelationTuple.grant(
        "Team", team_id, ROLE_RELATIONS[role], Subject(ns=subject_ns, id=str(subject_id))
    )


def seat_tuple(team_id: uuid.UUID, seat: Seat) -> RelationTuple:
    return role_tuple(team_id, seat.role, seat.subject_ns, seat.subject_id)


def personal_immutable() -> ValidationFailed:
    return TeamPersonalImmutable("A personal team has one owner and no members, groups or invites")


def not_active(status: str) -> Conflict:
    return TeamNotActive(f"The team is {status}, not active")


def last_owner() -> Conflict:
    return TeamLastOwner("A team keeps at least one owner")


class TeamRepo:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    # --- teams ----------------------------------------------------------------------------------

    async def create_personal_team(
        self, team_id: uuid.UUID, name: str, owner: Subject
    ) -> uuid.UUID:
        """The principal's personal team (created once) and its owner tuple; returns its id.

        Idempotent: a retry, or a second registration of the same agent, finds the team that
        exists and only makes sure the owner tuple is there.
        """
        owner_id = uuid.UUID(owner.id)
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(Q.team_insert_personal, team_id, name, owner_id, owner.ns)
            existing: uuid.UUID = await conn.fetchval(Q.team_personal_of, owner_id)
            await tuples.write_tuples(conn, [role_tuple(existing, "owner", owner.ns, owner_id)])
        return existing

    async def create_team(self, team_id: uuid.UUID, name: str, creator: Seat) -> None:
        """A team active at once, the creator its owner."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                Q.team_insert, team_id, name, creator.subject_id, creator.subject_ns, "active", None
            )
            await tuples.write_tuples(conn, [seat_tuple(team_id, creator)])

    async def seed_founding(
        self,
        team_id: uuid.UUID,
        name: str,
        creator: Seat,
        seats: Sequence[Seat],
        workflow_id: str,
        accepted: Sequence[uuid.UUID] = (),
    ) -> None:
        """The founding team and one acceptance row per seat, `pending` unless in `accepted`:
        the creator accepts like every founding member (SPEC 3.2). No role tuples yet: they
        come with activation."""
        async with self._pool.acquire() as conn, conn.transaction():
            await _require_subjects_exist(conn, seats)
            await conn.execute(
                Q.team_insert,
                team_id,
                name,
                creator.subject_id,
                creator.subject_ns,
                "founding",
                workflow_id,
            )
            await conn.execute(
                Q.founding_insert,
                [uuid.uuid5(team_id, str(seat.subject_id)) for seat in seats],
                team_id,
                [seat.subject_id for seat in seats],
                [seat.subject_ns for seat in seats],
                [seat.role for seat in seats],
                ["accepted" if seat.subject_id in accepted else "pending" for seat in seats],
            )

    async def accept_founding(self, team_id: uuid.UUID, subject_id: uuid.UUID) -> None:
        await self._pool.execute(Q.founding_accept, team_id, subject_id)

    async def finish_founding(
        self, team_id: uuid.UUID, outcome: FoundingOutcome, seats: Sequence[Seat]
    ) -> None:
        """Founding ends: `active` grants every founding member its role, `archived` nothing."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(Q.team_finish_founding, team_id, outcome)
            if outcome == "active":
                await tuples.write_tuples(conn, [seat_tuple(team_id, seat) for seat in seats])

    async def delete_team(self, team_id: uuid.UUID, *, retrying: bool) -> None:
        """The team, its groups, invites, projects and every tuple naming it or its groups."""
        async with self._pool.acquire() as conn, conn.transaction():
            if retrying and await conn.fetchrow(Q.team_lock, team_id) is None:
                return  # an earlier attempt deleted it
            team = await _lock_team(conn, team_id)
            if team["personal"]:
                raise personal_immutable()
            if team["status"] == "founding":
                raise TeamNotActive("The team is still founding")
            if diaries := await conn.fetchval(Q.team_diary_count, team_id):
                raise TeamHasDiaries(
                    "The team still owns diaries: delete or transfer them first",
                    extensions={"referencingKind": "diary", "referencingCount": diaries},
                )
            for kind, count in (await conn.fetchrow(Q.team_work_counts, team_id)).items():
                if count:
                    raise TeamInUse(
                        f"{count} {kind}(s) of the team are kept as history: the team stays",
                        extensions={"referencingKind": kind, "referencingCount": count},
                    )
            for row in await conn.fetch(Q.group_ids_of_team, team_id):
                await tuples.delete_object(conn, "Group", row["id"])
            await tuples.delete_object(conn, "Team", team_id)
            await conn.execute(Q.team_delete, team_id)

    # --- members --------------------------------------------------------------------------------

    async def change_role(
        self, team_id: uuid.UUID, subject_id: uuid.UUID, role: TeamRole, *, may_touch_owners: bool
    ) -> MemberNs:
        """Replace the subject's role; returns its namespace. Granting or taking away `owner`
        needs `may_touch_owners` (the caller owns the team); the last owner stays an owner."""
        async with self._pool.acquire() as conn, conn.transaction():
            await _lock_active_shared_team(conn, team_id)
            current, subject_ns = await _roles_of(conn, team_id, subject_id)
            if current == [role]:
                return subject_ns
            if "owner" in (*current, role) and not may_touch_owners:
                raise OwnerRequired("Only an owner grants or takes the owner role")
            if "owner" in current and role != "owner":
                await _require_another_owner(conn, team_id)
            await tuples.delete_tuples(
                conn, [role_tuple(team_id, r, subject_ns, subject_id) for r in current if r != role]
            )
            await tuples.write_tuples(conn, [role_tuple(team_id, role, subject_ns, subject_id)])
            return subject_ns

    async def remove_member(
        self, team_id: uuid.UUID, subject_id: uuid.UUID, *, may_touch_owners: bool, retrying: bool
    ) -> None:
        """The subject leaves the team and every group of the team; never the last owner."""
        async with self._pool.acquire() as conn, conn.transaction():
            await _lock_active_shared_team(conn, team_id)
            if retrying and not await conn.fetch(
                Q.team_subject_relations, str(team_id), str(subject_id)
            ):
                return  # an earlier attempt removed it
            current, subject_ns = await _roles_of(conn, team_id, subject_id)
            if "owner" in current:
                if not may_touch_owners:
                    raise OwnerRequired("Only an owner removes an owner")
                await _require_another_owner(conn, team_id)
            rows = await conn.fetch(Q.group_memberships_in_team, team_id, str(subject_id))
            await tuples.delete_tuples(
                conn,
                [role_tuple(team_id, r, subject_ns, subject_id) for r in current]
                + [_tuple_from_row(row) for row in rows],
            )

    # --- invites --------------------------------------------------------------------------------

    async def create_invite(
        self,
        invite_id: uuid.UUID,
        team_id: uuid.UUID,
        code: str,
        role: InviteRole,
        max_uses: int,
        expires_at: datetime,
        created_by: uuid.UUID,
    ) -> Invite:
        async with self._pool.acquire() as conn, conn.transaction():
            await _lock_active_shared_team(conn, team_id)
            await conn.execute(
                Q.invite_insert, invite_id, team_id, code, role, max_uses, created_by, expires_at
            )
            row = await conn.fetchrow(Q.invite_get, invite_id, team_id)
        assert row is not None
        return invite_from_row(row)

    async def delete_invite(
        self, team_id: uuid.UUID, invite_id: uuid.UUID, *, retrying: bool
    ) -> None:
        deleted = await self._pool.execute(Q.invite_delete, invite_id, team_id)
        if deleted == "DELETE 0" and not retrying:
            raise InviteNotFound("No such invite")

    async def join(self, code: str, subject_ns: MemberNs, subject_id: uuid.UUID) -> Joined:
        """Use one invite: the checks and the use-count increment happen under the invite's row
        lock, so a single-use code admits exactly one subject however many race for it.

        A join is a decision: repeated (by the client, or by a later activity attempt after a
        committed one), a membership with exactly the invite's role is the state it reaches, so
        it answers that state and uses nothing; a membership with another role is a 409.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            invite = await conn.fetchrow(Q.invite_lock_by_code, code)
            if invite is None:
                raise InviteNotFound("No such invite")
            team_id: uuid.UUID = invite["team_id"]
            role: InviteRole = invite["role"]
            await _lock_active_shared_team(conn, team_id)
            current = await conn.fetch(Q.team_subject_relations, str(team_id), str(subject_id))
            if current:
                if [RELATION_ROLES[r["relation"]] for r in current] == [role]:
                    return Joined(teamId=team_id, role=role)
                raise AlreadyMember("You are already a member of this team")
            if invite["expired"]:
                raise InviteExpired("The invite has expired")
            if invite["use_count"] >= invite["max_uses"]:
                raise InviteExhausted("The invite has been used up")
            await conn.execute(Q.invite_use, invite["id"])
            await tuples.write_tuples(conn, [role_tuple(team_id, role, subject_ns, subject_id)])
        return Joined(teamId=team_id, role=role)

    # --- groups ---------------------------------------------------------------------------------

    async def create_group(self, group_id: uuid.UUID, team_id: uuid.UUID, name: str) -> Group:
        """The group row and its `parent` tuple; a name is unique within the team."""
        async with self._pool.acquire() as conn, conn.transaction():
            await _lock_active_shared_team(conn, team_id)
            try:
                async with conn.transaction():
                    await conn.execute(Q.group_insert, group_id, team_id, name)
            except asyncpg.UniqueViolationError:
                raise GroupExists("The team has a group of this name") from None
            parent = RelationTuple.grant(
                "Group", group_id, "parent", Subject(ns="Team", id=str(team_id))
            )
            await tuples.write_tuples(conn, [parent])
            row = await conn.fetchrow(Q.group_get, group_id)
        assert row is not None
        return group_from_row(row)

    async def delete_group(self, group_id: uuid.UUID) -> None:
        """The group and every tuple of it or naming it (diary grants to its members)."""
        async with self._pool.acquire() as conn, conn.transaction():
            await tuples.delete_object(conn, "Group", group_id)
            await conn.execute(Q.group_delete, group_id)

    async def add_group_member(
        self,
        group_id: uuid.UUID,
        subject_id: uuid.UUID,
        subject_ns: MemberNs | None,
        *,
        retrying: bool,
    ) -> MemberNs:
        """Only a member of the group's team joins a group; returns the subject's namespace."""
        async with self._pool.acquire() as conn, conn.transaction():
            group = await conn.fetchrow(Q.group_get, group_id)
            if group is None:
                raise GroupNotFound("No such group")
            await _lock_active_shared_team(conn, group["team_id"])
            relations = await conn.fetch(
                Q.team_subject_relations, str(group["team_id"]), str(subject_id)
            )
            if not relations or (subject_ns and relations[0]["subject_ns"] != subject_ns):
                raise NotATeamMember("The subject is not a member of the group's team")
            ns: MemberNs = relations[0]["subject_ns"]
            member = RelationTuple.grant(
                "Group", group_id, "members", Subject(ns=ns, id=str(subject_id))
            )
            if not await tuples.write_tuples(conn, [member]) and not retrying:
                raise GroupMemberExists("The subject is already in the group")
            return ns

    async def remove_group_member(
        self, group_id: uuid.UUID, subject_id: uuid.UUID, *, retrying: bool
    ) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(Q.group_members, str(group_id))
            found = [row for row in rows if row["subject_id"] == subject_id]
            if not found and retrying:
                return  # an earlier attempt removed it
            if not found:
                raise NotAGroupMember("The subject is not in the group")
            subject = Subject(ns=found[0]["subject_ns"], id=str(subject_id))
            await tuples.delete_tuples(
                conn, [RelationTuple.grant("Group", group_id, "members", subject)]
            )

    # --- projects -------------------------------------------------------------------------------

    async def create_project(
        self, project_id: uuid.UUID, team_id: uuid.UUID, name: str, created_by: uuid.UUID
    ) -> Project:
        async with self._pool.acquire() as conn, conn.transaction():
            team = await _lock_team(conn, team_id)
            if team["status"] != "active":
                raise not_active(team["status"])
            try:
                async with conn.transaction():
                    await conn.execute(Q.project_insert, project_id, team_id, name, created_by)
            except asyncpg.UniqueViolationError:
                raise ProjectExists("The team has a project of this name") from None
            row = await conn.fetchrow(Q.project_get, project_id)
        assert row is not None
        return project_from_row(row)


# --- helpers: the connection first, inside the caller's transaction -----------------------------


async def _lock_team(conn: asyncpg.Connection, team_id: uuid.UUID) -> asyncpg.Record:
    team = await conn.fetchrow(Q.team_lock, team_id)
    if team is None:
        raise TeamNotFound("No such team")
    return team


async def _lock_active_shared_team(conn: asyncpg.Connection, team_id: uuid.UUID) -> None:
    """Serialise membership changes of one team; a personal or inactive team has none."""
    team = await _lock_team(conn, team_id)
    if team["personal"]:
        raise personal_immutable()
    if team["status"] != "active":
        raise not_active(team["status"])


async def _roles_of(
    conn: asyncpg.Connection, team_id: uuid.UUID, subject_id: uuid.UUID
) -> tuple[list[TeamRole], MemberNs]:
    rows = await conn.fetch(Q.team_subject_relations, str(team_id), str(subject_id))
    if not rows:
        raise NotATeamMember("The subject is not a member of this team")
    return [RELATION_ROLES[row["relation"]] for row in rows], rows[0]["subject_ns"]


async def _require_another_owner(conn: asyncpg.Connection, team_id: uuid.UUID) -> None:
    if await conn.fetchval(Q.team_owner_count, str(team_id)) <= 1:
        raise last_owner()


async def _require_subjects_exist(conn: asyncpg.Connection, seats: Sequence[Seat]) -> None:
    wanted = {
        "Agent": [s.subject_id for s in seats if s.subject_ns == "Agent"],
        "Human": [s.subject_id for s in seats if s.subject_ns == "Human"],
    }
    found = {row["id"] for row in await conn.fetch(Q.team_existing_agents, wanted["Agent"])}
    found |= {row["id"] for row in await conn.fetch(Q.team_existing_humans, wanted["Human"])}
    missing = [str(s.subject_id) for s in seats if s.subject_id not in found]
    if missing:
        raise UnknownSubject(f"No such agent or human: {', '.join(missing)}")


def _tuple_from_row(row: asyncpg.Record) -> RelationTuple:
    return RelationTuple(
        namespace=row["namespace"],
        object_id=row["object_id"],
        relation=row["relation"],
        subject_ns=row["subject_ns"],
        subject_id=row["subject_id"],
        subject_relation=row["subject_relation"],
    )


# --- rows as models (the API's reads use the same) ------------------------------------------------


def invite_from_row(row: asyncpg.Record) -> Invite:
    return Invite(
        id=row["id"],
        teamId=row["team_id"],
        code=row["code"],
        role=row["role"],
        maxUses=row["max_uses"],
        useCount=row["use_count"],
        expiresAt=row["expires_at"],
        usedAt=row["used_at"],
        createdBy=row["created_by"],
        createdAt=row["created_at"],
    )


def group_from_row(row: asyncpg.Record) -> Group:
    return Group(id=row["id"], teamId=row["team_id"], name=row["name"], createdAt=row["created_at"])


def project_from_row(row: asyncpg.Record) -> Project:
    return Project(
        id=row["id"],
        teamId=row["team_id"],
        name=row["name"],
        createdBy=row["created_by"],
        createdAt=row["created_at"],
    )
