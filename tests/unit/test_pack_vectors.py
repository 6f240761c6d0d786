"""Published vectors of a whole pack, from entry text to the rendered pack's CID.

An agent in any language can check its implementation against these: the entries' CIDs, the
levels the fitter picks under a budget, the pack CID and its JSON payload, the exact Markdown
of `server:pack-to-docs-v1` (the golden file `golden/pack-to-docs-v1.md`), its content hash and
the rendered pack CID. `client.cids` exposes the same functions the server uses; the pack CID
does not depend on who made the pack or when.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from client import cids as client_cids
from schemas.kernel import cids as server_cids
from schemas.kernel.pack_render import RenderEntry, iso_millis, render_pack_to_docs_v1
from schemas.packs import (
    ContextPack,
    PackEntryOut,
    PackSource,
    compile_pack,
    compile_stats,
    diff_packs,
    provenance_graph,
)

GOLDEN = Path(__file__).parent / "golden" / "pack-to-docs-v1.md"
DIARY = uuid.UUID("7b1d3c1e-2f0a-4c55-9a47-0d6c4f8e9a10")
PACK_ID = uuid.UUID("3f2b8d44-5e61-4a0b-8c1d-2e9f7a6b5c40")
CREATED = datetime(2026, 1, 1, 12, 30, 45, 123456, tzinfo=UTC)
PARAMS = {"topic": "ops", "k": 3.0, "ratio": 0.5}
BUDGET = 70
# (id, title, content, tags, type, rank)
ENTRIES = [
    (
        "0a1b2c3d-0000-4000-8000-000000000001",
        "Deploys",
        "Blue-green deploys halve our rollback time. We keep two fleets warm at all times. "
        "Traffic moves with one switch at the balancer. The old fleet stays for an hour. "
        "Rollbacks are a second switch, nothing more.",
        ["ops"],
        "procedural",
        1,
    ),
    (
        "0a1b2c3d-0000-4000-8000-000000000002",
        None,
        "Cache keys carry the schema version, so a deploy never reads stale shapes.",
        [],
        "semantic",
        2,
    ),
    (
        "0a1b2c3d-0000-4000-8000-000000000003",
        "Café notes",
        "Ünïcode survives: naïve façade résumé. The incident on 2025-11-03 took 42 minutes. "
        "We learned that alerts need owners. Every alert now names a team. Pages without "
        "owners are deleted after a week.",
        ["ops", "incidents"],
        "reflection",
        3,
    ),
]
ENTRY_CIDS = [
    "bafkreiatrkbd4jnho2tnmz75o4wwstuycuczfj3hcdqid52g2tl24nkrmm",
    "bafkreiggijlz4sxfg4mliwu56bp6iv75kwma3o4u7t5yad3swanc4mkfuy",
    "bafkreiavebdrgq3pb7ccpsk5ao2w2shx562ffzxrlgpi7zpzcnm5pzw4ou",
]
# (level, original tokens, packed tokens) under BUDGET: the tail compresses first
FITTED = [("summary", 48, 19), ("full", 18, 18), ("summary", 43, 16)]
PACK_CID = "bafyreicfbathvr3aex52ypt3wvhpbjieqlbkqfoaurgifmz75zscyqj55e"
MARKDOWN_HASH = "3c3bd34649f5d2713cd79ff68d0b9dc87954260df3157c7b9d670d3d2f9c402d"
RENDERED_CID = "bafyreigzjrsd2ptwpaix37jo4eqpun6gdx2sk74ezklsvkv7iybz73fd2y"


def sources() -> list[PackSource]:
    return [
        PackSource(
            entry_id=uuid.UUID(i), rank=rank, cid=server_cids.entry_cid(c, t, tags, ty), content=c
        )
        for i, t, c, tags, ty, rank in ENTRIES
    ]


def render_entries(entries: list[PackEntryOut]) -> list[RenderEntry]:
    by_id = {uuid.UUID(e[0]): e for e in ENTRIES}
    return [
        RenderEntry(
            entryId=e.entryId,
            rank=e.rank,
            title=by_id[e.entryId][1],
            content=by_id[e.entryId][2],
            entryCidSnapshot=e.entryCidSnapshot,
            compressionLevel=e.compressionLevel,
            originalTokens=e.originalTokens,
            packedTokens=e.packedTokens,
        )
        for e in entries
    ]


def test_entry_cids() -> None:
    assert [s.cid for s in sources()] == ENTRY_CIDS
    assert [client_cids.entry_cid(c, t, tags, ty) for _, t, c, tags, ty, _ in ENTRIES] == (
        ENTRY_CIDS
    )


def test_the_fitter_and_the_pack_cid() -> None:
    pack = compile_pack(DIARY, "custom", PARAMS, sources(), BUDGET)
    assert [(e.compressionLevel, e.originalTokens, e.packedTokens) for e in pack.entries] == FITTED
    assert pack.pack_cid == PACK_CID
    assert pack.payload == {
        "v": "service:pack:v1",
        "diaryId": str(DIARY),
        "packType": "custom",
        "params": PARAMS,
        "entries": [
            {"cid": cid, "compressionLevel": level, "rank": rank}
            for cid, (level, _, _), rank in zip(ENTRY_CIDS, FITTED, (1, 2, 3), strict=True)
        ],
    }
    assert client_cids.pack_cid_of_payload(pack.payload) == PACK_CID
    stats = compile_stats(pack.entries, BUDGET)
    assert (stats.totalTokens, stats.entriesIncluded, stats.entriesCompressed) == (53, 3, 2)


def test_the_pack_cid_ignores_selection_order_and_who_or_when() -> None:
    """Nothing about the creator or time enters compile_pack; the order entries are listed
    in does not matter either (the CID sorts by rank)."""
    reversed_order = compile_pack(DIARY, "custom", PARAMS, list(reversed(sources())), BUDGET)
    assert reversed_order.pack_cid == PACK_CID
    assert "createdBy" not in reversed_order.payload and "createdAt" not in reversed_order.payload
    assert compile_pack(DIARY, "custom", {**PARAMS, "k": 3}, sources(), BUDGET).pack_cid == PACK_CID
    assert compile_pack(DIARY, "custom", PARAMS, sources(), None).pack_cid != PACK_CID
    assert compile_pack(DIARY, "custom", {"topic": "dev"}, sources(), BUDGET).pack_cid != PACK_CID


def test_the_server_markdown_matches_the_golden_file() -> None:
    pack = compile_pack(DIARY, "custom", PARAMS, sources(), BUDGET)
    markdown = render_pack_to_docs_v1(PACK_ID, CREATED, render_entries(pack.entries))
    golden = GOLDEN.read_bytes().decode("utf-8")
    assert markdown == golden
    assert markdown.endswith("after a week.\n") and not markdown.endswith("\n\n")
    assert server_cids.content_hash(markdown) == MARKDOWN_HASH
    method = client_cids.PACK_TO_DOCS_V1
    assert server_cids.rendered_pack_cid(markdown, method, PACK_CID) == RENDERED_CID
    assert client_cids.rendered_pack_cid(markdown, method, PACK_CID) == RENDERED_CID
    assert client_cids.verify_rendered_pack(
        {
            "content": markdown,
            "contentHash": MARKDOWN_HASH,
            "renderMethod": method,
            "sourcePackCid": PACK_CID,
            "packCid": RENDERED_CID,
        }
    )


def test_render_orders_by_rank_and_numbers_untitled_entries_after_sorting() -> None:
    pack = compile_pack(DIARY, "custom", PARAMS, sources(), BUDGET)
    markdown = render_pack_to_docs_v1(
        PACK_ID, CREATED, list(reversed(render_entries(pack.entries)))
    )
    assert markdown == GOLDEN.read_text(encoding="utf-8")
    assert "### Entry 2\n" in markdown


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (datetime(2026, 1, 1, tzinfo=UTC), "2026-01-01T00:00:00.000Z"),
        (datetime(2026, 1, 1, 12, 0, 0, 999999, tzinfo=UTC), "2026-01-01T12:00:00.999Z"),
        (
            datetime(2026, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2))),
            "2026-01-01T00:00:00.000Z",
        ),
    ],
)
def test_created_prints_as_javascript_iso_strings(moment: datetime, expected: str) -> None:
    assert iso_millis(moment) == expected


def test_the_client_exposes_the_server_functions() -> None:
    for name in (
        "entry_cid",
        "pack_cid",
        "pack_envelope",
        "rendered_pack_cid",
        "rendered_pack_cid_from_hash",
        "content_hash",
        "json_cid",
        "bytes_cid",
    ):
        assert getattr(client_cids, name) is getattr(server_cids, name)


def _pack(pack_id: str, entries: list[PackEntryOut], supersedes: str | None = None) -> ContextPack:
    entries_for_cid = [
        server_cids.PackEntry(e.entryCidSnapshot, e.compressionLevel, e.rank) for e in entries
    ]
    return ContextPack(
        id=uuid.UUID(pack_id),
        diaryId=DIARY,
        packCid=server_cids.pack_cid(DIARY, "custom", {}, entries_for_cid),
        packType="custom",
        params={},
        payload={},
        tokenBudget=None,
        createdBy=uuid.uuid4(),
        supersedesPackId=uuid.UUID(supersedes) if supersedes else None,
        pinned=False,
        expiresAt=None,
        createdAt=CREATED,
        updatedAt=CREATED,
        entryCount=len(entries),
        totalTokens=sum(e.packedTokens for e in entries),
        entries=entries,
    )


def _entry(n: int, rank: int, level: str = "full") -> PackEntryOut:
    return PackEntryOut(
        entryId=uuid.UUID(ENTRIES[n][0]),
        entryCidSnapshot=ENTRY_CIDS[n],
        rank=rank,
        compressionLevel=level,  # type: ignore[arg-type]
        originalTokens=10,
        packedTokens=10 if level == "full" else 4,
    )


def test_diff_lists_added_removed_reordered_and_recompressed() -> None:
    base = _pack(str(uuid.uuid4()), [_entry(0, 1), _entry(1, 2), _entry(2, 3)])
    other = _pack(str(uuid.uuid4()), [_entry(1, 1), _entry(2, 3, "summary")])
    diff = diff_packs(base, other)
    assert [e.entryId for e in diff.removed] == [uuid.UUID(ENTRIES[0][0])]
    assert diff.added == []
    assert [(r.fromRank, r.toRank) for r in diff.reordered] == [(2, 1)]
    assert [(c.fromLevel, c.toLevel) for c in diff.compressionChanged] == [("full", "summary")]
    assert diff.stats.unchanged == 0 and diff.stats.tokenDelta == 14 - 30


def test_provenance_is_a_dag_of_supersedes_and_includes() -> None:
    first_id, second_id = str(uuid.uuid4()), str(uuid.uuid4())
    first = _pack(first_id, [_entry(0, 1)])
    second = _pack(second_id, [_entry(0, 1), _entry(1, 2)], supersedes=first_id)
    graph = provenance_graph(second, [(1, first)], depth=1, truncated=False)
    assert {n.id for n in graph.nodes} == {first.packCid, second.packCid, *ENTRY_CIDS[:2]}
    assert [(e.source, e.target) for e in graph.edges if e.kind == "supersedes"] == [
        (second.packCid, first.packCid)
    ]
    assert len([e for e in graph.edges if e.kind == "includes"]) == 3
    assert graph.metadata.format == "service.provenance-graph/v1"


def test_the_fast_links_encode_exactly_as_multiformats_cids() -> None:
    """`pack_envelope` builds its links without multiformats (for speed); the bytes are those
    of `dag_cbor` over real `CID` objects, for every codec Cairn writes."""
    import random

    import dag_cbor
    from multiformats import CID

    rng = random.Random(7)
    made = [
        server_cids.bytes_cid(rng.randbytes(16)),
        server_cids.json_cid({"n": rng.random()}),
        *ENTRY_CIDS,
        PACK_CID,
    ]
    entries = [server_cids.PackEntry(cid, "full", rank) for rank, cid in enumerate(made, 1)]
    expected = dag_cbor.encode(
        {
            "v": "service:pack:v1",
            "diaryId": str(DIARY),
            "packType": "custom",
            "params": {"k": 3, "ratio": 0.5},
            "entries": [
                {"cid": CID.decode(e.cid), "compressionLevel": "full", "rank": e.rank}
                for e in entries
            ],
        }
    )
    assert server_cids.pack_envelope(DIARY, "custom", {"k": 3.0, "ratio": 0.5}, entries) == expected
    for bad in ("bafy" + "a" * 55, PACK_CID.upper(), PACK_CID + "a", "zdj7W"):
        with pytest.raises(ValueError):
            server_cids.pack_cid(DIARY, "custom", {}, [server_cids.PackEntry(bad, "full", 1)])
