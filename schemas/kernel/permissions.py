"""The permission model of SPEC section 5, as data, and the pure evaluator that rewrites it.

Tuples are ``namespace:object_id#relation@subject_ns:subject_id[#subject_relation]``. A relation
holds subjects (an Agent, a Human, or a *subject set* such as ``Group:g#members``); a permission
is a union of terms, each of which is either

- ``Rel(name)``: the relation or permission ``name`` on the same object, or
- ``Arrow(via, name)``: tuple-to-userset, ``name`` on every object the relation ``via`` points at
  (``team->access``, ``parent->read``);

and either may be restricted to subjects of one namespace (``executors[Agent]``, "agent
executors"). The namespace table, as encoded (``PERMISSION_MODEL.describe()`` prints it):

    Team         owners, managers, executors, members: Agent | Human
                 access = owners | managers | members
                 write = owners | managers
                 manage = owners
                 propose_tasks = owners | managers | executors[Agent]
                 manage_credentials = owners | managers
                 manage_members = owners | managers
                 verify_claim = owners | managers | executors | members
    Group        parent: Team;  members: Agent | Human | Group#members
                 access = members
                 manage = parent->manage_members
    Diary        team: Team;  writers, managers: Agent | Human | Group#members
                 read = team->access | writers | managers
                 write = team->write | writers | managers
                 manage = team->manage | managers
                 verify_claim = team->verify_claim
    DiaryEntry   parent: Diary
                 view = parent->read;  edit = parent->write;  delete = parent->write
    Agent        self: Agent
                 act_as = self
    ContextPack  parent: Diary
                 read = parent->read;  manage = parent->manage
                 verify_claim = parent->verify_claim
    Task         team: Team;  parent: Diary;  claimant: Agent
                 writers, managers: Agent | Human | Group#members
                 view = team->access | writers | managers
                 claim = team->executors[Agent] | writers | managers
                 report = claimant
                 cancel = team->write | managers
    Human        no relations: a subject only

Choices where the spec's table is terse:

- Team "membership" (``verify_claim``) is any of owners, managers, executors, members; "teams I
  belong to" is ``lookup(Team, "verify_claim", me)``. ``access`` excludes a bare executor, as the
  table says, so an executor alone reads neither team diaries nor team tasks (it may still claim).
- ``manage_members`` is owners or managers.
- Diary has an implied ``verify_claim = team->verify_claim`` so that ContextPack's
  ``parent->verify_claim`` resolves.
- Task relations: ``team`` (owning Team), ``parent`` (provenance Diary), ``claimant`` (Agent),
  ``writers`` and ``managers`` (explicit task grants). The provenance diary grants nothing on the
  task: diary grants are Diary tuples, never Task tuples. ``cancel`` is the owning team's owners
  and managers (``team->write``) or an explicit task manager (SPEC 3.1).
- Groups nest (``Group#members`` may hold ``Group#members``), so membership can be cyclic. A
  membership is found by a breadth-first walk over subject sets with a visited set, so cycles
  terminate; a chain of subject sets deeper than ``MAX_SUBJECT_SET_DEPTH`` hops is an evaluation
  error (``PermissionEvaluationFailed``, 503), never a silent denial.
- Team ownership (DECISIONS "Trust at the edges"): each team resource names the relation path
  to its owning team (``owner``: a Team itself; Group ``parent``; Diary and Task ``team``;
  DiaryEntry and ContextPack ``parent`` then ``team``). A check or lookup ``within_team`` (a
  team-bound agent key) holds nothing on an object another team owns, whatever grants or
  memberships reach it; agents and humans belong to no team, so they are never confined.
- The model is validated when built: names exist, a subject set names a *relation* (so reverse
  lookups can follow stored tuples alone), an arrow's ``via`` relation holds whole objects only,
  and permissions never recurse into themselves. Recursion happens only through subject sets.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any, Final, Literal, NamedTuple, Protocol
from uuid import UUID

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from schemas.base import Payload
from schemas.errors import (
    PermissionEvaluationFailed,
    RelationNotAdmitted,
)

MAX_SUBJECT_SET_DEPTH: Final = 16
"""Hops through subject sets (a group inside a group inside a diary grant…) one check follows."""

MAX_TUPLES_PER_CHANGE: Final = 1000
"""Tuples one activity call writes or deletes (keeps payloads far below Temporal's 2 MiB cap)."""


class Namespace(StrEnum):
    TEAM = "Team"
    GROUP = "Group"
    DIARY = "Diary"
    DIARY_ENTRY = "DiaryEntry"
    AGENT = "Agent"
    HUMAN = "Human"
    CONTEXT_PACK = "ContextPack"
    TASK = "Task"


def _as_text(value: Any) -> Any:
    return str(value) if isinstance(value, UUID) else value


NamespaceName = Annotated[str, Field(pattern=r"^[A-Z][A-Za-z]{0,63}$")]
RelationName = Annotated[str, Field(pattern=r"^[a-z][a-z_]{0,63}$")]
ObjectId = Annotated[
    str, BeforeValidator(_as_text), Field(min_length=1, max_length=256, pattern=r"^[^\s#@:]+$")
]
"""An object id as tuples store it: a uuid's text form in practice (a `UUID` is accepted)."""

_TUPLE_TEXT = re.compile(
    r"^(?P<namespace>\w+):(?P<object_id>[^\s#@:]+)#(?P<relation>\w+)"
    r"@(?P<subject_ns>\w+):(?P<subject_id>[^\s#@:]+)(?:#(?P<subject_relation>\w+))?$"
)
_SUBJECT_TEXT = re.compile(r"^(?P<ns>\w+):(?P<id>[^\s#@:]+)(?:#(?P<relation>\w+))?$")


class Subject(Payload):
    """Who asks: an Agent or a Human; a subject set (`Group:g#members`) when `relation` is set."""

    ns: NamespaceName
    id: ObjectId
    relation: RelationName | None = None

    @classmethod
    def parse(cls, text: str) -> Subject:
        """`Agent:a1` or `Group:g1#members`."""
        match = _SUBJECT_TEXT.match(text)
        if match is None:
            raise ValueError(f"not a subject: {text!r}")
        return cls.model_validate(match.groupdict())

    def __str__(self) -> str:
        return f"{self.ns}:{self.id}" + (f"#{self.relation}" if self.relation else "")


class ObjectRef(NamedTuple):
    namespace: str
    object_id: str


class Userset(NamedTuple):
    """The subjects of one relation of one object, e.g. `Group:g1#members`."""

    namespace: str
    object_id: str
    relation: str

    @property
    def object(self) -> ObjectRef:
        return ObjectRef(self.namespace, self.object_id)


class RelationTuple(Payload):
    """One stored fact: `subject` is in `relation` of `namespace:object_id`."""

    namespace: NamespaceName
    object_id: ObjectId
    relation: RelationName
    subject_ns: NamespaceName
    subject_id: ObjectId
    subject_relation: Literal[""] | RelationName = ""

    @classmethod
    def grant(
        cls, namespace: str, object_id: str | UUID, relation: str, subject: Subject
    ) -> RelationTuple:
        return cls(
            namespace=namespace,
            object_id=str(object_id),
            relation=relation,
            subject_ns=subject.ns,
            subject_id=subject.id,
            subject_relation=subject.relation or "",
        )

    @classmethod
    def parse(cls, text: str) -> RelationTuple:
        """`Diary:d1#writers@Group:g1#members` (Zanzibar notation)."""
        match = _TUPLE_TEXT.match(text)
        if match is None:
            raise ValueError(f"not a relation tuple: {text!r}")
        fields = {k: v for k, v in match.groupdict().items() if v is not None}
        return cls.model_validate(fields)

    @property
    def object(self) -> ObjectRef:
        return ObjectRef(self.namespace, self.object_id)

    @property
    def subject(self) -> Subject:
        return Subject(
            ns=self.subject_ns, id=self.subject_id, relation=self.subject_relation or None
        )

    def __str__(self) -> str:
        return f"{self.namespace}:{self.object_id}#{self.relation}@{self.subject}"


# --- the model, as data ---------------------------------------------------------------------


class _Term(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    only: NamespaceName | None = None
    """Restrict the term to subjects of this namespace ("agent executors")."""

    def admits(self, subject: Subject) -> bool:
        return self.only is None or (subject.ns == self.only and subject.relation is None)

    def _suffix(self) -> str:
        return f"[{self.only}]" if self.only else ""


class Rel(_Term):
    """The relation or permission `name` of the same object."""

    kind: Literal["rel"] = "rel"
    name: RelationName

    def __str__(self) -> str:
        return self.name + self._suffix()


class Arrow(_Term):
    """Tuple-to-userset: `name` on each object that the relation `via` of this object holds."""

    kind: Literal["arrow"] = "arrow"
    via: RelationName
    name: RelationName

    def __str__(self) -> str:
        return f"{self.via}->{self.name}{self._suffix()}"


Term = Annotated[Rel | Arrow, Field(discriminator="kind")]


class SubjectType(BaseModel):
    """What a relation admits: a whole object of `namespace`, or its subject set `#relation`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: NamespaceName
    relation: RelationName | None = None

    @classmethod
    def parse(cls, text: str) -> SubjectType:
        namespace, _, relation = text.partition("#")
        return cls(namespace=namespace, relation=relation or None)

    def admits(self, subject_ns: str, subject_relation: str) -> bool:
        return self.namespace == subject_ns and (self.relation or "") == subject_relation

    def __str__(self) -> str:
        return self.namespace + (f"#{self.relation}" if self.relation else "")


class NamespaceDef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: NamespaceName
    relations: dict[str, tuple[SubjectType, ...]] = Field(default_factory=dict)
    permissions: dict[str, tuple[Term, ...]] = Field(default_factory=dict)
    owner: tuple[str, ...] | None = None
    """The relations leading from an object to the Team that owns it (`()` for a Team itself);
    None for what no team owns (agents, humans). A team key is confined along this path."""

    def has(self, name: str) -> bool:
        return name in self.relations or name in self.permissions


class UnknownPermission(LookupError):
    """A check named a namespace, relation or permission the model does not have (a bug)."""


class PermissionModel(BaseModel):
    """Namespaces by name; validated once when built."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespaces: dict[str, NamespaceDef]

    def namespace(self, name: str) -> NamespaceDef:
        try:
            return self.namespaces[name]
        except KeyError:
            raise UnknownPermission(f"no namespace {name!r}") from None

    def has(self, namespace: str, name: str) -> bool:
        found = self.namespaces.get(namespace)
        return found is not None and found.has(name)

    def targets(self, namespace: str, via: str) -> tuple[str, ...]:
        """Namespaces the arrow relation `via` of `namespace` may point at."""
        return tuple(s.namespace for s in self.namespace(namespace).relations[via])

    def validate_tuple(self, item: RelationTuple) -> None:
        """Raise `ValidationFailed` unless the model admits this tuple (checked before writing)."""
        found = self.namespaces.get(item.namespace)
        if found is None or item.relation not in found.relations:
            raise RelationNotAdmitted(f"{item}: {item.namespace}#{item.relation} is not a relation")
        admitted = found.relations[item.relation]
        if not any(s.admits(item.subject_ns, item.subject_relation) for s in admitted):
            allowed = ", ".join(str(s) for s in admitted)
            raise RelationNotAdmitted(f"{item}: {item.namespace}#{item.relation} admits {allowed}")

    def describe(self) -> dict[str, dict[str, str]]:
        """The model as text, one line per relation and permission (docs, tests, reviews)."""
        table: dict[str, dict[str, str]] = {}
        for ns in self.namespaces.values():
            lines = {name: " | ".join(map(str, types)) for name, types in ns.relations.items()}
            lines |= {name: " | ".join(map(str, terms)) for name, terms in ns.permissions.items()}
            table[ns.name] = lines
        return table

    @model_validator(mode="after")
    def _check_references(self) -> PermissionModel:
        for key, ns in self.namespaces.items():
            if key != ns.name:
                raise ValueError(f"namespace {ns.name!r} filed under {key!r}")
            if clash := ns.relations.keys() & ns.permissions.keys():
                raise ValueError(f"{ns.name}: {sorted(clash)} are both relation and permission")
            for relation, types in ns.relations.items():
                for st in types:
                    self._check_subject_type(ns.name, relation, st)
            for permission, terms in ns.permissions.items():
                for term in terms:
                    self._check_term(ns, permission, term)
        self._check_acyclic()
        for ns in self.namespaces.values():
            self._check_owner(ns)
        return self

    def _check_owner(self, ns: NamespaceDef) -> None:
        """An owner path walks relations that each hold one whole-object namespace, to Team."""
        if ns.owner is None:
            return
        at = ns.name
        for via in ns.owner:
            types = self.namespace(at).relations.get(via, ())
            if len(types) != 1 or types[0].relation is not None:
                raise ValueError(f"{ns.name}: owner step {at}#{via} is not one whole namespace")
            at = types[0].namespace
        if at != Namespace.TEAM:
            raise ValueError(f"{ns.name}: owner path ends at {at}, not Team")

    def followed_relations(self) -> set[tuple[str, str]]:
        """`(namespace, relation)` of every relation an arrow or an owner path walks to a whole
        object: past the object asked about, a check reads only these and subject sets."""
        followed = {
            (ns.name, term.via)
            for ns in self.namespaces.values()
            for terms in ns.permissions.values()
            for term in terms
            if isinstance(term, Arrow)
        }
        for ns in self.namespaces.values():
            followed.update(self.owner_chain(ns.name) or ())
        return followed

    def follow_steps(self) -> int:
        """The most followed relations one walk chains (DiaryEntry `parent`, then Diary
        `team`: 2); a cycle of them counts each relation once."""
        edges: dict[str, set[str]] = {}
        for namespace, via in self.followed_relations():
            edges.setdefault(namespace, set()).update(self.targets(namespace, via))

        def longest(at: str, path: frozenset[str]) -> int:
            ahead = [n for n in edges.get(at, ()) if n not in path]
            return max((1 + longest(n, path | {n}) for n in ahead), default=0)

        return max((longest(ns, frozenset({ns})) for ns in edges), default=0)

    def arrows_of(self, namespace: str, permission: str) -> set[tuple[str, str]]:
        """`(namespace, via)` of every arrow the rewrite of `permission` may take: the tuples a
        lookup of it walks backwards."""
        found: set[tuple[str, str]] = set()
        pending = [(namespace, permission)]
        seen: set[tuple[str, str]] = set()
        while pending:
            at, name = pending.pop()
            if (at, name) in seen:
                continue
            seen.add((at, name))
            for term in self.namespace(at).permissions.get(name, ()):
                if isinstance(term, Rel):
                    pending.append((at, term.name))
                    continue
                found.add((at, term.via))
                pending += [(target, term.name) for target in self.targets(at, term.via)]
        return found

    def owner_chain(self, namespace: str) -> list[tuple[str, str]] | None:
        """`(namespace, via)` for each step of the owner path of `namespace`, None if unowned."""
        path = self.namespace(namespace).owner
        if path is None:
            return None
        chain: list[tuple[str, str]] = []
        at = namespace
        for via in path:
            chain.append((at, via))
            at = self.targets(at, via)[0]
        return chain

    def _check_subject_type(self, namespace: str, relation: str, st: SubjectType) -> None:
        target = self.namespaces.get(st.namespace)
        if target is None:
            raise ValueError(f"{namespace}#{relation} admits unknown namespace {st.namespace}")
        if st.relation is not None and st.relation not in target.relations:
            # subject sets must name stored relations: lookups follow tuples, not rewrites
            raise ValueError(f"{namespace}#{relation} admits {st}, which is not a relation")

    def _check_term(self, ns: NamespaceDef, permission: str, term: Rel | Arrow) -> None:
        where = f"{ns.name}.{permission} = … {term}"
        if term.only is not None and term.only not in self.namespaces:
            raise ValueError(f"{where}: unknown namespace {term.only}")
        if isinstance(term, Rel):
            if not ns.has(term.name):
                raise ValueError(f"{where}: {ns.name} has no {term.name!r}")
            return
        if term.via not in ns.relations:
            raise ValueError(f"{where}: {ns.name} has no relation {term.via!r}")
        for st in ns.relations[term.via]:
            if st.relation is not None:
                raise ValueError(f"{where}: {term.via!r} must hold whole objects, not {st}")
            if not self.namespaces[st.namespace].has(term.name):
                raise ValueError(f"{where}: {st.namespace} has no {term.name!r}")

    def _check_acyclic(self) -> None:
        edges: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for ns in self.namespaces.values():
            for permission, terms in ns.permissions.items():
                out = edges.setdefault((ns.name, permission), [])
                for term in terms:
                    if isinstance(term, Rel):
                        out.append((ns.name, term.name))
                    else:
                        out += [(target, term.name) for target in self.targets(ns.name, term.via)]
        done: set[tuple[str, str]] = set()

        def visit(node: tuple[str, str], path: tuple[tuple[str, str], ...]) -> None:
            if node in path:
                cycle = " -> ".join(f"{n}.{p}" for n, p in (*path, node))
                raise ValueError(f"permissions recurse: {cycle}")
            if node in done:
                return
            for nxt in edges.get(node, ()):
                visit(nxt, (*path, node))
            done.add(node)

        for node in edges:
            visit(node, ())


def rel(name: str, *, only: str | None = None) -> Rel:
    return Rel(name=name, only=only)


def arrow(via: str, name: str, *, only: str | None = None) -> Arrow:
    return Arrow(via=via, name=name, only=only)


def _namespace(
    name: Namespace,
    relations: Mapping[str, str] | None = None,
    permissions: Mapping[str, Sequence[Rel | Arrow]] | None = None,
    *,
    owner: tuple[str, ...] | None = None,
) -> NamespaceDef:
    """`relations` maps a relation to the subject types it admits, `"Agent | Group#members"`;
    `owner` is the relation path to the owning team."""
    return NamespaceDef(
        name=name,
        owner=owner,
        relations={
            relation: tuple(SubjectType.parse(part.strip()) for part in admitted.split("|"))
            for relation, admitted in (relations or {}).items()
        },
        permissions={permission: tuple(terms) for permission, terms in (permissions or {}).items()},
    )


_PEOPLE = "Agent | Human"
_GRANTEES = "Agent | Human | Group#members"

PERMISSION_MODEL: Final = PermissionModel(
    namespaces={
        ns.name: ns
        for ns in (
            _namespace(Namespace.HUMAN),
            _namespace(
                Namespace.TEAM,
                {"owners": _PEOPLE, "managers": _PEOPLE, "executors": _PEOPLE, "members": _PEOPLE},
                {
                    "access": [rel("owners"), rel("managers"), rel("members")],
                    "write": [rel("owners"), rel("managers")],
                    "manage": [rel("owners")],
                    "propose_tasks": [
                        rel("owners"),
                        rel("managers"),
                        rel("executors", only=Namespace.AGENT),
                    ],
                    "manage_credentials": [rel("owners"), rel("managers")],
                    "manage_members": [rel("owners"), rel("managers")],
                    "verify_claim": [
                        rel("owners"),
                        rel("managers"),
                        rel("executors"),
                        rel("members"),
                    ],
                },
                owner=(),
            ),
            _namespace(
                Namespace.GROUP,
                {"parent": "Team", "members": _GRANTEES},
                {
                    "access": [rel("members")],
                    "manage": [arrow("parent", "manage_members")],
                },
                owner=("parent",),
            ),
            _namespace(
                Namespace.DIARY,
                {"team": "Team", "writers": _GRANTEES, "managers": _GRANTEES},
                {
                    "read": [arrow("team", "access"), rel("writers"), rel("managers")],
                    "write": [arrow("team", "write"), rel("writers"), rel("managers")],
                    "manage": [arrow("team", "manage"), rel("managers")],
                    "verify_claim": [arrow("team", "verify_claim")],
                },
                owner=("team",),
            ),
            _namespace(
                Namespace.DIARY_ENTRY,
                {"parent": "Diary"},
                {
                    "view": [arrow("parent", "read")],
                    "edit": [arrow("parent", "write")],
                    "delete": [arrow("parent", "write")],
                },
                owner=("parent", "team"),
            ),
            _namespace(Namespace.AGENT, {"self": "Agent"}, {"act_as": [rel("self")]}),
            _namespace(
                Namespace.CONTEXT_PACK,
                {"parent": "Diary"},
                {
                    "read": [arrow("parent", "read")],
                    "manage": [arrow("parent", "manage")],
                    "verify_claim": [arrow("parent", "verify_claim")],
                },
                owner=("parent", "team"),
            ),
            _namespace(
                Namespace.TASK,
                {
                    "team": "Team",
                    "parent": "Diary",
                    "claimant": "Agent",
                    "writers": _GRANTEES,
                    "managers": _GRANTEES,
                },
                {
                    "view": [arrow("team", "access"), rel("writers"), rel("managers")],
                    "claim": [
                        arrow("team", "executors", only=Namespace.AGENT),
                        rel("writers"),
                        rel("managers"),
                    ],
                    "report": [rel("claimant")],
                    "cancel": [arrow("team", "write"), rel("managers")],
                },
                owner=("team",),
            ),
        )
    }
)


# --- evaluation -----------------------------------------------------------------------------


class TupleSource(Protocol):
    """Where the evaluator reads tuples from: Postgres in production, `TupleSet` in tests."""

    async def tuples_of(
        self, objects: Sequence[ObjectRef]
    ) -> Mapping[ObjectRef, Sequence[RelationTuple]]:
        """Every tuple of each object (objects without tuples may be left out)."""
        ...

    async def memberships(self, subject: Subject, max_depth: int) -> Mapping[Userset, int]:
        """Every userset holding `subject`, directly (0) or through subject sets (hops), with
        the fewest hops; walking at most `max_depth + 1` hops so deeper chains show up."""
        ...

    async def objects_related(
        self, namespace: str, relation: str, subject_ns: str, subject_ids: Collection[str]
    ) -> set[str]:
        """Ids of `namespace` objects whose `relation` holds one of the whole objects given."""
        ...


async def check(
    model: PermissionModel,
    source: TupleSource,
    namespace: str,
    object_id: str,
    permission: str,
    subject: Subject,
    *,
    max_depth: int = MAX_SUBJECT_SET_DEPTH,
    within_team: str | None = None,
) -> bool:
    """Has `subject` the relation or permission `permission` on `namespace:object_id`?

    `within_team` confines the subject to one team (a team-bound agent key): an object owned
    by any other team is denied whatever the subject holds on it.
    Each object's tuples are read once per call (batched per breadth-first level)."""
    if not model.namespace(namespace).has(permission):
        raise UnknownPermission(f"{namespace} has no {permission!r}")
    if within_team is not None and not await _owned_by(
        model, source, namespace, object_id, within_team
    ):
        return False
    return await _Check(model, source, subject, max_depth).permission(
        namespace, object_id, permission
    )


async def lookup(
    model: PermissionModel,
    source: TupleSource,
    namespace: str,
    permission: str,
    subject: Subject,
    *,
    max_depth: int = MAX_SUBJECT_SET_DEPTH,
    within_team: str | None = None,
) -> set[str]:
    """Ids of every `namespace` object on which `subject` has `permission` (only those owned
    by `within_team` when it is given: see `check`).

    Runs the rewrite backwards: from the usersets holding the subject (one query) up through the
    arrows (one query per arrow), so the cost does not grow with the number of objects."""
    if not model.namespace(namespace).has(permission):
        raise UnknownPermission(f"{namespace} has no {permission!r}")
    depths = await source.memberships(subject, max_depth)
    if any(depth > max_depth for depth in depths.values()):
        raise _too_deep(subject, max_depth)
    found = await _Lookup(model, source, subject, depths.keys()).objects(namespace, permission)
    if within_team is None or not found or model.namespace(namespace).owner is None:
        return found
    return found & await _owned_objects(model, source, namespace, within_team)


async def _owned_by(
    model: PermissionModel, source: TupleSource, namespace: str, object_id: str, team_id: str
) -> bool:
    """Whether `team_id` owns the object (walks its owner path forwards); true for objects no
    team owns. An owned object whose path is broken belongs to no team, so it is denied."""
    chain = model.owner_chain(namespace)
    if chain is None:
        return True
    at = [ObjectRef(namespace, object_id)]
    for _, via in chain:
        tuples = await source.tuples_of(at)
        at = [
            ObjectRef(t.subject_ns, t.subject_id)
            for ref in at
            for t in tuples.get(ref, ())
            if t.relation == via and not t.subject_relation
        ]
    return {ref.object_id for ref in at} == {team_id}


async def _owned_objects(
    model: PermissionModel, source: TupleSource, namespace: str, team_id: str
) -> set[str]:
    """Ids of the `namespace` objects `team_id` owns (walks the owner path backwards)."""
    chain = model.owner_chain(namespace) or []
    ids = {team_id}
    target = Namespace.TEAM.value
    for step_ns, via in reversed(chain):
        ids = await source.objects_related(step_ns, via, target, ids) if ids else set()
        target = step_ns
    return ids


def _too_deep(subject: Subject, max_depth: int) -> PermissionEvaluationFailed:
    return PermissionEvaluationFailed(
        f"subject sets nest deeper than {max_depth} levels while evaluating for {subject}"
    )


class _Check:
    """One check call: a cache of tuples per object and of userset memberships."""

    def __init__(
        self, model: PermissionModel, source: TupleSource, subject: Subject, max_depth: int
    ) -> None:
        self._model = model
        self._source = source
        self._subject = subject
        self._max_depth = max_depth
        self._wanted = (subject.ns, subject.id, subject.relation or "")
        self._tuples: dict[ObjectRef, Sequence[RelationTuple]] = {}
        self._members: dict[Userset, bool] = {}

    async def permission(self, namespace: str, object_id: str, name: str) -> bool:
        ns = self._model.namespace(namespace)
        if name in ns.relations:
            return await self._member(Userset(namespace, object_id, name))
        for term in ns.permissions[name]:
            if not term.admits(self._subject):
                continue
            if isinstance(term, Rel):
                if await self.permission(namespace, object_id, term.name):
                    return True
                continue
            tuples = await self._load_one(ObjectRef(namespace, object_id))
            targets = [
                ObjectRef(t.subject_ns, t.subject_id)
                for t in tuples
                if t.relation == term.via
                and not t.subject_relation
                and self._model.has(t.subject_ns, term.name)
            ]
            await self._load(targets)
            for target in targets:
                if await self.permission(target.namespace, target.object_id, term.name):
                    return True
        return False

    async def _member(self, start: Userset) -> bool:
        """Breadth-first over subject sets; a visited set makes cycles terminate."""
        if start in self._members:
            return self._members[start]
        seen = {start}
        frontier = [start]
        hops = 0
        found = False
        while frontier and not found:
            if hops > self._max_depth:
                raise _too_deep(self._subject, self._max_depth)
            await self._load([userset.object for userset in frontier])
            following: list[Userset] = []
            for userset in frontier:
                for t in self._tuples[userset.object]:
                    if t.relation != userset.relation:
                        continue
                    if (t.subject_ns, t.subject_id, t.subject_relation) == self._wanted:
                        found = True
                        break
                    if t.subject_relation:
                        nested = Userset(t.subject_ns, t.subject_id, t.subject_relation)
                        if nested not in seen:
                            seen.add(nested)
                            following.append(nested)
                if found:
                    break
            frontier = following
            hops += 1
        self._members[start] = found
        return found

    async def _load_one(self, ref: ObjectRef) -> Sequence[RelationTuple]:
        await self._load([ref])
        return self._tuples[ref]

    async def _load(self, refs: Iterable[ObjectRef]) -> None:
        missing = [ref for ref in dict.fromkeys(refs) if ref not in self._tuples]
        if not missing:
            return
        found = await self._source.tuples_of(missing)
        for ref in missing:
            self._tuples[ref] = found.get(ref, ())


class _Lookup:
    def __init__(
        self,
        model: PermissionModel,
        source: TupleSource,
        subject: Subject,
        memberships: Iterable[Userset],
    ) -> None:
        self._model = model
        self._source = source
        self._subject = subject
        self._by_relation: dict[tuple[str, str], set[str]] = {}
        for userset in memberships:
            key = (userset.namespace, userset.relation)
            self._by_relation.setdefault(key, set()).add(userset.object_id)
        self._memo: dict[tuple[str, str], set[str]] = {}

    async def objects(self, namespace: str, name: str) -> set[str]:
        ns = self._model.namespace(namespace)
        if name in ns.relations:
            return self._by_relation.get((namespace, name), set())
        key = (namespace, name)
        if key in self._memo:
            return self._memo[key]
        found: set[str] = set()
        for term in ns.permissions[name]:
            if not term.admits(self._subject):
                continue
            if isinstance(term, Rel):
                found |= await self.objects(namespace, term.name)
                continue
            for target in self._model.targets(namespace, term.via):
                reachable = await self.objects(target, term.name)
                if reachable:
                    found |= await self._source.objects_related(
                        namespace, term.via, target, reachable
                    )
        self._memo[key] = found
        return found


class TupleSet:
    """An in-memory `TupleSource`: the reference the Postgres source is tested against."""

    def __init__(self, tuples: Iterable[RelationTuple] = ()) -> None:
        self._tuples: set[RelationTuple] = set(tuples)

    def add(self, *tuples: RelationTuple) -> None:
        self._tuples.update(tuples)

    def remove(self, *tuples: RelationTuple) -> None:
        self._tuples.difference_update(tuples)

    def __iter__(self) -> Iterator[RelationTuple]:
        return iter(sorted(self._tuples, key=str))

    def __len__(self) -> int:
        return len(self._tuples)

    async def tuples_of(
        self, objects: Sequence[ObjectRef]
    ) -> Mapping[ObjectRef, Sequence[RelationTuple]]:
        wanted = set(objects)
        found: dict[ObjectRef, list[RelationTuple]] = {}
        for t in self._tuples:
            if t.object in wanted:
                found.setdefault(t.object, []).append(t)
        return found

    async def memberships(self, subject: Subject, max_depth: int) -> Mapping[Userset, int]:
        holders: dict[tuple[str, str, str], list[Userset]] = {}
        for t in self._tuples:
            key = (t.subject_ns, t.subject_id, t.subject_relation)
            holders.setdefault(key, []).append(Userset(t.namespace, t.object_id, t.relation))
        depths: dict[Userset, int] = {}
        frontier = holders.get((subject.ns, subject.id, subject.relation or ""), [])
        for hops in range(max_depth + 2):
            fresh = [u for u in dict.fromkeys(frontier) if u not in depths]
            for userset in fresh:
                depths[userset] = hops
            frontier = [nxt for u in fresh for nxt in holders.get(u, [])]
        return depths

    async def objects_related(
        self, namespace: str, relation: str, subject_ns: str, subject_ids: Collection[str]
    ) -> set[str]:
        ids = set(subject_ids)
        return {
            t.object_id
            for t in self._tuples
            if t.namespace == namespace
            and t.relation == relation
            and t.subject_ns == subject_ns
            and t.subject_id in ids
            and not t.subject_relation
        }


# --- activity payloads ----------------------------------------------------------------------

TupleList = Annotated[list[RelationTuple], Field(max_length=MAX_TUPLES_PER_CHANGE)]


class TupleWrite(Payload):
    tuples: TupleList


class TupleWriteResult(Payload):
    written: int = 0
    """Tuples this call inserted; a retry after a committed attempt reports 0."""


class TupleDelete(Payload):
    tuples: TupleList


class TupleDeleteResult(Payload):
    deleted: int = 0


class TupleReplace(Payload):
    """Delete some tuples and write others in one transaction (a diary transfer rebinds its team
    atomically, SPEC 3.3)."""

    delete: TupleList = Field(default_factory=list)
    write: TupleList = Field(default_factory=list)


class TupleReplaceResult(Payload):
    deleted: int = 0
    written: int = 0


class ObjectDelete(Payload):
    namespace: NamespaceName
    object_id: ObjectId


class ObjectDeleteResult(Payload):
    deleted: int = 0
