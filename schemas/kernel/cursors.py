"""Opaque, signed page cursors bound to their query (DECISIONS "Tasks": pages).

A cursor carries a position in a keyset-ordered list (for example the `(created_at, id)` of the
last item served). It is `<payload>.<tag>`, both base64url without padding: the payload is the
compact JSON of the position, the tag an HMAC-SHA256 over the list's name, the query's filters
and the payload, under a key derived from the server secret. So a client can neither forge a
position nor reuse a cursor with other filters or on another list: any of these is a 400
`invalid-cursor`, never a silently different page. The page size is not bound: a client may
change `limit` from one page to the next.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypeVar
from uuid import UUID

from schemas.errors import InvalidCursor, ValidationFailed

CURSOR_MAX_CHARS: Final = 512
_KEY_LABEL: Final = b"service:cursor:v1"

Scalar = str | int | float | bool | None
# where a keyset-ordered list stands: the `(created_at, id)` of the last item served
Position = tuple[datetime, UUID]
T = TypeVar("T")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _canonical(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def _tag(secret: bytes, scope: str, binding: Mapping[str, Scalar], payload: str) -> str:
    key = hmac.new(secret, _KEY_LABEL, hashlib.sha256).digest()
    message = _canonical([scope, dict(binding), payload])
    return _b64(hmac.new(key, message, hashlib.sha256).digest())


def encode_cursor(
    position: Mapping[str, Scalar], *, secret: bytes, scope: str, binding: Mapping[str, Scalar]
) -> str:
    """The cursor after `position` in the list `scope` filtered by `binding`."""
    payload = _b64(_canonical(dict(position)))
    return f"{payload}.{_tag(secret, scope, binding, payload)}"


def decode_cursor(
    cursor: str, *, secret: bytes, scope: str, binding: Mapping[str, Scalar]
) -> dict[str, Any]:
    """The position a cursor carries; 400 `invalid-cursor` when it was not made by
    `encode_cursor` for this list and these filters."""
    payload, dot, tag = cursor.partition(".")
    if not dot or len(cursor) > CURSOR_MAX_CHARS:
        raise _invalid()
    if not hmac.compare_digest(tag.encode(), _tag(secret, scope, binding, payload).encode()):
        raise _invalid()
    try:
        position = json.loads(_unb64(payload))
    except (binascii.Error, ValueError):
        raise _invalid() from None
    if not isinstance(position, dict):
        raise _invalid()
    return position


def _invalid() -> ValidationFailed:
    return InvalidCursor("The cursor is not one this list gave for this query")


@dataclass(frozen=True)
class Keyset:
    """One keyset-paged list as a route serves it: the position a request's cursor names, and a
    page cut from one row more than asked (the extra row says another page follows) with the
    cursor after its last row. `fields` name the position's two parts in the cursor."""

    secret: bytes
    scope: str
    binding: Mapping[str, Scalar]
    fields: tuple[str, str] = ("c", "i")

    def after(self, cursor: str | None) -> Position | None:
        """Where the page a cursor asks for starts; None for the first page."""
        if cursor is None:
            return None
        position = decode_cursor(cursor, secret=self.secret, scope=self.scope, binding=self.binding)
        at, key = self.fields
        try:
            return datetime.fromisoformat(position[at]), UUID(position[key])
        except (KeyError, TypeError, ValueError):
            raise InvalidCursor("The cursor is malformed") from None

    def page(
        self, rows: Sequence[T], limit: int, position: Callable[[T], Position]
    ) -> tuple[list[T], str | None]:
        """The first `limit` rows, and the cursor of the next page (None when this is the last:
        `rows` holds `limit + 1` when another follows)."""
        page = list(rows[:limit])
        if len(rows) <= limit or not page:
            return page, None
        at, key = position(page[-1])
        cursor = encode_cursor(
            {self.fields[0]: at.isoformat(), self.fields[1]: str(key)},
            secret=self.secret,
            scope=self.scope,
            binding=self.binding,
        )
        return page, cursor
