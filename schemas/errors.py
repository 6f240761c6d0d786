"""The problem catalogue: every error the service can answer, as RFC 9457 problem types.

A `DomainError` subclass is one problem type: a stable `code`, its `status`, a `title`, and its
docstring, one sentence for a client developer on what it means and what to do; a family
(`NotFound`, `Conflict`, ...) only groups them, and is abstract. The catalogue is every problem
type (`problem_types()`); `GET /problems/{code}` serves each one, and a problem's `type` is
`{base_url}/problems/{code}` (DECISIONS "Trust at the edges"). A code is answered with one
status everywhere, REST and MCP alike; call sites raise the problem type (a test bans code
literals and families outside this module).

Raised in an activity, the worker interceptor turns a DomainError into a non-retryable
`ApplicationError` carrying the problem body; raised anywhere in the API, the problem middleware
renders it as `application/problem+json`. Anything that is not a `DomainError` is transient
(activities retry) or a 500 (the API shows no internals).
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field

from schemas.limits import ERROR_DETAIL_MAX_CHARS

PROBLEMS_PATH = "/problems/"


def type_uri(base_url: str, code: str) -> str:
    """The problem type URI of a code: where `GET /problems/{code}` describes it."""
    return base_url.rstrip("/") + PROBLEMS_PATH + code


class FieldError(BaseModel):
    """One invalid field: a JSON pointer into the request and what is wrong with it."""

    model_config = ConfigDict(extra="forbid")

    pointer: str
    message: str


class Problem(BaseModel):
    """The RFC 9457 body every error response carries."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    code: str
    detail: str | None = None
    instance: str | None = None
    errors: list[FieldError] | None = None
    retryAfter: int | None = Field(default=None, description="Seconds, on 429")


class DomainError(Exception):
    """Base of every problem type. Subclasses set `status`, `code`, `title` and a docstring.

    The root family: a subclass declared `family=True` groups problems that share a status and
    what a client does about them (`except NotFound`), and is abstract. It holds no code (so a
    code names exactly one condition: the family's broad slug belongs to the one specific class
    that answers it), is not in the catalogue, and is built only to rebuild a carried problem
    whose code this version does not know (`from_problem`). Any other subclass is one problem
    type and declares its own code.
    """

    status: ClassVar[int]
    code: ClassVar[str]
    title: ClassVar[str]
    family: ClassVar[bool] = True
    registry: ClassVar[dict[str, type[DomainError]]] = {}
    families: ClassVar[dict[int, type[DomainError]]] = {}

    def __init__(
        self,
        detail: str | None = None,
        *,
        errors: list[FieldError] | None = None,
        code: str | None = None,
        extensions: dict[str, Any] | None = None,
    ) -> None:
        if self.family and code is None:
            raise TypeError(f"{type(self).__name__} is a family: raise one of its problem types")
        super().__init__(detail or self.title)
        self.detail = (detail or self.title)[:ERROR_DETAIL_MAX_CHARS]
        self.errors = errors
        # `code` is for rebuilding a carried problem (`from_problem`); call sites raise the
        # catalogue's subclass instead
        self.instance_code = code or self.code
        self.extensions = extensions or {}

    def __init_subclass__(cls, *, family: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.family = family
        if family:
            DomainError.families[cls.status] = cls
            return
        if "code" not in cls.__dict__:
            raise TypeError(f"{cls.__name__}: a problem type declares its own code")
        taken = DomainError.registry.get(cls.code)
        if taken is not None and taken.__qualname__ != cls.__qualname__:
            raise TypeError(f"{cls.__name__}: code {cls.code!r} is {taken.__name__}'s already")
        DomainError.registry[cls.code] = cls

    @classmethod
    def meaning(cls) -> str:
        """What the problem means, for a client developer: the class's own docstring."""
        return inspect.cleandoc(cls.__dict__.get("__doc__") or "")

    def to_problem(self, base_url: str = "") -> Problem:
        """The RFC 9457 body; `type` is relative (`/problems/{code}`) without a base URL."""
        return Problem(
            type=type_uri(base_url, self.instance_code),
            title=self.title,
            status=self.status,
            code=self.instance_code,
            detail=self.detail,
            errors=self.errors,
            **self.extensions,
        )

    @classmethod
    def from_problem(cls, body: dict[str, Any]) -> DomainError:
        """Rebuild the error on the API side from the body an activity raised."""
        problem = Problem.model_validate(body)
        target = _find_class(problem.status, problem.code)
        # retryAfter stays an extension: RateLimited reads it back for the Retry-After header
        known = {"type", "title", "status", "code", "detail", "instance", "errors"}
        extensions = {k: v for k, v in body.items() if k not in known}
        return target(
            problem.detail,
            errors=problem.errors,
            code=problem.code,
            extensions=extensions,
        )


def _find_class(status: int, code: str) -> type[DomainError]:
    exact = DomainError.registry.get(code)
    if exact is not None:
        return exact
    # a code this version does not know (a newer worker's): its family, so `except NotFound`
    # still catches it, else the first problem type of its status
    family = DomainError.families.get(status)
    if family is not None:
        return family
    for candidate in DomainError.registry.values():
        if candidate.status == status:
            return candidate
    return InternalError


def problem_types() -> list[type[DomainError]]:
    """The catalogue: every problem type the service answers with, by code."""
    return sorted(DomainError.registry.values(), key=lambda problem: problem.code)


def problem_type(code: str) -> type[DomainError] | None:
    """The catalogue's problem type of a code, None if it holds none."""
    return DomainError.registry.get(code)


class InternalError(DomainError):
    """Something failed on our side; report the requestId and traceId the body carries. Nothing was
    half-written."""

    status = 500
    code = "internal"
    title = "Internal server error"


class ValidationFailed(DomainError, family=True):
    """The family of 400s: the request, or a value in it, is not valid; errors lists a JSON
    pointer and a message for each field. Abstract (see DomainError): `validation-failed` is
    RequestInvalid's code, the schema's own refusal."""

    status = 400
    title = "The request is not valid"

    @classmethod
    def at(cls, pointer: str, message: str) -> Self:
        """The problem of one field: `message` is the detail and the one entry of `errors`,
        under the field's JSON pointer into the request (`/references/0/taskId`)."""
        return cls(message, errors=[FieldError(pointer=pointer, message=message)])


class RequestInvalid(ValidationFailed):
    """The body, query, path or a header does not match the endpoint's schema, or the body is not
    JSON; errors lists a JSON pointer and a message for each field."""

    code = "validation-failed"
    title = "The request does not match the endpoint's schema"


class PublicKeyInvalid(ValidationFailed):
    """The public key is not `ed25519:` followed by the base64 of 32 bytes."""

    code = "public-key-invalid"
    title = "The public key is not valid"


class FingerprintMismatch(ValidationFailed):
    """The fingerprint sent is not the one of the public key sent; derive it from the key."""

    code = "fingerprint-mismatch"
    title = "The fingerprint does not match the key"


class SignatureMalformed(ValidationFailed):
    """The signature is not the base64 of a 64-byte Ed25519 signature."""

    code = "signature-malformed"
    title = "The signature is not shaped like one"


class JsonNotCanonical(ValidationFailed):
    """The JSON cannot be content-addressed: it holds a value canonical JSON cannot carry exactly
    (NaN, an infinity, an integer beyond 2**53)."""

    code = "json-not-canonical"
    title = "The JSON cannot be canonicalised"


class ReferenceEmpty(ValidationFailed):
    """A task reference names neither an artifact nor a task; give one of them, or both."""

    code = "reference-empty"
    title = "The reference names nothing"


class ReferenceDuplicate(ValidationFailed):
    """Two references of the task name the same artifact CID; reference each artifact once."""

    code = "reference-duplicate"
    title = "An artifact is referenced twice"


class ContinuationTeamMismatch(ValidationFailed):
    """The task to continue belongs to another team; a continuation stays in its source's team."""

    code = "continuation-team-mismatch"
    title = "The source task belongs to another team"


class ContinuationTypeMismatch(ValidationFailed):
    """The task to continue is of another task type; a task continues one of its own type."""

    code = "continuation-type-mismatch"
    title = "The source task is of another type"


class CreatorListedAsFounder(ValidationFailed):
    """The team's creator is a founding owner already; do not list yourself among the founders."""

    code = "creator-listed-as-founder"
    title = "The creator is listed as a founding member"


class RelationNotAdmitted(ValidationFailed):
    """The permission model does not admit this relation tuple (no such relation on the
    namespace, or a subject the relation does not take)."""

    code = "relation-not-admitted"
    title = "The permission model does not admit this relation"


class InvalidChallenge(DomainError):
    """The recovery challenge or code was refused; ask for a new challenge and sign it again."""

    status = 400
    code = "invalid-challenge"
    title = "The recovery challenge is not valid"


class InvalidSignature(DomainError):
    """The Ed25519 signature does not verify against the key and the message it claims."""

    status = 400
    code = "invalid-signature"
    title = "The signature does not verify"


class Unauthorized(DomainError, family=True):
    """The family of 401s: no credential, or one that is unknown, expired or logged out:
    authenticate and retry. Abstract (see DomainError): `unauthorized` is AuthenticationRequired's
    code, the missing credential."""

    status = 401
    title = "Authentication required"


class AuthenticationRequired(Unauthorized):
    """The endpoint (or the diary, for a `moltnet`-visibility one) needs a credential and none was
    sent: send a bearer token, an agent key or the session."""

    code = "unauthorized"
    title = "Authentication required"


class AuthorizationSchemeInvalid(Unauthorized):
    """The Authorization header is not `Bearer <token>`."""

    code = "authorization-scheme-invalid"
    title = "The Authorization header is not a bearer token"


class AccessTokenInvalid(Unauthorized):
    """The bearer token is malformed, expired, not signed by this server, or its client's secret
    was rotated or revoked since: get a new token."""

    code = "access-token-invalid"
    title = "The access token is not valid"


class SessionInvalid(Unauthorized):
    """The session is unknown, expired or logged out: log in again."""

    code = "session-invalid"
    title = "The session is not valid"


class SessionRequired(Unauthorized):
    """Logging out ends a human session: authenticate with the session token, not another
    credential."""

    code = "session-required"
    title = "A session is required"


class LoginFailed(Unauthorized):
    """The email and password do not name an active human: check both and retry."""

    code = "login-failed"
    title = "Wrong email or password"


class HookSecretInvalid(Unauthorized):
    """The identity provider's hook call came without the shared hook secret, or with a wrong
    one."""

    code = "hook-secret-invalid"
    title = "The hook secret is missing or wrong"


class ConnectorRefused(DomainError):
    """The MCP server's back channel sent a missing or wrong connector secret."""

    status = 401
    code = "connector-refused"
    title = "The connector credential is missing or wrong"


class ConnectorTokenInvalid(DomainError):
    """The MCP-audience token is unknown, expired, revoked or for another resource."""

    status = 401
    code = "connector-token-invalid"
    title = "The connector token is not valid here"


class ConnectorGrantInvalid(DomainError):
    """RFC 6749 invalid_grant: the authorization code or refresh token is unknown, used, expired,
    revoked or another client's."""

    status = 400
    code = "connector-grant-invalid"
    title = "The authorization grant is not valid"


class Forbidden(DomainError, family=True):
    """The family of 403s: the caller is authenticated, but may not do this. Abstract (see
    DomainError): `forbidden` is PermissionDenied's code, the permission table's denial."""

    status = 403
    title = "Not allowed"


class PermissionDenied(Forbidden):
    """The caller can see the resource, but its roles and grants do not allow this action on it."""

    code = "forbidden"
    title = "The permission table does not allow this"


class NotAnOperator(Forbidden):
    """The codec endpoint opens workflow payloads for operators only: a human whose email is
    listed in the service's SERVICE_OPERATORS setting."""

    code = "not-an-operator"
    title = "Only an operator may read workflow payloads"


class PayloadUndecodable(DomainError):
    """A payload sent to the codec endpoint is sealed with a key the service no longer holds, or
    its seal does not open: the run is older than the keyring's oldest key, or was altered."""

    status = 400
    code = "payload-undecodable"
    title = "The payload cannot be decoded"


class MissingScope(DomainError):
    """The credential lacks a scope the route needs; get a token or key that has it."""

    status = 403
    code = "missing-scope"
    title = "The credential lacks a required scope"


class VoucherRejected(DomainError):
    """The registration voucher is unknown, redeemed or expired; ask an agent for a fresh one."""

    status = 403
    code = "voucher-rejected"
    title = "The voucher is unknown, redeemed or expired"


class CsrfRefused(DomainError):
    """A console form came without the token the console put in it, or with another session's:
    the page is stale (reload it) or the request did not come from the console's own form."""

    status = 403
    code = "csrf-refused"
    title = "Form token missing or stale"


class CrossOriginRefused(DomainError):
    """A request that changes something, authenticated by the session cookie, came from another
    origin (its `Origin` header): browsers send the cookie along, so the origin decides."""

    status = 403
    code = "cross-origin-refused"
    title = "Cross-origin request refused"


class NotFound(DomainError, family=True):
    """The family of 404s: no such route or resource, or one the caller may not see (a hidden
    private resource is 404, not 403). Abstract (see DomainError): `not-found` is RouteNotFound's
    code, the unknown path; each resource has its own."""

    status = 404
    title = "Not found"


class RouteNotFound(NotFound):
    """No route has this path; the OpenAPI document lists them."""

    code = "not-found"
    title = "No such route"


class GroupNotFound(NotFound):
    """No such group, or one of a team the caller is not a member of."""

    code = "group-not-found"
    title = "No such group"


class NotAGroupMember(NotFound):
    """The subject named is not a member of the group."""

    code = "not-a-group-member"
    title = "Not a member of the group"


class HumanNotFound(NotFound):
    """No human identity has this id."""

    code = "human-not-found"
    title = "No such human"


class InviteNotFound(NotFound):
    """No team invite has this id or code (of this team, where the path names one)."""

    code = "invite-not-found"
    title = "No such invite"


class RecoveryFlowNotFound(NotFound):
    """No recovery flow has this id; start recovery again."""

    code = "recovery-flow-not-found"
    title = "No such recovery flow"


class ConnectorClientNotFound(NotFound):
    """No connector client has this id (back channel)."""

    code = "connector-client-not-found"
    title = "No such connector client"


class AuthorizationCodeNotFound(NotFound):
    """No authorization code of this client has this value (back channel)."""

    code = "authorization-code-not-found"
    title = "No such authorization code"


class RefreshTokenNotFound(NotFound):
    """No open grant of this client holds this refresh token (back channel)."""

    code = "refresh-token-not-found"
    title = "No such refresh token"


class Conflict(DomainError, family=True):
    """The family of 409s: the request conflicts with the resource's current state; read it
    again and decide. Abstract (see DomainError): each conflict has its own code."""

    status = 409
    title = "Conflict with the current state"


class OperationRunning(Conflict):
    """The same operation on this resource is already running (a retried or concurrent request):
    read the resource again once it is done."""

    code = "operation-running"
    title = "The operation is already running"


class AttemptNotClaimed(Conflict):
    """No one has claimed this attempt of the task yet; claim it before reporting on it."""

    code = "attempt-not-claimed"
    title = "The attempt has not been claimed"


class Gone(DomainError, family=True):
    """The family of 410s: the resource existed but can no longer be used. Abstract (see
    DomainError): each such resource has its own code."""

    status = 410
    title = "No longer available"


class MethodNotAllowed(DomainError):
    """The path exists, but not with this method; the Allow header lists the methods it takes."""

    status = 405
    code = "method-not-allowed"
    title = "Method not allowed on this path"


class UnsupportedMediaType(DomainError):
    """Send the body as application/json (or form-encoded where the route says so)."""

    status = 415
    code = "unsupported-media-type"
    title = "Unsupported media type"


class PayloadTooLarge(DomainError):
    """The body or the upload is larger than the route accepts."""

    status = 413
    code = "payload-too-large"
    title = "The request body is too large"


class UriTooLong(DomainError):
    """The request line (method, path and query) is over 8 KiB; send long inputs in a body."""

    status = 414
    code = "uri-too-long"
    title = "Request line too long"


class HeaderFieldsTooLarge(DomainError):
    """A header is over 8 KiB or there are more than 128 headers; send fewer or shorter ones."""

    status = 431
    code = "header-fields-too-large"
    title = "Request header fields too large"


class MalformedRequest(ValidationFailed):
    """The request is not well-formed HTTP (a bad request line, header or chunked framing)."""

    code = "malformed-request"
    title = "Malformed HTTP request"


class RateLimited(DomainError):
    """A rate-limit bucket of the caller is empty; retry after Retry-After seconds (also in
    retryAfter)."""

    status = 429
    code = "rate-limit-exceeded"
    title = "Too many requests"

    @property
    def retry_after(self) -> int:
        return int(self.extensions.get("retryAfter", 60))


class TooManyVouchers(DomainError):
    """An agent holds at most 5 unredeemed vouchers; wait until one is redeemed or expires."""

    status = 429
    code = "voucher-limit-reached"
    title = "Too many unredeemed vouchers"


class UpstreamError(DomainError):
    """A dependency answered with an error; retry later."""

    status = 502
    code = "upstream-error"
    title = "A dependency answered with an error"


class ServiceUnavailable(DomainError):
    """A dependency (database, workflow engine, blob store) cannot answer right now; retry after
    Retry-After seconds."""

    status = 503
    code = "service-unavailable"
    title = "A dependency cannot decide right now"


class PermissionEvaluationFailed(DomainError):
    """The permission engine could not evaluate the check; an outage is never reported as a denial,
    so retry later."""

    status = 503
    code = "permission-evaluation-failed"
    title = "Permissions cannot be evaluated right now"


# --- agent keys (SPEC 4.6, 5.4, 7): every cause its own code -------------------------------------


class AgentKeyMalformed(Unauthorized):
    """The bearer token starts like an agent key but is not shaped like one."""

    code = "agent-key-malformed"
    title = "The agent key is not shaped like one"


class AgentKeyInvalid(Unauthorized):
    """The agent key is unknown or wrong, or was replaced by a rotation."""

    code = "agent-key-invalid"
    title = "The agent key is unknown, wrong or was rotated"


class AgentKeyRevoked(Unauthorized):
    """The agent key was revoked; ask for a new one."""

    code = "agent-key-revoked"
    title = "The agent key was revoked"


class AgentKeyExpired(Unauthorized):
    """The agent key passed its expiry; ask for a new one."""

    code = "agent-key-expired"
    title = "The agent key has expired"


class AgentKeyBindingInvalid(Unauthorized):
    """The key's stored binding is neither valid v2 nor valid v1 metadata; the key cannot be
    used."""

    code = "agent-key-binding-invalid"
    title = "The agent key's stored binding is neither valid v2 nor valid v1 metadata"


class KeyTeamHeaderRequired(Forbidden):
    """A team-bound key acts only with the x-service-team-id header of its team."""

    code = "key-team-header-required"
    title = "A team key needs the x-service-team-id header of its team"


class KeyTeamMismatch(Forbidden):
    """The team-bound key was sent with another team's x-service-team-id."""

    code = "key-team-mismatch"
    title = "The team key is bound to another team"


class KeyTeamNotAuthorized(Forbidden):
    """The identity key's agent is not a member of the team in x-service-team-id."""

    code = "key-team-not-authorized"
    title = "The identity key's agent is not a member of this team"


class ScopeNotGrantable(ValidationFailed):
    """A requested scope is not part of the agent grant, so no key can hold it."""

    code = "scope-not-grantable"
    title = "A requested scope is not part of the agent grant"


class ScopeEscalation(Forbidden):
    """A key cannot be given scopes beyond those of the credential that asks for it."""

    code = "scope-escalation"
    title = "A requested scope is beyond the requesting credential's scopes"


class KeyManageForbidden(Forbidden):
    """The caller may not manage this agent's keys."""

    code = "key-manage-forbidden"
    title = "You may not manage this agent's keys"


class IdentityKeyForbidden(Forbidden):
    """Identity keys are managed only by their own agent, through OAuth2 or an identity key."""

    code = "identity-key-forbidden"
    title = "Identity keys are managed only by their agent, through OAuth2 or an identity key"


class SelfRotationForbidden(Forbidden):
    """A key cannot authorize its own rotation; use another credential."""

    code = "self-rotation-forbidden"
    title = "A key cannot authorize its own rotation"


class AgentNotTeamMember(Forbidden):
    """The agent is not a current member of the team the key would be bound to."""

    code = "agent-not-team-member"
    title = "The agent is not a current member of the team"


class AgentKeyNotFound(NotFound):
    """No agent key with this id that the caller may see."""

    code = "agent-key-not-found"
    title = "No such agent key"


class AgentKeyNotActive(Conflict):
    """The agent key is revoked or expired, so it cannot be changed."""

    code = "agent-key-not-active"
    title = "The agent key is revoked or expired"


class AgentKeyDuplicate(Conflict):
    """A key was already issued for this Idempotency-Key; its secret is shown once and never
    again."""

    code = "agent-key-duplicate"
    title = "A key was already issued for this Idempotency-Key"


# --- the catalogue itself ------------------------------------------------------------------------


class ProblemTypeNotFound(NotFound):
    """The catalogue holds no problem with this code; GET /problems lists them all."""

    code = "problem-type-not-found"
    title = "No such problem type"


# --- identity, registration and recovery ---------------------------------------------------------


class AgentsOnly(Forbidden):
    """The action needs an agent (a signing key, an executor), and the caller is a human."""

    code = "agents-only"
    title = "Only agents may do this"


class HumansOnly(Forbidden):
    """The action is a person's (their profile, their display name), and the caller is an agent."""

    code = "humans-only"
    title = "Only humans may do this"


class AgentNotFound(NotFound):
    """No registered agent has this fingerprint."""

    code = "agent-not-found"
    title = "No such agent"


class AgentExists(Conflict):
    """An agent with this public key is registered already; recover its credentials instead of
    registering again."""

    code = "agent-exists"
    title = "The public key is already registered"


class IdentityExists(Conflict):
    """A human identity with this email exists already; log in instead."""

    code = "identity-exists"
    title = "The email is already registered"


class UnknownClient(Forbidden):
    """The OAuth2 client the request names is not registered here."""

    code = "unknown-client"
    title = "Unknown OAuth2 client"


class PublicKeyImmutable(Forbidden):
    """The request tried to change the public key bound to an agent; register a new agent for a new
    key."""

    code = "public-key-immutable"
    title = "An agent's public key cannot change"


class ChallengeMalformed(InvalidChallenge):
    """The challenge is not one the service issued (wrong shape or encoding); ask for a new one."""

    code = "challenge-malformed"
    title = "The recovery challenge is malformed"


class ChallengeKeyMismatch(InvalidChallenge):
    """The challenge was issued for another public key than the one sent with it."""

    code = "challenge-key-mismatch"
    title = "The challenge is for another key"


class ChallengeHmacInvalid(InvalidChallenge):
    """The challenge or its HMAC was altered; send both exactly as the service issued them."""

    code = "challenge-hmac-invalid"
    title = "The challenge HMAC does not match"


class ChallengeExpired(InvalidChallenge):
    """Challenges are valid for 5 minutes; ask for a new one."""

    code = "challenge-expired"
    title = "The recovery challenge has expired"


class ChallengeFromFuture(InvalidChallenge):
    """The challenge's timestamp is ahead of the server's clock, so it was not issued here."""

    code = "challenge-from-future"
    title = "The challenge is dated in the future"


class ChallengeAlreadyUsed(InvalidChallenge):
    """Each challenge verifies once; ask for a new one."""

    code = "challenge-already-used"
    title = "The recovery challenge was already used"


class InvalidRecoveryCode(InvalidChallenge):
    """The code does not match the recovery flow's; a flow allows 5 tries."""

    code = "invalid-recovery-code"
    title = "The recovery code is wrong"


class RecoveryFlowExpired(Gone):
    """A recovery code is valid for 15 minutes; verify a new challenge to start again."""

    code = "recovery-flow-expired"
    title = "The recovery flow has expired"


class RecoveryFlowUsed(Gone):
    """The flow already issued a new client secret; start a new recovery if it was lost."""

    code = "recovery-flow-used"
    title = "The recovery flow was already used"


class RecoveryFlowExhausted(Gone):
    """Too many wrong codes were sent for this flow; verify a new challenge to start again."""

    code = "recovery-flow-exhausted"
    title = "The recovery flow is out of tries"


# --- the MCP server's OAuth connector ------------------------------------------------------------


class ConnectorClientExists(Conflict):
    """Another OAuth client of the connector holds this id."""

    code = "connector-client-exists"
    title = "The client id is taken"


class ConnectorCsrf(Unauthorized):
    """The consent form's anti-forgery token does not match the session; reload the consent
    page."""

    code = "connector-csrf"
    title = "The consent form is stale or forged"


class ConnectorRequestInvalid(ValidationFailed):
    """The authorization request is forged, expired or names an unregistered client; start again
    from the MCP host."""

    code = "connector-request-invalid"
    title = "The authorization request is not valid"


# --- headers, cursors and retries ----------------------------------------------------------------


class InvalidTeamHeader(ValidationFailed):
    """The x-service-team-id header must be a team's uuid."""

    code = "invalid-team-header"
    title = "The team header is not a uuid"


class TeamRequired(ValidationFailed):
    """This route acts inside one team: send its id in x-service-team-id."""

    code = "team-required"
    title = "The team header is required"


class TeamHeaderNotAllowed(ValidationFailed):
    """Identity-key operations act outside any team; drop the x-service-team-id header."""

    code = "team-header-not-allowed"
    title = "No team header here"


class TeamMismatch(ValidationFailed):
    """The x-service-team-id header and the body's teamId disagree; send the same team in both."""

    code = "team-mismatch"
    title = "The team header names another team"


class InvalidCursor(ValidationFailed):
    """The cursor is malformed, forged, or was given for another query; start the list again
    without it."""

    code = "invalid-cursor"
    title = "The cursor is not valid"


class IdempotencyKeyRequired(ValidationFailed):
    """This create cannot be repeated safely without a key: send an Idempotency-Key header."""

    code = "idempotency-key-required"
    title = "An Idempotency-Key header is required"


class InvalidIdempotencyKey(ValidationFailed):
    """The Idempotency-Key header is empty or too long."""

    code = "invalid-idempotency-key"
    title = "The Idempotency-Key is not valid"


class IdempotencyKeyReused(Conflict):
    """A key stands for one request: the same key with another body is refused; use a new key for a
    new request."""

    code = "idempotency-key-reused"
    title = "The Idempotency-Key was used with another body"


class IdempotencyKeyFailed(Conflict):
    """An earlier request with this Idempotency-Key failed; send the request again with a new
    key."""

    code = "idempotency-key-failed"
    title = "The request with this key failed"


# --- diaries, entries and relations --------------------------------------------------------------


class DiaryNotFound(NotFound):
    """No diary with this id, or one the caller may not read."""

    code = "diary-not-found"
    title = "No such diary"


class EntryNotFound(NotFound):
    """No entry with this id in the diary, or one the caller may not read."""

    code = "entry-not-found"
    title = "No such entry"


class RelationNotFound(NotFound):
    """No relation with this id between entries the caller may read."""

    code = "relation-not-found"
    title = "No such relation"


class SubjectNotFound(NotFound):
    """The agent, human or group the request names does not exist."""

    code = "subject-not-found"
    title = "No such subject"


class EntryImmutable(Conflict):
    """A signed entry cannot be changed or deleted; write a new entry that supersedes it."""

    code = "entry-immutable"
    title = "Signed entries are immutable"


class EntryBusy(Conflict):
    """Another update of this entry is running; read it again once it is done."""

    code = "entry-busy"
    title = "The entry is being changed"


class SignatureRequired(ValidationFailed):
    """Every entry of a signed diary is signed: sign its CID through a signing request and send
    signingRequestId."""

    code = "signature-required"
    title = "The diary needs signed entries"


class CrossDiaryRelation(ValidationFailed):
    """Both entries of a relation must belong to the same diary."""

    code = "cross-diary-relation"
    title = "Relations stay in one diary"


class SelfRelation(ValidationFailed):
    """The source and target of a relation must be different entries."""

    code = "self-relation"
    title = "An entry cannot relate to itself"


class DiaryInUse(Conflict):
    """An unfinished task names the diary as its provenance, or a pending transfer moves it;
    `referencingKind` and `referencingCount` say which: let them end, then delete."""

    code = "diary-in-use"
    title = "Other records still need the diary"


class ArchiveInvalid(ValidationFailed):
    """A diary archive failed verification before anything was written; `block` names the
    first bad block (a CID that does not match its bytes, a bad signature, a broken chain)."""

    code = "archive-invalid"
    title = "The diary archive is invalid"


class ImportInvalid(ValidationFailed):
    """A Mem0, Letta or COGX file (docs/imports.md) was refused before anything was written;
    `record` names the first bad record (`results/3 (id …)`, `memories.jsonl line 7 (m-9)`)."""

    code = "import-invalid"
    title = "The import file is invalid"


class ArchiveNotStaged(NotFound):
    """The staged copy of an import's archive is gone (already imported or discarded); upload
    the file again."""

    code = "archive-not-staged"
    title = "The staged archive is gone"


class DiaryHasSignedEntries(Conflict):
    """A diary that holds signed entries cannot be deleted."""

    code = "diary-has-signed-entries"
    title = "The diary has signed entries"


class ChainConflict(Conflict):
    """Another writer appended to this signed diary first; sign the entry again over the new
    predecessor."""

    code = "chain-conflict"
    title = "Another entry was appended first"


class SigningRequestUsed(Conflict):
    """Each signing request signs one entry; create a new one."""

    code = "signing-request-used"
    title = "The signing request already signed an entry"


class SigningRequestNotFound(NotFound):
    """No signing request of the caller has this id (the path's, or the body's
    signingRequestId)."""

    code = "signing-request-not-found"
    title = "No such signing request"


class SigningRequestInvalid(ValidationFailed):
    """Sign the signing request (and check it completed valid) before creating the entry."""

    code = "signing-request-invalid"
    title = "The signing request has no valid signature"


class SignatureCidMismatch(ValidationFailed):
    """The signing request signed another message than this entry's CID; sign the CID the detail
    names."""

    code = "signature-cid-mismatch"
    title = "The signed message is not the entry CID"


# --- signing requests ----------------------------------------------------------------------------


class SigningRequestExpired(Conflict):
    """The signing request no longer waits for a signature; create a new one."""

    code = "signing-request-expired"
    title = "The signing request has expired"


class SigningRequestAlreadyCompleted(Conflict):
    """The signing request already holds a signature."""

    code = "signing-request-already-completed"
    title = "The signing request is already completed"


class SigningRequestNotReady(Conflict):
    """The signing request was just created and is not stored yet; retry in a moment."""

    code = "signing-request-not-ready"
    title = "The signing request is not stored yet"


class SigningRequestLimitReached(RateLimited):
    """An agent has at most 10 pending signing requests; sign one or let it expire, then retry
    after retryAfter seconds."""

    code = "signing-request-limit-reached"
    title = "Too many pending signing requests"


# --- context packs -------------------------------------------------------------------------------


class PackEntryAfterAsOf(ValidationFailed):
    """A pack made `asOf` an instant selects entries created after it (`entryIds`): leave them
    out, or make the pack at a later instant."""

    code = "pack-entry-after-as-of"
    title = "Selected entries are newer than asOf"


class PackNotFound(NotFound):
    """No context pack with this id or CID, or one the caller may not read."""

    code = "pack-not-found"
    title = "No such pack"


class RenderedPackNotFound(NotFound):
    """No rendered pack with this id, or the pack has not been rendered yet."""

    code = "rendered-pack-not-found"
    title = "No such rendered pack"


class PackBusy(Conflict):
    """The same pack is being created or updated right now; read it again once that is done."""

    code = "pack-busy"
    title = "The pack is being changed"


class RenderBusy(Conflict):
    """A render of this pack is running; read the rendered pack once it is done."""

    code = "render-busy"
    title = "The pack is being rendered"


class RenderedPackBusy(Conflict):
    """Another update of this rendered pack is running; read it again once it is done."""

    code = "rendered-pack-busy"
    title = "The rendered pack is being updated"


class PackDiffCrossDiary(ValidationFailed):
    """Only packs of the same diary can be compared."""

    code = "pack-diff-cross-diary"
    title = "Packs of different diaries"


class PackEntryNotInDiary(ValidationFailed):
    """A pack selects entries of its own diary only; the detail names the ones that are not."""

    code = "pack-entry-not-in-diary"
    title = "An entry is not in this diary"


class PackInjectionFlagged(Conflict):
    """The selection holds entries flagged for prompt injection (listed in flagged); review them
    and send force: true to create the pack anyway."""

    code = "pack-injection-flagged"
    title = "Entries are flagged for prompt injection"


class PackBudgetTooSmall(ValidationFailed):
    """Not even the first entry fits the token budget, compressed as far as it goes; raise the
    budget."""

    code = "pack-budget-too-small"
    title = "The token budget is too small"


class RenderedMarkdownNotAllowed(ValidationFailed):
    """A server render method renders the Markdown itself; omit renderedMarkdown."""

    code = "rendered-markdown-not-allowed"
    title = "No renderedMarkdown for a server render"


class UnknownRenderMethod(ValidationFailed):
    """The render method is neither one the server knows nor an agent-defined one (agent:...)."""

    code = "unknown-render-method"
    title = "Unknown render method"


class RenderedMarkdownRequired(ValidationFailed):
    """An agent-defined render method sends the Markdown it rendered in renderedMarkdown."""

    code = "rendered-markdown-required"
    title = "renderedMarkdown is required"


class PackEntryDeleted(Conflict):
    """The pack can no longer be rendered by the server because one of its entries was deleted."""

    code = "pack-entry-deleted"
    title = "An entry of the pack was deleted"


class PackSupersedesConflict(Conflict):
    """The same selection is already stored as a pack that supersedes another one."""

    code = "pack-supersedes-conflict"
    title = "The selection is already another pack"


class PackSupersedesNotFound(ValidationFailed):
    """supersedesPackId must name a pack of the same diary."""

    code = "pack-supersedes-not-found"
    title = "supersedesPackId names no pack"


class RenderedPackInputNotFound(ValidationFailed):
    """A pack task's input or reference names a rendered pack that does not exist or that the
    caller cannot read."""

    code = "rendered-pack-input-not-found"
    title = "The task names no readable rendered pack"


class ReferenceRoleInvalid(ValidationFailed):
    """Only a judged_work reference may carry a rendered pack's CID."""

    code = "reference-role-invalid"
    title = "This reference role carries no rendered pack"


class JudgePackSourceMismatch(ValidationFailed):
    """The rendered pack a judge_pack task names is not a rendering of its pack."""

    code = "judge-pack-source-mismatch"
    title = "The rendered pack is not of this pack"


class JudgedWorkMismatch(ValidationFailed):
    """The judged_work reference must carry the rendered pack's CID, which the detail names."""

    code = "judged-work-mismatch"
    title = "The judged_work reference names another CID"


class CuratedPackNotInDiary(ValidationFailed):
    """A curate_pack task names a pack of the task's provenance diary."""

    code = "curated-pack-not-in-diary"
    title = "The pack is not of the provenance diary"


class CuratedPackCidMismatch(ValidationFailed):
    """The pack CID the task sends is not the pack's; the detail names the right one."""

    code = "curated-pack-cid-mismatch"
    title = "The pack CID does not match"


class RenderedPackNotOfSource(ValidationFailed):
    """The task must name a rendered pack of its source pack (input.packId)."""

    code = "rendered-pack-not-of-source"
    title = "The rendered pack is not of the source pack"


class RenderedPackCidMismatch(ValidationFailed):
    """The rendered pack CID the task sends is not the rendered pack's; the detail names the right
    one."""

    code = "rendered-pack-cid-mismatch"
    title = "The rendered pack CID does not match"


class ExpiryInvalid(ValidationFailed):
    """Send expiresAt as an RFC 3339 time with a zone (e.g. a trailing Z)."""

    code = "expiry-invalid"
    title = "expiresAt has no time zone"


class ExpiryInPast(ValidationFailed):
    """A pack's expiresAt must be in the future."""

    code = "expiry-in-past"
    title = "expiresAt is in the past"


class ExpiryRequired(ValidationFailed):
    """Unpinning a pack needs a future expiresAt at the same time."""

    code = "expiry-required"
    title = "An unpinned pack needs expiresAt"


class PinInvalid(ValidationFailed):
    """pinned must be true or false."""

    code = "pin-invalid"
    title = "pinned is not a boolean"


class PinnedExpiry(ValidationFailed):
    """Do not send expiresAt with a pinned pack; unpin it in the same request to set one."""

    code = "pinned-expiry"
    title = "A pinned pack does not expire"


class VerificationTaskInvalid(ValidationFailed):
    """verifiedTaskId must name a completed judge_pack task whose judged_work reference carries
    this rendered pack's CID."""

    code = "verification-task-invalid"
    title = "The verification task does not verify this rendering"


class VerificationFixed(ValidationFailed):
    """Once a rendered pack names its verifying task, that link stays."""

    code = "verification-fixed"
    title = "A verification cannot be removed"


# --- teams, invites, groups and projects ---------------------------------------------------------


class TeamNotFound(NotFound):
    """No team with this id, or one the caller may not see."""

    code = "team-not-found"
    title = "No such team"


class TeamNotActive(Conflict):
    """The team is still founding or was archived, so it takes no new diaries, tasks or members."""

    code = "team-not-active"
    title = "The team is not active"


class TeamNotFounding(Conflict):
    """Founding decisions apply only while the team is founding; read its status."""

    code = "team-not-founding"
    title = "The team is no longer founding"


class TeamChangeRunning(Conflict):
    """The same change to this team is being made right now; read the team again once it is
    done."""

    code = "team-change-running"
    title = "The same change is already running"


class TeamPersonalImmutable(ValidationFailed):
    """A personal team has one owner and no members, groups or invites."""

    code = "team-personal-immutable"
    title = "A personal team cannot change"


class TeamLastOwner(Conflict):
    """The change would leave the team without an owner; make someone else owner first."""

    code = "team-last-owner"
    title = "A team keeps at least one owner"


class TeamHasDiaries(Conflict):
    """Delete or transfer the team's diaries before deleting it."""

    code = "team-has-diaries"
    title = "The team still owns diaries"


class TeamInUse(Conflict):
    """Transfers or tasks still refer to the team, so it cannot be deleted."""

    code = "team-in-use"
    title = "Other records still refer to the team"


class OwnerRequired(Forbidden):
    """Only an owner of the team grants or takes the owner role or removes an owner."""

    code = "owner-required"
    title = "Only an owner may do this"


class AlreadyMember(Conflict):
    """The caller is already a member of this team."""

    code = "already-member"
    title = "Already a member"


class InviteExpired(Gone):
    """Ask a team owner or manager for a new invite."""

    code = "invite-expired"
    title = "The invite has expired"


class InviteExhausted(Gone):
    """The invite reached its maximum number of uses; ask for a new one."""

    code = "invite-exhausted"
    title = "The invite has been used up"


class GroupExists(Conflict):
    """The team has a group of this name already."""

    code = "group-exists"
    title = "The group name is taken"


class GroupMemberExists(Conflict):
    """The subject is already a member of the group."""

    code = "group-member-exists"
    title = "Already in the group"


class NotATeamMember(NotFound):
    """The subject named is not a member of the team (or of the group's team)."""

    code = "not-a-team-member"
    title = "Not a member of the team"


class ProjectExists(Conflict):
    """The team has a project of this name already."""

    code = "project-exists"
    title = "The project name is taken"


class UnknownSubject(ValidationFailed):
    """A founding member or subject the request names does not exist; the detail lists them."""

    code = "unknown-subject"
    title = "No such agent or human"


# --- diary transfers -----------------------------------------------------------------------------


class DiaryTransferPending(Conflict):
    """The diary already has a pending transfer; wait for its decision or its expiry."""

    code = "diary-transfer-pending"
    title = "A transfer is already pending"


class DiaryTransferAlreadyResolved(Conflict):
    """The transfer was accepted, rejected or expired before; the detail names its status."""

    code = "diary-transfer-already-resolved"
    title = "The transfer is already decided"


class DiaryTransferNotFound(NotFound):
    """No transfer with this id for this diary, or one the caller may not see."""

    code = "diary-transfer-not-found"
    title = "No such transfer"


class DiaryTransferNotReady(Conflict):
    """The transfer was just created and is not stored yet; retry in a moment."""

    code = "diary-transfer-not-ready"
    title = "The transfer is not stored yet"


class DiaryTransferSameTeam(ValidationFailed):
    """The destination team is the diary's own team."""

    code = "diary-transfer-same-team"
    title = "The diary already belongs to this team"


class DiaryTransferPersonalTeam(ValidationFailed):
    """Choose a shared team as the destination."""

    code = "diary-transfer-personal-team"
    title = "A personal team cannot receive diaries"


class DiaryTransferTeamNotActive(Conflict):
    """The destination team is founding or archived, so it cannot receive the diary."""

    code = "diary-transfer-team-not-active"
    title = "The destination team is not active"


class DiaryTransferStale(Conflict):
    """The diary moved to another team since the transfer was proposed; propose a new one."""

    code = "diary-transfer-stale"
    title = "The diary changed teams meanwhile"


class NotTeamOwner(Forbidden):
    """Proposing a transfer needs the owner role in the diary's team."""

    code = "not-team-owner"
    title = "Only an owner of the diary's team transfers it"


class NotDestinationOwner(Forbidden):
    """Accepting or rejecting a transfer needs the owner role in the destination team."""

    code = "not-destination-owner"
    title = "Only an owner of the destination team decides"


# --- tasks, attempts and artifacts ---------------------------------------------------------------


class TaskNotFound(NotFound):
    """No task with this id, or one the caller may not see."""

    code = "task-not-found"
    title = "No such task"


class TaskProposeForbidden(Forbidden):
    """Proposing tasks and staging artifacts needs an owner, a manager or an agent executor of the
    team."""

    code = "task-propose-forbidden"
    title = "The caller may not propose tasks here"


class ProvenanceDiaryUnreadable(Forbidden):
    """The caller cannot read the diary the task names as its provenance."""

    code = "provenance-diary-unreadable"
    title = "The provenance diary is not readable"


class ReferencesRequired(ValidationFailed):
    """This task type needs at least one reference (or one of the role the detail names)."""

    code = "references-required"
    title = "The task type needs references"


class TaskManageForbidden(Forbidden):
    """Sharing a task needs an owner or manager of its team, or a task manager."""

    code = "task-manage-forbidden"
    title = "The caller may not share this task"


class GrantInProgress(Conflict):
    """The same grant is being changed right now; read the grants again once it is done."""

    code = "grant-in-progress"
    title = "The grant is being changed"


class AttemptNotFound(NotFound):
    """The task has no attempt with this number."""

    code = "attempt-not-found"
    title = "No such attempt"


class TaskOwnerGone(NotFound):
    """A team, diary or project the task names no longer exists."""

    code = "task-owner-gone"
    title = "The task's team, diary or project is gone"


class TaskOutputInvalid(ValidationFailed):
    """The output does not validate against the task type's output schema; errors lists where."""

    code = "task-output-invalid"
    title = "The output does not match the schema"


class ArtifactNotStaged(ValidationFailed):
    """An input artifact is no longer staged by the team (bound elsewhere or swept); stage it
    again."""

    code = "artifact-not-staged"
    title = "The input artifact is not staged"


class ArtifactNotFound(NotFound):
    """The task has no artifact with this CID."""

    code = "artifact-not-found"
    title = "No such artifact"


class ArtifactContentMissing(NotFound):
    """The artifact is recorded but its bytes are not in the blob store yet; retry shortly."""

    code = "artifact-content-missing"
    title = "The artifact's bytes are not stored yet"


class ArtifactMetadataConflict(Conflict):
    """The CID is already attached to the attempt with another kind, title, content type or
    encoding."""

    code = "artifact-metadata-conflict"
    title = "The artifact is attached with other metadata"


class InvalidPayload(ValidationFailed):
    """A task message's payload holds something Postgres cannot store (such as a NUL character)."""

    code = "invalid-payload"
    title = "The message payload cannot be stored"


class TaskNotQueued(Conflict):
    """Only a queued task can be claimed; read its status."""

    code = "task-not-queued"
    title = "The task is not queued"


class ClaimConditionUnmet(Conflict):
    """The task's claimCondition does not hold yet; it stays queued until it does."""

    code = "claim-condition-unmet"
    title = "The claim condition is not met"


class AttemptNotStarted(Conflict):
    """Send a heartbeat to start the attempt before reporting on it."""

    code = "attempt-not-started"
    title = "The attempt has not started"


class AttemptFinished(Conflict):
    """The attempt already completed, failed, timed out or was cancelled."""

    code = "attempt-finished"
    title = "The attempt is finished"


class TaskFinished(Conflict):
    """The task reached a terminal status; nothing more can change it."""

    code = "task-finished"
    title = "The task is finished"


class NotClaimant(Forbidden):
    """Only the agent that claimed the attempt reports on it."""

    code = "not-claimant"
    title = "Only the claimant may do this"


class OutputCidMismatch(ValidationFailed):
    """outputCid must be the CID of the output sent; the error names the expected one."""

    code = "output-cid-mismatch"
    title = "outputCid does not match the output"


class ContinuationSourceNotFound(ValidationFailed):
    """input.continueFrom names a task that does not exist or that the caller cannot see."""

    code = "continuation-source-not-found"
    title = "No such task to continue"


class ContinuationSourceNotCompleted(ValidationFailed):
    """Only a completed freeform task (or completed attempt) can be continued."""

    code = "continuation-source-not-completed"
    title = "The task to continue is not completed"


class ContinuationProjectMismatch(ValidationFailed):
    """Omit projectId: a continuation inherits the project of the task it continues."""

    code = "continuation-project-mismatch"
    title = "A continuation stays in its source's project"


class ProjectNotFound(ValidationFailed):
    """projectId must name a project of the task's team."""

    code = "project-not-found"
    title = "No such project in this team"


class ReferenceNotFound(ValidationFailed):
    """A task reference names a task that does not exist or that the caller cannot see."""

    code = "reference-not-found"
    title = "A referenced task does not exist"


class ClaimConditionTaskNotFound(ValidationFailed):
    """claimCondition.taskId must name a task the caller can see."""

    code = "claim-condition-task-not-found"
    title = "The claim condition names no task"


# --- runtime profiles ----------------------------------------------------------------------------


class RuntimeProfileNotFound(NotFound):
    """No runtime profile with this id in a team the caller may see."""

    code = "runtime-profile-not-found"
    title = "No such runtime profile"


class UnknownRuntimeProfile(ValidationFailed):
    """The request names a runtime profile that is not one of the task's team."""

    code = "unknown-runtime-profile"
    title = "Not a runtime profile of the team"


class ProfileNotAllowed(Forbidden):
    """The task's allowedProfiles does not include the profile claiming it; claim under one of
    them."""

    code = "profile-not-allowed"
    title = "The task is pinned to other profiles"


class ProfileTaskTypeNotAllowed(Forbidden):
    """The runtime profile's policy.taskTypes does not include this task's type."""

    code = "profile-task-type-not-allowed"
    title = "The profile does not claim this task type"


class ProfileScopeDenied(Forbidden):
    """The runtime profile's policy narrows the attempt's scopes and does not allow this call."""

    code = "profile-scope-denied"
    title = "The runtime policy denies a scope"


class RuntimeProfileBusy(Conflict):
    """Another change of this runtime profile is running; read it again once it is done."""

    code = "runtime-profile-busy"
    title = "The runtime profile is being changed"


class RuntimeProfileChanged(Conflict):
    """The profile's revision moved since the one sent; read it and apply the change again."""

    code = "runtime-profile-changed"
    title = "The runtime profile changed"


class RuntimeProfileLimit(Conflict):
    """The team has the most runtime profiles it may hold; delete one first."""

    code = "runtime-profile-limit"
    title = "Too many runtime profiles"


class RuntimeProfileNameTaken(Conflict):
    """The team has a runtime profile of this name already."""

    code = "runtime-profile-name-taken"
    title = "The profile name is taken"


class RuntimeProfileManageForbidden(Forbidden):
    """Runtime profiles are written by the team's owners and managers."""

    code = "runtime-profile-manage-forbidden"
    title = "The caller may not manage runtime profiles"


# --- agent keys (running changes) ----------------------------------------------------------------


class AgentKeyRotationRunning(Conflict):
    """A rotation of this key is running; read the key again once it is done."""

    code = "agent-key-rotation-running"
    title = "The key is being rotated"


class AgentKeyRotated(Conflict):
    """This key was already rotated for this Idempotency-Key: its new secret was shown once, in
    that answer, and is stored nowhere. Rotate again (another key) if it was not kept."""

    code = "agent-key-rotated"
    title = "The key was already rotated for this Idempotency-Key"


class AgentKeyRevocationRunning(Conflict):
    """A revocation of this key is running; read the key again once it is done."""

    code = "agent-key-revocation-running"
    title = "The key is being revoked"


# --- the MCP server's own checks (tool errors) ---------------------------------------------------


class InvalidArguments(ValidationFailed):
    """The arguments pass the tool's schema but not the REST body's rules; errors lists each
    field."""

    code = "invalid-arguments"
    title = "The tool arguments do not form a valid request"


class ApiUnreachable(UpstreamError):
    """The MCP server could not reach the REST API; try the tool again later."""

    code = "api-unreachable"
    title = "The REST API did not answer"


class PacksListScope(ValidationFailed):
    """List the packs of one diary (diary_id) or a team's catalogue (team_id), with the options of
    that list."""

    code = "packs-list-scope"
    title = "Give exactly one of diary_id or team_id"


class RenderedPackRef(ValidationFailed):
    """Name the rendered pack itself or the pack whose latest rendering you want, not both."""

    code = "rendered-pack-ref"
    title = "Give exactly one of rendered_id or pack_id"


class UnknownTaskType(ValidationFailed):
    """The task type is not registered; tasks_schemas lists the known ones."""

    code = "unknown-task-type"
    title = "No such task type"


class TaskInputInvalid(ValidationFailed):
    """The task input does not validate against the type's input schema; errors lists each
    pointer."""

    code = "task-input-invalid"
    title = "The input does not match the task type's schema"


class InvalidBase64(ValidationFailed):
    """content_base64 must be standard base64."""

    code = "invalid-base64"
    title = "The content is not base64"
