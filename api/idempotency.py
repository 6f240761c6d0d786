"""`Idempotency-Key`: one parser, one request fingerprint, one way to mint ids from a key.

DECISIONS "Trust at the edges": every POST that creates or decides honours the header (its
endpoint says `idempotent=True`, which documents it). Temporal does the remembering:

- A create mints its resource id with `new_id`: a uuid5 of (area, principal, key) when a key is
  sent, so a retry names the same resource, hence the same workflow id (derived from the id
  alone, never from a parent: the key sent again under another team or diary must find the
  first run and be refused, not start a second run over the same id), and lands on the same
  run. A route whose workflow id is a natural key (a grant names its
  diary and subject) takes `keyed_workflow_id` instead.
- `api.flows` starts a keyed run with the request's `fingerprint` in its memo. A retry finds the
  run: the same fingerprint is answered from it (running or completed: its result), another one
  is 409 `idempotency-key-reused`. Temporal keeps a closed run for the namespace's retention
  (7 d in the Helm chart's setup); a run after that names the same id, on which the inserts of its
  activities are idempotent (`ON CONFLICT (id)`), as every activity's must be.
- An Update to a running workflow (a claim) carries `update_id`: Temporal answers a repeated
  update id from the first outcome.

Tasks (SPEC 4.5) and agent keys (SPEC 4.6) keep their own rules and share only the parser.
"""

from __future__ import annotations

import uuid
from typing import Any, Final
from uuid import UUID

from aiohttp import web
from pydantic import BaseModel

from api import keys
from api.auth import require_principal
from api.headers import IDEMPOTENCY_HEADER, TEAM_HEADER
from schemas import limits
from schemas.errors import Conflict, IdempotencyKeyReused, InvalidIdempotencyKey
from schemas.kernel.cids import json_cid

# The memo field of a keyed run that holds its request's fingerprint (`api.flows`)
FINGERPRINT_MEMO: Final = "idempotencyRequest"
# uuid5 namespace of ids minted from a key (fixed forever: stored ids depend on it)
_KEYED_IDS: Final = uuid.UUID("0b7f6c1e-3d52-5e0f-8a44-2c9b6e1d7a35")


def idempotency_key(request: web.Request) -> str | None:
    """The `Idempotency-Key` header: None when absent, 400 unless 1..200 characters."""
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        return None
    if not 1 <= len(key) <= limits.IDEMPOTENCY_KEY_MAX_CHARS:
        raise InvalidIdempotencyKey(
            f"{IDEMPOTENCY_HEADER} must be 1 to {limits.IDEMPOTENCY_KEY_MAX_CHARS} characters"
        )
    return key


def key_reused() -> Conflict:
    return IdempotencyKeyReused(f"This {IDEMPOTENCY_HEADER} was used with another request")


def fingerprint(request: web.Request) -> str:
    """The CID of the request as its route reads it: method, route template, path and query
    parameters, team header and the parsed body (defaults filled in, so an omitted default and
    the same value sent are one request), or a file body's CID."""
    parsed = request.get(keys.PARSED)
    spec = request[keys.ENDPOINT]
    described: dict[str, Any] = {
        "method": request.method,
        "route": getattr(spec, "path", request.path),
        "path": dict(request.match_info),
        "query": _dumped(getattr(parsed, "query", None)),
        "team": request.headers.get(TEAM_HEADER),
        "body": _dumped(getattr(parsed, "body", None)),
    }
    raw_body = request.get(keys.RAW_BODY_CID)
    if raw_body is not None:  # a file body (a diary import) is its bytes' CID
        described["rawBody"] = raw_body
    return json_cid(described)


def _dumped(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True) if isinstance(model, BaseModel) else None


def _keyed(request: web.Request, area: str) -> UUID | None:
    key = idempotency_key(request)
    if key is None:
        return None
    principal = require_principal(request)
    return uuid.uuid5(_KEYED_IDS, f"{area}|{principal.subject_ns}|{principal.subject_id}|{key}")


def new_id(request: web.Request, area: str) -> UUID:
    """The id of the resource this request creates: derived from (area, principal, key) when an
    `Idempotency-Key` is sent, so a retry names the same one; random otherwise."""
    keyed = _keyed(request, area)
    request[keys.KEYED_RUN] = keyed is not None
    return keyed or uuid.uuid4()


def keyed_workflow_id(request: web.Request, area: str, natural: str) -> str:
    """For a write whose workflow id is a natural key: with a key, an id of (principal, key)
    instead, so its run answers retries of this request only."""
    keyed = _keyed(request, area)
    request[keys.KEYED_RUN] = keyed is not None
    return natural if keyed is None else f"{area}/keyed/{keyed}"


def is_keyed_run(request: web.Request) -> bool:
    """Whether the workflow this request starts is named by its Idempotency-Key."""
    return bool(request.get(keys.KEYED_RUN))


def update_id(request: web.Request, area: str) -> str | None:
    """An Update's id for a keyed request: Temporal answers a repeat from the first outcome.
    The fingerprint is part of it, so a key reused with another body is a new Update, which the
    workflow's validator judges on the state reached."""
    keyed = _keyed(request, area)
    return None if keyed is None else f"{area}/{keyed}/{fingerprint(request)}"
