"""The permission engine on real Postgres: every permission of SPEC 5's table, allowed and
denied; lookups; tuple writes through the activities; outages answer 503, never a denial."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import asyncpg
import pytest
from temporalio.testing import ActivityEnvironment

from activities.permissions import PermissionActivities
from infra.db import create_pool
from infra.devstack import Postgres
from infra.permissions import (
    PostgresPermissionEngine,
    TupleRepository,
    delete_object,
    list_tuples,
    write_tuples,
)
from schemas.errors import PermissionEvaluationFailed, ValidationFailed
from schemas.kernel.permissions import (
    PERMISSION_MODEL,
    ObjectDelete,
    RelationTuple,
    Subject,
    TupleDelete,
    TupleReplace,
    TupleSet,
    TupleWrite,
    check,
)

WORLD = [
    RelationTuple.parse(text)
    for text in (
        # team acme, every role, an agent and a human where the difference matters
        "Team:acme#owners@Agent:owner",
        "Team:acme#owners@Human:founder",
        "Team:acme#managers@Agent:manager",
        "Team:acme#executors@Agent:executor",
        "Team:acme#executors@Human:executor-human",
        "Team:acme#members@Human:member",
        "Team:acme#members@Agent:member-agent",
        "Team:rival#owners@Agent:rival",
        "Team:solo#owners@Agent:soloist",  # a personal team
        # groups: staff holds interns (nesting); loop-a and loop-b hold each other (a cycle)
        "Group:staff#parent@Team:acme",
        "Group:staff#members@Agent:reviewer",
        "Group:staff#members@Group:interns#members",
        "Group:interns#parent@Team:acme",
        "Group:interns#members@Human:intern",
        "Group:loop-a#parent@Team:solo",
        "Group:loop-a#members@Group:loop-b#members",
        "Group:loop-b#parent@Team:solo",
        "Group:loop-b#members@Group:loop-a#members",
        "Group:loop-b#members@Agent:looper",
        # diaries
        "Diary:notes#team@Team:acme",
        "Diary:notes#writers@Agent:writer",
        "Diary:notes#writers@Group:staff#members",
        "Diary:notes#managers@Human:curator",
        "Diary:journal#team@Team:solo",
        "Diary:journal#writers@Group:loop-a#members",
        "Diary:rival-log#team@Team:rival",
        "DiaryEntry:entry-1#parent@Diary:notes",
        "ContextPack:pack-1#parent@Diary:notes",
        "Agent:owner#self@Agent:owner",
        "Agent:executor#self@Agent:executor",
        # a task of acme whose provenance diary is notes, claimed by the agent executor
        "Task:task-1#team@Team:acme",
        "Task:task-1#parent@Diary:notes",
        "Task:task-1#claimant@Agent:executor",
        "Task:task-1#writers@Agent:task-writer",
        "Task:task-1#managers@Human:task-manager",
    )
]


class Case(NamedTuple):
    obj: str
    permission: str
    subject: str
    allowed: bool
    why: str

    def param(self) -> Any:
        verdict = "allow" if self.allowed else "deny"
        return pytest.param(
            self.obj,
            self.permission,
            self.subject,
            self.allowed,
            id=f"{self.obj}.{self.permission}-{verdict}-{self.why}",
        )


CASES = [
    # Team
    Case("Team:acme", "access", "Agent:owner", True, "owner"),
    Case("Team:acme", "access", "Agent:manager", True, "manager"),
    Case("Team:acme", "access", "Human:member", True, "human-member"),
    Case("Team:acme", "access", "Agent:executor", False, "bare-executor"),
    Case("Team:acme", "access", "Agent:rival", False, "other-team"),
    Case("Team:acme", "write", "Agent:manager", True, "manager"),
    Case("Team:acme", "write", "Human:member", False, "member"),
    Case("Team:acme", "manage", "Human:founder", True, "human-owner"),
    Case("Team:acme", "manage", "Agent:manager", False, "manager"),
    Case("Team:acme", "propose_tasks", "Agent:executor", True, "agent-executor"),
    Case("Team:acme", "propose_tasks", "Human:executor-human", False, "human-executor"),
    Case("Team:acme", "propose_tasks", "Agent:manager", True, "manager"),
    Case("Team:acme", "propose_tasks", "Agent:member-agent", False, "member"),
    Case("Team:acme", "manage_credentials", "Agent:manager", True, "manager"),
    Case("Team:acme", "manage_credentials", "Agent:executor", False, "executor"),
    Case("Team:acme", "manage_members", "Agent:owner", True, "owner"),
    Case("Team:acme", "manage_members", "Agent:member-agent", False, "member"),
    Case("Team:acme", "verify_claim", "Human:executor-human", True, "executor-is-member"),
    Case("Team:acme", "verify_claim", "Agent:member-agent", True, "member"),
    Case("Team:acme", "verify_claim", "Agent:rival", False, "other-team"),
    Case("Team:solo", "manage", "Agent:soloist", True, "personal-owner"),
    # Group
    Case("Group:staff", "access", "Agent:reviewer", True, "member"),
    Case("Group:staff", "access", "Human:intern", True, "nested-group"),
    Case("Group:staff", "access", "Agent:owner", False, "team-owner-not-member"),
    Case("Group:staff", "manage", "Agent:manager", True, "team-manager"),
    Case("Group:staff", "manage", "Agent:reviewer", False, "member"),
    # Diary
    Case("Diary:notes", "read", "Human:member", True, "team-access"),
    Case("Diary:notes", "read", "Agent:reviewer", True, "group-grant"),
    Case("Diary:notes", "read", "Human:intern", True, "nested-group-grant"),
    Case("Diary:notes", "read", "Human:curator", True, "manager-grant"),
    Case("Diary:notes", "read", "Agent:executor", False, "bare-executor"),
    Case("Diary:notes", "read", "Agent:rival", False, "other-team"),
    Case("Diary:notes", "write", "Agent:owner", True, "team-owner"),
    Case("Diary:notes", "write", "Agent:writer", True, "writer-grant"),
    Case("Diary:notes", "write", "Agent:reviewer", True, "group-grant"),
    Case("Diary:notes", "write", "Human:member", False, "team-member"),
    Case("Diary:notes", "write", "Group:staff#members", True, "subject-set"),
    Case("Diary:notes", "manage", "Agent:owner", True, "team-owner"),
    Case("Diary:notes", "manage", "Human:curator", True, "manager-grant"),
    Case("Diary:notes", "manage", "Agent:manager", False, "team-manager"),
    Case("Diary:notes", "manage", "Agent:writer", False, "writer-grant"),
    Case("Diary:notes", "manage", "Group:staff#members", False, "subject-set"),
    Case("Diary:notes", "verify_claim", "Agent:executor", True, "team-executor"),
    Case("Diary:notes", "verify_claim", "Agent:writer", False, "grant-is-not-membership"),
    Case("Diary:rival-log", "read", "Agent:owner", False, "other-team"),
    Case("Diary:journal", "write", "Agent:looper", True, "through-group-cycle"),
    Case("Diary:journal", "write", "Agent:rival", False, "group-cycle-terminates"),
    Case("Diary:journal", "read", "Agent:soloist", True, "personal-team"),
    # DiaryEntry
    Case("DiaryEntry:entry-1", "view", "Human:intern", True, "nested-group"),
    Case("DiaryEntry:entry-1", "view", "Agent:rival", False, "other-team"),
    Case("DiaryEntry:entry-1", "edit", "Agent:writer", True, "writer"),
    Case("DiaryEntry:entry-1", "edit", "Human:member", False, "reader"),
    Case("DiaryEntry:entry-1", "delete", "Agent:reviewer", True, "group-writer"),
    Case("DiaryEntry:entry-1", "delete", "Human:member", False, "reader"),
    # Agent
    Case("Agent:owner", "act_as", "Agent:owner", True, "self"),
    Case("Agent:owner", "act_as", "Agent:executor", False, "other-agent"),
    Case("Agent:owner", "act_as", "Human:founder", False, "human"),
    # ContextPack
    Case("ContextPack:pack-1", "read", "Human:member", True, "team-access"),
    Case("ContextPack:pack-1", "read", "Agent:executor", False, "bare-executor"),
    Case("ContextPack:pack-1", "manage", "Human:curator", True, "diary-manager"),
    Case("ContextPack:pack-1", "manage", "Agent:writer", False, "diary-writer"),
    Case("ContextPack:pack-1", "verify_claim", "Human:executor-human", True, "membership"),
    Case("ContextPack:pack-1", "verify_claim", "Human:intern", False, "group-grant"),
    # Task
    Case("Task:task-1", "view", "Human:member", True, "team-access"),
    Case("Task:task-1", "view", "Agent:manager", True, "team-manager"),
    Case("Task:task-1", "view", "Agent:task-writer", True, "writer-grant"),
    Case("Task:task-1", "view", "Human:task-manager", True, "manager-grant"),
    Case("Task:task-1", "view", "Agent:writer", False, "diary-writer-grant"),
    Case("Task:task-1", "view", "Human:curator", False, "diary-manager-grant"),
    Case("Task:task-1", "view", "Agent:executor", False, "bare-executor"),
    Case("Task:task-1", "claim", "Agent:executor", True, "agent-executor"),
    Case("Task:task-1", "claim", "Human:executor-human", False, "human-executor"),
    Case("Task:task-1", "claim", "Agent:task-writer", True, "writer-grant"),
    Case("Task:task-1", "claim", "Human:task-manager", True, "manager-grant"),
    Case("Task:task-1", "claim", "Agent:writer", False, "diary-writer-grant"),
    Case("Task:task-1", "claim", "Agent:reviewer", False, "diary-group-grant"),
    Case("Task:task-1", "claim", "Agent:owner", False, "owner-not-executor"),
    Case("Task:task-1", "report", "Agent:executor", True, "claimant"),
    Case("Task:task-1", "report", "Agent:task-writer", False, "not-claimant"),
    Case("Task:task-1", "cancel", "Agent:owner", True, "team-owner"),
    Case("Task:task-1", "cancel", "Agent:manager", True, "team-manager"),
    Case("Task:task-1", "cancel", "Human:task-manager", True, "manager-grant"),
    Case("Task:task-1", "cancel", "Agent:task-writer", False, "writer-grant"),
    Case("Task:task-1", "cancel", "Human:member", False, "team-member"),
    Case("Task:task-1", "cancel", "Human:curator", False, "diary-manager-grant"),
]


@pytest.fixture(scope="module")
async def world(db_pool: asyncpg.Pool) -> TupleSet:
    async with db_pool.acquire() as conn, conn.transaction():
        assert await write_tuples(conn, WORLD) == len(WORLD)
    return TupleSet(WORLD)


@pytest.fixture(scope="module")
async def engine(database_url: str, world: TupleSet) -> AsyncIterator[PostgresPermissionEngine]:
    """On a read-only pool, as the API holds it."""
    pool = await create_pool(database_url, read_only=True)
    yield PostgresPermissionEngine(pool)
    await pool.close()


def test_every_permission_of_the_table_is_allowed_and_denied_somewhere() -> None:
    decided: dict[tuple[str, str], set[bool]] = {}
    for c in CASES:
        decided.setdefault((c.obj.split(":")[0], c.permission), set()).add(c.allowed)
    every = {
        (ns.name, permission)
        for ns in PERMISSION_MODEL.namespaces.values()
        for permission in ns.permissions
    }
    assert set(decided) == every
    assert all(outcomes == {True, False} for outcomes in decided.values())


@pytest.mark.parametrize(("obj", "permission", "subject", "allowed"), [c.param() for c in CASES])
async def test_check(
    engine: PostgresPermissionEngine,
    world: TupleSet,
    obj: str,
    permission: str,
    subject: str,
    allowed: bool,
) -> None:
    namespace, object_id = obj.split(":")
    who = Subject.parse(subject)
    assert await engine.check(namespace, object_id, permission, who) is allowed
    # the in-memory reference evaluator agrees on the same tuples
    assert await check(PERMISSION_MODEL, world, namespace, object_id, permission, who) is allowed


@pytest.mark.parametrize(
    ("namespace", "permission", "subject", "expected"),
    [
        pytest.param("Team", "verify_claim", "Agent:executor", {"acme"}, id="my-teams-executor"),
        pytest.param("Team", "access", "Agent:executor", set(), id="team-access-not-executor"),
        pytest.param("Team", "manage", "Agent:soloist", {"solo"}, id="personal-team"),
        pytest.param("Diary", "read", "Agent:owner", {"notes"}, id="diaries-of-my-team"),
        pytest.param("Diary", "read", "Human:intern", {"notes"}, id="diaries-via-nested-group"),
        pytest.param("Diary", "write", "Agent:looper", {"journal"}, id="diaries-via-cycle"),
        pytest.param("Diary", "read", "Agent:rival", {"rival-log"}, id="only-own-diaries"),
        pytest.param("DiaryEntry", "view", "Human:intern", {"entry-1"}, id="entries-generic"),
        pytest.param("Task", "claim", "Agent:executor", {"task-1"}, id="claimable-tasks"),
        pytest.param("Task", "view", "Agent:writer", set(), id="diary-grant-no-tasks"),
    ],
)
async def test_lookup(
    engine: PostgresPermissionEngine,
    namespace: str,
    permission: str,
    subject: str,
    expected: set[str],
) -> None:
    assert await engine.lookup(namespace, permission, Subject.parse(subject)) == expected


@pytest.mark.parametrize(
    ("namespace", "permission"),
    [
        pytest.param(ns.name, permission, id=f"{ns.name}.{permission}")
        for ns in PERMISSION_MODEL.namespaces.values()
        for permission in ns.permissions
    ],
)
async def test_lookup_agrees_with_check(
    engine: PostgresPermissionEngine, namespace: str, permission: str
) -> None:
    objects = sorted({t.object_id for t in WORLD if t.namespace == namespace})
    for subject in sorted({t.subject for t in WORLD}, key=str):
        expected = {o for o in objects if await engine.check(namespace, o, permission, subject)}
        assert await engine.lookup(namespace, permission, subject) == expected, str(subject)


async def test_delete_object_removes_its_tuples_and_those_naming_it(
    db_pool: asyncpg.Pool, engine: PostgresPermissionEngine
) -> None:
    doomed = [
        RelationTuple.parse(text)
        for text in (
            "Diary:doomed#team@Team:acme",
            "Diary:doomed#writers@Agent:writer",
            "DiaryEntry:doomed-entry#parent@Diary:doomed",
            "ContextPack:doomed-pack#parent@Diary:doomed",
        )
    ]
    member = Subject.parse("Human:member")
    async with db_pool.acquire() as conn, conn.transaction():
        await write_tuples(conn, doomed)
    assert await engine.check("DiaryEntry", "doomed-entry", "view", member)

    async with db_pool.acquire() as conn, conn.transaction():
        assert await delete_object(conn, "Diary", "doomed") == 4
        assert await list_tuples(conn, "Diary", "doomed") == []
        assert await list_tuples(conn, "DiaryEntry", "doomed-entry") == []
        assert await delete_object(conn, "Diary", "doomed") == 0
        assert await list_tuples(conn, "Team", "acme") != []
    assert not await engine.check("DiaryEntry", "doomed-entry", "view", member)
    assert not await engine.check("Diary", "doomed", "read", member)


async def test_activities_are_idempotent(
    db_pool: asyncpg.Pool, engine: PostgresPermissionEngine
) -> None:
    activities = PermissionActivities(TupleRepository(db_pool))
    env = ActivityEnvironment()
    writer = Subject(ns="Agent", id=str(uuid.uuid4()))
    diary = str(uuid.uuid4())
    grant = RelationTuple.grant("Diary", diary, "writers", writer)
    binding = RelationTuple.parse(f"Diary:{diary}#team@Team:acme")
    moved = RelationTuple.parse(f"Diary:{diary}#team@Team:rival")

    write = TupleWrite(tuples=[grant, binding, grant])
    assert (await env.run(activities.write_tuples, write)).written == 2
    assert (await env.run(activities.write_tuples, write)).written == 0  # a retry
    assert await engine.check("Diary", diary, "write", writer)
    assert await engine.check("Diary", diary, "read", Subject.parse("Human:member"))

    replace = TupleReplace(delete=[binding], write=[moved])
    result = await env.run(activities.replace_tuples, replace)
    assert (result.deleted, result.written) == (1, 1)
    retried = await env.run(activities.replace_tuples, replace)
    assert (retried.deleted, retried.written) == (0, 0)
    assert not await engine.check("Diary", diary, "read", Subject.parse("Human:member"))
    assert await engine.check("Diary", diary, "read", Subject.parse("Agent:rival"))

    assert (await env.run(activities.delete_tuples, TupleDelete(tuples=[grant]))).deleted == 1
    assert (await env.run(activities.delete_tuples, TupleDelete(tuples=[grant]))).deleted == 0
    assert not await engine.check("Diary", diary, "write", writer)

    gone = ObjectDelete(namespace="Diary", object_id=diary)
    assert (await env.run(activities.delete_object, gone)).deleted == 1
    assert (await env.run(activities.delete_object, gone)).deleted == 0


async def test_activity_refuses_a_tuple_the_model_does_not_admit(db_pool: asyncpg.Pool) -> None:
    activities = PermissionActivities(TupleRepository(db_pool))
    valid = RelationTuple.parse("Diary:mixed#writers@Agent:writer")
    invalid = RelationTuple.parse("Diary:mixed#writers@Team:acme")
    with pytest.raises(ValidationFailed):
        await ActivityEnvironment().run(
            activities.write_tuples, TupleWrite(tuples=[valid, invalid])
        )
    async with db_pool.acquire() as conn:
        assert await list_tuples(conn, "Diary", "mixed") == []


async def _assert_unavailable(engine: PostgresPermissionEngine) -> None:
    owner = Subject.parse("Agent:owner")
    with pytest.raises(PermissionEvaluationFailed) as raised:
        await engine.check("Diary", "notes", "read", owner)
    assert raised.value.status == 503
    with pytest.raises(PermissionEvaluationFailed):
        await engine.lookup("Diary", "read", owner)


async def test_closed_pool_is_503_not_a_denial(database_url: str) -> None:
    pool = await create_pool(database_url, read_only=True, min_size=1, max_size=1)
    await pool.close()
    await _assert_unavailable(PostgresPermissionEngine(pool))


async def test_dropped_database_is_503_not_a_denial(postgres: Postgres) -> None:
    name = f"t_perm_dropped_{uuid.uuid4().hex[:8]}"
    pool = await create_pool(
        postgres.ensure_database(name, template="cairn_template"), read_only=True
    )
    try:
        assert not await PostgresPermissionEngine(pool).check(
            "Diary", "notes", "read", Subject.parse("Agent:owner")
        )
        postgres.drop_database(name)
        await _assert_unavailable(PostgresPermissionEngine(pool))
    finally:
        pool.terminate()
        postgres.drop_database(name)


async def test_missing_table_is_503_not_a_denial(postgres: Postgres) -> None:
    name = f"t_perm_empty_{uuid.uuid4().hex[:8]}"
    pool = await create_pool(postgres.ensure_database(name), read_only=True)
    try:
        await _assert_unavailable(PostgresPermissionEngine(pool))
    finally:
        await pool.close()
        postgres.drop_database(name)
