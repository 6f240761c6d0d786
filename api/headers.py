"""The team header (`x-service-team-id`): read by authentication (a team agent key must name its
own team) and by the routes, so it lives below both."""

from __future__ import annotations

import uuid
from uuid import UUID

from aiohttp import web

from schemas.errors import (
    FieldError,
    InvalidTeamHeader,
    RequestInvalid,
    TeamRequired,
)
from schemas.text import UNSTORABLE_TEXT_MESSAGE, is_unstorable

TEAM_HEADER = "x-service-team-id"
# Retries of creates and decisions (api.idempotency)
IDEMPOTENCY_HEADER = "Idempotency-Key"
# On a 200 of an entry create: the request duplicated this live entry, and created nothing
DUPLICATE_HEADER = "Cairn-Duplicate-Of"


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


def refuse_unstorable_headers(request: web.Request) -> None:
    """400 naming `/headers/<name>` when a header holds a NUL or a byte sequence that is not
    UTF-8 (aiohttp keeps such bytes as lone surrogates): a credential, a team id or an
    `Idempotency-Key` reaches hashes, SQL and workflow ids, which cannot hold them."""
    for name, value in request.headers.items():
        if is_unstorable(value):
            pointer = f"/headers/{name.lower()}"
            raise RequestInvalid(
                f"Invalid header: {pointer}: {UNSTORABLE_TEXT_MESSAGE}",
                errors=[FieldError(pointer=pointer, message=UNSTORABLE_TEXT_MESSAGE)],
            )
