"""The kinds of model: HTTP bodies are closed, workflow payloads tolerate unknown fields."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Final, Self

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from schemas.text import UNSTORABLE_TEXT_MESSAGE, unstorable_text_at

# The error type of unstorable text; its context carries the location inside the model's input
# (`at`), which the API appends to the error's own location to build the JSON pointer.
UNSTORABLE_TEXT = "unstorable_text"


class RequestBody(BaseModel):
    """An HTTP request body, query or path: an unknown field is a client error (400 naming it),
    and so is a NUL or a lone surrogate anywhere in its text (keys included)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="after")
    def _refuse_unstorable_text(self) -> Self:
        # after validation: a validator before it would turn a JSON body into Python objects
        # and so lose JSON's strict types (an ISO string is a datetime only in JSON)
        at = unstorable_text_at(self)
        if at is not None:
            raise PydanticCustomError(UNSTORABLE_TEXT, UNSTORABLE_TEXT_MESSAGE, {"at": list(at)})
        return self


# RFC 3339 date-time (OpenAPI's `date-time`): seconds required, a fraction to microseconds (what
# Python and Postgres keep) and the offset optional here
# (a field's own type may require the offset: `Instant`)
_DATE_TIME: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?([Zz]|[+-]\d{2}:\d{2})?"
)


def _date_time_text(value: Any) -> Any:
    """A request's instant is RFC 3339 text: pydantic's lax mode would also read a number, or a
    numeric string such as `0.5` in a query, as Unix time, which no client means."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and _DATE_TIME.fullmatch(value):
        # parsed here: what a validator hands on is read as Python input, which a strict
        # (JSON-typed) body would refuse as a string
        return datetime.fromisoformat(value.replace("z", "Z"))
    raise ValueError("must be an RFC 3339 date-time, e.g. 2026-11-27T09:30:00Z")


# The one guard of every date-time a request carries (a test walks the request models for it).
DATE_TIME_TEXT: Final = BeforeValidator(_date_time_text)
# An instant with its offset, as requests send it
Instant = Annotated[AwareDatetime, DATE_TIME_TEXT]
# A date-time as requests send it; a missing offset is read as UTC where the field says so
DateTime = Annotated[datetime, DATE_TIME_TEXT]


def error_location(err: Any) -> tuple[Any, ...]:
    """A pydantic error's place in the input; unstorable text says where inside the model's
    input it sits (its own location is the model's)."""
    if err["type"] == UNSTORABLE_TEXT:
        return (*err["loc"], *err["ctx"]["at"])
    return tuple(err["loc"])


class ResponseBody(BaseModel):
    """An HTTP response body; clients must tolerate fields added later."""

    model_config = ConfigDict(frozen=True)


class Payload(BaseModel):
    """A Temporal payload: unknown fields tolerated, every new field gets a default."""

    model_config = ConfigDict(
        extra="ignore", frozen=True, ser_json_bytes="base64", val_json_bytes="base64"
    )
