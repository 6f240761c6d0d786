"""Permission checks as routes use them: the caller as a subject, the team header, 404 vs 403.

A private resource the caller may not read answers 404 (it does not exist for them, so ids
cannot be enumerated); a resource the caller can see but not change answers 403.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeVar
from uuid import UUID

from aiohttp import web

from api import keys
from api.auth import optional_principal, require_principal
from api.headers import team_header
from api.reads import reader
from api.spec import EndpointSpec
from infra.permissions import Closure
from infra.repos import memory_reads, runtime_profiles, task_reads
from infra.repos.task_reads import ClaimTarget
from schemas.errors import (
    AuthenticationRequired,
    DiaryNotFound,
    DomainError,
    NotFound,
    PermissionDenied,
    RuntimeProfileNotFound,
    TaskNotFound,
    TeamNotFound,
)
from schemas.kernel.permissions import Subject
from schemas.kernel.runtime_profiles import scopes_denied
from schemas.memory import Diary
from schemas.principals import Principal
from schemas.runtime_profiles import RuntimeProfile, profile_scope_denied
from schemas.task_api import Task

T = TypeVar("T")
NO_SUCH_DIARY = "No such diary"


def subject_of(principal: Principal) -> Subject:
    return Subject(ns=principal.subject_ns, id=str(principal.subject_id))


async def allowed(
    request: web.Request, namespace: str, object_id: str | UUID, permission: str
) -> bool:
    """Whether the authenticated caller holds `permission` on the object (503 on engine error).
    A team-bound agent key holds nothing on what another team owns (its confinement)."""
    return permission in await permitted(request, namespace, object_id, (permission,))


async def permitted(
    request: web.Request,
    namespace: str,
    object_id: str | UUID,
    permissions: Collection[str],
    *,
    closure: Closure | None = None,
) -> set[str]:
    """Which of `permissions` the authenticated caller holds on the object, as `allowed`
    decides each, in one read (none with the `closure` read beside the object)."""
    principal = require_principal(request)
    return await request.app[keys.PERMISSIONS].permitted(
        namespace,
        object_id,
        permissions,
        subject_of(principal),
        within_team=principal.confined_team_id,
        closure=closure,
    )


async def allowed_ids(request: web.Request, namespace: str, permission: str) -> set[UUID]:
    """Ids of the `namespace` objects on which the caller holds `permission`, under the same
    confinement as `allowed`: what lists and searches filter by."""
    principal = require_principal(request)
    found = await request.app[keys.PERMISSIONS].lookup(
        namespace, permission, subject_of(principal), within_team=principal.confined_team_id
    )
    return {UUID(object_id) for object_id in found}


async def require(
    request: web.Request,
    namespace: str,
    object_id: str | UUID,
    permission: str,
    *,
    denied: DomainError | None = None,
) -> None:
    """Raise `denied` (default 403) unless the caller holds `permission` on the object."""
    if not await allowed(request, namespace, object_id, permission):
        raise denied or PermissionDenied(f"You lack '{permission}' on this {namespace}")


# --- diaries: the visibility rule of SPEC 5, for every route that touches a diary ------------


def found(value: T | None, missing: DomainError) -> T:
    """`value`, or the `missing` problem (a 404) when the read found nothing."""
    if value is None:
        raise missing
    return value


async def load_diary(request: web.Request, diary_id: UUID) -> Diary:
    diary = await memory_reads.get_diary(reader(request), diary_id)
    return found(diary, DiaryNotFound(NO_SUCH_DIARY))


async def can_read(request: web.Request, diary: Diary) -> bool:
    """The visibility rule, for callers that filter rather than fail (lists)."""
    if diary.visibility == "public":
        return True
    principal = optional_principal(request)
    if principal is None:
        return False
    return diary.visibility == "moltnet" or await allowed(request, "Diary", diary.id, "read")


async def diary_access(
    request: web.Request, diary_id: UUID, permissions: Collection[str] = ()
) -> tuple[Diary, set[str]]:
    """The diary if the caller may read it, and which of `permissions` (Diary changes) the
    caller holds on it; 401 for an anonymous read of a `moltnet` diary, 404 for a private one
    the caller may not read (or that does not exist). One statement: the diary is read with its
    permission closure, from the primary like every permission read."""
    engine = request.app[keys.PERMISSIONS]
    read = await memory_reads.get_diary_with_closure(
        request.app[keys.READ_POOL], diary_id, engine.closure_args
    )
    diary, closure = found(read, DiaryNotFound(NO_SUCH_DIARY))
    principal = optional_principal(request)
    if principal is None:
        if diary.visibility == "moltnet":
            raise AuthenticationRequired("This diary is visible to authenticated principals only")
        if diary.visibility != "public":
            raise DiaryNotFound(NO_SUCH_DIARY)
        return diary, set()
    asked = set(permissions) if diary.visibility != "private" else {"read", *permissions}
    granted = await permitted(request, "Diary", diary.id, asked, closure=closure)
    if diary.visibility == "private" and "read" not in granted:
        raise DiaryNotFound(NO_SUCH_DIARY)
    return diary, granted & set(permissions)


async def readable_diary(request: web.Request, diary_id: UUID) -> Diary:
    """The diary if the caller may read it (see `diary_access`)."""
    diary, _ = await diary_access(request, diary_id)
    return diary


async def changeable_diary(request: web.Request, diary_id: UUID, permission: str) -> Diary:
    """The diary if the caller holds `permission` (write, manage); 404 when the caller cannot
    even read it, 403 when they can read but not change it."""
    diary, granted = await diary_access(request, diary_id, (permission,))
    if permission not in granted:
        raise PermissionDenied(f"You lack '{permission}' on this Diary")
    return diary


# --- tasks: who may see one -------------------------------------------------------------------


def _no_such_task() -> NotFound:
    return TaskNotFound("No such task")


async def can_view_task(request: web.Request, team_id: UUID, task_id: UUID) -> bool:
    """Members of the owning team (any role) and explicit grantees (Task `view`)."""
    return await allowed(request, "Team", team_id, "verify_claim") or await allowed(
        request, "Task", task_id, "view"
    )


async def task_target(
    request: web.Request, task_id: UUID, permission: str
) -> tuple[ClaimTarget, bool]:
    """The task as a claim or a cancel decides on it (404 when there is none), and whether the
    caller holds `permission` on it. One statement on one connection: the task is read with its
    permission closure, from the primary like every permission read."""
    engine = request.app[keys.PERMISSIONS]
    read = await task_reads.claim_target(request.app[keys.READ_POOL], task_id, engine.closure_args)
    target, closure = found(read, _no_such_task())
    granted = await permitted(request, "Task", task_id, (permission,), closure=closure)
    return target, permission in granted


async def visible_task(request: web.Request, task_id: UUID) -> Task:
    """The task if the caller may see it; 404 otherwise (and for another team's header)."""
    task = await task_reads.get_task(reader(request), task_id)
    if task is None:
        raise _no_such_task()
    header = team_header(request)
    if header is not None and header != task.teamId:
        raise _no_such_task()
    if not await can_view_task(request, task.teamId, task.id):
        raise _no_such_task()
    return task


# --- runtime profiles: who may see one, and the scopes an attempt keeps ------------------------


async def is_team_member(request: web.Request, team_id: UUID) -> bool:
    """Any role in the team (owners, managers, executors, members): who reads the task queue,
    and the runtime profiles a daemon claims under."""
    return await allowed(request, "Team", team_id, "verify_claim")


async def require_team_visible(
    request: web.Request, team_id: UUID, permission: str = "verify_claim"
) -> None:
    """The team as its routes see it: 404 `team-not-found` unless the caller holds `permission`
    on it (by default any role in it), so a team the caller is not in is indistinguishable
    from one that does not exist."""
    if not await allowed(request, "Team", team_id, permission):
        raise TeamNotFound("No such team")


async def visible_profile(request: web.Request, profile_id: UUID) -> RuntimeProfile:
    """The profile if the caller is a member of its team; 404 otherwise (and for another
    team's header)."""
    missing = RuntimeProfileNotFound("No such runtime profile")
    profile = await runtime_profiles.get_profile(reader(request), profile_id)
    if profile is None:
        raise missing
    header = team_header(request)
    if header is not None and header != profile.teamId:
        raise missing
    if not await is_team_member(request, profile.teamId):
        raise missing
    return profile


def attempt_scopes_denied(request: web.Request, policy: Mapping[str, Any] | None) -> list[str]:
    """The scopes of this route that the runtime policy frozen on an attempt at claim takes
    away from the caller's credential (SPEC 5: runtime policy narrows, never widens)."""
    spec = request[keys.ENDPOINT]
    assert isinstance(spec, EndpointSpec)
    return scopes_denied(spec.scopes, require_principal(request).scopes, policy)


def require_attempt_scopes(request: web.Request, policy: Mapping[str, Any] | None) -> None:
    """A call on an attempt: 403 `profile-scope-denied` when the attempt's runtime policy takes
    away a scope the route needs. The route's own scope check ran before."""
    denied = attempt_scopes_denied(request, policy)
    if denied:
        raise profile_scope_denied(denied)
