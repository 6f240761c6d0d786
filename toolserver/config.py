"""What the tool-protocol server needs to know, filled in by `cairn mcp` from the settings.

The server may not import `infra` (STYLE.md), so `cairn.py` reads `Settings` and hands over
this plain record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass(frozen=True)
class ToolServerConfig:
    api_url: str  # where the REST API answers (the MCP server talks to nothing else)
    public_url: str = "http://127.0.0.1:8001/mcp"  # {mcp_url} as clients reach it
    host: str = "127.0.0.1"
    port: int = 8001
    path: str = "/mcp"
    temporal_ui_url: str = "http://127.0.0.1:8233"
    temporal_namespace: str = "default"
    challenge_token: str = field(default="", repr=False)
    challenge_path: str = "/.well-known/openai-apps-challenge"
    # a credential's whoami (an agent key's proof, every credential's scopes) holds this long
    agent_key_check_ttl_sec: float = 60.0
    # the browser OAuth connector for humans (spec 5.5): on when the connector secret is set
    # (`cairn mcp` derives it from the server secret, as the API does)
    connector_secret: str = field(default="", repr=False)
    # the connector secrets of the server secret's older keys (SERVICE_SECRET_KEYS): a client
    # registered before a rotation still authenticates with its secret
    older_connector_secrets: tuple[str, ...] = field(default=(), repr=False)
    # where a human's browser reaches the REST API (its consent page); default `api_url`
    console_url: str = ""
    # the task-type registry (`/tasks/schemas`) is re-read at most this often
    task_schema_ttl_sec: float = 60.0
    # on shutdown, how long requests in flight may take to finish (SERVICE_SHUTDOWN_GRACE_S)
    shutdown_grace_s: float = 35.0

    @property
    def browser_api_url(self) -> str:
        return (self.console_url or self.api_url).rstrip("/")

    @property
    def public_host(self) -> str:
        """`host[:port]` of the public URL: the Host header transport security accepts."""
        return urlsplit(self.public_url).netloc
