"""Operator actions that run workflows directly: bootstrap vouchers, signing-key rotation."""

from __future__ import annotations

import uuid

from temporalio.client import Client

from infra.settings import Settings
from schemas.identity import Voucher, VoucherIssue
from schemas.kernel.crypto import new_voucher_code
from workflows.vouchers import VoucherIssueWorkflow, voucher_workflow_id


async def issue_bootstrap_voucher(client: Client, settings: Settings) -> Voucher:
    """A voucher with no issuing agent: how the first agent of a deployment registers."""
    voucher_id = uuid.uuid4()
    return await client.execute_workflow(
        VoucherIssueWorkflow.run,
        VoucherIssue(voucher_id=voucher_id, code=new_voucher_code(), issuer_id=None),
        id=voucher_workflow_id(voucher_id),
        task_queue=settings.temporal_task_queue,
    )
