"""Search hits in the console: the query's terms are marked in text that is escaped piece by
piece, so neither an entry's content nor the query can add markup (api/console/diaries.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from api.console.diaries import excerpt, marked, query_terms
from schemas.memory import Entry


def test_terms_are_the_query_words_longest_first_and_without_markup() -> None:
    assert query_terms("Tide <i>lighthouse</i> a tide") == ["lighthouse", "tide"]
    assert query_terms("  ") == []


def test_content_and_query_are_escaped_and_only_the_terms_marked() -> None:
    text = "The <script>alert(1)</script> Lighthouse & tide"
    html = str(marked(text, query_terms("lighthouse script")))
    assert "<script>" not in html
    assert html == (
        "The &lt;<mark>script</mark>&gt;alert(1)&lt;/<mark>script</mark>&gt; "
        "<mark>Lighthouse</mark> &amp; tide"
    )


def test_a_term_never_matches_inside_an_escape() -> None:
    assert str(marked("salt & pepper", ["amp"])) == "salt &amp; pepper"
    assert str(marked("<b>", [])) == "&lt;b&gt;"


def test_an_excerpt_is_cut_around_the_first_term() -> None:
    now = datetime.now(UTC)
    content = "x" * 1000 + " beacon " + "y" * 1000
    entry = Entry(
        id=uuid4(), diaryId=uuid4(), content=content, tags=[], importance=5,
        entryType="semantic", injectionRisk=False, cid="bafy", signed=False,
        hasEmbedding=True, accessCount=0, createdBy=uuid4(), createdAt=now, updatedAt=now,
    )  # fmt: skip
    shown = str(excerpt(entry, ["beacon"]))
    assert shown.startswith("…") and shown.endswith("…")
    assert "<mark>beacon</mark>" in shown and len(shown) < 500
