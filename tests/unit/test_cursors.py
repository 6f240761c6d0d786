"""Signed page cursors (`schemas.kernel.cursors`): a cursor round-trips only for the list and
filters it was made for, and anything altered is a 400 `invalid-cursor`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from schemas.errors import ValidationFailed
from schemas.kernel.cursors import CURSOR_MAX_CHARS, Keyset, decode_cursor, encode_cursor

SECRET = b"unit-test-secret-0123456789abcdef-xyz"
POSITION = {"c": "2026-01-01T00:00:00.123456+00:00", "i": "6f1c0f0e-1111-4222-8333-444455556666"}
BINDING = {"tag": "ops", "includeSuspicious": False}


def make(**overrides: object) -> str:
    options = {"secret": SECRET, "scope": "feed", "binding": BINDING, **overrides}
    return encode_cursor(POSITION, **options)  # type: ignore[arg-type]


def test_round_trip() -> None:
    cursor = make()
    assert decode_cursor(cursor, secret=SECRET, scope="feed", binding=dict(BINDING)) == POSITION
    assert len(cursor) < CURSOR_MAX_CHARS and "=" not in cursor


@pytest.mark.parametrize(
    ("secret", "scope", "binding"),
    [
        (b"another-secret-0123456789abcdef-xyz!", "feed", BINDING),
        (SECRET, "tasks", BINDING),
        (SECRET, "feed", {**BINDING, "tag": "notes"}),
        (SECRET, "feed", {**BINDING, "includeSuspicious": True}),
        (SECRET, "feed", {"tag": "ops"}),
    ],
)
def test_a_cursor_is_bound_to_its_secret_list_and_filters(
    secret: bytes, scope: str, binding: dict[str, object]
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        decode_cursor(make(), secret=secret, scope=scope, binding=binding)  # type: ignore[arg-type]
    assert refused.value.instance_code == "invalid-cursor"


def flip(text: str, index: int) -> str:
    return text[:index] + ("A" if text[index] != "A" else "B") + text[index + 1 :]


@pytest.mark.parametrize(
    "tamper",
    [
        lambda c: flip(c, 3),  # the position
        lambda c: flip(c, len(c) - 2),  # the tag
        lambda c: c.replace(".", ""),
        lambda c: c + "x",
        lambda c: "",
        lambda c: "a" * (CURSOR_MAX_CHARS + 1),
        lambda c: "é." + c.partition(".")[2],
    ],
)
def test_tampering_is_refused(tamper) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationFailed):
        decode_cursor(tamper(make()), secret=SECRET, scope="feed", binding=BINDING)


# --- Keyset: the one paging helper every keyset-paged route uses -------------------------------

ROWS = [
    (datetime(2026, 1, 1, tzinfo=UTC) - timedelta(minutes=n), uuid.UUID(int=n)) for n in range(5)
]


def test_a_keyset_cuts_the_page_and_its_next_cursor_names_the_last_row() -> None:
    keyset = Keyset(SECRET, "feed", BINDING)
    assert keyset.after(None) is None
    page, cursor = keyset.page(ROWS[:3], 2, lambda row: row)
    assert page == ROWS[:2] and cursor is not None
    assert keyset.after(cursor) == ROWS[1]
    last, none = keyset.page(ROWS[2:4], 2, lambda row: row)  # no extra row: the last page
    assert last == ROWS[2:4] and none is None


def test_a_keysets_cursor_is_bound_to_its_list_and_its_field_names() -> None:
    _, cursor = Keyset(SECRET, "feed", BINDING).page(ROWS, 1, lambda row: row)
    assert cursor is not None
    with pytest.raises(ValidationFailed):
        Keyset(SECRET, "tasks", BINDING).after(cursor)
    with pytest.raises(ValidationFailed):
        Keyset(SECRET, "feed", {**BINDING, "tag": "other"}).after(cursor)
    with pytest.raises(ValidationFailed):  # signed for this list, but not the position it reads
        Keyset(SECRET, "feed", BINDING, fields=("at", "id")).after(cursor)
