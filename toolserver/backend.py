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
from client.rest import CairnClient, ClientCredentials, TokenCache
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
        self._checked_keys: dict[str, float] = {}
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

    async def authenticate(self, credential: Credential) -> None:
        """Raise `ApiError` (401) when the credential does not authenticate at the API.

        Client credentials: the token exchange (cached, so usually no call). Agent keys: a
        whoami call, remembered for a minute by the key's SHA-256 (never the secret); a 403
        (no `agent:profile` scope, or a team key without its team header) still proves the key.
        The REST API stays the judge of every later call: a key revoked within the minute still
        passes here, but only into messages without data (initialize, `tools/list`, prompts);
        its first tool call gets the API's 401 as its error result, and `forget` drops it.
        """
        if isinstance(credential, HumanToken):
            return  # checked by the auth gate's bearer backend
        api = self.client(credential)
        if isinstance(credential, ClientCredentials):
            await api.access_token()
            return
        checked = self._checked_keys.get(credential.digest)
        if checked is not None and time.monotonic() - checked < self.config.agent_key_check_ttl_sec:
            return
        try:
            await api.whoami()
        except Exception as error:
            if getattr(error, "status", None) != 403:
                raise
        if len(self._checked_keys) > 10_000:
            self._checked_keys.clear()
        self._checked_keys[credential.digest] = time.monotonic()

    def forget(self, credential: Credential) -> None:
        """The API refused this credential (401): a revoked or expired agent key is checked
        again, and refused, at the next request instead of after the remembered minute."""
        if isinstance(credential, AgentKey):
            self._checked_keys.pop(credential.digest, None)

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
