"""Peer files (`schemas.imports`, docs/imports.md): the committed fixtures are what
tests/fixtures/peer_files.py writes; each format reads into entries with their origin, tags and
links; the format is chosen by Content-Type and the bytes; a bad file is refused at its first
bad record, named; a COGX archive cannot unpack past the upload limit."""

from __future__ import annotations

import copy
import io
import json
import uuid
import zipfile
from datetime import UTC, datetime
from typing import Any

import pytest
from fixtures.peer_files import (
    COGX,
    LETTA,
    MEM0,
    cogx_files,
    cogx_tar_gz,
    cogx_zip,
    expected_files,
    letta_agent_file,
    mem0_listing,
)

from schemas import limits
from schemas.errors import ImportInvalid, PayloadTooLarge
from schemas.imports.formats import family, read_peer_file
from schemas.imports.peer import RecordRejected, refusal, to_archive
from schemas.kernel.diary_car import CAR_MEDIA_TYPE, encode_archive, read_archive

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def as_json(document: Any) -> bytes:
    return json.dumps(document).encode()


def rejected(data: bytes) -> RecordRejected:
    with pytest.raises(RecordRejected) as caught:
        read_peer_file(data)
    return caught.value


def test_the_committed_fixtures_are_what_the_builder_writes() -> None:
    for path, data in expected_files().items():
        assert path.read_bytes() == data, f"run python tests/fixtures/peer_files.py ({path})"


# --- Mem0 ---------------------------------------------------------------------------------


def test_mem0_memories_keep_scope_and_categories_as_tags_and_their_origin() -> None:
    peer = read_peer_file(MEM0.read_bytes())
    assert peer.format == "mem0" and len(peer.entries) == 3
    first = peer.entries[0]
    assert first.content == "Prefers window seats on long-haul flights"
    assert first.tags == ("user:alice", "agent:travel-helper", "travel", "preferences")
    assert first.entry_type == "semantic"
    assert first.record_id == "4a7f2c1e-6b0d-4f57-9c8e-1d2b3a4c5d6e"
    assert first.created_at == datetime(2026, 1, 5, 17, 15, 0, 123456, tzinfo=UTC)
    assert first.metadata == {"source": "chat"}


def test_the_hosted_paged_listing_is_read_too() -> None:
    paged = mem0_listing() | {"count": 3, "next": None, "previous": None}
    assert read_peer_file(as_json(paged)).entries == read_peer_file(MEM0.read_bytes()).entries


def test_a_mem0_memory_without_text_is_refused_by_position_and_id() -> None:
    listing = mem0_listing()
    del listing["results"][1]["memory"]
    error = rejected(as_json(listing))
    assert error.record == "results/1" and "memory" in error.reason


def test_text_postgres_cannot_store_is_refused_wherever_it_sits() -> None:
    listing = mem0_listing()
    listing["results"][0]["metadata"] = {"note": "a\u0000b"}
    error = rejected(as_json(listing))
    assert error.record.startswith("results/0") and "metadata/note" in error.reason
    files = cogx_files()
    files["facts.jsonl"] = as_json(
        {"external_id": "f", "subject_ref": "m-1", "predicate": "x\ud800", "object_ref": "m-2"}
    )
    assert rejected(cogx_zip(files)).record == "facts.jsonl line 1"
    agent_file = letta_agent_file()
    agent_file["agents"][0]["name"] = "bot\u0000"
    assert rejected(as_json(agent_file)).record == "blocks/0 (persona)"  # its agent:… tag
    agent_file["agents"][0] |= {"block_ids": [], "passages": []}
    assert rejected(as_json(agent_file)).record == "agents/0"  # the diary's name


def test_a_mem0_memory_over_the_entry_limit_is_refused() -> None:
    listing = mem0_listing()
    listing["results"][2]["memory"] = "x" * (limits.ENTRY_CONTENT_MAX_CHARS + 1)
    error = rejected(as_json(listing))
    assert error.record == "results/2 (id 6c9f4e30-8d2f-4179-9ea0-3f4d5c6e7f80)"
    assert "content" in error.reason


def test_a_record_whose_own_id_or_metadata_passes_its_bound_is_too_large() -> None:
    """What a record keeps on its entry's origin is bounded: a file past it is refused (413)."""
    listing = mem0_listing()
    listing["results"][0]["metadata"] = {"blob": "x" * limits.PEER_RECORD_METADATA_MAX_BYTES}
    error = rejected(as_json(listing))
    assert error.too_large and error.record.startswith("results/0")
    assert "metadata" in error.reason
    assert refusal(error).status == 413
    listing = mem0_listing()
    listing["results"][1]["id"] = "r" * (limits.PEER_RECORD_ID_MAX_CHARS + 1)
    error = rejected(as_json(listing))
    assert error.too_large and error.record.startswith("results/1") and "id" in error.reason
    listing = mem0_listing()
    listing["results"][0]["metadata"] = {"blob": "x" * (limits.PEER_RECORD_METADATA_MAX_BYTES // 2)}
    assert read_peer_file(as_json(listing)).entries[0].metadata["blob"]


# --- Letta ----------------------------------------------------------------------------------


def test_letta_blocks_are_semantic_entries_tagged_with_their_label() -> None:
    peer = read_peer_file(LETTA.read_bytes())
    assert peer.format == "letta" and peer.name == "support-bot"
    persona, human, *passages = peer.entries
    assert (persona.title, persona.tags, persona.entry_type) == (
        "persona",
        ("persona", "agent:support-bot"),
        "semantic",
    )
    assert persona.metadata["limit"] == 5000 and persona.record_id == "block-0"
    assert human.tags[0] == "human"
    assert [p.record_id for p in passages] == ["passage-0", "passage-1"]
    assert all(p.entry_type == "episodic" and "archival" in p.tags for p in passages)


@pytest.mark.parametrize("inline", ["core_memory", "blocks", "memory_blocks"])
def test_letta_inline_blocks_of_older_files_and_files_without_passages(inline: str) -> None:
    agent_file = letta_agent_file()
    agent = agent_file["agents"][0]
    agent["memory_blocks"] = []  # what a current file writes beside block_ids
    agent[inline] = agent_file.pop("blocks")
    agent["block_ids"] = []
    del agent["passages"]
    peer = read_peer_file(as_json(agent_file))
    assert [e.title for e in peer.entries] == ["persona", "human"]


def test_a_letta_agent_naming_a_missing_block_is_refused() -> None:
    agent_file = letta_agent_file()
    agent_file["agents"][0]["block_ids"].append("block-9")
    error = rejected(as_json(agent_file))
    assert error.record == "agents/0/block_ids/2" and "block-9" in error.reason


# --- COGX -----------------------------------------------------------------------------------


def test_cogx_records_become_entries_and_facts_between_them_relations() -> None:
    peer = read_peer_file(COGX.read_bytes())
    assert peer.format == "cogx" and peer.name == "COGX import from mem0"
    assert [e.record_id for e in peer.entries] == ["m-1", "m-2", "b-1", "d-1"]
    assert peer.entries[1].tags == ("user:sam", "infra", "schedule")
    assert peer.entries[2].title == "human" and peer.entries[3].entry_type == "episodic"
    (link,) = peer.links  # the fact between two entities is graph data, not a link
    assert (link.source, link.target, link.relation) == (1, 0, "elaborates")
    assert link.metadata == {"predicate": "elaborates", "factId": "f-1", "confidence": 0.9}


def test_cogx_reads_the_same_from_a_tar_gz_and_from_a_folder_inside() -> None:
    expected = read_peer_file(COGX.read_bytes())
    assert read_peer_file(cogx_tar_gz(cogx_files())) == expected
    assert read_peer_file(cogx_zip(cogx_files(), folder="export/")) == expected


def test_an_unknown_predicate_is_a_reference_keeping_its_name() -> None:
    files = cogx_files()
    files["facts.jsonl"] = as_json(
        {
            "kind": "fact",
            "external_id": "f",
            "subject_ref": "m-1",
            "predicate": "is near",
            "object_ref": "d-1",
        }
    )
    (link,) = read_peer_file(cogx_zip(files)).links
    assert link.relation == "references" and link.metadata["predicate"] == "is near"


def test_a_bad_cogx_line_is_refused_by_file_and_line() -> None:
    files = cogx_files()
    files["memories.jsonl"] += b'{"kind": "memory", "external_id": "m-3"}\n'
    error = rejected(cogx_zip(files))
    assert error.record == "memories.jsonl line 3" and "content" in error.reason
    files = cogx_files()
    files["documents.jsonl"] = b"{not json\n"
    assert rejected(cogx_zip(files)).record == "documents.jsonl line 1"


def test_a_cogx_archive_of_a_newer_major_version_or_without_manifest_is_refused() -> None:
    files = cogx_files()
    files["manifest.json"] = as_json({"cogx_version": "1.0"})
    assert rejected(cogx_zip(files)).record == "manifest.json"
    del files["manifest.json"]
    assert rejected(cogx_zip(files)).record == "manifest.json"


def test_a_damaged_cogx_archive_is_refused_not_a_server_error() -> None:
    whole = COGX.read_bytes()
    damaged = whole[:40] + bytes(b ^ 0xFF for b in whole[40:200]) + whole[200:]
    assert rejected(damaged).record in {"the zip file", "manifest.json"}
    assert rejected(whole[: len(whole) // 2]).record == "the zip file"
    tar = bytearray(cogx_tar_gz(cogx_files()))
    assert rejected(bytes(tar[: len(tar) // 2])).record == "the tar file"
    tar[12] ^= 0xFF  # inside the deflate stream: zlib's own error
    assert rejected(bytes(tar)).record == "the tar file"


def test_an_encrypted_cogx_member_is_refused() -> None:
    data = bytearray(COGX.read_bytes())
    # mark every member encrypted (bit 0 of the flags of its local and central headers)
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature)
        while at != -1:
            data[at + flags_at] |= 0x1
            at = data.find(signature, at + 4)
    error = rejected(bytes(data))
    assert error.record == "the zip file" and "encrypted" in error.reason


def test_a_cogx_archive_unpacking_past_the_upload_limit_is_too_large() -> None:
    files = cogx_files()
    files["documents.jsonl"] = b" " * (limits.DIARY_IMPORT_MAX_BYTES + 1)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    assert len(buffer.getvalue()) < limits.DIARY_IMPORT_MAX_BYTES // 100  # a small upload
    error = rejected(buffer.getvalue())
    assert error.too_large and error.record == "documents.jsonl"
    error = rejected(cogx_tar_gz(files))
    assert error.too_large
    assert isinstance(refusal(error), PayloadTooLarge)


# --- choosing the format --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "data", "expected"),
    [
        (CAR_MEDIA_TYPE, b"{", "car"),
        ("application/json", b"{}", "peer"),
        ("application/zip", b"PK\x03\x04", "peer"),
        ("application/gzip", b"\x1f\x8b", "peer"),
        ("application/octet-stream", b"PK\x03\x04...", "peer"),
        ("application/octet-stream", b"\x1f\x8b...", "peer"),
        ("application/octet-stream", b'  {"results": []}', "peer"),
        ("application/octet-stream", b"\x3a\xa2eroots", "car"),
        ("text/plain", b"{}", None),
    ],
)
def test_the_family_comes_from_the_content_type_and_the_first_bytes(
    content_type: str, data: bytes, expected: str | None
) -> None:
    assert family(content_type, data) == expected


def test_json_that_is_no_known_shape_is_refused() -> None:
    assert rejected(b'{"memories": []}').record == "the file"
    assert rejected(b"[1, 2").record == "the file"
    assert isinstance(refusal(rejected(b"[]")), ImportInvalid)


# --- to the diary's rows ----------------------------------------------------------------------


def test_to_archive_keeps_the_origin_and_dates_undated_entries_at_the_import() -> None:
    peer = read_peer_file(LETTA.read_bytes())
    diary_id = uuid.uuid4()
    archive, origins = to_archive(peer, diary_id=diary_id, file_cid="bafk", imported_at=NOW)
    assert archive.entries[0].created_at == NOW  # blocks carry no timestamps
    assert archive.entries[2].created_at == datetime(2026, 2, 1, 8, tzinfo=UTC)
    assert origins[2] == {
        "format": "letta",
        "id": "passage-0",
        "createdAt": "2026-02-01T08:00:00Z",
        "file": "bafk",
        "metadata": {},
    }
    # the rows are those of an archive the CAR reader accepts (which orders them by date)
    reread = read_archive(encode_archive(archive)).entries
    assert {e.cid for e in reread} == {e.cid for e in archive.entries}


def test_reading_does_not_change_the_document() -> None:
    listing = mem0_listing()
    before = copy.deepcopy(listing)
    read_peer_file(as_json(listing))
    assert listing == before
