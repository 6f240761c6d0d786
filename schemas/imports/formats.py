"""Which format an upload to `POST /diaries/import` is, and reading a peer file whole.

The Content-Type chooses the family, the bytes the format (docs/imports.md "Choosing the
format"): `application/vnd.ipld.car` is a Cairn archive; `application/json` is Mem0's listing
(an object with `results`) or a Letta agent file (an object with `agents`); `application/zip`
and `application/gzip` are a COGX archive; `application/octet-stream` is sniffed (a zip or gzip
signature: COGX; a JSON object: Mem0 or Letta; anything else: a Cairn archive, as before peer
imports existed). Any other type is 415. Nothing here needs a `--format`: the shapes differ in
their first bytes or top-level keys.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from schemas.imports import cogx, letta, mem0
from schemas.imports.peer import PeerFile, RecordRejected
from schemas.kernel.diary_car import CAR_MEDIA_TYPE

JSON_TYPE: Final = "application/json"
ZIP_TYPE: Final = "application/zip"
GZIP_TYPE: Final = "application/gzip"
OCTET_STREAM: Final = "application/octet-stream"
# what the route accepts, in the order the OpenAPI document lists them
IMPORT_MEDIA_TYPES: Final = (CAR_MEDIA_TYPE, JSON_TYPE, ZIP_TYPE, GZIP_TYPE, OCTET_STREAM)
_ARCHIVE_TYPES: Final = frozenset({ZIP_TYPE, GZIP_TYPE, "application/x-gzip"})

Family = Literal["car", "peer"]


def _looks_like_json(data: bytes) -> bool:
    return data.lstrip()[:1] == b"{"


def family(content_type: str, data: bytes) -> Family | None:
    """`car` or `peer` for an accepted Content-Type (None: 415)."""
    if content_type == CAR_MEDIA_TYPE:
        return "car"
    if content_type == JSON_TYPE or content_type in _ARCHIVE_TYPES:
        return "peer"
    if content_type == OCTET_STREAM:
        return "peer" if cogx.is_archive(data) or _looks_like_json(data) else "car"
    return None


def _json_document(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RecordRejected("the file", f"not JSON ({error})") from None


def read_peer_file(data: bytes) -> PeerFile:
    """The entries of a Mem0, Letta or COGX file; raises `RecordRejected` at the first bad
    record."""
    if cogx.is_archive(data):
        return cogx.read(data)
    document = _json_document(data)
    if mem0.is_mem0(document):
        return mem0.read(document)
    if letta.is_agent_file(document):
        return letta.read(document)
    raise RecordRejected(
        "the file",
        "neither a Mem0 listing (an object with results), a Letta agent file (with agents) "
        "nor a COGX archive (a zip or .tar.gz)",
    )
