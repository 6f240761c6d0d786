"""The runtime-profile rules of `schemas.kernel.runtime_profiles` (DECISIONS "Runtime profiles"),
the policy model, and where the daemon takes its profile from. No I/O."""

from __future__ import annotations

import argparse
import uuid

import pytest
from pydantic import ValidationError

from client.cli import RUNTIME_PROFILE_ENV, daemon_config
from client.daemon import DaemonRefused
from schemas.kernel.runtime_profiles import (
    attempt_scopes,
    claim_refusal,
    policy_snapshot_hash,
    scopes_denied,
)
from schemas.runtime_profiles import RuntimePolicy

MINE = uuid.UUID("11111111-1111-4111-8111-111111111111")
THEIRS = uuid.UUID("22222222-2222-4222-8222-222222222222")
KEY = frozenset({"task:read", "task:claim", "task:execute"})


def test_the_policy_hash_is_sha256_of_the_rfc8785_bytes() -> None:
    # {"scopes":["task:claim","task:execute"],"taskTypes":["freeform"]}: keys sorted, no spaces
    policy = {"taskTypes": ["freeform"], "scopes": ["task:claim", "task:execute"]}
    expected = "ce627b4da821d48c7ded02f43e0b37c05ff9c752070628a8ae2cef5bbc1e12a6"
    assert policy_snapshot_hash(policy) == expected
    assert policy_snapshot_hash(dict(reversed(policy.items()))) == expected
    assert policy_snapshot_hash({}) == (
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"  # sha256 of "{}"
    )


def refusal(profile: uuid.UUID | None, policy: dict[str, object] | None, **task: object) -> object:
    return claim_refusal(
        allowed_profiles=task.get("pinned", []),  # type: ignore[arg-type]
        profile_id=profile,
        policy=policy,
        task_type=str(task.get("task_type", "freeform")),
        claim_scopes=("task:claim",),
        credential_scopes=KEY,
    )


def test_a_pinned_task_is_claimed_only_under_one_of_its_profiles() -> None:
    pinned = [{"profileId": str(MINE)}]
    assert refusal(MINE, {}, pinned=pinned) is None
    assert refusal(THEIRS, {}, pinned=pinned) == "profile-not-allowed"
    assert refusal(None, None, pinned=pinned) == "profile-not-allowed"
    assert refusal(None, None) is None  # unrestricted, no profile
    assert refusal(THEIRS, {}) is None  # unrestricted, any profile


def test_a_profile_claims_only_its_task_types() -> None:
    assert refusal(MINE, {"taskTypes": ["freeform"]}) is None
    assert refusal(MINE, {"taskTypes": ["fulfill_brief"]}) == "profile-task-type-not-allowed"


def test_a_profile_must_keep_the_claim_scope() -> None:
    assert refusal(MINE, {"scopes": ["task:claim"]}) is None
    assert refusal(MINE, {"scopes": ["task:execute"]}) == "profile-scope-denied"


def test_policy_scopes_narrow_and_never_widen() -> None:
    narrow = {"scopes": ["task:claim"]}
    wide = {"scopes": ["task:claim", "task:execute", "task:manage"]}
    assert attempt_scopes(KEY, narrow) == {"task:claim"}
    assert attempt_scopes(KEY, wide) == {"task:claim", "task:execute"}  # no task:manage
    assert attempt_scopes(KEY, None) == KEY and attempt_scopes(KEY, {}) == KEY
    assert scopes_denied(["task:execute"], KEY, narrow) == ["task:execute"]
    assert scopes_denied(["task:execute"], KEY, wide) == []
    # a scope the credential lacks is the route's own 403, not the policy's
    assert scopes_denied(["task:manage"], KEY, wide) == []


def test_a_policy_is_stored_sorted_and_checked() -> None:
    policy = RuntimePolicy.model_validate(
        {"taskTypes": ["freeform", "curate_pack", "freeform"], "scopes": ["task:read"]}
    )
    assert policy.snapshot() == {"taskTypes": ["curate_pack", "freeform"], "scopes": ["task:read"]}
    assert RuntimePolicy().snapshot() == {}
    for bad in ({"taskTypes": ["nope"]}, {"scopes": ["task:fly"]}, {"scopes": []}, {"x": 1}):
        with pytest.raises(ValidationError):
            RuntimePolicy.model_validate(bad)


def _args(**given: object) -> argparse.Namespace:
    base = {
        "team": str(uuid.uuid4()),
        "executor": ["run"],
        "task_types": None,
        "slots": None,
        "once": False,
        "lease_ttl_sec": None,
        "runtime_id": None,
        "profile": None,
    }
    return argparse.Namespace(**{**base, **given})


def test_the_daemon_takes_its_profile_from_flag_environment_then_config() -> None:
    env = {RUNTIME_PROFILE_ENV: str(THEIRS)}
    config = {"runtime_profile_id": str(uuid.uuid4())}
    assert daemon_config(_args(profile=str(MINE)), config, env).runtime_profile_id == MINE
    assert daemon_config(_args(), config, env).runtime_profile_id == THEIRS
    assert daemon_config(_args(), config, {}).runtime_profile_id == uuid.UUID(
        config["runtime_profile_id"]
    )
    assert daemon_config(_args(), {}, {}).runtime_profile_id is None
    with pytest.raises(DaemonRefused):
        daemon_config(_args(profile="gpu-pool"), {}, {})
