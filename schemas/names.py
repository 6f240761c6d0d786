"""How a response names a subject it refers to by id: a human's email and display name, an
agent's fingerprint (issue 24: a client never has to show a person as a bare uuid).

Reads fill these fields from the `subject_names` view (migration 0022) in the same query that
finds the subjects; a subject whose row is gone, or a group, keeps them null.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from schemas import limits
from schemas.base import ResponseBody

# A human's display name as requests send it (the text guard of `RequestBody` applies too)
DisplayName = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=limits.DISPLAY_NAME_MAX_CHARS
    ),
]


class SubjectNames(ResponseBody):
    """The names of the agent or human a view refers to by `subjectId` (all optional)."""

    email: str | None = Field(default=None, description="Humans only")
    displayName: str | None = Field(default=None, description="Humans only, when they gave one")
    fingerprint: str | None = Field(default=None, description="Agents only")
