"""The asynchronous signing protocol (spec 3.4): the server issues a payload, the agent signs
it locally with its private key (which never leaves it), the server verifies."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from schemas.signing import SigningRequestView, SignOutcome, VerifyRequest, VerifyResult
from toolserver.registry import Arguments, Call, tool

Signature = Field(min_length=1, max_length=100)


class PreparedSignature(BaseModel):
    """Spec 4.7: `id` and `signingInput` (sign the UTF-8 bytes of signingInput)."""

    id: UUID
    signingInput: str
    message: str
    nonce: UUID
    status: Literal["pending", "completed", "expired"]
    expiresAt: datetime


class SigningStatus(BaseModel):
    id: UUID
    status: Literal["pending", "completed", "expired"]
    valid: bool | None = None
    signingInput: str
    message: str
    signature: str | None = None
    expiresAt: datetime
    completedAt: datetime | None = None


def _prepared(view: SigningRequestView) -> PreparedSignature:
    return PreparedSignature(
        id=view.request_id,
        signingInput=view.signing_payload,
        message=view.message,
        nonce=view.nonce,
        status=view.status,
        expiresAt=view.expires_at,
    )


class PrepareSignature(Arguments):
    message: str = Field(min_length=1, max_length=100_000)


def _prepare_text(result: dict[str, Any]) -> str:
    return (
        f"Signing request {result['id']}: sign the UTF-8 bytes of signingInput with your Ed25519 "
        f"private key, then call crypto_submit_signature before {result['expiresAt']}."
    )


@tool(output=PreparedSignature, render=_prepare_text)
async def crypto_prepare_signature(call: Call, args: PrepareSignature) -> PreparedSignature:
    """Start signing a message: returns id and signingInput to sign (300 s)."""
    return _prepared(await call.api.create_signing_request(args.message))


class SubmitSignature(Arguments):
    id: UUID
    signature: str = Signature


@tool(output=SignOutcome, render=lambda r: f"Signature {'valid' if r['valid'] else 'INVALID'}")
async def crypto_submit_signature(call: Call, args: SubmitSignature) -> SignOutcome:
    """Submit your base64 Ed25519 signature of signingInput."""
    return await call.api.submit_signature(args.id, args.signature)


class SigningRequestRef(Arguments):
    id: UUID


@tool(output=SigningStatus, read_only=True, render=lambda r: f"Signing request {r['status']}")
async def crypto_signing_status(call: Call, args: SigningRequestRef) -> SigningStatus:
    """A signing request's status and validity."""
    view = await call.api.get_signing_request(args.id)
    return SigningStatus(
        id=view.request_id,
        status=view.status,
        valid=view.valid,
        signingInput=view.signing_payload,
        message=view.message,
        signature=view.signature,
        expiresAt=view.expires_at,
        completedAt=view.completed_at,
    )


class CryptoVerify(Arguments):
    message: str = Field(min_length=1, max_length=100_000)
    signature: str = Signature
    public_key: str | None = Field(default=None, description="ed25519:<base64> (or fingerprint)")
    fingerprint: str | None = Field(default=None, description="Or public_key")
    nonce: UUID | None = Field(
        default=None,
        description="Signed bytes are message + '.' + nonce",
    )


@tool(output=VerifyResult, read_only=True, render=lambda r: f"valid: {r['valid']}")
async def crypto_verify(call: Call, args: CryptoVerify) -> VerifyResult:
    """Verify an agent's signature over a message."""
    body = VerifyRequest(
        message=args.message,
        signature=args.signature,
        publicKey=args.public_key,
        fingerprint=args.fingerprint,
        nonce=args.nonce,
    )
    return await call.api.verify_signature(body)
