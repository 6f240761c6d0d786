"""Text every store can hold: no NUL (U+0000) and no lone surrogate (U+D800..U+DFFF).

Postgres refuses both in `text` and `jsonb`, and a lone surrogate cannot be encoded as UTF-8 at
all (S3 keys, hashes, logs), so a request carrying one is a client error named by its place,
never a failed write. `RequestBody` runs this over every body, query and path it validates (once
validated, so a JSON body keeps JSON's strict types), and the API over every header; no field
repeats the check.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

Location = tuple[str | int, ...]


def unstorable_text_at(value: Any, at: Location = ()) -> Location | None:
    """Where the first unstorable string sits in a JSON-like value or a model (a mapping key
    counts as text, its value sits under it), or None when all of it is storable."""
    if isinstance(value, str):
        return at if is_unstorable(value) else None
    if isinstance(value, BaseModel):  # a validated model: its fields under their wire names
        value = {
            field.alias or name: getattr(value, name)
            for name, field in type(value).model_fields.items()
        }
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and is_unstorable(key):
                return (*at, key)
            found = unstorable_text_at(item, (*at, key))
            if found is not None:
                return found
    elif isinstance(value, (list, tuple, set, frozenset)):
        for index, item in enumerate(value):
            found = unstorable_text_at(item, (*at, index))
            if found is not None:
                return found
    return None


def is_unstorable(text: str) -> bool:
    if text.isascii():  # the common case, and a scan in C: no surrogate can hide in ASCII
        return "\x00" in text
    return _UNSTORABLE.search(text) is not None


def printable(text: str) -> str:
    """The text with each unstorable character written as a `\\u` escape of four hex digits
    (for messages)."""
    return _UNSTORABLE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


UNSTORABLE_TEXT_MESSAGE = "Text must not contain a NUL character or a lone surrogate"
