"""Models of the asynchronous signing protocol (SPEC 2.4, 3.4, 4.4, 6) and of `POST /crypto/verify`.

An agent asks for a signing request with a message; the service answers with a nonce and the
`signing_payload` (message, a period, the nonce). The agent signs its UTF-8 bytes locally with
its Ed25519 key and posts the base64 signature; the `SigningRequest` workflow verifies it against
the agent's public key and records `completed` with `valid` true or false. Without a signature
within 300 s the request is `expired`. Bodies are snake_case, as the spec shows them.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Annotated, Final, Literal
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from schemas import limits
from schemas.base import Payload, RequestBody, ResponseBody
from schemas.errors import (
    Conflict,
    SigningRequestAlreadyCompleted,
    SigningRequestExpired,
)
from schemas.identity import Fingerprint, PublicKeyStr
from schemas.kernel.crypto import parse_public_key, signing_payload
from schemas.numbers import SqlCount

SigningStatus = Literal["pending", "completed", "expired"]

# The Update that answers once the request is stored (the API's 201; SPEC 6 "envelope")
ENVELOPE_UPDATE: Final = "envelope"


def check_signature_format(value: str) -> str:
    """Strict base64 of exactly 64 bytes, or ``ValueError``: a malformed signature is a bad
    request (400, nothing recorded), unlike a well-formed one that does not verify."""
    if len(value) > limits.SIGNATURE_B64_MAX_CHARS:
        raise ValueError("the signature is too long for an Ed25519 signature")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the signature must be standard base64") from None
    if len(raw) != limits.ED25519_SIGNATURE_BYTES:
        raise ValueError(f"the signature decodes to {len(raw)} bytes, an Ed25519 one has 64")
    return value


def _raw_key(value: str) -> str:
    parse_public_key(value)
    return value


Signature = Annotated[
    str,
    Field(
        min_length=1,
        max_length=limits.SIGNATURE_B64_MAX_CHARS,
        description="base64 of the 64-byte Ed25519 signature",
    ),
    AfterValidator(check_signature_format),
]
SigningMessage = Annotated[str, Field(min_length=1, max_length=limits.SIGNING_MESSAGE_MAX_CHARS)]


# --- HTTP bodies ------------------------------------------------------------------------------


class SigningRequestCreate(RequestBody):
    """`POST /crypto/signing-requests`: the text to sign (1 to 100 000 characters)."""

    message: SigningMessage


class SignatureSubmit(RequestBody):
    """`POST /crypto/signing-requests/{id}/sign`: the signature over `signing_payload`."""

    signature: Signature


class SigningRequestPath(RequestBody):
    id: UUID


class SigningRequestListQuery(RequestBody):
    """The caller's own requests, newest first; `status` filters."""

    status: SigningStatus | None = None
    limit: int = Field(
        default=limits.SIGNING_REQUESTS_PAGE.default, ge=1, le=limits.SIGNING_REQUESTS_PAGE.max
    )
    offset: SqlCount = 0


class VerifyRequest(RequestBody):
    """`POST /crypto/verify` (public): does `signature` verify for this message and signer?

    Name the signer by exactly one of `publicKey` (`ed25519:<base64>`) or `fingerprint` (a
    registered agent; an unknown one is 404). The signed bytes are the UTF-8 of `message`; with
    `nonce` they are those of a signing request's payload, `message + "." + nonce`, so a third
    party can check a signature made through `/crypto/signing-requests`. The answer is
    `{valid}`; a malformed signature or key is 400.
    """

    message: SigningMessage
    signature: Signature
    publicKey: Annotated[PublicKeyStr, AfterValidator(_raw_key)] | None = None
    fingerprint: Fingerprint | None = None
    nonce: UUID | None = None

    @model_validator(mode="after")
    def _one_signer(self) -> VerifyRequest:
        if (self.publicKey is None) == (self.fingerprint is None):
            raise ValueError("name the signer by exactly one of publicKey or fingerprint")
        return self

    def signed_bytes(self) -> bytes:
        text = self.message if self.nonce is None else signing_payload(self.message, self.nonce)
        return text.encode("utf-8")


class VerifyResult(ResponseBody):
    """Whether the signature verifies."""

    valid: bool


class SigningRequestView(ResponseBody):
    """A signing request as its agent sees it; sign the UTF-8 bytes of `signing_payload`.

    `signature`, `valid` and `completed_at` appear once the request is completed.
    """

    request_id: UUID
    message: str
    nonce: UUID
    signing_payload: str
    status: SigningStatus
    signature: str | None = None
    valid: bool | None = None
    created_at: datetime
    expires_at: datetime
    completed_at: datetime | None = None


class SigningRequestList(ResponseBody):
    """One page of the caller's signing requests, newest first."""

    items: list[SigningRequestView]
    total: int
    limit: int
    offset: int


class SignOutcome(ResponseBody):
    """The result of a signature: `completed`, and whether it verified."""

    status: SigningStatus
    valid: bool


# --- the stored row ---------------------------------------------------------------------------


class SigningRequestRecord(BaseModel):
    """A row of `signing_requests` (SPEC 2.4), as every reader gets it."""

    model_config = ConfigDict(frozen=True)

    id: UUID
    agent_id: UUID
    message: str
    nonce: UUID
    status: SigningStatus
    signature: str | None
    valid: bool | None
    workflow_id: str
    created_at: datetime
    expires_at: datetime
    completed_at: datetime | None

    def view(self) -> SigningRequestView:
        return SigningRequestView(
            request_id=self.id,
            message=self.message,
            nonce=self.nonce,
            signing_payload=signing_payload(self.message, self.nonce),
            status=self.status,
            signature=self.signature,
            valid=self.valid,
            created_at=self.created_at,
            expires_at=self.expires_at,
            completed_at=self.completed_at,
        )


# --- workflow and activity payloads -----------------------------------------------------------


class SigningRequestInput(Payload):
    """What the API starts `SigningRequest` with; the key is the caller's, from its token."""

    request_id: UUID
    agent_id: UUID
    public_key: str
    message: str
    nonce: UUID


class SigningEnvelope(Payload):
    """The workflow's envelope event (SPEC 6): the stored request, message and nonce."""

    request_id: UUID
    agent_id: UUID
    message: str
    nonce: UUID
    status: SigningStatus = "pending"
    created_at: datetime
    expires_at: datetime

    def view(self) -> SigningRequestView:
        return SigningRequestView(
            request_id=self.request_id,
            message=self.message,
            nonce=self.nonce,
            signing_payload=signing_payload(self.message, self.nonce),
            status=self.status,
            created_at=self.created_at,
            expires_at=self.expires_at,
        )


class SigningResult(Payload):
    """The workflow's result event (SPEC 6): status, and `valid` once a signature came."""

    request_id: UUID
    status: SigningStatus
    valid: bool | None = None


class SignatureSubmission(Payload):
    """The argument of the `sign` update."""

    signature: str


class SigningRowInsert(Payload):
    """The pending row; both times are the workflow's, so `expires_at` is its timer."""

    request_id: UUID
    agent_id: UUID
    message: str
    nonce: UUID
    workflow_id: str
    created_at: datetime
    expires_at: datetime


class SigningRowCreated(Payload):
    created_at: datetime
    expires_at: datetime


class SignatureRecord(Payload):
    request_id: UUID
    signature: str
    valid: bool


class SigningExpiry(Payload):
    request_id: UUID


# --- state rules shared by the API and the workflow -------------------------------------------


def refusal(status: SigningStatus) -> Conflict | None:
    """Why a signature cannot be accepted in this state (409), None while pending."""
    if status == "expired":
        return SigningRequestExpired("The signing request has expired")
    if status == "completed":
        return SigningRequestAlreadyCompleted("The signing request is already completed")
    return None


def effective_status(record: SigningRequestRecord, now: datetime) -> SigningStatus:
    """The row's status, except that a pending row past its deadline no longer takes a signature
    (its workflow is about to mark it expired)."""
    if record.status == "pending" and record.expires_at <= now:
        return "expired"
    return record.status
