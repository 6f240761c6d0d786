"""The rules of runtime profiles (DECISIONS "Runtime profiles"), pure and in one place.

A runtime profile is a team's named policy `{taskTypes?, scopes?}` that a daemon claims under.
"Runtime policy may narrow, never widen" (SPEC 5) reads here as three rules:

- a task with a non-empty `allowedProfiles` is claimable only under one of them
  (`profile-not-allowed` otherwise, for another profile and for none);
- a profile with `taskTypes` claims only tasks of those types;
- a profile with `scopes` narrows the credential's scopes for the attempt it claims: a call on
  the attempt needs each of its route's scopes both in the credential and in the policy frozen
  at claim. The intersection can only lose scopes, so a policy never widens a credential.

The policy an attempt keeps is the one read at claim, addressed by `policy_snapshot_hash`: the
SHA-256 hex of its RFC 8785 (JCS) bytes. A later update of the profile changes neither.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal
from uuid import UUID

from schemas.kernel.cids import canonical_json

ClaimRefusal = Literal[
    "profile-not-allowed", "profile-task-type-not-allowed", "profile-scope-denied"
]


def policy_snapshot_hash(policy: Mapping[str, Any]) -> str:
    """SHA-256 hex of the RFC 8785 form of the policy as it stood at claim."""
    return hashlib.sha256(canonical_json(dict(policy))).hexdigest()


def pinned_profiles(allowed_profiles: Sequence[Mapping[str, Any]]) -> frozenset[UUID]:
    """The profile ids a task's `allowedProfiles` names (empty: any runtime may claim it)."""
    return frozenset(UUID(str(entry["profileId"])) for entry in allowed_profiles)


def policy_scopes(policy: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The scopes a policy keeps; None when it does not narrow scopes."""
    scopes = None if policy is None else policy.get("scopes")
    return None if scopes is None else frozenset(scopes)


def attempt_scopes(
    credential_scopes: Collection[str], policy: Mapping[str, Any] | None
) -> frozenset[str]:
    """The scopes a call on an attempt holds: the credential's, narrowed by the policy frozen on
    the attempt at claim (never widened: an intersection)."""
    kept = policy_scopes(policy)
    held = frozenset(credential_scopes)
    return held if kept is None else held & kept


def scopes_denied(
    required: Collection[str], credential_scopes: Collection[str], policy: Mapping[str, Any] | None
) -> list[str]:
    """The required scopes the attempt's policy takes away from the credential, sorted (empty:
    the call may go on). Scopes the credential lacks itself are the route's own 403."""
    held = attempt_scopes(credential_scopes, policy)
    return sorted(s for s in required if s in credential_scopes and s not in held)


def claim_refusal(
    *,
    allowed_profiles: Sequence[Mapping[str, Any]],
    profile_id: UUID | None,
    policy: Mapping[str, Any] | None,
    task_type: str,
    claim_scopes: Collection[str],
    credential_scopes: Collection[str],
) -> ClaimRefusal | None:
    """Why a claim under `profile_id` (None: no profile) with this policy is refused, if it is.
    Checked in order: the task's pin, the policy's task types, then its scopes (the claim is
    itself a call the policy must allow)."""
    pinned = pinned_profiles(allowed_profiles)
    if pinned and profile_id not in pinned:
        return "profile-not-allowed"
    if policy is None:
        return None
    task_types = policy.get("taskTypes")
    if task_types is not None and task_type not in task_types:
        return "profile-task-type-not-allowed"
    if scopes_denied(claim_scopes, credential_scopes, policy):
        return "profile-scope-denied"
    return None
