"""Models of identity: registration, vouchers, tokens, recovery, humans, whoami.

Registration and signing bodies are snake_case as the spec shows them; the rest is camelCase.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final, Literal
from uuid import UUID

from pydantic import Field, StringConstraints, field_validator

from schemas.base import Payload, RequestBody, ResponseBody
from schemas.kernel.crypto import VOUCHER_CODE_PATTERN, parse_public_key
from schemas.names import DisplayName

# The header a human session's token travels in (or the session cookie, in a browser)
SESSION_HEADER: Final = "X-Session-Token"

PublicKeyStr = Annotated[
    str, StringConstraints(pattern=r"^ed25519:[A-Za-z0-9+/=]+$", max_length=60)
]
VoucherCode = Annotated[str, StringConstraints(pattern=VOUCHER_CODE_PATTERN)]
Email = Annotated[
    str,
    StringConstraints(
        # no control characters: Postgres text cannot hold a NUL (found by schemathesis: a 500)
        pattern=r"^[^@\s\x00-\x1f\x7f]+@[^@\s\x00-\x1f\x7f]+\.[^@\s\x00-\x1f\x7f]+$",
        max_length=254,
        to_lower=True,
        strip_whitespace=True,
    ),
]
FINGERPRINT_PATTERN: Final = r"^[A-Fa-f0-9]{4}(-[A-Fa-f0-9]{4}){3}$"
Fingerprint = Annotated[str, StringConstraints(pattern=FINGERPRINT_PATTERN)]


def _raw_key_check(value: str) -> str:
    parse_public_key(value)
    return value


# --- registration -------------------------------------------------------------------------


class RegisterRequest(RequestBody):
    public_key: PublicKeyStr = Field(description="ed25519:<base64 of the raw 32-byte key>")
    voucher_code: VoucherCode = Field(description="64 lower-case hex characters")

    _check_key = field_validator("public_key")(_raw_key_check)


class RegisterResponse(ResponseBody):
    """The agent's identity and OAuth2 client; `clientSecret` is shown once."""

    identityId: UUID
    fingerprint: str
    publicKey: str
    clientId: str
    clientSecret: str


class RegistrationInput(Payload):
    public_key: str
    fingerprint: str
    voucher_code: str
    identity_id: UUID
    agent_id: UUID
    client_id: str
    client_secret_hash: str


class RegistrationResult(Payload):
    identity_id: UUID
    agent_id: UUID
    client_id: str


class VoucherCheck(Payload):
    voucher_code: str


class IdentityCreate(Payload):
    identity_id: UUID
    schema_id: Literal["agent", "human"]
    traits: dict[str, str]
    password_hash: str
    email: str | None = None
    display_name: str | None = None


class IdentityRef(Payload):
    identity_id: UUID


class AgentBinding(Payload):
    identity_id: UUID
    agent_id: UUID
    public_key: str
    fingerprint: str
    voucher_code: str


class AgentBound(Payload):
    agent_id: UUID


class OAuthClientCreate(Payload):
    client_id: str
    identity_id: UUID
    agent_id: UUID
    client_secret_hash: str
    public_key: str
    fingerprint: str


# --- vouchers -----------------------------------------------------------------------------


class VoucherIssue(Payload):
    voucher_id: UUID
    code: str
    issuer_id: UUID | None = None


class Voucher(ResponseBody):
    """A voucher: one registration, within 24 hours."""

    code: str
    expiresAt: datetime
    issuedBy: UUID | None = None


class VoucherList(ResponseBody):
    items: list[Voucher]


# --- OAuth2 -------------------------------------------------------------------------------


class TokenRequest(RequestBody):
    grant_type: str
    client_id: str | None = None
    client_secret: str | None = None
    scope: str | None = None


class TokenResponse(ResponseBody):
    """RFC 6749 section 5.1 access token response."""

    access_token: str
    token_type: Literal["Bearer"] = "Bearer"
    expires_in: int
    scope: str


class OAuthError(ResponseBody):
    """RFC 6749 section 5.2 error response of the token endpoint."""

    error: str
    error_description: str


class SigningKeyEnsure(Payload):
    rotate: bool = False


class SigningKeyState(Payload):
    kid: str
    created: bool


# --- recovery -----------------------------------------------------------------------------


class RecoveryChallengeRequest(RequestBody):
    publicKey: PublicKeyStr


class RecoveryChallenge(ResponseBody):
    """Sign `challenge` with the agent's key and send both back to /recovery/verify."""

    challenge: str
    hmac: str


class RecoveryVerifyRequest(RequestBody):
    challenge: Annotated[str, StringConstraints(max_length=500)]
    hmac: Annotated[str, StringConstraints(pattern=r"^[a-f0-9]{64}$")]
    signature: Annotated[str, StringConstraints(max_length=88)]
    publicKey: PublicKeyStr


class RecoveryVerified(ResponseBody):
    """A one-time code (15 minutes, 5 tries) to redeem at `recoveryFlowUrl`."""

    recoveryCode: str
    recoveryFlowUrl: str


class RecoveryStart(Payload):
    nonce: str
    nonce_expires_at: datetime
    public_key: str
    challenge: str
    signature: str
    flow_id: UUID
    code_hash: str
    flow_expires_at: datetime


class RecoveryStarted(Payload):
    flow_id: UUID
    identity_id: UUID


class NonceConsume(Payload):
    nonce: str
    expires_at: datetime


class AgentLookup(Payload):
    public_key: str


class AgentFound(Payload):
    agent_id: UUID
    identity_id: UUID


class RecoveryFlowCreate(Payload):
    flow_id: UUID
    identity_id: UUID
    code_hash: str
    expires_at: datetime


class RecoveryFlowQuery(RequestBody):
    flow: UUID


class RecoveryCodeRequest(RequestBody):
    method: Literal["code"]
    code: Annotated[str, StringConstraints(min_length=1, max_length=128)]


class RecoveryRedeem(Payload):
    flow_id: UUID
    code_hash: str
    new_secret_hash: str


class RecoveryRedeemed(Payload):
    client_id: str
    identity_id: UUID


class RecoveryCompleted(ResponseBody):
    """The agent's OAuth2 client with its new secret (shown once); the old one is dead."""

    clientId: str
    clientSecret: str


# --- humans -------------------------------------------------------------------------------


class HumanRegisterRequest(RequestBody):
    email: Email
    password: Annotated[str, StringConstraints(min_length=12, max_length=256)]
    displayName: DisplayName | None = Field(
        default=None, description="How the console and other members name you (optional)"
    )


class HumanLoginRequest(RequestBody):
    email: Email
    password: Annotated[str, StringConstraints(min_length=1, max_length=256)]


class HumanIdentity(ResponseBody):
    """A human identity of the identity provider."""

    identityId: UUID
    email: str
    state: str
    displayName: str | None = None


class HumanRegistration(Payload):
    identity_id: UUID
    email: str
    password_hash: str
    display_name: str | None = None


class ProfileUpdateRequest(RequestBody):
    """The human's new display name; null clears it."""

    displayName: DisplayName | None


class HumanProfile(ResponseBody):
    """The logged-in human as others see them."""

    identityId: UUID
    email: str
    displayName: str | None = None


class ProfileChange(Payload):
    identity_id: UUID
    display_name: str | None = None


class SessionOpen(Payload):
    session_id: UUID
    identity_id: UUID
    human_id: UUID
    token_hash: str
    expires_at: datetime


class CredentialRehash(Payload):
    """A stored keyed hash that matched only under an older server secret, moved to the
    current one (compare-and-set: a row changed meanwhile is left alone). Hashes travel in
    history as they do when a session opens; the secret itself never does."""

    kind: Literal["session", "agent_key", "oauth_client"]
    ref: str  # the session's or agent key's id, or the client id
    old_hash: str
    new_hash: str


class SessionOpened(Payload):
    human_id: UUID


class SessionClose(Payload):
    session_id: UUID


class HumanSession(ResponseBody):
    """A session: send `sessionToken` as X-Session-Token (or use the cookie)."""

    sessionToken: str
    expiresAt: datetime
    identityId: UUID
    humanId: UUID


class Done(ResponseBody):
    success: bool = True


# --- whoami and lookup --------------------------------------------------------------------


class TeamBinding(ResponseBody):
    bindingScope: Literal["team"] = "team"
    keyId: UUID
    boundTeamId: UUID


class IdentityBinding(ResponseBody):
    bindingScope: Literal["identity"] = "identity"
    keyId: UUID


class Whoami(ResponseBody):
    """The caller as the server sees it."""

    subjectType: Literal["agent", "human"]
    identityId: UUID
    agentId: UUID | None = None
    humanId: UUID | None = None
    clientId: str | None = None
    publicKey: str | None = None
    fingerprint: str | None = None
    email: str | None = Field(default=None, description="Humans only")
    displayName: str | None = Field(default=None, description="Humans only, when they gave one")
    scopes: list[str]
    credentialBinding: TeamBinding | IdentityBinding | None = Field(
        default=None, discriminator="bindingScope"
    )


class FingerprintPath(RequestBody):
    fingerprint: Fingerprint


class AgentProfile(ResponseBody):
    """Public facts of an agent."""

    fingerprint: str
    publicKey: str
    agentId: UUID
    createdAt: datetime
