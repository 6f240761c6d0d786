"""Team workflows: founding (SPEC 3.2) and the short request workflows behind every team write.

`TeamFounding` (id `teams/<id>/founding`) seeds the founding team and its acceptance rows, then
waits up to `TEAM_FOUNDING_WAIT` (24 h) for every founding member's `FOUNDING_ACCEPT_EVENT`, the
creator's included (SPEC 3.2; runs started before `CREATOR_ACCEPTS_PATCH` took the creator's as
given).
When all have accepted the team becomes `active` and each founding member gets its role (owner
unless the creator named another); when the wait runs out it is `archived` and nobody gets
anything. The API starts it with Update-with-Start on `FOUNDING_SEEDED`, so `POST /teams` answers
as soon as the rows exist, not after the day of waiting.

The request workflows are one activity each: the activity is the transaction that checks the
team's invariants under a lock and writes rows and tuples together.
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from activities.teams import TeamActivities
    from schemas import limits
    from schemas.errors import (
        TeamNotFound,
        TeamNotFounding,
    )
    from schemas.teams import (
        FOUNDING_ACCEPT_EVENT,
        FOUNDING_SEEDED,
        FoundingAccept,
        FoundingAcceptance,
        FoundingAccepted,
        FoundingFinish,
        FoundingOutcome,
        FoundingSeed,
        FoundingState,
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
        Project,
        ProjectCreate,
        TeamCreate,
        TeamJoin,
        TeamRef,
        TeamStatus,
    )
    from workflows.common import LONG_LIVED, STEP_FAILURES, domain_failure, run_step
    from workflows.steps import RequestStep, request_step

# The end of a founding must land even if Postgres is down at hour 24: retry until it does.
FINISH_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=0,
)


# --- workflow ids, each beside its workflow: a team write runs as `teams/<team>/<what>` -------
# Two writes of the same thing never run at once (the API answers 409 `team-change-running`);
# once one has ended, the next runs under the same id. Ids of new rows (invites, groups,
# projects) carry the id the API chose for the row.


def team_founding_workflow_id(team_id: UUID) -> str:
    return f"teams/{team_id}/founding"


# Runs started before this patch seeded the creator's acceptance as given and never wait for it;
# runs after it seed it `pending` and wait for the creator's own accept-founding (SPEC 3.2).
CREATOR_ACCEPTS_PATCH = "creator-accepts"


@workflow.defn(name="TeamFounding", versioning_behavior=LONG_LIVED)
class TeamFoundingWorkflow:
    @workflow.init
    def __init__(self, inp: TeamCreate) -> None:
        self._team_id = inp.team_id
        self._seats = {seat.subject_id for seat in inp.seats}
        # before the patch, the creator's acceptance was its request to found the team
        self._accepted_at_seeding = (
            [] if workflow.patched(CREATOR_ACCEPTS_PATCH) else [inp.creator.subject_id]
        )
        self._pending = self._seats - set(self._accepted_at_seeding)
        self._status: TeamStatus | None = None  # None until the rows exist
        self._closing = False
        self._seed_failure: FailureError | None = None

    @workflow.run
    async def run(self, inp: TeamCreate) -> FoundingState:
        try:
            await run_step(
                TeamActivities.seed_founding,
                FoundingSeed(team=inp, accepted=self._accepted_at_seeding),
            )
        except STEP_FAILURES as failure:
            self._seed_failure = failure  # the Update that started us reports it
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise
        self._status = "founding"
        outcome = await self._wait_for_acceptances()
        self._closing = True
        await run_step(
            TeamActivities.finish_founding,
            FoundingFinish(team_id=inp.team_id, outcome=outcome, seats=inp.seats),
            retry=FINISH_RETRY,
        )
        self._status = outcome
        await workflow.wait_condition(workflow.all_handlers_finished)
        return FoundingState(team_id=inp.team_id, status=outcome)

    async def _wait_for_acceptances(self) -> FoundingOutcome:
        try:
            await workflow.wait_condition(
                lambda: not self._pending, timeout=limits.TEAM_FOUNDING_WAIT
            )
        except TimeoutError:
            return "archived"
        return "active"

    @workflow.update(name=FOUNDING_SEEDED)
    async def seeded(self) -> FoundingState:
        await workflow.wait_condition(
            lambda: self._status is not None or self._seed_failure is not None
        )
        if self._seed_failure is not None:
            raise self._seed_failure
        assert self._status is not None
        return FoundingState(team_id=self._team_id, status=self._status)

    @workflow.update(name=FOUNDING_ACCEPT_EVENT)
    async def accept(self, inp: FoundingAccept) -> FoundingAccepted:
        await workflow.wait_condition(lambda: self._status is not None)
        if inp.subject_id in self._pending and not self._closing:
            await run_step(
                TeamActivities.accept_founding,
                FoundingAcceptance(team_id=self._team_id, subject_id=inp.subject_id),
            )
            self._pending.discard(inp.subject_id)
        if not self._pending or self._closing:
            # the last acceptance learns the outcome, not an intermediate "founding"
            await workflow.wait_condition(lambda: self._status in ("active", "archived"))
        assert self._status is not None
        return FoundingAccepted(
            accepted=inp.subject_id not in self._pending, teamStatus=self._status
        )

    @accept.validator
    def _check_accept(self, inp: FoundingAccept) -> None:
        if inp.subject_id not in self._seats:
            raise domain_failure(TeamNotFound("No such team"))
        if inp.subject_id in self._pending and (self._closing or self._seed_failure):
            raise domain_failure(TeamNotFounding("The team is no longer founding"))


# --- request workflows: one transaction each -------------------------------------------------


def team_create_workflow_id(team_id: UUID) -> str:
    return f"teams/{team_id}/create"


@request_step("TeamCreate", TeamActivities.create_team)
class TeamCreateWorkflow(RequestStep[TeamCreate, TeamRef]): ...


def team_delete_workflow_id(team_id: UUID) -> str:
    return f"teams/{team_id}/delete"


@request_step("TeamDelete", TeamActivities.delete_team)
class TeamDeleteWorkflow(RequestStep[TeamRef, None]): ...


def team_member_workflow_id(team_id: UUID, subject_id: UUID) -> str:
    """A member's role change and removal share it: they exclude each other."""
    return f"teams/{team_id}/members/{subject_id}"


@request_step("TeamMemberRole", TeamActivities.change_member_role)
class TeamMemberRoleWorkflow(RequestStep[MemberRoleChange, None]): ...


@request_step("TeamMemberRemove", TeamActivities.remove_member)
class TeamMemberRemoveWorkflow(RequestStep[MemberRemove, None]): ...


def invite_create_workflow_id(invite_id: UUID) -> str:
    """Named by the invite alone: an id minted from an `Idempotency-Key` names one run, so the
    key reused under another team finds it and is told `idempotency-key-reused`."""
    return f"invites/{invite_id}"


@request_step("TeamInviteCreate", TeamActivities.create_invite)
class TeamInviteCreateWorkflow(RequestStep[InviteCreate, Invite]): ...


def invite_delete_workflow_id(team_id: UUID, invite_id: UUID) -> str:
    return f"teams/{team_id}/invites/{invite_id}/delete"


@request_step("TeamInviteDelete", TeamActivities.delete_invite)
class TeamInviteDeleteWorkflow(RequestStep[InviteDelete, None]): ...


def join_workflow_id(team_id: UUID, subject_id: UUID) -> str:
    return f"teams/{team_id}/join/{subject_id}"


@request_step("TeamJoin", TeamActivities.join)
class TeamJoinWorkflow(RequestStep[TeamJoin, Joined]): ...


def group_create_workflow_id(group_id: UUID) -> str:
    """Named by the group alone (see `invite_create_workflow_id`)."""
    return f"groups/{group_id}"


@request_step("GroupCreate", TeamActivities.create_group)
class GroupCreateWorkflow(RequestStep[GroupCreate, Group]): ...


def group_delete_workflow_id(team_id: UUID, group_id: UUID) -> str:
    return f"teams/{team_id}/groups/{group_id}/delete"


@request_step("GroupDelete", TeamActivities.delete_group)
class GroupDeleteWorkflow(RequestStep[GroupRef, None]): ...


def group_member_workflow_id(team_id: UUID, group_id: UUID, subject_id: UUID) -> str:
    """Adding and removing one member of a group share it: they exclude each other."""
    return f"teams/{team_id}/groups/{group_id}/members/{subject_id}"


@request_step("GroupMemberAdd", TeamActivities.add_group_member)
class GroupMemberAddWorkflow(RequestStep[GroupMemberChange, GroupMemberChange]): ...


@request_step("GroupMemberRemove", TeamActivities.remove_group_member)
class GroupMemberRemoveWorkflow(RequestStep[GroupMemberRemove, None]): ...


def project_create_workflow_id(project_id: UUID) -> str:
    """Named by the project alone (see `invite_create_workflow_id`)."""
    return f"projects/{project_id}"


@request_step("ProjectCreate", TeamActivities.create_project)
class ProjectCreateWorkflow(RequestStep[ProjectCreate, Project]): ...
