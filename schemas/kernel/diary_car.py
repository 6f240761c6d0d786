"""Diary archives: a whole diary as one CARv1 file, and every check an import makes on one.

`GET /diaries/{id}/export` writes this format and `POST /diaries/import` reads it. It is a
public contract (another implementation must be able to write and check it), so it is written
down here in full; README "Export and import" points at this text.

File
    A CARv1 file (https://ipld.io/specs/transport/car/carv1/): an unsigned-varint-prefixed
    DAG-CBOR header ``{"roots": [<manifest CID>], "version": 1}``, then one frame per block:
    varint(len(CID bytes) + len(block bytes)), the binary CID, the block bytes. Every CID is a
    CIDv1, sha2-256, codec dag-cbor (0x71); every block is canonical DAG-CBOR (sorted map keys,
    shortest integers, floats as 64-bit), so any IPLD library (libipld, go-car, @ipld/car)
    reads the file whole. Each block appears once, in this order: the manifest, then the entry
    blocks in manifest order (an entry block equal to an earlier one is not repeated).

Manifest (the root block)
    ``{"v": "service:diary-export:v1",
       "diary": {"id": <uuid string>, "name": str, "visibility": "private"|"moltnet"|"public",
                 "signed": bool},
       "entries": [<link to an entry block>, ...],
       "relations": [{"source": <index in entries>, "target": <index>, "relation": str,
                      "status": "proposed"|"accepted"|"rejected", "metadata": {...}}, ...],
       "head": <entry CID string of the chain's last entry> | null}``

    Entries of a signed diary are in chain order (the first has ``p = ""``, each next one's
    ``p`` is the CID of the one before, ``head`` is the last one's CID, null when empty); other
    diaries list theirs by ``createdAt``, then by entry block CID (entries with identical
    blocks, then by the relations they take part in), and ``head`` is null.
    Relations are sorted by (source, target, relation). Integral floats in ``metadata`` are
    written as integers (as for pack CIDs).

Entry block
    ``{"cid": <the entry CID string>, "envelope": <bytes>, "importance": 1..10,
       "createdAt": "YYYY-MM-DDTHH:MM:SS.ffffffZ",
       "signature": {"publicKey": "ed25519:<base64>", "nonce": <uuid string>,
                     "value": <base64 Ed25519 signature>}}``  (``signature`` only when signed)

    ``envelope`` holds the exact bytes the entry CID hashes (DECISIONS "Content identifiers":
    compact sorted JSON of ``{c, t, tags, type, v}``, plus ``p`` in signed diaries), so a
    reader recomputes the entry's CID as the raw-codec (0x55) sha2-256 CIDv1 of those bytes
    and compares it with ``cid``. The entry is carried inside a DAG-CBOR block rather than as
    a raw block because libipld's CAR reader refuses raw blocks. A signature is the signer's
    Ed25519 signature over the UTF-8 of ``"<cid>.<nonce>"`` (the signing-request payload,
    SPEC 4.4); the public key travels with it, so the file verifies without the server.

What is not in the file
    Entry and relation ids, creators, embeddings, injection flags, access counters, the
    diary's team and grants: an import gives them anew (the scan and the embedding are
    recomputed). So an export of an imported diary equals the original export byte for byte
    except for the manifest's ``diary.id`` and ``diary.name`` (and so the manifest's CID and
    the header that names it).

An import runs :func:`read_archive`, which refuses a file at its first bad block (in file
order: a frame that does not parse, bytes that do not hash to their CID, a block that is not
DAG-CBOR; then, walking the manifest, the first entry whose envelope, CID, chain link, limits
or signature is wrong, or whose block is not exactly the canonical encoding of its fields;
then the manifest itself) and names it. Because every accepted block is exactly what the
writer produces for its values, an accepted file re-exports to the same bytes.

Libraries: blocks are decoded by libipld (Rust; fast on large untrusted input) and encoded by
`dag_cbor` (which also encodes pack CIDs). The CAR framing is a varint and a CID per frame,
written here: libipld's CAR reader neither checks block hashes nor returns block bytes, and
the Python CAR packages are unmaintained.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, get_args

import dag_cbor
import libipld
from dag_cbor.ipld import IPLDKind

from schemas import limits
from schemas.kernel.cids import (
    DAG_CBOR_BLOCK_PREFIX,
    ENTRY_CID_VERSION,
    Json,
    dag_cbor_block_cid,
    dag_cbor_cid_string,
    entry_cid,
    entry_envelope,
    ipld_value,
    link,
    varint,
)
from schemas.kernel.crypto import parse_public_key, signing_payload, verify_signature
from schemas.memory import EntryType, RelationStatus, RelationType, Visibility

EXPORT_VERSION: Final = "service:diary-export:v1"
CAR_MEDIA_TYPE: Final = "application/vnd.ipld.car"
ROOT: Final = "the manifest"

_ENTRY_TYPES: Final = frozenset(get_args(EntryType))
_RELATIONS: Final = frozenset(get_args(RelationType))
_STATUSES: Final = frozenset(get_args(RelationStatus))
_VISIBILITIES: Final = frozenset(get_args(Visibility))
_CREATED_AT: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
_CREATED_AT_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
# what no text column can hold: NUL, and a lone surrogate (no UTF-8 form)
_UNSTORABLE: Final = re.compile("[\x00\ud800-\udfff]")
# CIDv1, dag-cbor, sha2-256 over 32 bytes: the only block address this format uses.
_BLOCK_PREFIX: Final = DAG_CBOR_BLOCK_PREFIX
_BLOCK_CID_BYTES: Final = len(_BLOCK_PREFIX) + 32


# --- the archive as values ----------------------------------------------------------------


@dataclass(frozen=True)
class ArchivedSignature:
    public_key: str
    nonce: str
    value: str


@dataclass(frozen=True)
class ArchivedEntry:
    """One entry as the file carries it; `prev_cid` is None outside signed diaries."""

    content: str
    title: str | None
    tags: tuple[str, ...]
    entry_type: str
    importance: int
    created_at: datetime
    prev_cid: str | None = None
    signature: ArchivedSignature | None = None

    @functools.cached_property
    def envelope(self) -> bytes:
        return entry_envelope(self.content, self.title, self.tags, self.entry_type, self.prev_cid)

    @functools.cached_property
    def cid(self) -> str:
        return entry_cid(self.content, self.title, self.tags, self.entry_type, self.prev_cid)


@dataclass(frozen=True)
class ArchivedRelation:
    """A relation between two entries, named by their positions in `DiaryArchive.entries`."""

    source: int
    target: int
    relation: str
    status: str
    metadata: Mapping[str, Json] = field(default_factory=dict)


@dataclass(frozen=True)
class DiaryArchive:
    diary_id: uuid.UUID
    name: str
    visibility: str
    signed: bool
    entries: tuple[ArchivedEntry, ...]
    relations: tuple[ArchivedRelation, ...] = ()

    @property
    def head(self) -> str | None:
        """The chain head of a signed diary (None when unsigned or empty)."""
        return self.entries[-1].cid if self.signed and self.entries else None


class ArchiveRejected(ValueError):
    """The file is not a diary archive this service accepts; `block` names where it failed."""

    def __init__(self, block: str, reason: str) -> None:
        super().__init__(f"{block}: {reason}")
        self.block = block
        self.reason = reason


# --- writing ------------------------------------------------------------------------------


_block_cid = dag_cbor_block_cid
_cid_text = dag_cbor_cid_string


def _created_at_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime(_CREATED_AT_FORMAT)


def _entry_block(entry: ArchivedEntry) -> bytes:
    block: dict[str, IPLDKind] = {
        "cid": entry.cid,
        "envelope": entry.envelope,
        "importance": entry.importance,
        "createdAt": _created_at_text(entry.created_at),
    }
    if entry.signature is not None:
        block["signature"] = {
            "publicKey": entry.signature.public_key,
            "nonce": entry.signature.nonce,
            "value": entry.signature.value,
        }
    return dag_cbor.encode(block)


def _chain_order(entries: Sequence[ArchivedEntry]) -> list[int]:
    """Positions in chain order, from the entry with ``p = ""``; entries off the chain (none
    in a healthy diary: the unique chain index forbids forks) follow in creation order, and a
    reader refuses them."""
    by_creation = sorted(range(len(entries)), key=lambda i: entries[i].created_at)
    successors: dict[str | None, list[int]] = {}
    for i in by_creation:
        successors.setdefault(entries[i].prev_cid, []).append(i)
    order: list[int] = []
    prev = ""
    while successors.get(prev):
        position = successors[prev].pop(0)
        order.append(position)
        prev = entries[position].cid
    placed = set(order)
    return order + [i for i in by_creation if i not in placed]


def _twin_key(
    archive: DiaryArchive, cids: Sequence[bytes], position: int
) -> tuple[tuple[str, str, str, str, bytes], ...]:
    """What tells apart entries whose blocks are identical: the relations they take part in
    (direction, the other end's block, type, status, metadata). Entries equal in this too are
    interchangeable: either order writes the same bytes."""
    keys = []
    for r in archive.relations:
        for end, other, role in ((r.source, r.target, "source"), (r.target, r.source, "target")):
            if end == position:
                metadata = dag_cbor.encode(ipld_value(r.metadata, "metadata"))
                keys.append((role, _cid_text(cids[other]), r.relation, r.status, metadata))
    return tuple(sorted(keys))


def write_archive(archive: DiaryArchive) -> Iterator[bytes]:
    """The CAR file of a diary, a frame at a time (the header first)."""
    blocks = [_entry_block(entry) for entry in archive.entries]
    cids = [_block_cid(block) for block in blocks]
    if archive.signed:
        order = _chain_order(archive.entries)
    else:
        order = sorted(
            range(len(blocks)),
            key=lambda i: (
                archive.entries[i].created_at,
                _cid_text(cids[i]),
                _twin_key(archive, cids, i),
            ),
        )
    position = {old: new for new, old in enumerate(order)}
    ordered = archive if order == list(range(len(order))) else _reordered(archive, order)
    manifest = dag_cbor.encode(_manifest(ordered, [cids[i] for i in order], position))
    root = _block_cid(manifest)
    header = _header(root)
    yield varint(len(header)) + header
    yield _frame(root, manifest)
    seen: set[bytes] = set()
    for i in order:
        if cids[i] not in seen:
            seen.add(cids[i])
            yield _frame(cids[i], blocks[i])


def _header(root: bytes) -> bytes:
    return dag_cbor.encode({"roots": [link(root)], "version": 1})


def _reordered(archive: DiaryArchive, order: Sequence[int]) -> DiaryArchive:
    return DiaryArchive(
        diary_id=archive.diary_id,
        name=archive.name,
        visibility=archive.visibility,
        signed=archive.signed,
        entries=tuple(archive.entries[i] for i in order),
        relations=archive.relations,
    )


def _manifest(
    archive: DiaryArchive, entry_cids: Sequence[bytes], position: Mapping[int, int]
) -> dict[str, IPLDKind]:
    relations = sorted(
        (
            (position[r.source], position[r.target], r.relation, r.status, r.metadata)
            for r in archive.relations
        ),
        key=lambda r: (r[0], r[1], r[2]),
    )
    return {
        "v": EXPORT_VERSION,
        "diary": {
            "id": str(archive.diary_id),
            "name": archive.name,
            "visibility": archive.visibility,
            "signed": archive.signed,
        },
        "entries": [link(cid) for cid in entry_cids],
        "relations": [
            {
                "source": source,
                "target": target,
                "relation": relation,
                "status": status,
                "metadata": ipld_value(metadata, "metadata"),
            }
            for source, target, relation, status, metadata in relations
        ],
        "head": archive.head,
    }


def _frame(cid: bytes, data: bytes) -> bytes:
    return varint(len(cid) + len(data)) + cid + data


def encode_archive(archive: DiaryArchive) -> bytes:
    return b"".join(write_archive(archive))


# --- reading and verifying ----------------------------------------------------------------


def _link(value: Any, where: str, what: str) -> str:
    """The CID string of a decoded link (libipld gives a link as its binary CID) to a block of
    this format; whether it was written as a link (tag 42) is held by the re-encoding check."""
    if not isinstance(value, bytes) or len(value) != _BLOCK_CID_BYTES:
        raise ArchiveRejected(where, f"{what}: not a link to a dag-cbor sha2-256 block")
    if not value.startswith(_BLOCK_PREFIX):
        raise ArchiveRejected(where, f"{what}: not a link to a dag-cbor sha2-256 block")
    return _cid_text(value)


def _read_varint(data: bytes, offset: int, where: str) -> tuple[int, int]:
    value = shift = 0
    while offset < len(data) and shift < 63:
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
    raise ArchiveRejected(where, "truncated or oversized length prefix")


def _decode(data: bytes, where: str) -> Any:
    """A block's value, decoded by libipld (Rust: the file is untrusted and may be large). It
    refuses unsorted or repeated map keys; the canonical form as a whole (shortest integers,
    links as links) is held by re-encoding what was read and comparing the bytes."""
    try:
        return libipld.decode_dag_cbor(data)
    except Exception as exc:  # libipld raises ValueError and others on malformed input
        raise ArchiveRejected(where, f"not DAG-CBOR ({exc})") from None


@dataclass(frozen=True)
class _Block:
    value: Any
    data: bytes


def _frames(data: bytes) -> tuple[str, dict[str, _Block]]:
    """The root CID and every block by CID string, each block's bytes hash-checked."""
    size, offset = _read_varint(data, 0, "the CAR header")
    header_bytes = data[offset : offset + size]
    header = _decode(header_bytes, "the CAR header")
    offset += size
    if (
        not isinstance(header, dict)
        or set(header) != {"roots", "version"}
        or header["version"] != 1
        or not isinstance(header["roots"], list)
        or len(header["roots"]) != 1
    ):
        raise ArchiveRejected("the CAR header", "expected {roots: [one CID], version: 1}")
    root = _link(header["roots"][0], "the CAR header", "roots")
    if _header(header["roots"][0]) != header_bytes:
        raise ArchiveRejected("the CAR header", "not in canonical DAG-CBOR form")
    blocks: dict[str, _Block] = {}
    while offset < len(data):
        where = f"the block at byte {offset}"
        size, offset = _read_varint(data, offset, where)
        frame = data[offset : offset + size]
        offset += size
        if len(frame) != size or size < _BLOCK_CID_BYTES:
            raise ArchiveRejected(where, "the frame is truncated")
        if not frame.startswith(_BLOCK_PREFIX):
            raise ArchiveRejected(where, "not a CIDv1 dag-cbor sha2-256 block address")
        cid = _cid_text(frame[:_BLOCK_CID_BYTES])
        body = frame[_BLOCK_CID_BYTES:]
        if hashlib.sha256(body).digest() != frame[len(_BLOCK_PREFIX) : _BLOCK_CID_BYTES]:
            raise ArchiveRejected(f"block {cid}", "its bytes do not hash to its CID")
        if cid in blocks:
            raise ArchiveRejected(f"block {cid}", "appears twice")
        blocks[cid] = _Block(_decode(body, f"block {cid}"), body)
    if root not in blocks:
        raise ArchiveRejected(f"block {root}", "the root (manifest) block is missing")
    return root, blocks


def _map(value: Any, keys: set[str], where: str, optional: frozenset[str] = frozenset()) -> dict:  # type: ignore[type-arg]
    if not isinstance(value, dict) or not keys <= set(value) <= keys | optional:
        raise ArchiveRejected(where, f"expected a map of {sorted(keys | optional)}")
    return value


def _text(value: Any, where: str, what: str, max_chars: int, min_chars: int = 0) -> str:
    if not isinstance(value, str) or not min_chars <= len(value) <= max_chars:
        raise ArchiveRejected(where, f"{what}: expected {min_chars}..{max_chars} characters")
    if _UNSTORABLE.search(value):
        raise ArchiveRejected(where, f"{what}: a NUL or a lone surrogate")
    return value


def _one_of(value: Any, allowed: frozenset[str], where: str, what: str) -> str:
    if value not in allowed:
        raise ArchiveRejected(where, f"{what}: expected one of {sorted(allowed)}")
    return str(value)


_Envelope = tuple[str, str | None, tuple[str, ...], str, str | None]


def _envelope(data: Any, where: str, signed: bool) -> _Envelope:
    """(content, title, tags, type, p) of an entry block's envelope, which must be exactly the
    canonical bytes `entry_envelope` writes for them."""
    if not isinstance(data, bytes):
        raise ArchiveRejected(where, "envelope: expected bytes")
    try:
        fields = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ArchiveRejected(where, "envelope: not UTF-8 JSON") from None
    keys = {"c", "t", "tags", "type", "v"} | ({"p"} if signed else set())
    _map(fields, keys, f"{where} envelope")
    if fields["v"] != ENTRY_CID_VERSION:
        raise ArchiveRejected(where, f"envelope: version is not {ENTRY_CID_VERSION}")
    content = _text(
        fields["c"],
        where,
        "content",
        limits.ENTRY_CONTENT_MAX_CHARS,
        limits.ENTRY_CONTENT_MIN_CHARS,
    )
    title = _text(fields["t"], where, "title", limits.ENTRY_TITLE_MAX_CHARS) or None
    tags = fields["tags"]
    if not isinstance(tags, list) or len(tags) > limits.ENTRY_TAGS_MAX:
        raise ArchiveRejected(where, f"tags: at most {limits.ENTRY_TAGS_MAX}")
    if len({repr(tag) for tag in tags}) != len(tags):
        raise ArchiveRejected(where, f"tags: at most {limits.ENTRY_TAGS_MAX}, each once")
    for tag in tags:
        _text(tag, where, "tag", limits.ENTRY_TAG_MAX_CHARS, 1)
    entry_type = _one_of(fields["type"], _ENTRY_TYPES, where, "type")
    prev = _text(fields["p"], where, "p", 100) if signed else None
    try:
        canonical = entry_envelope(content, title, tags, entry_type, prev)
    except ValueError:  # `p` is neither "" nor a CID
        raise ArchiveRejected(where, "envelope: p is not a CID") from None
    if canonical != data:
        raise ArchiveRejected(where, "envelope: not the canonical JSON of its fields")
    return content, title, tuple(tags), entry_type, prev


def _created_at(value: Any, where: str) -> datetime:
    if not isinstance(value, str) or not _CREATED_AT.fullmatch(value):
        raise ArchiveRejected(where, "createdAt: expected YYYY-MM-DDTHH:MM:SS.ffffffZ")
    try:
        return datetime.strptime(value, _CREATED_AT_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise ArchiveRejected(where, "createdAt: not a date") from None


def _signature(value: Any, cid: str, where: str) -> ArchivedSignature:
    fields = _map(value, {"publicKey", "nonce", "value"}, f"{where} signature")
    try:
        key = parse_public_key(fields["publicKey"])
        nonce = str(uuid.UUID(fields["nonce"]))
    except (ValueError, TypeError, AttributeError):
        raise ArchiveRejected(where, "signature: malformed public key or nonce") from None
    if nonce != fields["nonce"] or not isinstance(fields["value"], str):
        raise ArchiveRejected(where, "signature: the nonce is not a canonical UUID")
    if not verify_signature(key, signing_payload(cid, nonce).encode(), fields["value"]):
        raise ArchiveRejected(where, "signature: does not verify against its public key")
    return ArchivedSignature(public_key=fields["publicKey"], nonce=nonce, value=fields["value"])


def _entry(block: _Block, where: str, signed: bool, prev: str) -> ArchivedEntry:
    entry = _entry_fields(block.value, where, signed, prev)
    if _entry_block(entry) != block.data:
        raise ArchiveRejected(where, "not the canonical DAG-CBOR of its fields")
    return entry


def _entry_fields(block: Any, where: str, signed: bool, prev: str) -> ArchivedEntry:
    fields = _map(
        block, {"cid", "envelope", "importance", "createdAt"}, where, frozenset({"signature"})
    )
    content, title, tags, entry_type, p = _envelope(fields["envelope"], where, signed)
    if signed and p != prev:
        raise ArchiveRejected(where, f"chain: p is {p!r}, the previous entry is {prev!r}")
    entry = ArchivedEntry(
        content=content,
        title=title,
        tags=tags,
        entry_type=entry_type,
        importance=fields["importance"],
        created_at=_created_at(fields["createdAt"], where),
        prev_cid=p,
    )
    if fields["cid"] != entry.cid:
        raise ArchiveRejected(where, f"cid: the envelope hashes to {entry.cid}")
    importance = fields["importance"]
    if type(importance) is not int or not (
        limits.ENTRY_IMPORTANCE_MIN <= importance <= limits.ENTRY_IMPORTANCE_MAX
    ):
        raise ArchiveRejected(where, "importance: expected an integer 1..10")
    if signed and "signature" not in fields:
        raise ArchiveRejected(where, "signature: every entry of a signed diary is signed")
    if "signature" in fields:
        signature = _signature(fields["signature"], entry.cid, where)
        return dataclasses.replace(entry, signature=signature)
    return entry


def _is_json(value: Any, depth: int = 0) -> bool:
    """Whether a decoded value is plain JSON (no bytes or links), as relation metadata is
    stored; nesting is bounded so a hostile file cannot recurse deeply."""
    if depth > 32:
        return False
    if value is None or isinstance(value, bool | int | float):
        return True
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, list):
        return all(_is_json(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all("\x00" not in key and _is_json(item, depth + 1) for key, item in value.items())
    return False


def _relation(value: Any, count: int, where: str) -> ArchivedRelation:
    fields = _map(value, {"source", "target", "relation", "status", "metadata"}, where)
    ends = (fields["source"], fields["target"])
    if any(type(end) is not int or not 0 <= end < count for end in ends) or ends[0] == ends[1]:
        raise ArchiveRejected(where, "relation: source and target are two entry positions")
    if not isinstance(fields["metadata"], dict) or not _is_json(fields["metadata"]):
        raise ArchiveRejected(where, "relation: metadata is a map of JSON values")
    return ArchivedRelation(
        source=ends[0],
        target=ends[1],
        relation=_one_of(fields["relation"], _RELATIONS, where, "relation"),
        status=_one_of(fields["status"], _STATUSES, where, "status"),
        metadata=fields["metadata"],
    )


def read_archive(data: bytes) -> DiaryArchive:
    """The diary a CAR file holds, every block, CID, chain link and signature checked; raises
    `ArchiveRejected` naming the first bad block."""
    root, blocks = _frames(data)
    where = f"block {root} ({ROOT})"
    manifest = _map(blocks[root].value, {"v", "diary", "entries", "relations", "head"}, where)
    if manifest["v"] != EXPORT_VERSION:
        raise ArchiveRejected(where, f"v: expected {EXPORT_VERSION}")
    diary = _map(manifest["diary"], {"id", "name", "visibility", "signed"}, where)
    try:
        diary_id = uuid.UUID(diary["id"])
    except (ValueError, TypeError, AttributeError):
        raise ArchiveRejected(where, "diary.id: not a UUID") from None
    signed = diary["signed"]
    if not isinstance(signed, bool) or not isinstance(manifest["entries"], list):
        raise ArchiveRejected(where, "diary.signed is a boolean and entries a list")
    entries: list[ArchivedEntry] = []
    prev = ""
    for n, entry_link in enumerate(manifest["entries"]):
        cid = _link(entry_link, where, f"entries/{n}")
        if cid not in blocks:
            raise ArchiveRejected(where, f"entries/{n}: not a link to a block of the file")
        entry = _entry(blocks[cid], f"block {cid} (entry {n})", signed, prev)
        entries.append(entry)
        prev = entry.cid
    if not isinstance(manifest["relations"], list):
        raise ArchiveRejected(where, "relations: expected a list")
    archive = DiaryArchive(
        diary_id=diary_id,
        name=_text(diary["name"], where, "diary.name", 255, 1),
        visibility=_one_of(diary["visibility"], _VISIBILITIES, where, "diary.visibility"),
        signed=signed,
        entries=tuple(entries),
        relations=tuple(_relation(r, len(entries), where) for r in manifest["relations"]),
    )
    triples = {(r.source, r.target, r.relation) for r in archive.relations}
    if len(triples) != len(archive.relations):
        raise ArchiveRejected(where, "relations: the same relation twice")
    if manifest["head"] != archive.head:
        raise ArchiveRejected(where, f"head: expected {archive.head!r}")
    in_file_order = {n: n for n in range(len(entries))}
    if dag_cbor.encode(_manifest(archive, manifest["entries"], in_file_order)) != blocks[root].data:
        raise ArchiveRejected(where, "not the canonical manifest (links, relation order, numbers)")
    linked = {root} | {_cid_text(cid) for cid in manifest["entries"]}
    if stray := next((cid for cid in blocks if cid not in linked), None):
        raise ArchiveRejected(f"block {stray}", "not linked from the manifest")
    return archive
