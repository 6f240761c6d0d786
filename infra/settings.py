"""Every address, secret and knob of the service, read from `SERVICE_*` environment variables.

The same code runs on the embedded stack (`cairn dev` fills the addresses in) and against an
external Postgres, a Temporal cluster and any S3 endpoint.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import AfterValidator, AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas import limits
from schemas.kernel.keyring import SecretKeyring
from schemas.queues import embedding_queue_for

_PERIOD_SEC = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60}
_PERIOD_SEC |= {"h": 3600, "hour": 3600, "d": 86400, "day": 86400}
_RATE = re.compile(r"^\s*([1-9][0-9]*)\s*/\s*([1-9][0-9]*)?\s*([a-z]+?)s?\s*$")


class Rate(NamedTuple):
    """A bucket's rate: at most `limit` requests per `period_sec` (a burst of `limit`)."""

    limit: int
    period_sec: int

    @classmethod
    def parse(cls, text: str) -> Rate:
        """`N/period`, the period a unit (`s`, `minute`, `hour`, `day`, ...) with an optional
        count before it: `30/minute`, `30/min`, `5/30s`, `1000/day`."""
        match = _RATE.match(text.lower())
        if match is None or match.group(3) not in _PERIOD_SEC:
            raise ValueError(f"a rate is N/period (30/minute, 5/30s, 1000/day), not {text!r}")
        count = int(match.group(2) or 1)
        return cls(limit=int(match.group(1)), period_sec=count * _PERIOD_SEC[match.group(3)])


def _checked_rate(text: str) -> str:
    Rate.parse(text)
    return text


# a bucket's setting stays the text it was given (pydantic-settings would JSON-decode a tuple)
RateSetting = Annotated[str, AfterValidator(_checked_rate)]


def _rate(bucket: str, applies_to: str) -> Any:
    """The setting of one bucket, its default the reference value (per minute)."""
    return Field(
        default=f"{limits.RATE_LIMITS_PER_MINUTE[bucket]}/minute",
        description=f"Rate limit of the `{bucket}` bucket ({applies_to}): N/period.",
    )


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
            "Python process uses one core. Rate limits are shared by all of them (Postgres)."
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
        description="Server secret (≥32 bytes): recovery HMACs, secret hashes, key sealing. "
        "A one-key ring; `SERVICE_SECRET_KEYS` wins when set.",
    )
    secret_keys: SecretStr = Field(
        default=SecretStr(""),
        description="Server secrets for rotation, comma-separated, the current one first (each "
        "≥32 bytes): the first makes every new hash, seal and MAC, every one still verifies; "
        "what is used under an older key moves to the current one (docs/operations-secrets.md).",
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
    rate_limit_enabled: bool = Field(
        default=True,
        description="Per-identity rate limits, shared by every API process (429 + Retry-After).",
    )
    # one setting per bucket, `N/period` (`30/minute`, `600/hour`, `5/30s`): schemas/limits.py
    rate_limit_global_auth: RateSetting = _rate("global_auth", "every authenticated request")
    rate_limit_global_anon: RateSetting = _rate("global_anon", "anonymous requests, per address")
    rate_limit_global_read: RateSetting = _rate("global_read", "authenticated GETs")
    rate_limit_search: RateSetting = _rate("search", "POST /diary/search (it embeds the query)")
    rate_limit_signing: RateSetting = _rate("signing", "signing requests created")
    rate_limit_agent_key: RateSetting = _rate("agent_key", "agent-key create, rotate and revoke")
    rate_limit_recovery: RateSetting = _rate("recovery", "/recovery/*")
    rate_limit_registration: RateSetting = _rate("registration", "/auth/register")
    rate_limit_vouch: RateSetting = _rate("vouch", "POST /vouch")
    rate_limit_public_verify: RateSetting = _rate("public_verify", "public signature checks")
    rate_limit_public_search: RateSetting = _rate("public_search", "public feed search")
    rate_limit_artifact_upload: RateSetting = _rate("artifact_upload", "artifact upload and stage")
    rate_limit_connector: RateSetting = _rate("connector", "the MCP server's OAuth back channel")
    access_token_ttl_sec: int = limits.ACCESS_TOKEN_TTL_SEC
    hygiene_flush_sec: float = Field(
        default=limits.HYGIENE_FLUSH_SEC,
        gt=0,
        description="How often the API hands over the ids of the entries it created (to their "
        "consolidation) and of those searches and packs returned (to the hygiene report).",
    )
    otel_service_name: str = "cairn"
    otel_capture_query_text: bool = Field(
        default=False,
        description="Record a memory search's query text on its span "
        "(`gen_ai.memory.query.text`, the GenAI conventions' opt-in); off: never recorded.",
    )
    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Prometheus scrape endpoint of each process (`GET /metrics`), 0 = off; the "
        "n-th extra process of `cairn api --processes` serves on this port + n.",
    )
    metrics_host: str = Field(
        default="0.0.0.0",
        description="Address the scrape endpoint binds (a pod's scraper reaches its IP).",
    )
    log_format: Literal["json", "text"] = Field(
        default="json",
        description="Log lines: `json` (one object a line with time, level, logger, message, "
        "trace, span and request ids and the principal) or `text` (plain, for a terminal).",
    )
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
    def rate_limits(self) -> dict[str, Rate]:
        """Every bucket's rate, from its `SERVICE_RATE_LIMIT_<BUCKET>` setting."""
        return {
            name.removeprefix("rate_limit_"): Rate.parse(getattr(self, name))
            for name in type(self).model_fields
            if name.startswith("rate_limit_") and name != "rate_limit_enabled"
        }

    @property
    def embedding_task_queue(self) -> str:
        """Embedding activities run on their own queue so they can scale apart from the rest."""
        return embedding_queue_for(self.temporal_task_queue)

    @property
    def secret_ring(self) -> SecretKeyring:
        """`SERVICE_SECRET_KEYS`, else `SERVICE_SECRET_KEY` as a ring of one."""
        listed = self.secret_keys.get_secret_value()
        try:
            if listed.strip():
                return SecretKeyring.parse(listed)
            return SecretKeyring((self.secret_key.get_secret_value().encode(),))
        except ValueError as exc:
            raise ValueError(f"SERVICE_SECRET_KEYS / SERVICE_SECRET_KEY: {exc}") from None

    @property
    def secret_bytes(self) -> bytes:
        """The current server secret: what makes new hashes, seals and MACs."""
        return self.secret_ring.current

    @property
    def mcp_url(self) -> str:
        return self.mcp_public_url or f"http://{self.mcp_host}:{self.mcp_port}/mcp"

    @property
    def issuer(self) -> str:
        return self.base_url.rstrip("/")
