"""The one rule of who reports on an attempt: its current claimant, once it has started."""

from __future__ import annotations

import uuid

import pytest

from schemas.errors import AttemptFinished, AttemptNotStarted, Conflict, Forbidden, NotClaimant
from schemas.kernel.attempts import (
    is_claimant,
    message_refusal,
    report_refusal,
    state_refusal,
)
from schemas.task_attempts import (
    report_refused,
)
from schemas.tasks import TERMINAL_ATTEMPT_STATUSES

AGENT = uuid.uuid4()
OTHER = uuid.uuid4()


def test_the_claimant_of_a_running_attempt_may_report() -> None:
    assert report_refusal("running", AGENT, AGENT) is None


def test_another_agent_or_a_human_may_not() -> None:
    assert report_refusal("running", AGENT, OTHER) == "not-claimant"
    assert report_refusal("running", AGENT, None) == "not-claimant"
    assert not is_claimant(None, None)


def test_who_asks_is_decided_before_the_state() -> None:
    assert report_refusal("claimed", AGENT, OTHER) == "not-claimant"
    assert report_refusal("completed", AGENT, OTHER) == "not-claimant"


def test_a_claimed_attempt_has_not_started() -> None:
    assert state_refusal("claimed") == "not-started"
    assert report_refusal("claimed", AGENT, AGENT) == "not-started"


@pytest.mark.parametrize("status", sorted(TERMINAL_ATTEMPT_STATUSES))
def test_an_ended_attempt_takes_no_report(status: str) -> None:
    assert report_refusal(status, AGENT, AGENT) == "finished"
    assert message_refusal(status, AGENT, AGENT) == "finished"


def test_the_claimant_posts_messages_from_the_claim_on() -> None:
    assert message_refusal("claimed", AGENT, AGENT) is None
    assert message_refusal("running", AGENT, AGENT) is None


def test_no_one_else_posts_messages_before_or_after_the_first_heartbeat() -> None:
    for status in ("claimed", "running"):
        assert message_refusal(status, AGENT, OTHER) == "not-claimant"
        assert message_refusal(status, AGENT, None) == "not-claimant"


def test_each_refusal_has_its_problem() -> None:
    refused = report_refused("not-claimant", 2, "running", "uploads its artifacts")
    assert isinstance(refused, Forbidden)
    assert refused.instance_code == NotClaimant.code
    assert "uploads its artifacts" in refused.detail
    started = report_refused("not-started", 2, "claimed")
    assert isinstance(started, Conflict)
    assert started.instance_code == AttemptNotStarted.code
    finished = report_refused("finished", 2, "failed")
    assert (finished.instance_code, finished.status) == (AttemptFinished.code, 409)
    assert "failed" in finished.detail
