"""The one list of workflows and activities, used by production workers, tests and replay."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from cairn.activities.identity import IdentityActivities
from cairn.activities.permissions import PermissionActivities
from cairn.infra.permissions import TupleRepository
from cairn.infra.repos.identity import IdentityRepo
from cairn.workflows.humans import (
    HumanRegistrationWorkflow,
    SessionCloseWorkflow,
    SessionOpenWorkflow,
)
from cairn.workflows.recovery import RecoveryRedeemWorkflow, RecoveryVerifyWorkflow
from cairn.workflows.registration import RegistrationWorkflow
from cairn.workflows.signing_keys import SigningKeysWorkflow
from cairn.workflows.vouchers import VoucherIssueWorkflow

WORKFLOWS: Sequence[type] = (
    RegistrationWorkflow,
    VoucherIssueWorkflow,
    SigningKeysWorkflow,
    RecoveryVerifyWorkflow,
    RecoveryRedeemWorkflow,
    HumanRegistrationWorkflow,
    SessionOpenWorkflow,
    SessionCloseWorkflow,
)


@dataclass(frozen=True)
class ActivityDeps:
    """What activities are built from: a writable pool and the server secret."""

    pool: asyncpg.Pool
    server_secret: bytes


def activities(deps: ActivityDeps) -> list[Callable[..., Any]]:
    identity = IdentityActivities(IdentityRepo(deps.pool, deps.server_secret))
    permissions = PermissionActivities(deps.pool, TupleRepository())
    return [
        identity.check_voucher,
        identity.create_identity,
        identity.delete_identity,
        identity.bind_agent,
        identity.create_oauth_client,
        identity.issue_voucher,
        identity.ensure_signing_key,
        identity.consume_recovery_nonce,
        identity.find_agent,
        identity.create_recovery_flow,
        identity.redeem_recovery,
        identity.open_session,
        identity.close_session,
        permissions.write_tuples,
        permissions.delete_tuples,
        permissions.replace_tuples,
        permissions.delete_object,
    ]
