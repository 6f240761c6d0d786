"""Tenant isolation as a property: random tenants, every read path, one oracle.

Hypothesis draws a world (teams with members in every role, a group, diaries of each
visibility with grants to agents, humans and the group, one entry per diary, a pack, a task and
a runtime profile); the test builds it through the real API on the real stack and then asks
every read path as every principal — each agent through its OAuth2 token, an identity key and a
team key bound to one of its teams; each human through its session; an anonymous caller — over
REST (gets, lists, search), the MCP server (the official client SDK), the app tools, A2A
(`GetTask`, `SubscribeToTask`), the console's pages (server-rendered from the same REST calls
made as the logged-in human) and the public feed.

The oracle (`Oracle`) is written from SPEC section 5's permission table and DECISIONS
("Permissions", "Trust at the edges"), not from our code: who holds which role, which grants
reach whom, what visibility allows, and that a team key acts only inside its team. Every
mismatch is collected and printed with the principal, the resource and the path.

`make test` runs a few derandomized examples; `CAIRN_ISOLATION_EXAMPLES=50` explores more.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from actors import Actor, agent_key_secret, anonymous, holding_key, personal_team
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from mcp_support import client_headers, mcp_session

EXAMPLES = int(os.environ.get("CAIRN_ISOLATION_EXAMPLES", "4"))
AGENTS, HUMANS, NEW_TEAMS = 3, 2, 2
ROLES = ("owner", "manager", "member", "executor")
ACCESS_ROLES = frozenset({"owner", "manager", "member"})  # Team `access` (SPEC 5)
VISIBILITIES = ("private", "moltnet", "public")


# --- the drawn world: indices only, so hypothesis can shrink it --------------------------------


@dataclass(frozen=True)
class GrantSpec:
    subject: tuple[str, int]  # ("agent"|"human"|"group", index)
    role: str  # writer | manager


@dataclass(frozen=True)
class DiarySpec:
    team: int  # index into the world's teams: NEW_TEAMS new ones, then each agent's personal
    visibility: str
    grants: tuple[GrantSpec, ...]


@dataclass(frozen=True)
class WorldSpec:
    owners: tuple[int, ...]  # agent index owning each new team
    roles: tuple[tuple[str | None, ...], ...]  # per new team, per person (agents then humans)
    group: tuple[bool, ...]  # per person: in the group of new team 0 (if a member there)
    diaries: tuple[DiarySpec, ...]
    key_teams: tuple[int, ...]  # per agent: which of its teams (by order) its team key binds
    task_grants: tuple[GrantSpec, ...] = ()


# The world of issue 23: agent 0 owns team 0 and its personal team; its team key is bound to
# the personal team, and team 0 holds a private diary (granted to agent 1 too), a moltnet one
# and a public one.
ISSUE_23 = WorldSpec(
    owners=(0, 1),
    roles=(("owner", "member", "executor", "member", None), ("member", "owner", None, None, None)),
    group=(True, True, False, True, False),
    diaries=(
        DiarySpec(0, "private", (GrantSpec(("agent", 1), "writer"),)),
        DiarySpec(0, "moltnet", ()),
        DiarySpec(0, "public", (GrantSpec(("group", 0), "manager"),)),
        DiarySpec(3, "private", (GrantSpec(("agent", 0), "writer"),)),
    ),
    key_teams=(2, 2, 0),
    task_grants=(GrantSpec(("agent", 0), "writer"), GrantSpec(("human", 1), "manager")),
)


def _people() -> list[tuple[str, int]]:
    return [("agent", i) for i in range(AGENTS)] + [("human", i) for i in range(HUMANS)]


@st.composite
def worlds(draw: st.DrawFn) -> WorldSpec:
    owners = tuple(draw(st.integers(0, AGENTS - 1)) for _ in range(NEW_TEAMS))
    roles = []
    for owner in owners:
        row: list[str | None] = []
        for kind, index in _people():
            if (kind, index) == ("agent", owner):
                row.append("owner")
                continue
            # DECISIONS: executors are agents (a daemon); humans hold the other roles
            choices = [None, "manager", "member"] + (["executor"] if kind == "agent" else [])
            row.append(draw(st.sampled_from(choices)))
        roles.append(tuple(row))
    group = tuple(draw(st.booleans()) for _ in _people())
    subjects = [*_people(), ("group", 0)]
    diary = st.builds(
        DiarySpec,
        team=st.integers(0, NEW_TEAMS + AGENTS - 1),
        visibility=st.sampled_from(VISIBILITIES),
        grants=st.lists(
            st.builds(
                GrantSpec,
                subject=st.sampled_from(subjects),
                role=st.sampled_from(("writer", "manager")),
            ),
            max_size=2,
            unique_by=lambda g: g.subject,
        ).map(tuple),
    )
    diaries = tuple(draw(st.lists(diary, min_size=3, max_size=4)))
    key_teams = tuple(draw(st.integers(0, NEW_TEAMS)) for _ in range(AGENTS))
    task_grants = draw(
        st.lists(
            st.builds(GrantSpec, subject=st.sampled_from(subjects), role=st.just("writer")),
            max_size=2,
            unique_by=lambda g: g.subject,
        )
    )
    return WorldSpec(owners, tuple(roles), group, diaries, key_teams, tuple(task_grants))


# --- the oracle: SPEC 5 and DECISIONS, as plain Python -----------------------------------------


@dataclass
class Principal:
    """One way of calling: `person` is None for the anonymous caller; `bound` is the team a
    team key is bound to (the header it sends), None otherwise."""

    name: str
    person: tuple[str, int] | None
    actor: Actor | None
    credential: str  # oauth2 | identity_key | team_key | session | anonymous
    bound: str | None = None
    mcp_headers: dict[str, str] | None = None


@dataclass
class Oracle:
    """Who may read what. Teams, diaries, groups are the built world's ids."""

    roles: dict[str, dict[tuple[str, int], str]]  # team -> person -> role
    group_team: str
    group_members: set[tuple[str, int]]
    diary_team: dict[str, str]
    visibility: dict[str, str]
    grants: dict[str, set[tuple[str, int]]]  # diary -> grantees (people; the group expanded)
    task_team: str = ""
    task_grantees: set[tuple[str, int]] = field(default_factory=set)

    def role(self, person: tuple[str, int] | None, team: str) -> str | None:
        return None if person is None else self.roles[team].get(person)

    @staticmethod
    def acts_in(who: Principal, team: str) -> bool:
        """DECISIONS "Trust at the edges": a team key acts only inside its team."""
        return who.bound is None or who.bound == team

    def member(self, who: Principal, team: str) -> bool:
        """Any role: who reads a team's tasks, profiles, members, groups and queue counts."""
        return self.acts_in(who, team) and self.role(who.person, team) is not None

    def context_status(self, who: Principal, team: str) -> int:
        """A team-scoped read in `team`'s context (the team header): an identity key is denied
        (403) in a team its agent does not belong to (SPEC 5.4); otherwise members see the
        team's things and everyone else finds nothing (404)."""
        if who.credential == "identity_key" and self.role(who.person, team) is None:
            return 403
        return 200 if self.member(who, team) else 404

    def task_status(self, who: Principal, asked: str) -> int:
        """The task by id in the `asked` team's context: Task `view` = the owning team's
        members (DECISIONS: executors too) or explicit task grantees; only in the owning
        team's context (SPEC 5: by-id operations with the owning-team context)."""
        in_context = self.context_status(who, asked)
        if in_context == 403:
            return 403
        if asked != self.task_team or not self.acts_in(who, asked):
            return 404
        granted = who.person in self.task_grantees
        return 200 if self.member(who, asked) or granted else 404

    def reads_by_permission(self, who: Principal, diary: str) -> bool:
        """Diary `read` = team->access | writers | managers, within a team key's team."""
        team = self.diary_team[diary]
        if who.person is None or not self.acts_in(who, team):
            return False
        return self.role(who.person, team) in ACCESS_ROLES or who.person in self.grants[diary]

    def sees_diary(self, who: Principal, diary: str) -> bool:
        """Visibility on read (SPEC 5): public to all, moltnet to the authenticated."""
        visibility = self.visibility[diary]
        if visibility == "public":
            return True
        if visibility == "moltnet":
            return who.person is not None
        return self.reads_by_permission(who, diary)

    def diary_status(self, who: Principal, diary: str) -> int:
        if self.sees_diary(who, diary):
            return 200
        return 401 if who.person is None and self.visibility[diary] == "moltnet" else 404


@dataclass
class Built:
    oracle: Oracle
    teams: list[str]
    diaries: list[str]
    entries: dict[str, str]  # entry -> diary
    pack: tuple[str, str]  # pack id, diary id
    rendered: str
    artifact: str  # CID of the task's input artifact
    task: str
    task_team: str
    profile: str
    group: str
    word: str
    principals: list[Principal] = field(default_factory=list)


@dataclass
class Mismatch:
    principal: str
    resource: str
    path: str
    expected: Any
    got: Any

    def __str__(self) -> str:
        return (
            f"{self.principal} on {self.resource} via {self.path}: "
            f"expected {self.expected}, got {self.got}"
        )


class Findings:
    def __init__(self) -> None:
        self.items: list[Mismatch] = []
        self.compared = 0

    def compare(self, who: Principal, resource: str, path: str, expected: Any, got: Any) -> None:
        self.compared += 1
        if expected != got:
            self.items.append(Mismatch(who.name, resource, path, expected, got))


# --- building the world through the API ---------------------------------------------------------


@dataclass
class Cast:
    agents: list[Actor]
    humans: list[Actor]
    personal: list[str]  # each agent's personal team

    def actor(self, person: tuple[str, int]) -> Actor:
        kind, index = person
        return self.agents[index] if kind == "agent" else self.humans[index]


@pytest.fixture(scope="module")
async def cast(actors: Any) -> Cast:
    agents = list(await asyncio.gather(*(actors.agent() for _ in range(AGENTS))))
    humans = list(await asyncio.gather(*(actors.human() for _ in range(HUMANS))))
    personal = list(await asyncio.gather(*(personal_team(a) for a in agents)))
    return Cast(agents, humans, personal)


async def ok(actor: Actor, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    status, body = await actor.call(method, path, **kwargs)
    assert status in (200, 201), (method, path, status, body)
    return dict(body)


async def _join(owner: Actor, team: str, role: str, joiner: Actor) -> None:
    invite = await ok(owner, "POST", f"/teams/{team}/invites", json={"role": role})
    await ok(joiner, "POST", "/teams/join", json={"code": invite["code"]})


async def build(cast: Cast, spec: WorldSpec) -> Built:
    word = f"iso{uuid.uuid4().hex[:10]}"
    people = _people()
    owners = [cast.agents[i] for i in spec.owners]
    new_teams = [
        str((await ok(o, "POST", "/teams", json={"name": f"t{n}-{word}"}))["id"])
        for n, o in enumerate(owners)
    ]
    teams = new_teams + cast.personal
    roles: dict[str, dict[tuple[str, int], str]] = {t: {} for t in teams}
    for index, team in enumerate(cast.personal):
        roles[team][("agent", index)] = "owner"
    joins = []
    for team, owner, row in zip(new_teams, owners, spec.roles, strict=True):
        for person, role in zip(people, row, strict=True):
            if role is not None:
                roles[team][person] = role
            if role not in (None, "owner"):
                joins.append(_join(owner, team, role, cast.actor(person)))
    await asyncio.gather(*joins)

    group_team, group_owner = new_teams[0], owners[0]
    group = await ok(group_owner, "POST", f"/teams/{group_team}/groups", json={"name": word})
    members = {p for p, inside in zip(people, spec.group, strict=True) if inside}
    members &= set(roles[group_team])
    for person in sorted(members):
        body = {"subjectId": str(cast.actor(person).subject_id)}
        await ok(group_owner, "POST", f"/groups/{group['id']}/members", json=body)

    def owner_of(team: str) -> Actor:
        [person] = [p for p, r in roles[team].items() if r == "owner"]
        return cast.actor(person)

    async def make_diary(n: int, d: DiarySpec) -> tuple[str, str, set[tuple[str, int]]]:
        team = teams[d.team]
        owner = owner_of(team)
        body = {"name": f"d{n}-{word}", "visibility": d.visibility}
        diary = str((await ok(owner, "POST", "/diaries", json=body, team=team))["id"])
        grantees: set[tuple[str, int]] = set()
        for grant in d.grants:
            kind = grant.subject[0]
            if kind == "group":
                subject, ns = group["id"], "Group"
                grantees |= members
            else:
                subject, ns = str(cast.actor(grant.subject).subject_id), kind.capitalize()
                grantees.add(grant.subject)
            body = {"subjectId": subject, "subjectNs": ns, "role": grant.role}
            await ok(owner, "POST", f"/diaries/{diary}/grants", json=body)
        content = {"content": f"{word} note {n} of a {d.visibility} diary", "tags": [word]}
        entry = await ok(owner, "POST", f"/diaries/{diary}/entries", json=content)
        return diary, str(entry["id"]), grantees

    made = await asyncio.gather(*(make_diary(n, d) for n, d in enumerate(spec.diaries)))
    diaries = [d for d, _, _ in made]
    oracle = Oracle(
        roles=roles,
        group_team=group_team,
        group_members=members,
        diary_team={d: teams[s.team] for d, s in zip(diaries, spec.diaries, strict=True)},
        visibility={d: s.visibility for d, s in zip(diaries, spec.diaries, strict=True)},
        grants={d: g for d, _, g in made},
    )
    first, first_entry = diaries[0], made[0][1]
    task_team = oracle.diary_team[first]
    proposer = owner_of(task_team)
    pack = await ok(
        proposer,
        "POST",
        f"/diaries/{first}/packs",
        json={"entries": [{"entryId": first_entry, "rank": 1}]},
    )
    render = {"renderMethod": "server:pack-to-docs-v1"}
    rendered = await ok(proposer, "POST", f"/packs/{pack['packId']}/render", json=render)
    status, staged = await proposer.call(
        "PUT", "/task-artifacts/staged", team=task_team, data=word.encode()
    )
    assert status == 200, staged
    task = await ok(
        proposer,
        "POST",
        "/tasks",
        json={
            "taskType": "freeform",
            "teamId": task_team,
            "diaryId": first,
            "input": {"brief": word},
            "references": [{"artifact": {"cid": staged["cid"]}, "role": "context"}],
        },
    )
    task_grantees: set[tuple[str, int]] = set()
    for grant in spec.task_grants:
        if grant.subject[0] == "group":
            subject, ns = group["id"], "Group"
            task_grantees |= members
        else:
            subject = str(cast.actor(grant.subject).subject_id)
            ns = grant.subject[0].capitalize()
            task_grantees.add(grant.subject)
        body = {"subjectId": subject, "subjectNs": ns, "role": grant.role}
        await ok(proposer, "POST", f"/tasks/{task['id']}/grants", json=body, team=task_team)
    oracle.task_team, oracle.task_grantees = task_team, task_grantees
    profile = await ok(
        proposer,
        "POST",
        "/runtime-profiles",
        json={"teamId": task_team, "name": word},
        team=task_team,
    )
    built = Built(
        oracle=oracle,
        teams=teams,
        diaries=diaries,
        entries={e: d for d, e, _ in made},
        pack=(str(pack["packId"]), first),
        rendered=str(rendered["id"]),
        artifact=str(staged["cid"]),
        task=str(task["id"]),
        task_team=task_team,
        profile=str(profile["id"]),
        group=str(group["id"]),
        word=word,
    )
    built.principals = await _principals(cast, spec, built)
    return built


async def _principals(cast: Cast, spec: WorldSpec, built: Built) -> list[Principal]:
    found: list[Principal] = []
    for index, agent in enumerate(cast.agents):
        person = ("agent", index)
        mine = [t for t in built.teams if person in built.oracle.roles[t]]
        bound = mine[spec.key_teams[index] % len(mine)]
        identity, team = await asyncio.gather(
            agent_key_secret(agent, "identity", None), agent_key_secret(agent, "team", bound)
        )
        as_identity = holding_key(agent, identity)
        as_team = holding_key(agent, team)
        found += [
            Principal(f"agent{index}/oauth2", person, agent, "oauth2", None, client_headers(agent)),
            Principal(
                f"agent{index}/identity-key",
                person,
                as_identity,
                "identity_key",
                None,
                {"Authorization": f"Bearer {identity}"},
            ),
            Principal(
                f"agent{index}/team-key@{bound}",
                person,
                as_team,
                "team_key",
                bound,
                {"Authorization": f"Bearer {team}", "X-Service-Team-Id": bound},
            ),
        ]
    for index, human in enumerate(cast.humans):
        found.append(Principal(f"human{index}/session", ("human", index), human, "session"))
    found.append(Principal("anonymous", None, None, "anonymous"))
    return found


# --- asking every read path ---------------------------------------------------------------------


async def rest(
    who: Principal, http: Any, method: str, path: str, *, team: str | None = None, **kw: Any
) -> tuple[int, Any]:
    """A REST call as `who`: a team key always names its own team (its only valid header)."""
    if who.actor is None:
        return await anonymous(http, method, path, **kw)
    return await who.actor.call(method, path, team=who.bound or team, **kw)


async def check_rest(who: Principal, w: Built, http: Any, out: Findings) -> None:
    o = w.oracle
    authenticated = who.person is not None
    for diary in w.diaries:
        expected = o.diary_status(who, diary)
        for path in (f"/diaries/{diary}", f"/diaries/{diary}/map"):
            status, _ = await rest(who, http, "GET", path)
            out.compare(who, f"diary {diary}", f"GET {path}", expected, status)
        if authenticated:
            for part in ("entries", "hygiene", "export"):
                status, _ = await rest(who, http, "GET", f"/diaries/{diary}/{part}")
                out.compare(who, f"diary {diary}", f"GET {part}", expected, status)
    for entry, diary in w.entries.items():
        status, _ = await rest(who, http, "GET", f"/entries/{entry}")
        want = o.diary_status(who, diary) if authenticated else _anonymous_entry(o, diary)
        out.compare(who, f"entry {entry}", "GET /entries/{id}", want, status)
    if not authenticated:
        await check_public_feed(who, w, http, out)
        return
    pack, pack_diary = w.pack
    via_diary = o.diary_status(who, pack_diary)
    for resource, path in (
        (f"pack {pack}", f"/packs/{pack}"),
        (f"pack {pack}", f"/packs/{pack}/provenance"),
        (f"rendered pack {w.rendered}", f"/rendered-packs/{w.rendered}"),
    ):
        status, _ = await rest(who, http, "GET", path)
        out.compare(who, resource, f"GET {path}", via_diary, status)
    status, body = await rest(who, http, "GET", f"/diaries/{pack_diary}/packs")
    listed = {p["id"] for p in body["items"]} if status == 200 else set()
    out.compare(who, f"diary {pack_diary}", "GET /diaries/{id}/packs", via_diary, status)
    want = {pack} if via_diary == 200 else set()
    out.compare(who, f"pack {pack}", "GET /diaries/{id}/packs (items)", want, listed & {pack})
    await check_search(who, w, http, out)
    await check_lists(who, w, http, out)
    await check_team_resources(who, w, http, out)


async def check_console(who: Principal, w: Built, http: Any, out: Findings) -> None:
    """The console's pages as a person's browser asks for them: a human sees a diary, an entry,
    a pack or a rendering exactly where the REST reads allow it (the page runs them as that
    human), and an anonymous visitor is sent to log in (303) whatever the visibility."""
    headers = who.actor.auth if who.actor is not None else {}
    pack, pack_diary = w.pack
    pages = [(f"diary {d}", f"/console/diaries/{d}", d) for d in w.diaries]
    pages += [(f"entry {e}", f"/console/entries/{e}", d) for e, d in w.entries.items()]
    pages += [
        (f"pack {pack}", f"/console/packs/{pack}", pack_diary),
        (f"rendered pack {w.rendered}", f"/console/rendered/{w.rendered}", pack_diary),
    ]
    for resource, path, diary in pages:
        async with http.get(path, headers=headers, allow_redirects=False) as response:
            await response.read()
            status = response.status
        expected = 303 if who.actor is None else w.oracle.diary_status(who, diary)
        out.compare(who, resource, f"console GET {path}", expected, status)


def _anonymous_entry(o: Oracle, diary: str) -> int:
    """An entry read without credentials: what its diary's visibility allows."""
    return o.diary_status(Principal("anonymous", None, None, "anonymous"), diary)


async def check_search(who: Principal, w: Built, http: Any, out: Findings) -> None:
    """Search without a diary: never a hit the caller may not read, and every entry of a diary
    it reads through its teams and grants."""
    status, body = await rest(
        who, http, "POST", "/diary/search", json={"query": w.word, "limit": 50}
    )
    hits = {h["id"] for h in body["results"]} & set(w.entries) if status == 200 else set()
    readable = {e for e, d in w.entries.items() if w.oracle.sees_diary(who, d)}
    owed = {e for e, d in w.entries.items() if w.oracle.reads_by_permission(who, d)}
    out.compare(who, "search hits", "POST /diary/search (sound)", set(), hits - readable)
    out.compare(who, "search hits", "POST /diary/search (complete)", set(), owed - hits)


async def check_lists(who: Principal, w: Built, http: Any, out: Findings) -> None:
    o = w.oracle
    _, body = await rest(who, http, "GET", "/teams")
    listed = {t["id"] for t in body["items"]} & set(w.teams)
    out.compare(who, "teams", "GET /teams", {t for t in w.teams if o.member(who, t)}, listed)
    _, body = await rest(who, http, "GET", "/diaries")
    listed = {d["id"] for d in body["items"]} & set(w.diaries)
    expected = {
        d
        for d in w.diaries
        if o.reads_by_permission(who, d) and who.bound in (None, o.diary_team[d])
    }
    out.compare(who, "diaries", "GET /diaries", expected, listed)


async def check_team_resources(who: Principal, w: Built, http: Any, out: Findings) -> None:
    """Tasks, runtime profiles, members, groups and queue counts: any role in the owning team
    (DECISIONS: executors view their team's tasks), asked in a team's context: the task's
    team, or for a team key the one team it may name."""
    o, team = w.oracle, w.task_team
    asked = who.bound or team
    in_context = o.context_status(who, asked)
    # the task and profile are found only in their own team's context
    owned = in_context if asked == team or in_context != 200 else 404
    task = o.task_status(who, asked)
    checks = [
        (f"task {w.task}", f"/tasks/{w.task}", task),
        (f"profile {w.profile}", f"/runtime-profiles/{w.profile}", owned),
        (f"task {w.task}", f"/tasks/{w.task}/artifacts", task),
        (f"artifact {w.artifact}", f"/tasks/{w.task}/artifacts/{w.artifact}/content", task),
        (f"team {asked}", "/task-counts", in_context),
    ]
    for resource, path, expected in checks:
        status, _ = await rest(who, http, "GET", path, team=asked)
        out.compare(who, resource, f"GET {path}", expected, status)
    status, body = await rest(who, http, "GET", "/tasks", team=asked)
    listed = {t["id"] for t in body["items"]} if status == 200 else set()
    out.compare(who, f"team {asked}", "GET /tasks", in_context, status)
    want = {w.task} if owned == 200 else set()
    out.compare(who, f"task {w.task}", "GET /tasks (items)", want, listed & {w.task})
    for t in w.teams:
        status, _ = await rest(who, http, "GET", f"/teams/{t}/members")
        out.compare(
            who, f"team {t}", "GET /teams/{id}/members", 200 if o.member(who, t) else 404, status
        )
    status, _ = await rest(who, http, "GET", f"/groups/{w.group}")
    want_group = 200 if o.member(who, o.group_team) else 404
    out.compare(who, f"group {w.group}", "GET /groups/{id}", want_group, status)


async def check_public_feed(who: Principal, w: Built, http: Any, out: Findings) -> None:
    status, body = await anonymous(http, "GET", "/public/feed", params={"limit": 100})
    shown = {e["id"] for e in body["items"]} & set(w.entries) if status == 200 else set()
    public = {e for e, d in w.entries.items() if w.oracle.visibility[d] == "public"}
    out.compare(who, "public feed", "GET /public/feed", public, shown)
    status, body = await anonymous(http, "GET", "/public/feed/search", params={"q": w.word})
    shown = {e["id"] for e in body["items"]} & set(w.entries) if status == 200 else set()
    out.compare(who, "public feed", "GET /public/feed/search (sound)", set(), shown - public)
    for entry, diary in w.entries.items():
        status, _ = await anonymous(http, "GET", f"/public/entries/{entry}")
        want = 200 if w.oracle.visibility[diary] == "public" else 404
        out.compare(who, f"entry {entry}", "GET /public/entries/{id}", want, status)


async def check_mcp(who: Principal, w: Built, url: str, out: Findings) -> None:
    """The same reads through the MCP server (tools proxy REST with the caller's credential)."""
    assert who.mcp_headers is not None
    o = w.oracle
    async with mcp_session(url, who.mcp_headers) as session:

        async def succeeds(tool: str, args: dict[str, Any]) -> bool:
            result = await session.call_tool(tool, args)
            return not result.is_error

        for diary in w.diaries:
            visible = o.sees_diary(who, diary)
            for tool in ("diaries_get", "entries_map_points"):
                got = await succeeds(tool, {"diary_id": diary})
                out.compare(who, f"diary {diary}", f"mcp {tool}", visible, got)
        for entry, diary in w.entries.items():
            got = await succeeds("entries_get", {"entry_id": entry})
            out.compare(who, f"entry {entry}", "mcp entries_get", o.sees_diary(who, diary), got)
        pack, pack_diary = w.pack
        got = await succeeds("packs_get", {"pack_id": pack})
        out.compare(who, f"pack {pack}", "mcp packs_get", o.sees_diary(who, pack_diary), got)
        team = w.task_team
        task_args: dict[str, Any] = {"id": w.task}
        if who.bound is None:
            task_args["team_id"] = team
        got = await succeeds("tasks_get", task_args)
        visible = o.task_status(who, who.bound or team) == 200
        out.compare(who, f"task {w.task}", "mcp tasks_get", visible, got)
        got = await succeeds("tasks_app_counts", {"team_id": team})
        out.compare(who, f"team {team}", "mcp tasks_app_counts", o.member(who, team), got)
        result = await session.call_tool("entries_search", {"query": w.word, "limit": 50})
        hits: set[str] = set()
        if not result.is_error and isinstance(result.structured_content, dict):
            hits = {h["id"] for h in result.structured_content["results"]} & set(w.entries)
        readable = {e for e, d in w.entries.items() if o.sees_diary(who, d)}
        owed = {e for e, d in w.entries.items() if o.reads_by_permission(who, d)}
        out.compare(who, "search hits", "mcp entries_search (sound)", set(), hits - readable)
        out.compare(who, "search hits", "mcp entries_search (complete)", set(), owed - hits)


async def check_a2a(who: Principal, w: Built, http: Any, out: Findings) -> None:
    """The task through A2A (`GetTask`, and the first event of `SubscribeToTask`'s stream), as
    an agent's bearer credential or nobody, in the task team's context: the same answer as
    `GET /tasks/{id}`."""
    team = w.task_team
    headers = {"A2A-Version": "1.0", "X-Service-Team-Id": who.bound or team}
    headers.update(who.actor.auth if who.actor is not None else {})
    visible = who.actor is not None and w.oracle.task_status(who, who.bound or team) == 200
    for method in ("GetTask", "SubscribeToTask"):
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": w.task}}
        async with http.post("/a2a", json=body, headers=headers) as response:
            answer = await _first_json_rpc(response)
        result = answer.get("result") or {}
        found = (result.get("task") or result).get("id") == w.task  # a stream's event wraps it
        out.compare(who, f"task {w.task}", f"a2a {method}", visible, found)


async def _first_json_rpc(response: Any) -> dict[str, Any]:
    """The JSON-RPC answer, or a stream's first event (the rest is not read: the task waits in
    the queue, so its stream would stay open)."""
    if not response.content_type.startswith("text/event-stream"):
        answer: dict[str, Any] = await response.json(content_type=None)
        return answer
    async for line in response.content:
        if line.startswith(b"data: "):
            event: dict[str, Any] = json.loads(line.removeprefix(b"data: "))
            return event
    return {}


async def _each(items: Iterable[Any], run: Callable[[Any], Awaitable[None]]) -> None:
    await asyncio.gather(*(run(item) for item in items))


@settings(
    max_examples=EXAMPLES,
    derandomize="CAIRN_ISOLATION_EXAMPLES" not in os.environ,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    # a world is built on the real stack: shrinking one would take many minutes, and the
    # printed mismatches name the principal, resource and path already
    phases=[Phase.explicit, Phase.generate],
)
@given(spec=worlds())
@example(spec=ISSUE_23)
async def test_every_read_path_agrees_with_the_permission_table(
    cast: Cast, api_http: Any, mcp_server: Any, spec: WorldSpec
) -> None:
    world = await build(cast, spec)
    out = Findings()
    await _each(world.principals, lambda who: check_rest(who, world, api_http, out))
    people = [who for who in world.principals if who.credential in ("session", "anonymous")]
    await _each(people, lambda who: check_console(who, world, api_http, out))
    agents = [who for who in world.principals if who.mcp_headers is not None]
    await _each(agents, lambda who: check_mcp(who, world, mcp_server.url, out))
    callers = [who for who in world.principals if who.mcp_headers is not None or who.actor is None]
    await _each(callers, lambda who: check_a2a(who, world, api_http, out))
    assert out.compared > 0
    assert not out.items, "\n".join(map(str, out.items))
