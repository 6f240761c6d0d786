"""Every address, secret and knob of the service, read from `SERVICE_*` environment variables.

The same code runs on the embedded stack (`cairn dev` fills the addresses in) and against an
external Postgres, a Temporal cluster and any S3 endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas import limits
from schemas.queues import embedding_queue_for


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SERVICE_", extra="ignore")

    base_url: str = Field(
        default="http://127.0.0.1:8000",
        description="Public base URL of the API; recovery URLs and the token issuer use it.",
    )
    api_host: str = "127.0.0.1"
    api_port: int = 8000
    api_processes: int = Field(
        default=1,
        ge=1,
        le=64,
        description=(
            "`cairn api` serves from this many processes sharing the port (SO_REUSEPORT); one "
            "Python process uses one core. Rate limits are counted per process."
        ),
    )

    database_url: str = Field(
        default="", description="postgresql:// URL; empty = embedded pgserver"
    )
    database_pool_min: int = 2
    database_pool_max: int = 10

    temporal_address: str = "127.0.0.1:7233"
    temporal_namespace: str = "default"
    temporal_task_queue: str = "cairn"
    temporal_tls: bool = False
    worker_queues: Literal["all", "service", "embeddings"] = Field(
        default="all",
        description=(
            "What `cairn worker` polls: `all` (the service queue and the embedding queue, the "
            "model in the same process), `service` (every workflow and activity but the entry "
            "writes and embedding; no model loaded) or `embeddings` (only the embedding queue: "
            "the entry workflows beside the model; needs Temporal and Postgres, not S3)."
        ),
    )

    s3_endpoint: str = ""
    s3_bucket: str = "cairn"
    s3_access_key: str = "cairn"
    s3_secret_key: SecretStr = SecretStr("cairn-dev-secret")
    s3_region: str = "us-east-1"

    secret_key: SecretStr = Field(
        default=SecretStr(""),
        description="Server secret (≥32 bytes): recovery HMACs, secret hashes, key sealing.",
    )
    hook_secret: SecretStr = Field(
        default=SecretStr(""),
        description="Shared secret for /hooks/* (external IdP / OAuth2 server).",
    )

    mcp_host: str = "127.0.0.1"
    mcp_port: int = Field(default=8001, description="Port of the tool-protocol (MCP) server.")
    mcp_public_url: str = Field(
        default="",
        description=(
            "Public URL of the MCP endpoint (default http://{mcp_host}:{mcp_port}/mcp); its host "
            "is the one the MCP server's transport security accepts besides loopback."
        ),
    )
    mcp_api_url: str = Field(
        default="", description="Where the MCP server reaches the REST API (default base_url)."
    )
    mcp_challenge_token: SecretStr = Field(
        default=SecretStr(""),
        description="Token served at the MCP server's /.well-known/ challenge path (unset: 404).",
    )
    mcp_challenge_path: str = Field(
        default="/.well-known/openai-apps-challenge",
        pattern=r"^/\.well-known/[A-Za-z0-9._-]+$",
        description="Path of that challenge (the app directory's own name for it).",
    )
    temporal_ui_url: str = Field(
        default="http://127.0.0.1:8233",
        description="Temporal Web UI base URL: `tasks_console_link` points there.",
    )

    data_dir: Path = Path(".cairn")
    rate_limit_enabled: bool = True
    access_token_ttl_sec: int = limits.ACCESS_TOKEN_TTL_SEC
    otel_service_name: str = "cairn"
    task_artifact_orphan_grace_sec: int = Field(
        default=limits.ARTIFACT_ORPHAN_GRACE_SEC,
        ge=0,
        # the spec names the variable without our prefix; SERVICE_... wins when both are set
        validation_alias=AliasChoices(
            "SERVICE_TASK_ARTIFACT_ORPHAN_GRACE_SEC",
            "TASK_ARTIFACT_ORPHAN_GRACE_SEC",
            "task_artifact_orphan_grace_sec",
        ),
        description="Staged artifacts no task binds are swept after this many seconds.",
    )

    @property
    def embedding_task_queue(self) -> str:
        """Embedding activities run on their own queue so they can scale apart from the rest."""
        return embedding_queue_for(self.temporal_task_queue)

    @property
    def secret_bytes(self) -> bytes:
        value = self.secret_key.get_secret_value().encode()
        if len(value) < 32:
            raise ValueError("SERVICE_SECRET_KEY must be at least 32 bytes")
        return value

    @property
    def mcp_url(self) -> str:
        return self.mcp_public_url or f"http://{self.mcp_host}:{self.mcp_port}/mcp"

    @property
    def issuer(self) -> str:
        return self.base_url.rstrip("/")
