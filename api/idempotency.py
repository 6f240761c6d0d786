"""`Idempotency-Key`: one parser, one request fingerprint, one way to mint ids from a key.

DECISIONS "Trust at the edges": every POST that creates or decides honours the header (its
endpoint says `idempotent=True`, which documents it). Temporal does the remembering:

- A route mints the request's `RunKey` once (`run_key`: None without a header) and passes it to
  the run as an argument (`api.flows.execute(..., key=...)`): nothing about the key travels on
  the request. A create names its resource with `new_id(key)`: a uuid5 of (area, principal,
  key), so a retry names the same resource, hence the same workflow id (derived from the id
  alone, never from a parent: the key sent again under another team or diary must find the
  first run and be refused, not start a second run over the same id), and lands on the same
  run. A route whose workflow id is a natural key (a grant names its diary and subject) takes
  `keyed_workflow_id(key, natural)` instead.
- `api.flows` starts a keyed run with the key's request fingerprint in its memo. A retry finds
  the run: the same fingerprint is answered from it (running or completed: its result), another
  one is 409 `idempotency-key-reused`. Temporal keeps a closed run for the namespace's retention
  (7 d in the Helm chart's setup); a run after that names the same id, on which the inserts of
  its activities are idempotent (`ON CONFLICT (id)`), as every activity's must be.
- An Update to a running workflow (a claim) carries `update_id`: Temporal answers a repeated
  update id from the first outcome.

Tasks (SPEC 4.5) and agent keys (SPEC 4.6) keep their own rules, as the spec writes them, and
share only the parser: docs/contributing-idempotency.md says why.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
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


@dataclass(frozen=True)
class RunKey:
    """A request's `Idempotency-Key` as its run uses it, minted once by `run_key`.

    `scoped` is the key within its area and principal (the same key from another caller, or for
    another kind of write, is another run); `fingerprint` is the request it was sent with, which
    a retry must match."""

    area: str
    scoped: UUID
    fingerprint: str

    @property
    def update_id(self) -> str:
        """An Update's id: Temporal answers a repeat from the first outcome. The fingerprint is
        part of it, so a key reused with another body is a new Update, which the workflow's
        validator judges on the state reached."""
        return f"{self.area}/{self.scoped}/{self.fingerprint}"


def run_key(request: web.Request, area: str) -> RunKey | None:
    """The request's key for a run of `area`, None when no `Idempotency-Key` was sent. Call it
    once the route has read what the fingerprint covers (a file body sets its CID first)."""
    key = idempotency_key(request)
    if key is None:
        return None
    principal = require_principal(request)
    scoped = uuid.uuid5(_KEYED_IDS, f"{area}|{principal.subject_ns}|{principal.subject_id}|{key}")
    return RunKey(area=area, scoped=scoped, fingerprint=fingerprint(request))


def new_id(key: RunKey | None) -> UUID:
    """The id of the resource a request creates: its key's when one was sent, so a retry names
    the same one; random otherwise."""
    return uuid.uuid4() if key is None else key.scoped


def keyed_workflow_id(key: RunKey | None, natural: str) -> str:
    """For a write whose workflow id is a natural key: with a key, an id of (principal, key)
    instead, so its run answers retries of this request only."""
    return natural if key is None else f"{key.area}/keyed/{key.scoped}"


def update_id(request: web.Request, area: str) -> str | None:
    """The Update id of a keyed request (`RunKey.update_id`), None without a key."""
    key = run_key(request, area)
    return None if key is None else key.update_id
