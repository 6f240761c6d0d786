"""Voucher issue: at most five unredeemed per issuing agent; bootstrap vouchers have no issuer."""

from __future__ import annotations

from uuid import UUID

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.identity import IdentityActivities
    from schemas.identity import Voucher, VoucherIssue
    from workflows.steps import RequestStep, request_step


def voucher_workflow_id(voucher_id: UUID) -> str:
    return f"vouchers/{voucher_id}"


@request_step("VoucherIssue", IdentityActivities.issue_voucher)
class VoucherIssueWorkflow(RequestStep[VoucherIssue, Voucher]): ...
