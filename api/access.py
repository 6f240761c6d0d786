"""Permission checks as routes use them: the caller as a subject, the team header, 404 vs 403.

A private resource the caller may not read answers 404 (it does not exist for them, so ids
cannot be enumerated); a resource the caller can see but not change answers 403.
"""

from __future__ import annotations

import uuid
from uuid import UUID

from aiohttp import web

from api import keys
from api.auth import require_principal
from schemas.errors import DomainError, Forbidden, NotFound, ValidationFailed
from schemas.kernel.permissions import Subject
from schemas.principals import Principal

TEAM_HEADER = "x-service-team-id"


def subject_of(principal: Principal) -> Subject:
    return Subject(ns=principal.subject_ns, id=str(principal.subject_id))


def team_header(request: web.Request) -> UUID | None:
    """The `x-service-team-id` header as a uuid; None when absent, 400 when malformed."""
    raw = request.headers.get(TEAM_HEADER)
    if raw is None:
        return None
    try:
        return uuid.UUID(raw.strip())
    except ValueError:
        raise ValidationFailed(
            f"The {TEAM_HEADER} header must be a uuid", code="invalid-team-header"
        ) from None


def require_team_header(request: web.Request) -> UUID:
    team_id = team_header(request)
    if team_id is None:
        raise ValidationFailed(f"This route needs the {TEAM_HEADER} header", code="team-required")
    return team_id


async def allowed(
    request: web.Request, namespace: str, object_id: str | UUID, permission: str
) -> bool:
    """Whether the authenticated caller holds `permission` on the object (503 on engine error)."""
    subject = subject_of(require_principal(request))
    return await request.app[keys.PERMISSIONS].check(namespace, object_id, permission, subject)


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
        raise denied or Forbidden(f"You lack '{permission}' on this {namespace}")


async def require_visible(
    request: web.Request, namespace: str, object_id: str | UUID, permission: str
) -> None:
    """Like `require`, but a denial is the 404 of a resource the caller cannot know about."""
    await require(
        request, namespace, object_id, permission, denied=NotFound(f"No such {namespace}")
    )
