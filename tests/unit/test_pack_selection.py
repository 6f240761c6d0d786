"""The refusals of a pack's selection read as a person writes: one entry, or many."""

from __future__ import annotations

import uuid

import pytest

from infra.repos.packs import SelectedEntry, checked_selection
from schemas.errors import Conflict, ValidationFailed


def _entry(diary_id: uuid.UUID, *, flagged: bool) -> SelectedEntry:
    return SelectedEntry(
        entry_id=uuid.uuid4(),
        rank=1,
        cid="bafy",
        content="text",
        diary_id=diary_id,
        injection_risk=flagged,
        injection_threats=[{"kind": "instruction-override"}] if flagged else [],
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
