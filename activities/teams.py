"""Side effects of teams: team rows, founding acceptances, invites, groups and projects, each
written in one transaction together with the relation tuples it implies (`TeamRepo`).

Idempotent under retry: ids come from the API or `workflow.uuid4()` and inserts are
`ON CONFLICT`; where a second attempt cannot tell its own committed effect from a duplicate
request or a missing target (joining, adding or removing a member, deleting), the attempt
number says which it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import activity

from schemas.kernel.permissions import Subject
from schemas.teams import (
    FoundingAcceptance,
    FoundingFinish,
    FoundingSeed,
    Group,
    GroupCreate,
    GroupMemberChange,
    GroupMemberRemove,
    GroupRef,
    Invite,
    InviteCreate,
    InviteDelete,
    Joined,
    MemberRemove,
    MemberRoleChange,
    PersonalTeamCreate,
    PersonalTeamCreated,
    Project,
    ProjectCreate,
    TeamCreate,
    TeamJoin,
    TeamRef,
)

if TYPE_CHECKING:
    from infra.repos.teams import TeamRepo


def _retrying() -> bool:
    return activity.info().attempt > 1


class TeamActivities:
    def __init__(self, repo: TeamRepo) -> None:
        self._repo = repo

    @activity.defn(name="teams.create_personal_team")
    async def create_personal_team(self, inp: PersonalTeamCreate) -> PersonalTeamCreated:
        owner = Subject(ns=inp.owner_ns, id=str(inp.owner_id))
        team_id = await self._repo.create_personal_team(inp.team_id, inp.name, owner)
        return PersonalTeamCreated(team_id=team_id)

    @activity.defn(name="teams.create_team")
    async def create_team(self, inp: TeamCreate) -> TeamRef:
        await self._repo.create_team(inp.team_id, inp.name, inp.creator)
        return TeamRef(team_id=inp.team_id)

    @activity.defn(name="teams.seed_founding")
    async def seed_founding(self, inp: FoundingSeed) -> TeamRef:
        team = inp.team
        await self._repo.seed_founding(
            team.team_id, team.name, team.creator, team.seats, team.workflow_id or "", inp.accepted
        )
        return TeamRef(team_id=team.team_id)

    @activity.defn(name="teams.accept_founding")
    async def accept_founding(self, inp: FoundingAcceptance) -> None:
        await self._repo.accept_founding(inp.team_id, inp.subject_id)

    @activity.defn(name="teams.finish_founding")
    async def finish_founding(self, inp: FoundingFinish) -> None:
        await self._repo.finish_founding(inp.team_id, inp.outcome, inp.seats)

    @activity.defn(name="teams.delete_team")
    async def delete_team(self, inp: TeamRef) -> None:
        await self._repo.delete_team(inp.team_id, retrying=_retrying())

    @activity.defn(name="teams.change_member_role")
    async def change_member_role(self, inp: MemberRoleChange) -> None:
        await self._repo.change_role(
            inp.team_id, inp.subject_id, inp.role, may_touch_owners=inp.may_touch_owners
        )

    @activity.defn(name="teams.remove_member")
    async def remove_member(self, inp: MemberRemove) -> None:
        await self._repo.remove_member(
            inp.team_id,
            inp.subject_id,
            may_touch_owners=inp.may_touch_owners,
            retrying=_retrying(),
        )

    @activity.defn(name="teams.create_invite")
    async def create_invite(self, inp: InviteCreate) -> Invite:
        return await self._repo.create_invite(
            inp.invite_id,
            inp.team_id,
            inp.code,
            inp.role,
            inp.max_uses,
            inp.expires_at,
            inp.created_by,
        )

    @activity.defn(name="teams.delete_invite")
    async def delete_invite(self, inp: InviteDelete) -> None:
        await self._repo.delete_invite(inp.team_id, inp.invite_id, retrying=_retrying())

    @activity.defn(name="teams.join")
    async def join(self, inp: TeamJoin) -> Joined:
        return await self._repo.join(inp.code, inp.subject_ns, inp.subject_id)

    @activity.defn(name="teams.create_group")
    async def create_group(self, inp: GroupCreate) -> Group:
        return await self._repo.create_group(inp.group_id, inp.team_id, inp.name)

    @activity.defn(name="teams.delete_group")
    async def delete_group(self, inp: GroupRef) -> None:
        await self._repo.delete_group(inp.group_id)

    @activity.defn(name="teams.add_group_member")
    async def add_group_member(self, inp: GroupMemberChange) -> GroupMemberChange:
        subject_ns = await self._repo.add_group_member(
            inp.group_id, inp.subject_id, inp.subject_ns, retrying=_retrying()
        )
        return inp.model_copy(update={"subject_ns": subject_ns})

    @activity.defn(name="teams.remove_group_member")
    async def remove_group_member(self, inp: GroupMemberRemove) -> None:
        await self._repo.remove_group_member(inp.group_id, inp.subject_id, retrying=_retrying())

    @activity.defn(name="teams.create_project")
    async def create_project(self, inp: ProjectCreate) -> Project:
        return await self._repo.create_project(
            inp.project_id, inp.team_id, inp.name, inp.created_by
        )
