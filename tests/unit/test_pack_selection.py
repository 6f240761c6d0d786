"""The refusals of a pack's selection read as a person writes: one entry, or many; and a
selection `asOf` an instant holds only entries created by then."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from infra.repos.packs import SelectedEntry, checked_selection
from schemas.errors import Conflict, ValidationFailed

WRITTEN = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def _entry(diary_id: uuid.UUID, *, flagged: bool, at: datetime = WRITTEN) -> SelectedEntry:
    return SelectedEntry(
        entry_id=uuid.uuid4(),
        rank=1,
        cid="bafy",
        content="text",
        diary_id=diary_id,
        injection_risk=flagged,
        injection_threats=[{"kind": "instruction-override"}] if flagged else [],
        created_at=at,
    )


@pytest.mark.parametrize(
    ("count", "subject"), [(1, "1 selected entry is"), (2, "2 selected entries are")]
)
def test_flagged_entries_are_counted_in_singular_or_plural(count: int, subject: str) -> None:
    diary = uuid.uuid4()
    entries = [_entry(diary, flagged=True) for _ in range(count)] + [_entry(diary, flagged=False)]
    found = {e.entry_id: e for e in entries}
    selection = [(e.entry_id, 1) for e in entries]
    with pytest.raises(Conflict) as refused:
        checked_selection(diary, selection, found, force=False)
    assert refused.value.detail.startswith(f"{subject} flagged for prompt injection; ")
    assert len(checked_selection(diary, selection, found, force=True)) == count + 1


@pytest.mark.parametrize(
    ("count", "subject"), [(1, "1 selected entry is"), (3, "3 selected entries are")]
)
def test_entries_of_another_diary_are_counted_in_singular_or_plural(
    count: int, subject: str
) -> None:
    diary = uuid.uuid4()
    strangers = [_entry(uuid.uuid4(), flagged=False) for _ in range(count)]
    found = {e.entry_id: e for e in strangers}
    with pytest.raises(ValidationFailed) as refused:
        checked_selection(diary, [(e.entry_id, 1) for e in strangers], found, force=False)
    assert refused.value.detail == f"{subject} not in this diary"


def test_as_of_refuses_the_entries_written_after_it_and_keeps_those_written_by_then() -> None:
    diary = uuid.uuid4()
    early = _entry(diary, flagged=False)
    late = _entry(diary, flagged=False, at=WRITTEN + timedelta(microseconds=1))
    found = {e.entry_id: e for e in (early, late)}
    selection = [(early.entry_id, 1), (late.entry_id, 2)]
    with pytest.raises(ValidationFailed) as refused:
        checked_selection(diary, selection, found, force=False, as_of=WRITTEN)
    assert refused.value.instance_code == "pack-entry-after-as-of"
    assert refused.value.detail == "1 selected entry is newer than asOf"
    kept = checked_selection(diary, selection[:1], found, force=False, as_of=WRITTEN)
    assert [s.entry_id for s in kept] == [early.entry_id]
    assert len(checked_selection(diary, selection, found, force=False)) == 2
