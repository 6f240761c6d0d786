"""A fixed number of statements per request, whatever the depth of the grant graph.

Every statement an API process sends is counted on its pools (`infra.db.StatementTally`: each
`BEGIN`, `COMMIT` and `set_config` is a statement too). The hot paths have a budget, the
rate-limit count included:

- an authenticated `GET /diaries/{id}`: 3 (the credential, the diary with its permission
  closure, the rate count);
- `POST /diary/search`: 4 (the credential, the scope, the rate count, and the search itself:
  one statement, `search_diaries`, however many arms, plans and links it runs), which the grant
  graph does not change either;
- the API side of an entry create (the workflow's activities are the worker's): 3 (the
  credential, the diary with its closure, the rate count; the workflow's result carries the
  entry it wrote, so nothing is read back).
- a task claim: 5 (the credential, the task with its permission closure, the rate count, then
  the task and its new attempt read back; the Update between is the workflow's).

A diary is granted to a group nested `depth` levels deep, its team has members, and the caller
is at the bottom of the nesting; every route is counted at two depths, for an OAuth2 token, an
agent key and a human session (and a team manager's team-bound key, confined to the team), and
must cost the same at both, within its budget. The rate
buckets are strict here (below the lease threshold), so each request asks the shared bucket
once; a leased bucket asks less often, never more.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import pytest
from actors import TEAM_HEADER, Actor, agent_key_secret, holding_key, join_team
from aiohttp import web

from api import keys
from api.app import Deps, create_app
from api.ratelimit import Quota, RateLimiter, Refusal
from infra.db import StatementTally, create_pool
from infra.devstack import free_port
from infra.permissions import Closure, PostgresPermissionEngine, TupleRepository
from infra.repos.search import SearchRepo
from infra.settings import Rate
from schemas.embedding import SearchFilters
from schemas.errors import PermissionEvaluationFailed
from schemas.kernel.permissions import (
    PERMISSION_MODEL,
    RelationTuple,
    Subject,
    TupleSet,
    check,
    lookup,
)
from schemas.limits import RATE_LEASE_TTL_SEC

T = TypeVar("T")

GET_DIARY_BUDGET = 3
SEARCH_BUDGET = 4
SEARCH_OWN = 1  # the search's own statement: plan, arms, links and rows
ENTRY_CREATE_BUDGET = 3
CLAIM_BUDGET = 5
WORD = "granite"
DEPTHS = (1, 6)
# strict buckets (below RATE_LEASE_MIN_LIMIT a period): one statement of the shared bucket each
STRICT_RATES = {
    f"rate_limit_{bucket}": "59/second" for bucket in ("global_auth", "global_read", "search")
}


@asynccontextmanager
async def counted_api(stack: Any) -> AsyncIterator[tuple[web.Application, str]]:
    """An app of the stack with rate limits on, on a port of its own (its pools are its own,
    so their tallies hold what this app sent and nothing else)."""
    port = free_port()
    settings = stack.settings.model_copy(
        update={"api_port": port, "rate_limit_enabled": True, **STRICT_RATES}
    )
    app = create_app(settings, deps=Deps(temporal=stack.temporal))
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield app, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def tallies(app: web.Application) -> list[StatementTally]:
    pools = [app[keys.READ_POOL], app[keys.MESSAGE_WRITER], app[keys.RATE_LIMITER].pool]
    return [pool.tally for pool in pools]


async def statements(app: web.Application, call: Callable[[], Awaitable[None]]) -> int:
    """What one call sends over every pool of the app. The least of three runs: a process's
    own now-and-then reads (the signing keys it refreshes every minute) are nobody's request."""
    sent = []
    for _ in range(3):
        before = sum(tally.sent for tally in tallies(app))
        await call()
        sent.append(sum(tally.sent for tally in tallies(app)) - before)
    return min(sent)


@dataclass
class Graph:
    diary: dict[str, Any]
    callers: dict[str, Actor]


async def nested_grant(
    db_pool: Any, owner: Actor, actors: Any, depth: int, http: aiohttp.ClientSession
) -> Graph:
    """A private diary of `owner`'s team, writable by a group that nests `depth` groups; an
    agent and a human sit in the innermost one. The team has members of its own."""
    status, made = await owner.call("POST", "/teams", json={"name": f"crew {depth}"})
    assert status == 201, made
    team = made["id"]
    status, diary = await owner.call(
        "POST", "/diaries", json={"name": f"deep-{depth}", "visibility": "private"}, team=team
    )
    assert status == 201, diary
    for _ in range(2):
        await join_team(owner, team, await actors.agent(), "member")
    manager = await actors.agent()
    await join_team(owner, team, manager, "manager")
    agent, human = await actors.agent(), await actors.human()
    groups = [str(uuid.uuid4()) for _ in range(depth)]
    tuples = [RelationTuple.parse(f"Diary:{diary['id']}#writers@Group:{groups[0]}#members")]
    for outer, inner in itertools.pairwise(groups):
        tuples.append(RelationTuple.parse(f"Group:{outer}#members@Group:{inner}#members"))
    tuples += [RelationTuple.parse(f"Group:{g}#parent@Team:{team}") for g in groups]
    for member in (agent, human):
        subject = Subject(ns=member.subject_ns, id=str(member.subject_id))
        tuples.append(RelationTuple.grant("Group", groups[-1], "members", subject))
    await TupleRepository(db_pool).write(tuples)
    entry = {"content": f"{WORD} at depth {depth}", "tags": ["budget"]}
    await ok(owner, "POST", f"/diaries/{diary['id']}/entries", json=entry, team=team)
    key = holding_key(agent, await agent_key_secret(agent, "identity", None))
    # a daemon's credential: a key bound to the team (confined to it), sent with its header
    team_key = holding_key(manager, await agent_key_secret(manager, "team", team))
    team_key.auth[TEAM_HEADER] = team
    callers = {"oauth2": agent, "agent_key": key, "session": human, "team_key": team_key}
    return Graph(diary, {k: dataclasses.replace(c, http=http) for k, c in callers.items()})


@pytest.fixture(scope="module")
async def counted(stack: Any) -> AsyncIterator[tuple[web.Application, aiohttp.ClientSession]]:
    async with counted_api(stack) as (app, base_url):
        cookies = aiohttp.DummyCookieJar()
        async with aiohttp.ClientSession(base_url=base_url, cookie_jar=cookies) as http:
            yield app, http


@pytest.fixture(scope="module")
async def graphs(actors: Any, db_pool: Any, counted: Any) -> dict[int, Graph]:
    owner, http = await actors.agent(), counted[1]
    return {depth: await nested_grant(db_pool, owner, actors, depth, http) for depth in DEPTHS}


async def ok(actor: Actor, method: str, path: str, **kwargs: Any) -> None:
    status, body = await actor.call(method, path, **kwargs)
    assert status in (200, 201), (method, path, status, body)


async def per_depth(
    counted: Any, graphs: dict[int, Graph], route: Callable[[Actor, Graph], Awaitable[None]]
) -> dict[str, dict[int, int]]:
    app = counted[0]
    found: dict[str, dict[int, int]] = {}
    for depth, graph in graphs.items():
        for kind, caller in graph.callers.items():
            call = functools.partial(route, caller, graph)
            found.setdefault(kind, {})[depth] = await statements(app, call)
    print(found)
    return found


def assert_within(found: dict[str, dict[int, int]], budget: int) -> None:
    for kind, by_depth in found.items():
        assert len(set(by_depth.values())) == 1, (kind, by_depth)
        assert max(by_depth.values()) <= budget, (kind, by_depth)


async def test_reading_a_diary_costs_the_same_at_any_depth(counted: Any, graphs: Any) -> None:
    async def get(caller: Actor, graph: Graph) -> None:
        await ok(caller, "GET", f"/diaries/{graph.diary['id']}")

    assert_within(await per_depth(counted, graphs, get), GET_DIARY_BUDGET)


async def own_search(app: web.Application, graph: Graph) -> int:
    """What the search itself sends (plan, arms, links and rows), asked directly."""
    filters = SearchFilters(diary_ids=(uuid.UUID(graph.diary["id"]),), mode="fulltext")
    repo = SearchRepo(app[keys.READ_POOL])

    async def search() -> None:
        assert (await repo.search(WORD, None, filters)).hits

    return await statements(app, search)


async def assert_search_within(counted: Any, graphs: dict[int, Graph], body: Any) -> None:
    async def search(caller: Actor, graph: Graph) -> None:
        await ok(caller, "POST", "/diary/search", json=body(graph))

    assert_within(await per_depth(counted, graphs, search), SEARCH_BUDGET)
    own = {depth: await own_search(counted[0], graph) for depth, graph in graphs.items()}
    assert set(own.values()) == {SEARCH_OWN}, own


async def test_searching_a_diary_costs_the_same_at_any_depth(counted: Any, graphs: Any) -> None:
    def body(graph: Graph) -> dict[str, Any]:
        return {"query": WORD, "diaryId": graph.diary["id"], "mode": "fulltext"}

    await assert_search_within(counted, graphs, body)


async def test_searching_every_diary_costs_the_same_at_any_depth(counted: Any, graphs: Any) -> None:
    await assert_search_within(counted, graphs, lambda _: {"query": WORD, "mode": "fulltext"})


async def test_a_hybrid_search_costs_the_same_at_any_depth(counted: Any, graphs: Any) -> None:
    """Both arms, the vector arm's plan and its settings included: still one statement (the
    pool's pgvector version is read on its first search only)."""

    def body(graph: Graph) -> dict[str, Any]:
        return {"query": WORD, "diaryId": graph.diary["id"]}

    graph = graphs[DEPTHS[0]]
    status, found = await graph.callers["oauth2"].call("POST", "/diary/search", json=body(graph))
    assert status == 200 and found["search_type"] == "hybrid", (status, found)
    await assert_search_within(counted, graphs, body)


async def test_creating_an_entry_costs_the_same_at_any_depth(counted: Any, graphs: Any) -> None:
    async def create(caller: Actor, graph: Graph) -> None:
        body = {"content": f"{WORD} {uuid.uuid4().hex}", "tags": ["budget"]}
        await ok(caller, "POST", f"/diaries/{graph.diary['id']}/entries", json=body)

    assert_within(await per_depth(counted, graphs, create), ENTRY_CREATE_BUDGET)


async def test_a_claim_reads_its_task_and_permission_in_one_statement(
    counted: Any, actors: Any
) -> None:
    """The claim decides on the task and on the caller's `claim` in one statement (the task
    row read with its permission closure), not two reads holding two pooled connections."""
    app, http = counted
    owner, executor = await actors.agent(), await actors.agent()
    status, team = await owner.call("POST", "/teams", json={"name": "claim budget"})
    assert status == 201, team
    await join_team(owner, team["id"], executor, "executor")
    status, diary = await owner.call("POST", "/diaries", json={"name": "work"}, team=team["id"])
    assert status == 201, diary
    body = {
        "taskType": "freeform",
        "teamId": team["id"],
        "diaryId": diary["id"],
        "input": {"brief": "a haiku"},
    }
    tasks = []
    for _ in range(3):
        status, task = await owner.call("POST", "/tasks", json=body, team=team["id"])
        assert status == 201, task
        tasks.append(task["id"])
    claimant = dataclasses.replace(executor, http=http)

    async def claim() -> None:
        await ok(claimant, "POST", f"/tasks/{tasks.pop()}/claim", json={})

    assert await statements(app, claim) <= CLAIM_BUDGET


# --- the permission engine: one statement a check or a lookup, the reference's answers ---------


def chain(diary: str, depth: int, member: Subject) -> list[RelationTuple]:
    """`diary` of a team, writable through `depth` nested groups; `member` in the innermost."""
    groups = [f"g{n}-{diary}" for n in range(depth)]
    tuples = [
        RelationTuple.parse(f"Diary:{diary}#team@Team:t-{diary}"),
        RelationTuple.parse(f"Diary:{diary}#writers@Group:{groups[0]}#members"),
        RelationTuple.grant("Group", groups[-1], "members", member),
    ]
    for outer, inner in itertools.pairwise(groups):
        tuples.append(RelationTuple.parse(f"Group:{outer}#members@Group:{inner}#members"))
    return tuples


@pytest.fixture(scope="module")
async def engine_pool(database_url: str) -> AsyncIterator[Any]:
    pool = await create_pool(database_url, read_only=True)
    yield pool
    await pool.close()


@pytest.fixture(scope="module")
def engine(engine_pool: Any) -> PostgresPermissionEngine:
    """Following at most 4 subject sets, so that the chains below go past it."""
    return PostgresPermissionEngine(engine_pool, max_depth=4)


async def decided(run: Awaitable[T]) -> T | type[PermissionEvaluationFailed]:
    try:
        return await run
    except PermissionEvaluationFailed:
        return PermissionEvaluationFailed


@pytest.mark.parametrize("depth", [1, 2, 4, 5, 7])
async def test_a_check_or_a_lookup_is_one_statement_at_any_depth(
    db_pool: Any, engine_pool: Any, engine: PostgresPermissionEngine, depth: int
) -> None:
    diary, member = f"d{depth}-{uuid.uuid4().hex[:6]}", Subject(ns="Agent", id=uuid.uuid4().hex)
    tuples = chain(diary, depth, member)
    await TupleRepository(db_pool).write(tuples)
    reference = TupleSet(tuples)
    tally = engine_pool.tally
    for permission in ("read", "write", "manage"):
        before = tally.sent
        got = await decided(engine.check("Diary", diary, permission, member))
        assert tally.sent - before == 1
        expected = await decided(
            check(PERMISSION_MODEL, reference, "Diary", diary, permission, member, max_depth=4)
        )
        assert got == expected, (permission, depth)
    before = tally.sent
    found = await decided(engine.lookup("Diary", "write", member))
    assert tally.sent - before == 1
    assert found == await decided(
        lookup(PERMISSION_MODEL, reference, "Diary", "write", member, max_depth=4)
    )


@pytest.mark.parametrize("depth", [1, 3, 5])
async def test_a_check_reads_on_past_what_it_was_given(
    db_pool: Any, engine: PostgresPermissionEngine, depth: int
) -> None:
    """A closure that stops short (here: the diary's own tuples only) is read on from the
    database, level by level: the answer never depends on how far the closure reached."""
    diary, member = f"p{depth}-{uuid.uuid4().hex[:6]}", Subject(ns="Agent", id=uuid.uuid4().hex)
    tuples = chain(diary, depth, member)
    await TupleRepository(db_pool).write(tuples)
    own = [t for t in tuples if t.namespace == "Diary"]
    rows = [
        (t.namespace, t.object_id, t.relation, t.subject_ns, t.subject_id, t.subject_relation)
        for t in own
    ]
    short = Closure.of_rows(rows)
    asked = ("read", "write", "manage")
    got = await decided(engine.permitted("Diary", diary, asked, member, closure=short))
    full = await decided(engine.permitted("Diary", diary, asked, member))
    assert got == full
    assert full == (PermissionEvaluationFailed if depth > 4 else {"read", "write"})


# --- the rate count: one statement, whatever buckets a request falls in -------------------------


async def test_a_request_is_counted_in_one_statement(database_url: str) -> None:
    """A strict bucket's place and a leased bucket's new lease are asked together, rows made
    or not: the count a request waits for is one statement."""
    now = [1_000.0]
    rates = {"strict": Rate(limit=5, period_sec=60), "leased": Rate(limit=6000, period_sec=60)}
    pool = await create_pool(database_url, read_only=False, min_size=1, max_size=2)
    limiter = RateLimiter(pool, rates, clock=lambda: now[0])
    key = f"agent:{uuid.uuid4()}"
    try:
        for _ in range(3):  # no rows yet, then rows, then after the lease lapsed
            before = pool.tally.sent
            assert isinstance(await limiter.take(key, ["leased", "strict"]), Quota)
            assert pool.tally.sent - before == 1
            now[0] += 2 * RATE_LEASE_TTL_SEC
        for _ in range(2):
            await limiter.take(key, ["leased", "strict"])
        refused = await limiter.take(key, ["leased", "strict"])
        assert isinstance(refused, Refusal) and refused.bucket == "strict"
    finally:
        await pool.close()
