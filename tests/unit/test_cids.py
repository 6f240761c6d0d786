"""Published test vectors and properties of every CID Cairn computes.

The vectors are part of the product: agents in other languages check their implementation
against them. Each vector is cross-checked without the code under test (and without
multiformats): the CID string is base32-decoded by hand, and its digest compared with a sha256
of bytes written out literally here or encoded by the small CBOR writer below.
"""

from __future__ import annotations

import base64
import hashlib
import math
import uuid
from dataclasses import dataclass
from typing import Any

import dag_cbor
import pytest
from multiformats import CID, multihash

from schemas.kernel.cids import (
    BytesCidHasher,
    Json,
    PackEntry,
    bytes_cid,
    canonical_json,
    cid_to_sha256_hex,
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

DIARY_ID = "0b6f7c1e-3a52-4d8e-9c41-7f2a5b6c8d90"

# --- published vectors ------------------------------------------------------------------------

EMPTY_BYTES_CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"  # IPFS's well-known
HELLO_BYTES_CID = "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq"

ENTRY_1 = "bafkreid3h7nvm34bjb2vfj3wi2ju5aiuz7b6obz4rjgg5lb3nw4rbhav5y"
ENTRY_1_BYTES = (
    b'{"c":"Cairns mark the trail.","t":"Trail","tags":["a","hiking"],'
    b'"type":"semantic","v":"service:diary:v1"}'
)
ENTRY_2 = "bafkreidrswnm5u7q22azj4aogiyvvozdqa34qu6heyuuqx5jtcjyqixvei"
ENTRY_2_BYTES = (
    b'{"c":"Stacked stones: d\xc3\xa9j\xc3\xa0 vu <&>","t":"","tags":[],'
    b'"type":"episodic","v":"service:diary:v1"}'
)
SIGNED_1 = "bafkreidrjxerripoi53njvgahmvmqhmgvhizs3gee6zqcp2gnbrmolnhny"
SIGNED_1_BYTES = (
    b'{"c":"first","p":"","t":"one","tags":["x"],"type":"procedural","v":"service:diary:v1"}'
)
SIGNED_2 = "bafkreigt4vuj5h7edyij3zkgfh2f7urwvzfrnwxa2ldddi53uxmdfmsz2m"
SIGNED_2_BYTES = (
    b'{"c":"second","p":"' + SIGNED_1.encode() + b'","t":"two","tags":["x"],'
    b'"type":"procedural","v":"service:diary:v1"}'
)
PACK = "bafyreigjo56jlzx2osyjkpr2hlodwqjagyu4w6hbnlw24voew33otwxdre"
PACK_PARAMS: dict[str, Json] = {"tokenBudget": 4000, "note": "v1"}
PACK_ENTRIES = [PackEntry(ENTRY_2, "summary", 2), PackEntry(ENTRY_1, "full", 1)]
RENDERED_MARKDOWN = "# Context Pack x\n\nhello\n"
RENDERED_HASH = "edd13dd6b6320148d93570529ca8e562f6863c97cf9a90ff4b6c498e465d1187"
RENDERED = "bafyreid3lcmf4ccti762vj6jktxbck7pom7uq635jqgeh2n2hgybnyrztq"
TASK_INPUT: dict[str, Json] = {"task": "freeform", "brief": "Write a haiku", "n": 3}
TASK_INPUT_BYTES = b'{"brief":"Write a haiku","n":3,"task":"freeform"}'
TASK_INPUT_CID = "bagaaieragh3q7okpwqfsezlkqltmey4ck7emhkquekucxrqmkpmica2h5lwa"


# --- independent decoders / encoders ------------------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7


def _cid_bytes(cid: str) -> bytes:
    """Binary CID from its base32 string, by hand (RFC 4648 base32, lower-case, unpadded)."""
    assert cid[0] == "b"
    body = cid[1:].upper()
    return base64.b32decode(body + "=" * (-len(body) % 8))


def _decode_cid(cid: str) -> tuple[int, int, int, bytes]:
    """(version, codec, multihash code, digest) of a CID string, without multiformats."""
    data = _cid_bytes(cid)
    version, pos = _varint(data, 0)
    codec, pos = _varint(data, pos)
    hash_code, pos = _varint(data, pos)
    length, pos = _varint(data, pos)
    digest = data[pos:]
    assert len(digest) == length
    return version, codec, hash_code, digest


def _assert_cid_of(cid: str, codec: int, hashed: bytes) -> None:
    assert _decode_cid(cid) == (1, codec, 0x12, hashlib.sha256(hashed).digest())


@dataclass(frozen=True)
class _Link:
    cid: str


def _head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for extra, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([major << 5 | extra]) + n.to_bytes(size, "big")
    raise AssertionError("too large")


def _cbor(value: Any) -> bytes:
    """Minimal DAG-CBOR writer, enough for our envelopes (no floats, no negatives)."""
    if isinstance(value, _Link):
        payload = b"\x00" + _cid_bytes(value.cid)
        return b"\xd8\x2a" + _head(2, len(payload)) + payload
    if isinstance(value, int):
        return _head(0, value)
    if isinstance(value, str):
        raw = value.encode()
        return _head(3, len(raw)) + raw
    if isinstance(value, list):
        return _head(4, len(value)) + b"".join(_cbor(v) for v in value)
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return _head(5, len(keys)) + b"".join(_cbor(k) + _cbor(value[k]) for k in keys)
    raise AssertionError(type(value))


# --- bytes ------------------------------------------------------------------------------------


def test_bytes_cid_matches_published_ipfs_vectors() -> None:
    assert bytes_cid(b"") == EMPTY_BYTES_CID
    assert bytes_cid(b"hello") == HELLO_BYTES_CID
    _assert_cid_of(EMPTY_BYTES_CID, 0x55, b"")
    _assert_cid_of(HELLO_BYTES_CID, 0x55, b"hello")


def _library_cid(codec: int, hashed: bytes) -> str:
    return str(CID("base32", 1, codec, multihash.wrap(hashlib.sha256(hashed).digest(), "sha2-256")))


def test_cid_strings_equal_the_multiformats_library() -> None:
    """Our CID strings are written by hand (the library's objects are slow to build); the
    library, an independent implementation, spells the same digests the same way."""
    for data in (b"", b"hello", bytes(range(256)) * 7, uuid.uuid4().bytes):
        assert bytes_cid(data) == _library_cid(0x55, data)
    for value in ({}, {"brief": "x", "n": [1, 2.5, None]}, "\u00e9t\u00e9"):
        assert json_cid(value) == _library_cid(0x0200, canonical_json(value))
    envelope = rendered_pack_envelope(content_hash("# pack"), "markdown", PACK)
    cid = rendered_pack_cid("# pack", "markdown", PACK)
    assert cid == _library_cid(0x71, envelope)


def test_streaming_hasher_equals_one_shot() -> None:
    data = bytes(range(256)) * 1000
    hasher = BytesCidHasher()
    assert hasher.cid() == EMPTY_BYTES_CID
    for start in range(0, len(data), 4096):
        hasher.update(data[start : start + 4096])
    assert hasher.size == len(data)
    assert hasher.cid() == bytes_cid(data)
    assert hasher.sha256_hex() == hashlib.sha256(data).hexdigest()


# --- entries ----------------------------------------------------------------------------------


def test_entry_vectors() -> None:
    assert entry_cid("Cairns mark the trail.", "Trail", ["hiking", "a"], "semantic") == ENTRY_1
    assert entry_cid("Stacked stones: déjà vu <&>", None, [], "episodic") == ENTRY_2
    _assert_cid_of(ENTRY_1, 0x55, ENTRY_1_BYTES)
    _assert_cid_of(ENTRY_2, 0x55, ENTRY_2_BYTES)


def test_signed_chain_vectors() -> None:
    assert entry_cid("first", "one", ["x"], "procedural", prev_cid="") == SIGNED_1
    assert entry_cid("second", "two", ["x"], "procedural", prev_cid=SIGNED_1) == SIGNED_2
    _assert_cid_of(SIGNED_1, 0x55, SIGNED_1_BYTES)
    _assert_cid_of(SIGNED_2, 0x55, SIGNED_2_BYTES)


def test_entry_envelope_does_not_escape_non_ascii_or_html() -> None:
    envelope = entry_envelope("Stacked stones: déjà vu <&>", None, [], "episodic")
    assert envelope == ENTRY_2_BYTES
    assert b"\\u" not in envelope


def test_entry_tags_are_sorted_by_code_point() -> None:
    tags = ["é", "a", "B", "\U0001f600", "\uffff"]
    envelope = entry_envelope("c", None, tags, "semantic")
    expected = '"tags":["B","a","é","\uffff","\U0001f600"]'.encode()
    assert expected in envelope
    assert entry_cid("c", None, tags, "semantic") == entry_cid("c", None, sorted(tags), "semantic")


def test_entry_missing_title_and_tags_equal_empty() -> None:
    assert entry_cid("c", None, None, "semantic") == entry_cid("c", "", [], "semantic")


def test_entry_cid_covers_every_field() -> None:
    base = entry_cid("c", "t", ["a"], "semantic")
    assert entry_cid("c2", "t", ["a"], "semantic") != base
    assert entry_cid("c", "t2", ["a"], "semantic") != base
    assert entry_cid("c", "t", ["b"], "semantic") != base
    assert entry_cid("c", "t", ["a"], "episodic") != base


def test_prev_cid_none_differs_from_first_link() -> None:
    unsigned = entry_cid("c", "t", [], "semantic")
    first = entry_cid("c", "t", [], "semantic", prev_cid="")
    chained = entry_cid("c", "t", [], "semantic", prev_cid=ENTRY_1)
    assert len({unsigned, first, chained}) == 3
    assert b'"p"' not in entry_envelope("c", "t", [], "semantic")


def test_prev_cid_must_be_a_cid() -> None:
    with pytest.raises(ValueError):
        entry_cid("c", "t", [], "semantic", prev_cid="not-a-cid")


def test_lone_surrogate_is_rejected() -> None:
    with pytest.raises(ValueError):
        entry_cid("\ud800", None, [], "semantic")


# --- packs ------------------------------------------------------------------------------------


def test_pack_vector() -> None:
    assert pack_cid(DIARY_ID, "custom", PACK_PARAMS, PACK_ENTRIES) == PACK
    expected = _cbor(
        {
            "v": "service:pack:v1",
            "diaryId": DIARY_ID,
            "packType": "custom",
            "params": PACK_PARAMS,
            "entries": [
                {"cid": _Link(ENTRY_1), "compressionLevel": "full", "rank": 1},
                {"cid": _Link(ENTRY_2), "compressionLevel": "summary", "rank": 2},
            ],
        }
    )
    assert pack_envelope(DIARY_ID, "custom", PACK_PARAMS, PACK_ENTRIES) == expected
    _assert_cid_of(PACK, 0x71, expected)


def test_pack_envelope_round_trips_with_tag_42_links() -> None:
    encoded = pack_envelope(DIARY_ID, "custom", PACK_PARAMS, PACK_ENTRIES)
    link = b"\xd8\x2a\x58\x25\x00" + _cid_bytes(ENTRY_1)
    assert link in encoded
    decoded = dag_cbor.decode(encoded)
    assert isinstance(decoded, dict)
    assert decoded["v"] == "service:pack:v1"
    assert decoded["diaryId"] == DIARY_ID
    assert decoded["params"] == PACK_PARAMS
    entries = decoded["entries"]
    assert isinstance(entries, list)
    first = entries[0]
    assert isinstance(first, dict)
    assert isinstance(first["cid"], CID)
    assert first["cid"] == CID.decode(ENTRY_1)
    assert dag_cbor.encode(decoded) == encoded


def test_pack_entry_order_does_not_matter() -> None:
    forward = pack_cid(DIARY_ID, "custom", {}, PACK_ENTRIES)
    backward = pack_cid(DIARY_ID, "custom", {}, list(reversed(PACK_ENTRIES)))
    assert forward == backward


def test_pack_entries_with_equal_rank_sort_by_cid_string() -> None:
    assert ENTRY_1 < ENTRY_2
    entries = [PackEntry(ENTRY_2, "full", 1), PackEntry(ENTRY_1, "full", 1)]
    encoded = pack_envelope(DIARY_ID, "custom", {}, entries)
    assert encoded.index(_cid_bytes(ENTRY_1)) < encoded.index(_cid_bytes(ENTRY_2))


def test_integral_floats_in_params_encode_as_integers() -> None:
    as_ints: dict[str, Json] = {"budget": 4000, "nested": {"w": [1, 2, {"k": 0}]}, "on": True}
    as_floats: dict[str, Json] = {"budget": 4e3, "nested": {"w": [1.0, 2, {"k": -0.0}]}, "on": True}
    assert pack_cid(DIARY_ID, "custom", as_floats, []) == pack_cid(DIARY_ID, "custom", as_ints, [])
    decoded = dag_cbor.decode(pack_envelope(DIARY_ID, "custom", as_floats, []))
    assert isinstance(decoded, dict)
    params = decoded["params"]
    assert isinstance(params, dict)
    assert type(params["budget"]) is int
    assert params["on"] is True


def test_fractional_floats_stay_float64() -> None:
    encoded = pack_envelope(DIARY_ID, "custom", {"lambda": 0.5}, [])
    assert b"\xfb\x3f\xe0\x00\x00\x00\x00\x00\x00" in encoded  # float64 0.5
    assert pack_cid(DIARY_ID, "custom", {"lambda": 0.5}, []) != pack_cid(
        DIARY_ID, "custom", {"lambda": 1}, []
    )


def test_pack_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="empty CID"):
        pack_cid(DIARY_ID, "custom", {}, [PackEntry("", "full", 1)])
    with pytest.raises(ValueError):
        pack_cid(DIARY_ID, "custom", {}, [PackEntry("bafy-nope", "full", 1)])
    with pytest.raises(ValueError):
        pack_cid(DIARY_ID, "custom", {"x": math.nan}, [])
    with pytest.raises(ValueError):
        pack_cid(DIARY_ID, "custom", {"x": 2**70}, [])
    with pytest.raises(ValueError):
        pack_cid("not-a-uuid", "custom", {}, [])


def test_diary_id_spelling_is_normalised() -> None:
    upper = pack_cid(DIARY_ID.upper(), "custom", {}, PACK_ENTRIES)
    as_uuid = pack_cid(uuid.UUID(DIARY_ID), "custom", {}, PACK_ENTRIES)
    assert upper == as_uuid == pack_cid(DIARY_ID, "custom", {}, PACK_ENTRIES)


# --- rendered packs ---------------------------------------------------------------------------


def test_rendered_pack_vector() -> None:
    assert content_hash(RENDERED_MARKDOWN) == RENDERED_HASH
    assert hashlib.sha256(RENDERED_MARKDOWN.encode()).hexdigest() == RENDERED_HASH
    method = "server:pack-to-docs-v1"
    assert rendered_pack_cid(RENDERED_MARKDOWN, method, PACK) == RENDERED
    assert rendered_pack_cid_from_hash(RENDERED_HASH, method, PACK) == RENDERED
    expected = _cbor(
        {
            "v": "service:rendered-pack:v1",
            "contentHash": RENDERED_HASH,
            "renderMethod": method,
            "sourcePackCid": _Link(PACK),
        }
    )
    assert rendered_pack_envelope(RENDERED_HASH, method, PACK) == expected
    _assert_cid_of(RENDERED, 0x71, expected)


def test_rendered_pack_rejects_bad_hash_and_non_pack_source() -> None:
    with pytest.raises(ValueError):
        rendered_pack_cid_from_hash(RENDERED_HASH.upper(), "m", PACK)
    with pytest.raises(ValueError, match="dag-cbor"):
        rendered_pack_cid(RENDERED_MARKDOWN, "m", ENTRY_1)


# --- JSON (JCS) -------------------------------------------------------------------------------


def test_json_cid_vector() -> None:
    assert canonical_json(TASK_INPUT) == TASK_INPUT_BYTES
    assert json_cid(TASK_INPUT) == TASK_INPUT_CID
    assert TASK_INPUT_CID.startswith("bagaaiera")  # json codec 0x0200, sha2-256
    _assert_cid_of(TASK_INPUT_CID, 0x0200, TASK_INPUT_BYTES)


def test_jcs_key_order_is_independent_of_insertion() -> None:
    assert json_cid({"b": 1, "a": {"d": 2, "c": 3}}) == json_cid({"a": {"c": 3, "d": 2}, "b": 1})
    assert canonical_json({"b": 1, "a": {"d": 2, "c": 3}}) == b'{"a":{"c":3,"d":2},"b":1}'


def test_jcs_orders_keys_by_utf16_code_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00, which sorts before U+FFFF in UTF-16
    # (unlike code-point order): the rule every JCS implementation shares.
    value = {"\uffff": 1, "\U0001f600": 2}
    assert canonical_json(value) == '{"\U0001f600":2,"\uffff":1}'.encode()


def test_jcs_numbers_and_strings() -> None:
    assert canonical_json({"x": 1.0, "y": 1e21, "z": "é\n"}) == (
        b'{"x":1,"y":1e+21,"z":"\xc3\xa9\\n"}'
    )
    assert json_cid({"x": 1.0}) == json_cid({"x": 1})


def test_json_cid_rejects_unrepresentable_values() -> None:
    for bad in ({"x": math.inf}, {"x": 2**60}, {1: "non-string key"}):
        with pytest.raises(ValueError):
            json_cid(bad)  # type: ignore[arg-type]


# --- parsing ----------------------------------------------------------------------------------


def test_parse_cid_accepts_canonical_and_pins_codec() -> None:
    assert parse_cid(PACK, codec=0x71).codec.name == "dag-cbor"
    assert parse_cid(ENTRY_1, codec=0x55).codec.name == "raw"
    with pytest.raises(ValueError, match="expected a raw CID"):
        parse_cid(PACK, codec=0x55)


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "b",
        "bxyz",
        "hello",
        ENTRY_1.upper(),
        "B" + ENTRY_1[1:].upper(),
        ENTRY_1[:-1],
        ENTRY_1 + "a",
        ENTRY_1 + "\n",
        "QmXoypizjW3WknFiJnKLwHCnL72vedxjQkDDP1mXWo6uco",  # CIDv0
        "b" + "a" * 200,
        "zb2rhe5P4gXftAwvA4eXQ5HJwsER2owDyS9sKaQRRVQPn93bA",  # base58btc CIDv1
    ],
)
def test_parse_cid_rejects_garbage(garbage: str) -> None:
    with pytest.raises(ValueError):
        parse_cid(garbage)


def test_parse_cid_rejects_other_hash_functions() -> None:
    sha3 = str(CID("base32", 1, "raw", multihash.digest(b"x", "sha3-256")))
    with pytest.raises(ValueError, match="sha2-256"):
        parse_cid(sha3)


def test_cid_to_sha256_hex() -> None:
    assert cid_to_sha256_hex(HELLO_BYTES_CID) == hashlib.sha256(b"hello").hexdigest()
    assert cid_to_sha256_hex(TASK_INPUT_CID) == hashlib.sha256(TASK_INPUT_BYTES).hexdigest()
    with pytest.raises(ValueError):
        cid_to_sha256_hex("nope")
