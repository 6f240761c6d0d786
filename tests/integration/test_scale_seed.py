"""The seeder of bench/scale.py writes entries the search finds: each seeded entry comes back by its
text (full-text arm) and by its vector (vector arm), across its team's diaries, so the benchmark
cannot silently measure an empty index or a scope that holds nothing. Also: the rows carry what
an API write has (the CID of the content, the parent tuple, the consolidation mark)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.memory import mix_corpus, sentences
from bench.scale import Layout, grow, index_definitions, seed_layout
from infra.repos.search import SearchRepo
from schemas.embedding import SearchFilters
from schemas.kernel.cids import entry_cid

ENTRIES = 60


@pytest.fixture(scope="module")
async def seeded(db_pool: Any) -> dict[str, Any]:
    generated = sentences(6)
    topics = list(generated)
    base = [s for t in topics for s in generated[t]]
    rng = np.random.default_rng(1)
    base_vectors = rng.standard_normal((len(base), 384)).astype(np.float32)
    base_vectors /= np.linalg.norm(base_vectors, axis=1, keepdims=True)
    layout = Layout.new(teams=2, per_team=3)
    corpus = mix_corpus(base_vectors, topics, base, 6, count=ENTRIES, diaries=len(layout.diaries))
    ids = [uuid.uuid4() for _ in range(ENTRIES)]
    await seed_layout(db_pool, layout, uuid.uuid4())
    definitions = await index_definitions(db_pool)
    # in two steps, as the benchmark grows its database: the indexes rebuilt after each
    await grow(db_pool, corpus, ids, layout, definitions, 0, ENTRIES // 2)
    await grow(db_pool, corpus, ids, layout, definitions, ENTRIES // 2, ENTRIES)
    return {"corpus": corpus, "ids": ids, "layout": layout}


@pytest.mark.parametrize("index", [0, ENTRIES // 2 + 1, ENTRIES - 1])
async def test_a_seeded_entry_is_found_by_its_text_and_by_its_vector(
    db_pool: Any, seeded: dict[str, Any], index: int
) -> None:
    corpus, ids, layout = seeded["corpus"], seeded["ids"], seeded["layout"]
    diary = int(corpus.diary[index])
    team = layout.team_diaries(layout.team_of(diary))
    repo = SearchRepo(db_pool)

    by_text = await repo.search(
        corpus.content(index), None, SearchFilters(diary_ids=tuple(team), mode="fulltext")
    )
    assert by_text.fulltext_ids is not None
    assert ids[index] in by_text.fulltext_ids
    by_vector = await repo.search(
        "", corpus.vectors[index], SearchFilters(diary_ids=tuple(team), mode="vector")
    )
    assert by_vector.vector_ids is not None
    assert by_vector.vector_ids[0] == ids[index]


async def test_seeded_rows_carry_what_an_api_write_has(
    db_pool: Any, seeded: dict[str, Any]
) -> None:
    corpus, ids, layout = seeded["corpus"], seeded["ids"], seeded["layout"]
    row = await db_pool.fetchrow(
        "SELECT e.diary_id, e.cid, e.tags, e.entry_type, e.tsv IS NOT NULL AS has_tsv,"
        " EXISTS (SELECT 1 FROM relation_tuples t WHERE t.namespace = 'DiaryEntry'"
        "   AND t.object_id = e.id::text AND t.relation = 'parent'"
        "   AND t.subject_id = e.diary_id::text) AS has_parent,"
        " EXISTS (SELECT 1 FROM consolidation_pending p WHERE p.entry_id = e.id) AS pending"
        " FROM diary_entries e WHERE e.id = $1",
        ids[7],
    )
    assert row["diary_id"] == layout.diaries[int(corpus.diary[7])]
    assert row["cid"] == entry_cid(corpus.content(7), None, row["tags"], row["entry_type"])
    assert row["has_tsv"] and row["has_parent"] and row["pending"]
    assert await db_pool.fetchval("SELECT count(*) FROM diary_entries") == ENTRIES
    indexes = await index_definitions(db_pool)
    assert "diary_entries_embedding" in indexes and "diary_entries_scope_vectors" in indexes
