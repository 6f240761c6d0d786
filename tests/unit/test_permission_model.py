"""The permission model and its pure evaluator, over an in-memory tuple set (no Postgres)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence

import pytest
from pydantic import ValidationError

from schemas.errors import PermissionEvaluationFailed, ValidationFailed
from schemas.kernel.permissions import (
    MAX_TUPLES_PER_CHANGE,
    PERMISSION_MODEL,
    Namespace,
    NamespaceDef,
    ObjectRef,
    PermissionModel,
    RelationTuple,
    Subject,
    SubjectType,
    TupleSet,
    TupleWrite,
    UnknownPermission,
    Userset,
    arrow,
    check,
    lookup,
    rel,
)

SPEC_TABLE = {
    "Human": {},
    "Team": {
        "owners": "Agent | Human",
        "managers": "Agent | Human",
        "executors": "Agent | Human",
        "members": "Agent | Human",
        "access": "owners | managers | members",
        "write": "owners | managers",
        "manage": "owners",
        "propose_tasks": "owners | managers | executors[Agent]",
        "manage_credentials": "owners | managers",
        "manage_members": "owners | managers",
        "verify_claim": "owners | managers | executors | members",
    },
    "Group": {
        "parent": "Team",
        "members": "Agent | Human | Group#members",
        "access": "members",
        "manage": "parent->manage_members",
    },
    "Diary": {
        "team": "Team",
        "writers": "Agent | Human | Group#members",
        "managers": "Agent | Human | Group#members",
        "read": "team->access | writers | managers",
        "write": "team->write | writers | managers",
        "manage": "team->manage | managers",
        "verify_claim": "team->verify_claim",
    },
    "DiaryEntry": {
        "parent": "Diary",
        "view": "parent->read",
        "edit": "parent->write",
        "delete": "parent->write",
    },
    "Agent": {"self": "Agent", "act_as": "self"},
    "ContextPack": {
        "parent": "Diary",
        "read": "parent->read",
        "manage": "parent->manage",
        "verify_claim": "parent->verify_claim",
    },
    "Task": {
        "team": "Team",
        "parent": "Diary",
        "claimant": "Agent",
        "writers": "Agent | Human | Group#members",
        "managers": "Agent | Human | Group#members",
        "view": "team->access | writers | managers",
        "claim": "team->executors[Agent] | writers | managers",
        "report": "claimant",
        "cancel": "team->write | managers",
    },
}

WORLD = TupleSet(
    RelationTuple.parse(text)
    for text in (
        "Team:acme#owners@Agent:owner",
        "Team:acme#managers@Human:manager",
        "Team:acme#executors@Agent:executor",
        "Team:acme#executors@Human:executor-human",
        "Team:acme#members@Human:member",
        "Group:staff#parent@Team:acme",
        "Group:staff#members@Agent:reviewer",
        "Group:staff#members@Group:interns#members",
        "Group:interns#parent@Team:acme",
        "Group:interns#members@Human:intern",
        "Group:loop-a#members@Group:loop-b#members",
        "Group:loop-b#members@Group:loop-a#members",
        "Group:loop-b#members@Agent:looper",
        "Diary:notes#team@Team:acme",
        "Diary:notes#writers@Group:staff#members",
        "Diary:notes#managers@Agent:curator",
        "Diary:ring#writers@Group:loop-a#members",
        "DiaryEntry:e1#parent@Diary:notes",
        "ContextPack:p1#parent@Diary:notes",
        "Agent:owner#self@Agent:owner",
        "Task:t1#team@Team:acme",
        "Task:t1#parent@Diary:notes",
        "Task:t1#claimant@Agent:executor",
        "Task:t1#managers@Human:task-manager",
    )
)


def test_the_model_is_the_spec_table() -> None:
    assert PERMISSION_MODEL.describe() == SPEC_TABLE


def test_every_namespace_enum_member_is_modelled() -> None:
    assert set(PERMISSION_MODEL.namespaces) == {ns.value for ns in Namespace}


@pytest.mark.parametrize(
    ("obj", "permission", "subject", "allowed"),
    [
        pytest.param("Team:acme", "access", "Human:member", True, id="team-access-member"),
        pytest.param("Team:acme", "access", "Agent:executor", False, id="team-access-executor"),
        pytest.param("Team:acme", "propose_tasks", "Agent:executor", True, id="propose-agent"),
        pytest.param(
            "Team:acme", "propose_tasks", "Human:executor-human", False, id="propose-human"
        ),
        pytest.param("Team:acme", "verify_claim", "Agent:executor", True, id="membership-executor"),
        pytest.param("Group:staff", "access", "Human:intern", True, id="nested-group-member"),
        pytest.param("Group:staff", "manage", "Human:manager", True, id="group-manage-via-team"),
        pytest.param("Group:staff", "manage", "Agent:reviewer", False, id="group-member-no-manage"),
        pytest.param("Diary:notes", "write", "Human:intern", True, id="diary-write-nested-group"),
        pytest.param("Diary:notes", "read", "Agent:executor", False, id="diary-read-executor"),
        pytest.param("Diary:notes", "manage", "Agent:curator", True, id="diary-manager-grant"),
        pytest.param("Diary:notes", "manage", "Human:manager", False, id="diary-team-manager"),
        pytest.param("DiaryEntry:e1", "delete", "Agent:reviewer", True, id="entry-delete-writer"),
        pytest.param("DiaryEntry:e1", "edit", "Human:member", False, id="entry-edit-member"),
        pytest.param("ContextPack:p1", "verify_claim", "Agent:executor", True, id="pack-verify"),
        pytest.param("ContextPack:p1", "verify_claim", "Agent:curator", False, id="pack-verify-no"),
        pytest.param("Agent:owner", "act_as", "Agent:owner", True, id="agent-self"),
        pytest.param("Agent:owner", "act_as", "Agent:executor", False, id="agent-other"),
        pytest.param("Task:t1", "view", "Agent:curator", False, id="task-view-diary-grant"),
        pytest.param("Task:t1", "claim", "Agent:reviewer", False, id="task-claim-diary-group"),
        pytest.param("Task:t1", "claim", "Agent:executor", True, id="task-claim-agent-exec"),
        pytest.param("Task:t1", "claim", "Human:executor-human", False, id="task-claim-human"),
        pytest.param("Task:t1", "report", "Agent:executor", True, id="task-report-claimant"),
        pytest.param("Task:t1", "cancel", "Human:task-manager", True, id="task-cancel-grant"),
        pytest.param("Task:t1", "cancel", "Human:member", False, id="task-cancel-member"),
        pytest.param("Diary:ring", "write", "Agent:looper", True, id="cycle-member-found"),
        pytest.param("Diary:ring", "write", "Agent:owner", False, id="cycle-terminates"),
        pytest.param("Team:acme", "members", "Human:member", True, id="relation-checkable"),
        pytest.param("Diary:notes", "write", "Group:staff#members", True, id="subject-set-subject"),
        pytest.param(
            "Diary:notes", "write", "Group:interns#members", True, id="nested-subject-set"
        ),
        pytest.param("Diary:notes", "write", "Group:loop-a#members", False, id="subject-set-no"),
    ],
)
async def test_check(obj: str, permission: str, subject: str, allowed: bool) -> None:
    namespace, object_id = obj.split(":")
    decided = await check(
        PERMISSION_MODEL, WORLD, namespace, object_id, permission, Subject.parse(subject)
    )
    assert decided is allowed


def _objects(namespace: str) -> set[str]:
    return {t.object_id for t in WORLD if t.namespace == namespace}


def _subjects() -> list[Subject]:
    return sorted({t.subject for t in WORLD}, key=str)


@pytest.mark.parametrize(
    ("namespace", "permission"),
    [
        pytest.param(ns.name, name, id=f"{ns.name}.{name}")
        for ns in PERMISSION_MODEL.namespaces.values()
        for name in ns.permissions
    ],
)
async def test_lookup_agrees_with_check(namespace: str, permission: str) -> None:
    for subject in _subjects():
        expected = {
            object_id
            for object_id in _objects(namespace)
            if await check(PERMISSION_MODEL, WORLD, namespace, object_id, permission, subject)
        }
        found = await lookup(PERMISSION_MODEL, WORLD, namespace, permission, subject)
        assert found == expected, f"{namespace}.{permission} for {subject}"


async def test_lookup_examples() -> None:
    def sub(text: str) -> Subject:
        return Subject.parse(text)

    assert await lookup(PERMISSION_MODEL, WORLD, "Team", "verify_claim", sub("Agent:executor")) == {
        "acme"
    }
    assert await lookup(PERMISSION_MODEL, WORLD, "Team", "access", sub("Agent:executor")) == set()
    assert await lookup(PERMISSION_MODEL, WORLD, "Diary", "read", sub("Human:intern")) == {"notes"}
    assert await lookup(PERMISSION_MODEL, WORLD, "Diary", "write", sub("Agent:looper")) == {"ring"}
    assert await lookup(PERMISSION_MODEL, WORLD, "Task", "view", sub("Agent:curator")) == set()


class CountingSource:
    """Wraps a source and records each `tuples_of` batch."""

    def __init__(self, inner: TupleSet) -> None:
        self.inner = inner
        self.batches: list[list[ObjectRef]] = []

    async def tuples_of(
        self, objects: Sequence[ObjectRef]
    ) -> Mapping[ObjectRef, Sequence[RelationTuple]]:
        self.batches.append(list(objects))
        return await self.inner.tuples_of(objects)

    async def memberships(self, subject: Subject, max_depth: int) -> Mapping[Userset, int]:
        raise AssertionError("check never walks memberships")

    async def objects_related(
        self, namespace: str, relation: str, subject_ns: str, subject_ids: Collection[str]
    ) -> set[str]:
        raise AssertionError("check never reverses arrows")


async def test_check_loads_each_object_once() -> None:
    source = CountingSource(WORLD)
    # Diary.write tries team->write (Diary, Team), then writers: Group staff, then Group interns
    allowed = await check(
        PERMISSION_MODEL,
        source,
        "Diary",
        "notes",
        "write",
        Subject.parse("Human:intern"),
    )
    assert allowed
    loaded = [ref for batch in source.batches for ref in batch]
    assert len(loaded) == len(set(loaded))
    assert set(loaded) == {
        ObjectRef("Diary", "notes"),
        ObjectRef("Team", "acme"),
        ObjectRef("Group", "staff"),
        ObjectRef("Group", "interns"),
    }


def _chain(length: int) -> TupleSet:
    """Diary:deep#writers@Group:g0#members, g0 holds g1, … the last group holds Agent:far."""
    tuples = [RelationTuple.parse("Diary:deep#writers@Group:g0#members")]
    tuples += [
        RelationTuple.parse(f"Group:g{i}#members@Group:g{i + 1}#members") for i in range(length - 1)
    ]
    tuples.append(RelationTuple.parse(f"Group:g{length - 1}#members@Agent:far"))
    return TupleSet(tuples)


async def test_nesting_up_to_the_bound_is_followed() -> None:
    world = _chain(3)  # Agent:far is 3 subject-set hops below Diary:deep#writers
    far = Subject.parse("Agent:far")
    assert await check(PERMISSION_MODEL, world, "Diary", "deep", "write", far, max_depth=3)
    assert await lookup(PERMISSION_MODEL, world, "Diary", "write", far, max_depth=3) == {"deep"}


async def test_nesting_beyond_the_bound_is_an_evaluation_error_not_a_denial() -> None:
    world = _chain(4)
    far = Subject.parse("Agent:far")
    with pytest.raises(PermissionEvaluationFailed):
        await check(PERMISSION_MODEL, world, "Diary", "deep", "write", far, max_depth=3)
    with pytest.raises(PermissionEvaluationFailed):
        await lookup(PERMISSION_MODEL, world, "Diary", "write", far, max_depth=3)


async def test_a_long_cycle_terminates_within_the_bound() -> None:
    ring = [
        RelationTuple.parse(f"Group:r{i}#members@Group:r{(i + 1) % 5}#members") for i in range(5)
    ]
    world = TupleSet([*ring, RelationTuple.parse("Diary:d#writers@Group:r0#members")])
    stranger = Subject.parse("Agent:stranger")
    assert not await check(PERMISSION_MODEL, world, "Diary", "d", "write", stranger)
    assert await lookup(PERMISSION_MODEL, world, "Diary", "write", stranger) == set()
    world.add(RelationTuple.parse("Group:r3#members@Agent:stranger"))
    assert await check(PERMISSION_MODEL, world, "Diary", "d", "write", stranger)
    assert await lookup(PERMISSION_MODEL, world, "Diary", "write", stranger) == {"d"}


@pytest.mark.parametrize(
    ("namespace", "name"),
    [
        pytest.param("Diary", "delete", id="unknown-permission"),
        pytest.param("Project", "read", id="unknown-namespace"),
    ],
)
async def test_unknown_names_are_bugs_not_denials(namespace: str, name: str) -> None:
    with pytest.raises(UnknownPermission):
        await check(PERMISSION_MODEL, WORLD, namespace, "x", name, Subject.parse("Agent:owner"))
    with pytest.raises(UnknownPermission):
        await lookup(PERMISSION_MODEL, WORLD, namespace, name, Subject.parse("Agent:owner"))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Diary:d#writers@Group:g#members", id="group-subject-set"),
        pytest.param("Diary:d#team@Team:t", id="team-binding"),
        pytest.param("Task:t#claimant@Agent:a", id="claimant-agent"),
        pytest.param("Task:t#managers@Human:h", id="task-manager-human"),
    ],
)
def test_model_admits(text: str) -> None:
    PERMISSION_MODEL.validate_tuple(RelationTuple.parse(text))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Diary:d#writers@Team:t", id="team-as-writer"),
        pytest.param("Diary:d#read@Agent:a", id="permission-as-relation"),
        pytest.param("Task:t#claimant@Human:h", id="human-claimant"),
        pytest.param("Diary:d#team@Group:g#members", id="subject-set-as-team"),
        pytest.param("Project:p#owners@Agent:a", id="unknown-namespace"),
    ],
)
def test_model_rejects(text: str) -> None:
    with pytest.raises(ValidationFailed):
        PERMISSION_MODEL.validate_tuple(RelationTuple.parse(text))


def test_tuple_text_round_trips_and_accepts_uuids() -> None:
    text = "Diary:d1#writers@Group:g1#members"
    assert str(RelationTuple.parse(text)) == text
    assert RelationTuple.parse(text).subject == Subject(ns="Group", id="g1", relation="members")
    agent_id = uuid.uuid4()
    grant = RelationTuple.grant("Agent", agent_id, "self", Subject(ns="Agent", id=agent_id))
    assert grant.object_id == grant.subject_id == str(agent_id)
    assert grant.subject_relation == ""


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Diary:d1#writers", id="no-subject"),
        pytest.param("Diary:#writers@Agent:a", id="empty-id"),
        pytest.param("diary:d1#writers@Agent:a", id="lowercase-namespace"),
    ],
)
def test_malformed_tuples_are_rejected(text: str) -> None:
    with pytest.raises((ValueError, ValidationError)):
        RelationTuple.parse(text)


def test_payloads_are_bounded() -> None:
    one = RelationTuple.parse("Agent:a#self@Agent:a")
    assert len(TupleWrite(tuples=[one] * MAX_TUPLES_PER_CHANGE).tuples) == MAX_TUPLES_PER_CHANGE
    with pytest.raises(ValidationError):
        TupleWrite(tuples=[one] * (MAX_TUPLES_PER_CHANGE + 1))


def _broken(**namespaces: NamespaceDef) -> PermissionModel:
    return PermissionModel(namespaces={"Agent": NamespaceDef(name="Agent"), **namespaces})


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        pytest.param(
            NamespaceDef(name="Doc", permissions={"read": (rel("viewers"),)}),
            "has no 'viewers'",
            id="unknown-relation",
        ),
        pytest.param(
            NamespaceDef(
                name="Doc",
                relations={"viewers": (SubjectType.parse("Doc#read"),)},
                permissions={"read": (rel("viewers"),)},
            ),
            "not a relation",
            id="subject-set-names-permission",
        ),
        pytest.param(
            NamespaceDef(
                name="Doc",
                relations={"parent": (SubjectType.parse("Doc#parent"),)},
                permissions={"read": (arrow("parent", "read"),)},
            ),
            "whole objects",
            id="arrow-over-subject-set",
        ),
        pytest.param(
            NamespaceDef(
                name="Doc",
                relations={"parent": (SubjectType.parse("Doc"),)},
                permissions={"read": (arrow("parent", "read"),)},
            ),
            "recurse",
            id="recursive-permission",
        ),
        pytest.param(
            NamespaceDef(
                name="Doc",
                relations={"read": (SubjectType.parse("Agent"),)},
                permissions={"read": (rel("read"),)},
            ),
            "both relation and permission",
            id="name-clash",
        ),
        pytest.param(
            NamespaceDef(
                name="Doc",
                relations={"viewers": (SubjectType.parse("Agent"),)},
                permissions={"read": (rel("viewers", only="Robot"),)},
            ),
            "unknown namespace Robot",
            id="unknown-restriction",
        ),
    ],
)
def test_inconsistent_models_are_refused(definition: NamespaceDef, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _broken(Doc=definition)


# --- confinement to one team (a team-bound agent key) -----------------------------------------

TWO_TEAMS = TupleSet(
    RelationTuple.parse(text)
    for text in (
        "Team:home#owners@Agent:a",
        "Team:away#owners@Agent:a",
        "Team:third#owners@Agent:b",
        "Group:gh#parent@Team:home",
        "Group:gh#members@Agent:a",
        "Group:ga#parent@Team:away",
        "Group:ga#members@Agent:a",
        "Diary:dh#team@Team:home",
        "Diary:da#team@Team:away",
        "Diary:dt#team@Team:third",
        "Diary:dt#writers@Agent:a",
        "Diary:dt2#team@Team:third",
        "Diary:dt2#writers@Group:gh#members",
        "DiaryEntry:eh#parent@Diary:dh",
        "DiaryEntry:ea#parent@Diary:da",
        "ContextPack:ph#parent@Diary:dh",
        "ContextPack:pa#parent@Diary:da",
        "Task:th#team@Team:home",
        "Task:ta#team@Team:away",
        "Task:tt#team@Team:third",
        "Task:tt#managers@Agent:a",
        "Agent:a#self@Agent:a",
    )
)
AGENT_A = Subject(ns="Agent", id="a")


@pytest.mark.parametrize(
    ("obj", "permission", "free", "confined"),
    [
        pytest.param("Team:home", "manage", True, True, id="own-team"),
        pytest.param("Team:away", "manage", True, False, id="other-team"),
        pytest.param("Group:ga", "access", True, False, id="other-teams-group"),
        pytest.param("Diary:dh", "read", True, True, id="own-diary"),
        pytest.param("Diary:da", "read", True, False, id="other-teams-diary"),
        pytest.param("Diary:dt", "write", True, False, id="granted-diary-of-a-third-team"),
        pytest.param("Diary:dt2", "write", True, False, id="granted-through-own-group"),
        pytest.param("DiaryEntry:ea", "view", True, False, id="other-teams-entry"),
        pytest.param("DiaryEntry:eh", "view", True, True, id="own-entry"),
        pytest.param("ContextPack:pa", "read", True, False, id="other-teams-pack"),
        pytest.param("Task:ta", "view", True, False, id="other-teams-task"),
        pytest.param("Task:tt", "cancel", True, False, id="task-grant-elsewhere"),
        pytest.param("Agent:a", "act_as", True, True, id="no-team-owns-an-agent"),
        pytest.param("Diary:orphan", "read", False, False, id="unowned-diary"),
    ],
)
async def test_a_confined_subject_holds_nothing_another_team_owns(
    obj: str, permission: str, free: bool, confined: bool
) -> None:
    namespace, object_id = obj.split(":")
    args = (PERMISSION_MODEL, TWO_TEAMS, namespace, object_id, permission, AGENT_A)
    assert await check(*args) is free
    assert await check(*args, within_team="home") is confined


@pytest.mark.parametrize(
    ("namespace", "permission"),
    [
        pytest.param(ns.name, name, id=f"{ns.name}.{name}")
        for ns in PERMISSION_MODEL.namespaces.values()
        for name in ns.permissions
    ],
)
async def test_a_confined_lookup_agrees_with_confined_checks(
    namespace: str, permission: str
) -> None:
    objects = {t.object_id for t in TWO_TEAMS if t.namespace == namespace}
    for team in ("home", "away", "third"):
        expected = {
            object_id
            for object_id in objects
            if await check(
                PERMISSION_MODEL,
                TWO_TEAMS,
                namespace,
                object_id,
                permission,
                AGENT_A,
                within_team=team,
            )
        }
        found = await lookup(
            PERMISSION_MODEL, TWO_TEAMS, namespace, permission, AGENT_A, within_team=team
        )
        assert found == expected, f"{namespace}.{permission} within {team}"


def test_every_team_resource_has_an_owner_path() -> None:
    owned = {ns.name for ns in PERMISSION_MODEL.namespaces.values() if ns.owner is not None}
    assert owned == {"Team", "Group", "Diary", "DiaryEntry", "ContextPack", "Task"}


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        pytest.param(
            NamespaceDef(
                name="Doc", relations={"team": (SubjectType.parse("Agent"),)}, owner=("team",)
            ),
            "not Team",
            id="owner-path-ends-elsewhere",
        ),
        pytest.param(
            NamespaceDef(
                name="Doc", relations={"team": (SubjectType.parse("Agent"),)}, owner=("boss",)
            ),
            "not one whole namespace",
            id="owner-path-unknown-relation",
        ),
    ],
)
def test_broken_owner_paths_are_refused(definition: NamespaceDef, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _broken(Doc=definition)
