"""The kinds of model: HTTP bodies are closed, workflow payloads tolerate unknown fields."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, model_validator
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
