"""Settings a mistyped value would turn into an outage are bounded both ways: a slot count or a
keep-alive of zero, or one far past what any machine or proxy can use, is refused at start
with the setting's name, not found later under load."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infra.settings import Settings

BOUNDS = {
    "worker_workflow_task_slots": (1, 1024),
    "embedding_workflow_task_slots": (1, 512),
    "a2a_stream_keepalive_s": (0.001, 300),
}


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_the_bounds_themselves_are_accepted(name: str) -> None:
    low, high = BOUNDS[name]
    assert getattr(Settings(**{name: low}), name) == low
    assert getattr(Settings(**{name: high}), name) == high


@pytest.mark.parametrize("name", sorted(BOUNDS))
@pytest.mark.parametrize("beyond", ["zero", "above"])
def test_a_value_beyond_the_bounds_is_refused_by_name(name: str, beyond: str) -> None:
    value = 0 if beyond == "zero" else BOUNDS[name][1] + 1
    with pytest.raises(ValidationError, match=name):
        Settings(**{name: value})
