"""The browser OAuth connector's mutations: client registration (RFC 7591), an authorization
code issued at consent, its redemption into a grant, refresh-token rotation, revocation.

Payloads carry keyed hashes of secrets, codes and refresh tokens, never the values.
"""

from __future__ import annotations

from uuid import UUID

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.connector import ConnectorActivities
    from schemas.connector import (
        ClientRegister,
        CodeExchange,
        CodeIssue,
        GrantIssued,
        GrantRef,
        RefreshRotate,
    )
    from workflows.common import run_step


def client_register_workflow_id(client_id: str) -> str:
    return f"connector/clients/{client_id}/register"


@workflow.defn(name="ConnectorClientRegister")
class ConnectorClientRegisterWorkflow:
    @workflow.run
    async def run(self, inp: ClientRegister) -> None:
        await run_step(ConnectorActivities.register_client, inp)


def code_issue_workflow_id(code_hash: str) -> str:
    return f"connector/codes/{code_hash}/issue"


@workflow.defn(name="ConnectorCodeIssue")
class ConnectorCodeIssueWorkflow:
    @workflow.run
    async def run(self, inp: CodeIssue) -> None:
        await run_step(ConnectorActivities.issue_code, inp)


def code_redeem_workflow_id(code_hash: str) -> str:
    return f"connector/codes/{code_hash}/redeem"


@workflow.defn(name="ConnectorCodeRedeem")
class ConnectorCodeRedeemWorkflow:
    @workflow.run
    async def run(self, inp: CodeExchange) -> GrantIssued:
        return await run_step(ConnectorActivities.redeem_code, inp)


def refresh_rotate_workflow_id(grant_id: UUID, old_hash: str) -> str:
    return f"connector/grants/{grant_id}/refresh/{old_hash}"


@workflow.defn(name="ConnectorRefreshRotate")
class ConnectorRefreshRotateWorkflow:
    @workflow.run
    async def run(self, inp: RefreshRotate) -> GrantIssued:
        return await run_step(ConnectorActivities.rotate_refresh, inp)


def grant_revoke_workflow_id(grant_id: UUID) -> str:
    return f"connector/grants/{grant_id}/revoke"


@workflow.defn(name="ConnectorGrantRevoke")
class ConnectorGrantRevokeWorkflow:
    @workflow.run
    async def run(self, inp: GrantRef) -> None:
        await run_step(ConnectorActivities.revoke_grant, inp)


CONNECTOR_WORKFLOWS: tuple[type, ...] = (
    ConnectorClientRegisterWorkflow,
    ConnectorCodeIssueWorkflow,
    ConnectorCodeRedeemWorkflow,
    ConnectorRefreshRotateWorkflow,
    ConnectorGrantRevokeWorkflow,
)
