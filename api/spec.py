"""What `@endpoint` records about a route: method, path, models, auth, scopes, errors.

A module of its own so that both the endpoint wiring (`api.endpoint`) and the authorization it
runs (`api.auth`) can read a spec without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from api.genai import MemoryOperation
from schemas.errors import DomainError

# "connector": the MCP server's back channel (X-Connector-Secret; api.routes.connector)
# A page for a person (the console): its refusals are pages too
HTML = "text/html"
# "browser": a person's browser (the console): the session if it is valid, else anonymous (a
# stale cookie is a logged-out visitor, not a 401); counted in the human's own buckets
AuthMode = Literal["none", "optional", "required", "connector", "browser"]
# The OpenAPI document that describes a route (api.openapi): "api", served as /openapi.json, or
# "console": the console's pages and forms, which are a person's browser's, not an API client's
# (so no generated client or contract test of the API sees them); built for the console's tests
Document = Literal["api", "console"]


@dataclass(frozen=True)
class EndpointSpec:
    method: str
    path: str
    operation_id: str
    summary: str
    tag: str
    status: int = 200
    # Other statuses the handler answers with the same body, each with when: `((202, "..."),)`
    also: tuple[tuple[int, str], ...] = ()
    # Error statuses answered with this JSON body instead of a problem (RFC 6749 token errors)
    error_body: type[BaseModel] | None = None
    error_statuses: tuple[int, ...] = ()
    body: type[BaseModel] | None = None
    body_form: bool = False
    # The handler parses the body itself (the token endpoint answers RFC 6749 errors, not problems)
    manual_body: bool = False
    query: type[BaseModel] | None = None
    path_params: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    auth: AuthMode = "required"
    scopes: tuple[str, ...] = ()
    errors: tuple[type[DomainError], ...] = ()
    rate_bucket: str | None = None
    # False: never counted in any bucket, never a 429 (the probes: kubelets probing several pods
    # from one node share an address, DECISIONS "Operations")
    rate_limited: bool = True
    headers: tuple[str, ...] = ()
    # Honours `Idempotency-Key` (api.idempotency): every POST that creates or decides says so
    idempotent: bool = False
    raw_response: str | None = None
    # The handler runs other routes on clones of this request (api.endpoint.invoke) after its
    # own body was read: an unread clone is kept for them (the console's forms)
    door: bool = False
    # The handler reads the body itself, as a file of this media type, or of one of these
    # (`POST /diaries/import`)
    raw_body: str | tuple[str, ...] | None = None
    # Called by the Temporal UI's page (the codec endpoint): its origin (`temporal_ui_url`) gets
    # CORS answers, and a session cookie sent from it is accepted (api.routes.codec)
    ui_origin: bool = False
    # The GenAI memory operation the route is (api.genai): its span and duration histogram
    memory: MemoryOperation | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # A POST that writes nothing (search): its reads may come from the replica, as a GET's may
    read_only: bool = False
    # Which OpenAPI document describes the route: the console's pages are no API (api.openapi)
    document: Document = "api"

    @property
    def writes_nothing(self) -> bool:
        return self.method in ("GET", "HEAD") or self.read_only
