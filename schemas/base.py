"""The kinds of model: HTTP bodies are closed, workflow payloads tolerate unknown fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RequestBody(BaseModel):
    """An HTTP request body or query: an unknown field is a client error (400 naming it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ResponseBody(BaseModel):
    """An HTTP response body; clients must tolerate fields added later."""

    model_config = ConfigDict(frozen=True)


class Payload(BaseModel):
    """A Temporal payload: unknown fields tolerated, every new field gets a default."""

    model_config = ConfigDict(
        extra="ignore", frozen=True, ser_json_bytes="base64", val_json_bytes="base64"
    )
