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
    from workflows.steps import RequestStep, request_step


def client_register_workflow_id(client_id: str) -> str:
    return f"connector/clients/{client_id}/register"


@request_step("ConnectorClientRegister", ConnectorActivities.register_client)
class ConnectorClientRegisterWorkflow(RequestStep[ClientRegister, None]): ...


def code_issue_workflow_id(code_hash: str) -> str:
    return f"connector/codes/{code_hash}/issue"


@request_step("ConnectorCodeIssue", ConnectorActivities.issue_code)
class ConnectorCodeIssueWorkflow(RequestStep[CodeIssue, None]): ...


def code_redeem_workflow_id(code_hash: str) -> str:
    return f"connector/codes/{code_hash}/redeem"


@request_step("ConnectorCodeRedeem", ConnectorActivities.redeem_code)
class ConnectorCodeRedeemWorkflow(RequestStep[CodeExchange, GrantIssued]): ...


def refresh_rotate_workflow_id(grant_id: UUID, old_hash: str) -> str:
    return f"connector/grants/{grant_id}/refresh/{old_hash}"


@request_step("ConnectorRefreshRotate", ConnectorActivities.rotate_refresh)
class ConnectorRefreshRotateWorkflow(RequestStep[RefreshRotate, GrantIssued]): ...


def grant_revoke_workflow_id(grant_id: UUID) -> str:
    return f"connector/grants/{grant_id}/revoke"


@request_step("ConnectorGrantRevoke", ConnectorActivities.revoke_grant)
class ConnectorGrantRevokeWorkflow(RequestStep[GrantRef, None]): ...
