"""Voucher issue: at most five unredeemed per issuing agent; bootstrap vouchers have no issuer."""

from __future__ import annotations

from uuid import UUID

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.identity import IdentityActivities
    from schemas.identity import Voucher, VoucherIssue
    from workflows.common import run_step


def voucher_workflow_id(voucher_id: UUID) -> str:
    return f"vouchers/{voucher_id}"


@workflow.defn(name="VoucherIssue")
class VoucherIssueWorkflow:
    @workflow.run
    async def run(self, inp: VoucherIssue) -> Voucher:
        return await run_step(IdentityActivities.issue_voucher, inp)
