"""The server's one connection to the REST API: a shared HTTP session, the token cache, and
the per-request `CairnClient` that acts with the caller's credential.

Nothing here keeps per-session MCP state: any replica can answer any request (stateless).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from urllib.parse import quote

import aiohttp
from jsonschema import Draft202012Validator

from client.connector import ConnectorApi
from client.rest import ApiError, CairnClient, ClientCredentials, TokenCache
from schemas.task_api import TaskSchema
from toolserver.config import ToolServerConfig


@dataclass(frozen=True)
class AgentKey:
    """An agent key presented as the MCP bearer: passed to REST unchanged."""

    secret: str = field(repr=False)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.secret.encode()).hexdigest()


@dataclass(frozen=True)
class HumanToken:
    """A human through the browser OAuth connector: the bearer the host sent (audience = this
    server) never reaches the API; `api_token` is what the API exchanged it for."""

    bearer: str = field(repr=False)
    api_token: str = field(repr=False)


Credential = ClientCredentials | AgentKey | HumanToken


@dataclass
class TaskTypeRegistry:
    """`/tasks/schemas`, re-read at most every `ttl` seconds; a compiled validator per
    `inputSchemaCid`, so an unchanged schema is never compiled twice."""

    ttl: float
    types: dict[str, TaskSchema] = field(default_factory=dict)
    read_at: float = 0.0
    validators: dict[str, Draft202012Validator] = field(default_factory=dict)

    async def get(self, api: CairnClient, task_type: str) -> TaskSchema | None:
        if time.monotonic() - self.read_at > self.ttl or task_type not in self.types:
            listed = await api.task_schemas()
            self.types = {item.taskType: item for item in listed.items}
            self.read_at = time.monotonic()
        return self.types.get(task_type)

    def validator(self, schema: TaskSchema) -> Draft202012Validator:
        found = self.validators.get(schema.inputSchemaCid)
        if found is None:
            found = Draft202012Validator(schema.inputSchema)
            self.validators[schema.inputSchemaCid] = found
        return found


class Backend:
    def __init__(self, config: ToolServerConfig) -> None:
        self.config = config
        self.tokens = TokenCache()
        self.task_types = TaskTypeRegistry(ttl=config.task_schema_ttl_sec)
        # (credential digest, team) -> (when whoami answered, the scopes it told)
        self._known: dict[str, tuple[float, frozenset[str] | None]] = {}
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=256, keepalive_timeout=30)
            self._session = aiohttp.ClientSession(connector=connector)

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def token_exchanges(self) -> int:
        return self.tokens.exchanges

    def client(self, credential: Credential, *, team: str | None = None) -> CairnClient:
        """A REST client acting as the caller, on the shared session and token cache; `team`
        (the request's `X-Service-Team-Id`) goes on every call that names no team itself.
        A new client per MCP request: nothing of one caller is kept for the next."""
        if self._session is None:
            raise RuntimeError("the backend is not started")
        if isinstance(credential, AgentKey):
            return CairnClient(
                self.config.api_url,
                session=self._session,
                bearer=credential.secret,
                default_team=team,
            )
        if isinstance(credential, HumanToken):
            return CairnClient(
                self.config.api_url,
                session=self._session,
                bearer=credential.api_token,
                default_team=team,
            )
        return CairnClient(
            self.config.api_url,
            credentials=credential,
            session=self._session,
            tokens=self.tokens,
            default_team=team,
        )

    async def authenticate(
        self, credential: Credential, *, team: str | None = None
    ) -> frozenset[str] | None:
        """Raise `ApiError` (401) when the credential does not authenticate at the API; else
        its scopes (None when the API does not tell them: whoami answered 403).

        Client credentials: the token exchange (cached, so usually no call). Then, for every
        kind, a whoami call (with the request's team header) remembered for a minute by the
        credential's SHA-256 (never the secret): it proves an agent key and tells the scopes
        that narrow the toolsets (toolserver.toolsets). A 403 (no `agent:profile` scope, or a
        team key without its team header) still proves the key. The REST API stays the judge
        of every later call: a key revoked within the minute still passes here, but only into
        messages without data (initialize, `tools/list`, prompts); its first tool call gets
        the API's 401 as its error result, and `forget` drops it.
        """
        if isinstance(credential, ClientCredentials):
            await self.client(credential).access_token()
        key = f"{_digest(credential)} {team or ''}"
        known = self._known.get(key)
        if known is not None and time.monotonic() - known[0] < self.config.agent_key_check_ttl_sec:
            return known[1]
        scopes: frozenset[str] | None
        try:
            scopes = frozenset((await self.client(credential, team=team).whoami()).scopes)
        except ApiError as error:
            if error.status != 403:
                raise
            scopes = None
        if len(self._known) > 10_000:
            self._known.clear()
        self._known[key] = (time.monotonic(), scopes)
        return scopes

    def forget(self, credential: Credential) -> None:
        """The API refused this credential (401): a revoked or expired agent key is checked
        again, and refused, at the next request instead of after the remembered minute."""
        prefix = _digest(credential) + " "
        for key in [key for key in self._known if key.startswith(prefix)]:
            self._known.pop(key, None)

    def connector_api(self, secret: str) -> ConnectorApi:
        """The back channel of the browser OAuth connector, on the shared session."""
        if self._session is None:
            raise RuntimeError("the backend is not started")
        return ConnectorApi(CairnClient(self.config.api_url, session=self._session), secret)

    def temporal_link(self, workflow_id: str) -> str:
        base = self.config.temporal_ui_url.rstrip("/")
        namespace = self.config.temporal_namespace
        return (
            f"{base}/namespaces/{quote(namespace, safe='')}/workflows/{quote(workflow_id, safe='')}"
        )


def _digest(credential: Credential) -> str:
    """A credential's cache key: a SHA-256, never the secret itself."""
    if isinstance(credential, AgentKey):
        return credential.digest
    secret = credential.api_token if isinstance(credential, HumanToken) else credential.cache_key
    return hashlib.sha256(secret.encode()).hexdigest()
