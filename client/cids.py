"""The content identifiers an agent recomputes on its side: the same functions the server uses
(`schemas.kernel.cids`), plus checks of what the packs API returns.

    from client.cids import verify_pack, verify_rendered_pack
    assert verify_pack(await rest.get(f"/packs/{pack_id}"))   # payload hashes to packCid

A pack's CID hashes its diary, type, params and each entry's CID, compression level and rank
(never its creator or times); a rendered pack's CID hashes the SHA-256 of its Markdown, its
render method and its source pack's CID. `render_pack_to_docs_v1` is the exact Markdown of the
server render method, so a server rendering can be checked byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas.kernel.cids import (
    PackEntry,
    bytes_cid,
    content_hash,
    entry_cid,
    entry_envelope,
    json_cid,
    pack_cid,
    pack_envelope,
    parse_cid,
    rendered_pack_cid,
    rendered_pack_cid_from_hash,
    rendered_pack_envelope,
)
from schemas.kernel.pack_render import PACK_TO_DOCS_V1, RenderEntry, render_pack_to_docs_v1

__all__ = [
    "PACK_TO_DOCS_V1",
    "PackEntry",
    "RenderEntry",
    "bytes_cid",
    "content_hash",
    "entry_cid",
    "entry_envelope",
    "json_cid",
    "pack_cid",
    "pack_cid_of_payload",
    "pack_envelope",
    "parse_cid",
    "render_pack_to_docs_v1",
    "rendered_pack_cid",
    "rendered_pack_cid_from_hash",
    "rendered_pack_envelope",
    "verify_pack",
    "verify_rendered_pack",
]


def pack_cid_of_payload(payload: Mapping[str, Any]) -> str:
    """The CID of a pack from its stored `payload` (the hashed envelope as JSON)."""
    entries = [
        PackEntry(str(e["cid"]), str(e["compressionLevel"]), int(e["rank"]))
        for e in payload["entries"]
    ]
    return pack_cid(payload["diaryId"], payload["packType"], payload["params"], entries)


def verify_pack(pack: Mapping[str, Any]) -> bool:
    """Whether a pack as `GET /packs/{id}` returns it hashes to its `packCid`, and its payload
    names its diary, type and params."""
    payload = pack["payload"]
    return bool(
        pack_cid_of_payload(payload) == pack["packCid"]
        and payload["diaryId"] == pack["diaryId"]
        and payload["packType"] == pack["packType"]
        and payload["params"] == pack["params"]
    )


def verify_rendered_pack(rendered: Mapping[str, Any]) -> bool:
    """Whether a rendered pack with its `content` hashes to its `contentHash` and `packCid`."""
    markdown = str(rendered["content"])
    return bool(
        content_hash(markdown) == rendered["contentHash"]
        and rendered_pack_cid(markdown, rendered["renderMethod"], rendered["sourcePackCid"])
        == rendered["packCid"]
    )
