"""Reads of teams, their members, founding seats, invites, groups and projects for the API.

Functions take a pool or a connection first (the API passes its read-only pool) and return
models: a row model where a route decides on columns the wire does not show, the wire model
where it does not.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from infra.db import Q
from infra.repos.rows import Db, NamedSubjectRow, Row, fetch_all, fetch_one
from infra.repos.teams import group_from_row, invite_from_row, project_from_row
from schemas.teams import (
    AcceptanceStatus,
    Group,
    GroupMember,
    Invite,
    MemberNs,
    Project,
    TeamRole,
    TeamStatus,
)


class TeamRow(Row):
    id: UUID
    name: str
    personal: bool
    created_by: UUID
    created_by_ns: str
    status: TeamStatus
    workflow_id: str | None
    created_at: datetime
    updated_at: datetime


class TeamState(Row):
    """What decides whether a team takes a new diary or a transferred one."""

    id: UUID
    status: TeamStatus
    personal: bool


class FoundingSeatRow(NamedSubjectRow):
    subject_id: UUID
    subject_ns: MemberNs
    role: TeamRole
    status: AcceptanceStatus
    accepted_at: datetime | None


class MemberRow(NamedSubjectRow):
    """One role tuple of a member (a member holding two roles has two rows)."""

    subject_id: UUID
    subject_ns: MemberNs
    relation: str


class GroupMemberRow(NamedSubjectRow):
    subject_id: UUID
    subject_ns: MemberNs


class MembershipRow(Row):
    """A team the subject holds a role in (`relation`), or was asked to found (`founding_role`)."""

    id: UUID
    name: str
    personal: bool
    status: TeamStatus
    created_at: datetime
    relation: str | None
    founding_role: TeamRole | None
    founding_status: AcceptanceStatus | None


async def get_team(db: Db, team_id: UUID) -> TeamRow | None:
    return await fetch_one(db, TeamRow, Q.team_get, team_id)


async def team_state(db: Db, team_id: UUID) -> TeamState | None:
    return await fetch_one(db, TeamState, Q.memory_get_team, team_id)


async def subject_relations(db: Db, team_id: UUID, subject_id: UUID) -> list[str]:
    """The role relations (`owners`, `managers`, ...) one subject holds on the team."""
    rows = await db.fetch(Q.team_subject_relations, str(team_id), str(subject_id))
    return [row["relation"] for row in rows]


async def founding_seat(db: Db, team_id: UUID, subject_id: UUID) -> FoundingSeatRow | None:
    return await fetch_one(db, FoundingSeatRow, Q.founding_of, team_id, subject_id)


async def founding_seats(db: Db, team_id: UUID) -> list[FoundingSeatRow]:
    return await fetch_all(db, FoundingSeatRow, Q.founding_list, team_id)


async def member_roles(db: Db, team_id: UUID) -> list[MemberRow]:
    return await fetch_all(db, MemberRow, Q.team_members, str(team_id))


async def memberships(
    db: Db, subject_ns: str, subject_id: UUID, confined_team_id: UUID | None = None
) -> list[MembershipRow]:
    """The subject's teams (only `confined_team_id` when set: a team key's confinement)."""
    return await fetch_all(
        db,
        MembershipRow,
        Q.team_list_for_subject,
        subject_ns,
        str(subject_id),
        confined_team_id,
    )


async def list_invites(db: Db, team_id: UUID) -> list[Invite]:
    return [invite_from_row(row) for row in await db.fetch(Q.invite_list, team_id)]


async def invite_team(db: Db, code: str) -> UUID | None:
    """The team an invite code belongs to (None for an unknown code)."""
    team_id: UUID | None = await db.fetchval(Q.invite_team_of_code, code)
    return team_id


async def get_group(db: Db, group_id: UUID) -> Group | None:
    row = await db.fetchrow(Q.group_get, group_id)
    return None if row is None else group_from_row(row)


async def list_groups(db: Db, team_id: UUID) -> list[Group]:
    return [group_from_row(row) for row in await db.fetch(Q.group_list, team_id)]


async def group_members(db: Db, group_id: UUID) -> list[GroupMember]:
    rows = await fetch_all(db, GroupMemberRow, Q.group_members, str(group_id))
    return [
        GroupMember(subjectId=row.subject_id, subjectNs=row.subject_ns, **row.names())
        for row in rows
    ]


async def list_projects(db: Db, team_id: UUID) -> list[Project]:
    return [project_from_row(row) for row in await db.fetch(Q.project_list, team_id)]
