"""The diary archive format (`schemas.kernel.diary_car`): an independent IPLD library (libipld)
reads the file whole and every CID recomputes from the bytes; the reader refuses each kind of
damage at the first bad block, naming it."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import uuid
from datetime import UTC, datetime, timedelta

import dag_cbor
import libipld
import nacl.signing
import pytest

from schemas.kernel.cids import (
    RAW_CODEC,
    bytes_cid,
    dag_cbor_block_cid,
    dag_cbor_cid_string,
    entry_cid,
    link,
    varint,
)
from schemas.kernel.crypto import format_public_key, signing_payload
from schemas.kernel.diary_car import (
    EXPORT_VERSION,
    ArchivedEntry,
    ArchivedRelation,
    ArchivedSignature,
    ArchiveRejected,
    DiaryArchive,
    encode_archive,
    read_archive,
)

T0 = datetime(2026, 11, 26, 12, 0, 0, 123456, tzinfo=UTC)
KEY = nacl.signing.SigningKey(b"\x07" * 32)
PUBLIC_KEY = format_public_key(bytes(KEY.verify_key))


def unsigned() -> DiaryArchive:
    entries = (
        ArchivedEntry(
            "Rollbacks take ninety seconds.", "Ops", ("ops", "deploy"), "procedural", 9, T0
        ),
        ArchivedEntry(
            "Rollbacks take four minutes.", None, (), "semantic", 5, T0 - timedelta(days=1)
        ),
        ArchivedEntry(
            "Rollbacks take four minutes.", None, (), "semantic", 5, T0 - timedelta(days=1)
        ),
    )
    relations = (ArchivedRelation(0, 1, "supersedes", "accepted", {"similarity": 0.9, "n": 2.0}),)
    return DiaryArchive(uuid.UUID(int=1), "ops diary", "private", False, entries, relations)


def sign(entry: ArchivedEntry, key: nacl.signing.SigningKey = KEY) -> ArchivedEntry:
    nonce = str(uuid.UUID(int=len(entry.content)))
    value = key.sign(signing_payload(entry.cid, nonce).encode()).signature
    signature = ArchivedSignature(PUBLIC_KEY, nonce, base64.b64encode(value).decode())
    return dataclasses.replace(entry, signature=signature)


def signed() -> DiaryArchive:
    entries, prev = [], ""
    for n, content in enumerate(("first", "second", "third")):
        entry = sign(
            ArchivedEntry(content, None, (), "semantic", 5, T0 + timedelta(seconds=n), prev)
        )
        entries.append(entry)
        prev = entry.cid
    return DiaryArchive(uuid.UUID(int=2), "signed", "public", True, tuple(entries))


def raw_cid(data: bytes) -> str:
    return bytes_cid(data)


@pytest.mark.parametrize("archive", [unsigned(), signed()], ids=["unsigned", "signed"])
def test_libipld_reads_the_file_and_every_cid_recomputes(archive: DiaryArchive) -> None:
    data = encode_archive(archive)
    header, blocks = libipld.decode_car(data)
    assert header["version"] == 1 and len(header["roots"]) == 1
    for cid, block in blocks.items():
        # libipld re-encodes canonically, so re-hashing its bytes checks the block's address
        assert dag_cbor_block_cid(libipld.encode_dag_cbor(block)) == cid
        assert libipld.decode_cid(cid)["codec"] == 0x71
    manifest = blocks[header["roots"][0]]
    assert manifest["v"] == EXPORT_VERSION and manifest["diary"]["name"] == archive.name
    cids_in_file = []
    for entry_link in manifest["entries"]:
        block = blocks[entry_link]
        # an entry's own CID is the raw-codec CID of the envelope bytes
        assert raw_cid(block["envelope"]) == block["cid"]
        assert libipld.decode_cid(block["cid"])["codec"] == RAW_CODEC
        cids_in_file.append(block["cid"])
    assert sorted(cids_in_file) == sorted(e.cid for e in archive.entries)
    if archive.signed:
        assert manifest["head"] == archive.entries[-1].cid


def test_reading_gives_back_what_was_written_and_writing_is_deterministic() -> None:
    archive = unsigned()
    data = encode_archive(archive)
    again = read_archive(data)
    assert encode_archive(again) == data
    # the file orders entries by creation, so the writer's input order does not matter
    shuffled = dataclasses.replace(
        archive,
        entries=archive.entries[::-1],
        relations=(ArchivedRelation(2, 1, "supersedes", "accepted", {"similarity": 0.9, "n": 2}),),
    )
    assert encode_archive(shuffled) == data
    assert again.relations[0].metadata == {"n": 2, "similarity": 0.9}  # integral floats → ints
    assert again.entries[0].content == "Rollbacks take four minutes."


def test_a_signed_diary_is_written_in_chain_order() -> None:
    archive = signed()
    data = encode_archive(dataclasses.replace(archive, entries=archive.entries[::-1]))
    assert data == encode_archive(archive)
    assert [e.content for e in read_archive(data).entries] == ["first", "second", "third"]
    assert read_archive(data).head == archive.entries[-1].cid


# --- refusals ---------------------------------------------------------------------------------


def refusal(data: bytes) -> ArchiveRejected:
    with pytest.raises(ArchiveRejected) as caught:
        read_archive(data)
    return caught.value


def block_of(archive: DiaryArchive, position: int) -> str:
    data = encode_archive(archive)
    _, blocks = libipld.decode_car(data)
    manifest = next(b for b in blocks.values() if "entries" in b)
    return dag_cbor_cid_string(manifest["entries"][position])


def car(root: bytes, frames: list[tuple[bytes, bytes]]) -> bytes:
    header = dag_cbor.encode({"roots": [link(root)], "version": 1})
    body = b"".join(varint(len(c) + len(d)) + c + d for c, d in frames)
    return varint(len(header)) + header + body


def test_changed_bytes_are_refused_naming_their_block() -> None:
    archive = unsigned()
    data = encode_archive(archive)
    rejected = refusal(data.replace(b"ninety seconds", b"eighty seconds"))
    assert rejected.block == f"block {block_of(archive, 2)}"
    assert rejected.reason == "its bytes do not hash to its CID"


def one_entry_file(cid: str, envelope: bytes, *, signed: bool = False) -> tuple[bytes, str]:
    """A hand-built archive of one unsigned entry block (cid, envelope as given), and that
    block's CID: for damage the writer cannot produce."""
    block = dag_cbor.encode(
        {
            "cid": cid,
            "createdAt": "2026-11-26T12:00:00.123456Z",
            "envelope": envelope,
            "importance": 5,
        }
    )
    block_cid = dag_cbor_block_cid(block)
    diary = {"id": str(uuid.UUID(int=3)), "name": "x", "visibility": "private", "signed": signed}
    manifest = dag_cbor.encode(
        {
            "v": EXPORT_VERSION,
            "diary": diary,
            "entries": [link(block_cid)],
            "relations": [],
            "head": None,
        }
    )
    root = dag_cbor_block_cid(manifest)
    return car(root, [(root, manifest), (block_cid, block)]), dag_cbor_cid_string(block_cid)


def test_an_entry_whose_envelope_does_not_hash_to_its_cid_is_refused() -> None:
    envelope = unsigned().entries[0].envelope
    data, block = one_entry_file(entry_cid("something else", None, [], "semantic"), envelope)
    rejected = refusal(data)
    assert rejected.block == f"block {block} (entry 0)"
    assert rejected.reason.startswith("cid: the envelope hashes to")


def test_a_non_canonical_envelope_is_refused() -> None:
    spaced = unsigned().entries[1].envelope.replace(b'","', b'", "')
    data, _ = one_entry_file(raw_cid(spaced), spaced)
    assert refusal(data).reason == "envelope: not the canonical JSON of its fields"


def test_a_forged_signature_is_refused_naming_its_entry() -> None:
    archive = signed()
    other = nacl.signing.SigningKey(b"\x09" * 32)
    entries = list(archive.entries)
    entries[1] = sign(entries[1], other)  # signed by another key, still naming KEY's
    forged = dataclasses.replace(archive, entries=tuple(entries))
    rejected = refusal(encode_archive(forged))
    assert rejected.block == f"block {block_of(forged, 1)} (entry 1)"
    assert rejected.reason == "signature: does not verify against its public key"


def test_an_unsigned_entry_in_a_signed_diary_is_refused() -> None:
    archive = signed()
    entries = list(archive.entries)
    entries[2] = dataclasses.replace(entries[2], signature=None)
    rejected = refusal(encode_archive(dataclasses.replace(archive, entries=tuple(entries))))
    assert rejected.reason == "signature: every entry of a signed diary is signed"


def test_a_broken_chain_is_refused() -> None:
    archive = signed()
    entries = list(archive.entries)
    # the third entry re-signed over the first as its predecessor: a fork, not a chain
    entries[2] = sign(dataclasses.replace(entries[2], prev_cid=entries[0].cid, signature=None))
    rejected = refusal(encode_archive(dataclasses.replace(archive, entries=tuple(entries))))
    assert rejected.reason.startswith("chain: p is")


def test_a_block_the_manifest_does_not_link_is_refused() -> None:
    data = encode_archive(unsigned())
    stray = dag_cbor.encode({"hello": "world"})
    stray_cid = dag_cbor_block_cid(stray)
    rejected = refusal(data + varint(len(stray_cid) + len(stray)) + stray_cid + stray)
    assert rejected.block == f"block {dag_cbor_cid_string(stray_cid)}"


def test_a_truncated_file_and_a_non_dag_cbor_block_are_refused() -> None:
    data = encode_archive(unsigned())
    assert refusal(data[:-5]).reason == "the frame is truncated"
    raw = b"\x01\x55\x12\x20" + hashlib.sha256(b"x").digest()
    rejected = refusal(data + varint(len(raw) + 1) + raw + b"x")
    assert rejected.reason == "not a CIDv1 dag-cbor sha2-256 block address"


def test_a_duplicate_relation_is_refused() -> None:
    archive = unsigned()
    twice = dataclasses.replace(archive, relations=archive.relations * 2)
    assert refusal(encode_archive(twice)).reason == "relations: the same relation twice"


def frames_of(data: bytes) -> list[tuple[bytes, bytes]]:
    """(CID, block) of every frame after the header (CIDs here are 36 bytes)."""

    def varint_at(offset: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = data[offset]
            offset += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, offset

    size, offset = varint_at(0)
    offset += size
    frames = []
    while offset < len(data):
        size, offset = varint_at(offset)
        frames.append((data[offset : offset + 36], data[offset + 36 : offset + size]))
        offset += size
    return frames


def test_a_manifest_naming_another_chain_head_is_refused() -> None:
    archive = signed()
    (_, manifest), *entries = frames_of(encode_archive(archive))
    fields = dag_cbor.decode(manifest)
    fields["head"] = archive.entries[0].cid  # every entry verifies; the head is a lie
    changed = dag_cbor.encode(fields)
    root = dag_cbor_block_cid(changed)
    rejected = refusal(car(root, [(root, changed), *entries]))
    assert rejected.block == f"block {dag_cbor_cid_string(root)} (the manifest)"
    assert rejected.reason.startswith("head: expected")


def test_metadata_that_is_not_json_and_a_p_that_is_not_a_cid_are_refused() -> None:
    archive = unsigned()
    with_bytes = dataclasses.replace(
        archive, relations=(ArchivedRelation(0, 1, "supersedes", "accepted", {}),)
    )
    (_, manifest), *entries = frames_of(encode_archive(with_bytes))
    fields = dag_cbor.decode(manifest)
    fields["relations"][0]["metadata"] = {"blob": b"\x00\x01"}
    changed = dag_cbor.encode(fields)
    root = dag_cbor_block_cid(changed)
    rejected = refusal(car(root, [(root, changed), *entries]))
    assert rejected.reason == "relation: metadata is a map of JSON values"

    envelope = (
        b'{"c":"x","p":"not-a-cid","t":"","tags":[],"type":"semantic","v":"service:diary:v1"}'
    )
    data, _ = one_entry_file(raw_cid(envelope), envelope, signed=True)
    assert refusal(data).reason == "envelope: p is not a CID"


@pytest.mark.parametrize("archive", [unsigned(), signed()], ids=["unsigned", "signed"])
def test_any_damage_is_a_refusal_never_a_crash(archive: DiaryArchive) -> None:
    """Truncations and flipped bytes all through a file (every 13th position, and all of the
    header): refused, with a reason; an exception of another kind would be a 500 at the
    import route."""
    data = encode_archive(archive)
    positions = sorted(set(range(0, len(data), 13)) | set(range(64)))
    damaged = [data[:cut] for cut in positions]
    damaged += [data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1 :] for i in positions]
    for broken in damaged:
        with pytest.raises(ArchiveRejected):
            read_archive(broken)


def test_a_manifest_with_byte_strings_for_links_is_refused() -> None:
    """libipld decodes a link and a byte string alike: the re-encoding check tells them apart."""
    archive = unsigned()
    (_, manifest), *entries = frames_of(encode_archive(archive))
    fields = dag_cbor.decode(manifest)
    fields["entries"] = [bytes(cid) for cid in fields["entries"]]
    changed = dag_cbor.encode(fields)
    root = dag_cbor_block_cid(changed)
    rejected = refusal(car(root, [(root, changed), *entries]))
    assert rejected.block == f"block {dag_cbor_cid_string(root)} (the manifest)"
    assert rejected.reason.startswith("not the canonical manifest")


def test_an_entry_block_in_a_longer_encoding_is_refused() -> None:
    envelope = unsigned().entries[1].envelope
    data, _ = one_entry_file(raw_cid(envelope), envelope)
    frames = frames_of(data)
    padded = frames[1][1].replace(b"jimportance\x05", b"jimportance\x18\x05")  # 5 in 2 bytes
    assert padded != frames[1][1]
    padded_cid = dag_cbor_block_cid(padded)
    manifest = dag_cbor.decode(frames[0][1])
    manifest["entries"] = [link(padded_cid)]
    manifest_bytes = dag_cbor.encode(manifest)
    root = dag_cbor_block_cid(manifest_bytes)
    rejected = refusal(car(root, [(root, manifest_bytes), (padded_cid, padded)]))
    assert rejected.block.startswith(f"block {dag_cbor_cid_string(padded_cid)}")
