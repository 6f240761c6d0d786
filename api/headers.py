"""The team header (`x-service-team-id`): read by authentication (a team agent key must name its
own team) and by the routes, so it lives below both."""

from __future__ import annotations

import uuid
from uuid import UUID

from aiohttp import web

from schemas.errors import InvalidTeamHeader, TeamRequired

TEAM_HEADER = "x-service-team-id"


def team_header(request: web.Request) -> UUID | None:
    """The `x-service-team-id` header as a uuid; None when absent, 400 when malformed."""
    raw = request.headers.get(TEAM_HEADER)
    if raw is None:
        return None
    try:
        return uuid.UUID(raw.strip())
    except ValueError:
        raise InvalidTeamHeader(f"The {TEAM_HEADER} header must be a uuid") from None


def require_team_header(request: web.Request) -> UUID:
    team_id = team_header(request)
    if team_id is None:
        raise TeamRequired(f"This route needs the {TEAM_HEADER} header")
    return team_id
