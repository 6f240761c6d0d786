"""The problem catalogue: every error the service can answer, as RFC 9457 problem types.

A `DomainError` subclass is one problem type (type URI, title, status, stable `code`). Raised in
an activity, the worker interceptor turns it into a non-retryable `ApplicationError` carrying the
problem body; raised anywhere in the API, the problem middleware renders it as
`application/problem+json`. Anything that is not a `DomainError` is transient (activities retry)
or a 500 (the API shows no internals).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from schemas.limits import ERROR_DETAIL_MAX_CHARS

PROBLEM_BASE = "https://cairn.dev/problems/"


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
    """Base of every problem type. Subclasses set `status`, `code` and `title`."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal"
    title: ClassVar[str] = "Internal server error"
    registry: ClassVar[dict[str, type[DomainError]]] = {}

    def __init__(
        self,
        detail: str | None = None,
        *,
        errors: list[FieldError] | None = None,
        code: str | None = None,
        extensions: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail or self.title)
        self.detail = (detail or self.title)[:ERROR_DETAIL_MAX_CHARS]
        self.errors = errors
        self.instance_code = code or self.code
        self.extensions = extensions or {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        DomainError.registry[cls.code] = cls

    @property
    def type_uri(self) -> str:
        return PROBLEM_BASE + self.instance_code

    def to_problem(self) -> Problem:
        return Problem(
            type=self.type_uri,
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
    for candidate in DomainError.registry.values():
        if candidate.status == status:
            return candidate
    return InternalError


class InternalError(DomainError):
    status = 500
    code = "internal"
    title = "Internal server error"


class ValidationFailed(DomainError):
    status = 400
    code = "validation-failed"
    title = "The request is not valid"


class InvalidChallenge(DomainError):
    status = 400
    code = "invalid-challenge"
    title = "The recovery challenge is not valid"


class InvalidSignature(DomainError):
    status = 400
    code = "invalid-signature"
    title = "The signature does not verify"


class Unauthorized(DomainError):
    status = 401
    code = "unauthorized"
    title = "Authentication required"


class ConnectorRefused(DomainError):
    """The MCP server's back channel refused: a wrong connector secret (401)."""

    status = 401
    code = "connector-refused"
    title = "The connector credential is missing or wrong"


class ConnectorTokenInvalid(DomainError):
    """An MCP-audience token that is unknown, expired, revoked or for another resource."""

    status = 401
    code = "connector-token-invalid"
    title = "The connector token is not valid here"


class ConnectorGrantInvalid(DomainError):
    """RFC 6749 invalid_grant: an authorization code or refresh token that is unknown, used,
    expired, revoked or another client's."""

    status = 400
    code = "connector-grant-invalid"
    title = "The authorization grant is not valid"


class Forbidden(DomainError):
    status = 403
    code = "forbidden"
    title = "Not allowed"


class MissingScope(DomainError):
    status = 403
    code = "missing-scope"
    title = "The credential lacks a required scope"


class VoucherRejected(DomainError):
    status = 403
    code = "voucher-rejected"
    title = "The voucher is unknown, redeemed or expired"


class NotFound(DomainError):
    status = 404
    code = "not-found"
    title = "Not found"


class Conflict(DomainError):
    status = 409
    code = "conflict"
    title = "Conflict with the current state"


class Gone(DomainError):
    status = 410
    code = "gone"
    title = "No longer available"


class MethodNotAllowed(DomainError):
    status = 405
    code = "method-not-allowed"
    title = "Method not allowed on this path"


class UnsupportedMediaType(DomainError):
    status = 415
    code = "unsupported-media-type"
    title = "Unsupported media type"


class PayloadTooLarge(DomainError):
    status = 413
    code = "payload-too-large"
    title = "The request body is too large"


class UriTooLong(DomainError):
    status = 414
    code = "uri-too-long"
    title = "Request line too long"


class HeaderFieldsTooLarge(DomainError):
    status = 431
    code = "header-fields-too-large"
    title = "Request header fields too large"


class RateLimited(DomainError):
    status = 429
    code = "rate-limit-exceeded"
    title = "Too many requests"

    @property
    def retry_after(self) -> int:
        return int(self.extensions.get("retryAfter", 60))


class TooManyVouchers(DomainError):
    status = 429
    code = "voucher-limit-reached"
    title = "Too many unredeemed vouchers"


class UpstreamError(DomainError):
    status = 502
    code = "upstream-error"
    title = "A dependency answered with an error"


class ServiceUnavailable(DomainError):
    status = 503
    code = "service-unavailable"
    title = "A dependency cannot decide right now"


class PermissionEvaluationFailed(DomainError):
    """The permission engine could not evaluate: an outage is never mistaken for a denial."""

    status = 503
    code = "permission-evaluation-failed"
    title = "Permissions cannot be evaluated right now"


# --- agent keys (SPEC 4.6, 5.4, 7): every cause its own code -------------------------------------


class AgentKeyMalformed(Unauthorized):
    code = "agent-key-malformed"
    title = "The agent key is not shaped like one"


class AgentKeyInvalid(Unauthorized):
    code = "agent-key-invalid"
    title = "The agent key is unknown, wrong or was rotated"


class AgentKeyRevoked(Unauthorized):
    code = "agent-key-revoked"
    title = "The agent key was revoked"


class AgentKeyExpired(Unauthorized):
    code = "agent-key-expired"
    title = "The agent key has expired"


class AgentKeyBindingInvalid(Unauthorized):
    code = "agent-key-binding-invalid"
    title = "The agent key's stored binding is neither valid v2 nor valid v1 metadata"


class KeyTeamHeaderRequired(Forbidden):
    code = "key-team-header-required"
    title = "A team key needs the x-service-team-id header of its team"


class KeyTeamMismatch(Forbidden):
    code = "key-team-mismatch"
    title = "The team key is bound to another team"


class KeyTeamNotAuthorized(Forbidden):
    code = "key-team-not-authorized"
    title = "The identity key's agent is not a member of this team"


class ScopeNotGrantable(ValidationFailed):
    code = "scope-not-grantable"
    title = "A requested scope is not part of the agent grant"


class ScopeEscalation(Forbidden):
    code = "scope-escalation"
    title = "A requested scope is beyond the requesting credential's scopes"


class KeyManageForbidden(Forbidden):
    code = "key-manage-forbidden"
    title = "You may not manage this agent's keys"


class IdentityKeyForbidden(Forbidden):
    code = "identity-key-forbidden"
    title = "Identity keys are managed only by their agent, through OAuth2 or an identity key"


class SelfRotationForbidden(Forbidden):
    code = "self-rotation-forbidden"
    title = "A key cannot authorize its own rotation"


class AgentNotTeamMember(Forbidden):
    code = "agent-not-team-member"
    title = "The agent is not a current member of the team"


class AgentKeyNotFound(NotFound):
    code = "agent-key-not-found"
    title = "No such agent key"


class AgentKeyNotActive(Conflict):
    code = "agent-key-not-active"
    title = "The agent key is revoked or expired"


class AgentKeyDuplicate(Conflict):
    code = "agent-key-duplicate"
    title = "A key was already issued for this Idempotency-Key"
