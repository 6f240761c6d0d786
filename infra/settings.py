"""Every address, secret and knob of the service, read from `SERVICE_*` environment variables.

The same code runs on the embedded stack (`cairn dev` fills the addresses in) and against an
external Postgres, a Temporal cluster and any S3 endpoint.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    AfterValidator,
    AliasChoices,
    BeforeValidator,
    Field,
    SecretStr,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from infra.payload_codec import PayloadKeyring
from schemas import limits
from schemas.kernel.keyring import SecretKeyring
from schemas.queues import embedding_queue_for


def _cores() -> int:
    """The cores this process may run on: its CPU affinity where the OS has one (a container's
    cpuset), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


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


def _checked_keyring(value: SecretStr) -> SecretStr:
    PayloadKeyring.parse(value.get_secret_value())
    return value


def _rate(bucket: str, applies_to: str) -> Any:
    """The setting of one bucket, its default the reference value (per minute)."""
    return Field(
        default=f"{limits.RATE_LIMITS_PER_MINUTE[bucket]}/minute",
        description=f"Rate limit of the `{bucket}` bucket ({applies_to}): N/period.",
    )


def _networks(value: object) -> object:
    """`10.0.0.0/8, 192.168.1.7` (a bare address is its own /32 or /128), or a list of them."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


# Parsed once, when the settings are read: a malformed CIDR stops the process at start-up.
Networks = Annotated[
    tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...],
    NoDecode,
    BeforeValidator(_networks),
]


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

    trusted_proxies: Networks = Field(
        default=(),
        description=(
            "Comma-separated CIDRs of the reverse proxies in front of the API. Only a request "
            "whose socket peer is in one of them has its forwarding header read: the client "
            "address is then the right-most hop of that header that is not a trusted proxy. "
            "Empty: the socket peer is the client, whatever the headers say."
        ),
    )
    trusted_proxy_header: Literal["x-forwarded-for", "forwarded"] = Field(
        default="x-forwarded-for",
        description=(
            "The header the trusted proxies append the client's address to: `x-forwarded-for`, "
            "or `forwarded` (RFC 7239 `for=`). Only this one is read, so a client cannot pass "
            "its own address in the other one through a proxy that forwards it untouched."
        ),
    )
    shutdown_drain_s: float = Field(
        default=5.0,
        ge=0,
        description=(
            "On SIGTERM/SIGINT `cairn api` and `cairn mcp` answer their readiness probe 503 at "
            "once and keep accepting connections for this many seconds, so a load balancer sees "
            "the failed probe and stops sending traffic before the listener closes."
        ),
    )
    shutdown_grace_s: float = Field(
        default=35.0,
        ge=0,
        description=(
            "After the drain, how long requests in flight may take to finish before they are "
            "cancelled (longer than SERVICE_REQUEST_WAIT_S, so a request waiting on a workflow "
            "gets its answer)."
        ),
    )
    a2a_stream_keepalive_s: float = Field(
        default=15.0,
        gt=0,
        le=300,  # proxies close a stream idle for longer (nginx after 60 s unless raised)
        description=(
            "The longest an A2A event stream stays silent: then an SSE comment keeps it open "
            "through proxies and finds a client that left (its watch of the task ends)."
        ),
    )
    request_wait_s: float = Field(
        default=30.0,
        gt=0,
        description=(
            "The longest an API request waits on a workflow (its result or an Update's). Past it "
            "the answer is 503 with Retry-After; the workflow is left to finish, and the same "
            "request sent again with its Idempotency-Key gets the one result."
        ),
    )

    database_url: str = Field(
        default="", description="postgresql:// URL; empty = the embedded PostgreSQL of `cairn dev`"
    )
    database_pool_min: int = Field(
        default=2, ge=0, description="Connections each process's main pool keeps open."
    )
    # The connection budget (docs/deployment.md "Connection budget", infra.db.connection_budget):
    # every pool of every process is sized here, so the sum over a deployment can be kept under
    # the server's max_connections.
    database_pool_max: int = Field(
        default=10,
        ge=1,
        description=(
            "Most connections of each process's main pool: an API process's reads, a worker's "
            "activities (the embedding queue's too, in the same process)."
        ),
    )
    database_message_pool_max: int = Field(
        default=4,
        ge=1,
        description="Most connections of an API process's task-message writer (short appends).",
    )
    database_rate_pool_max: int = Field(
        default=4,
        ge=1,
        description="Most connections of an API process's rate limiter (one statement a request).",
    )
    database_read_pool_max: int = Field(
        default=10,
        ge=1,
        description=(
            "Most connections of an API process's replica pool (only with "
            "SERVICE_DATABASE_READ_URL; they count against the replica, not the primary)."
        ),
    )
    database_acquire_timeout_s: float = Field(
        default=limits.DATABASE_ACQUIRE_TIMEOUT_SEC,
        gt=0,
        description=(
            "Longest wait for a free pooled connection: past it the API answers 503 with "
            "Retry-After (a worker's activity fails and is retried), never a hang."
        ),
    )
    database_transaction_pooler: bool = Field(
        default=False,
        description=(
            "The URLs lead to a transaction pooler (pgbouncer, pool_mode=transaction): no "
            "statement cache, and read-only and synchronous_commit are set per transaction "
            "instead of per session."
        ),
    )
    database_read_url: str = Field(
        default="",
        description=(
            "postgresql:// URL of a streaming replica: list, get and search requests read "
            "there; a request that writes reads its own rows from the primary. Empty: the "
            "primary serves every read."
        ),
    )

    temporal_address: str = "127.0.0.1:7233"
    temporal_namespace: str = Field(
        default="default", description="Temporal namespace of every workflow (one per deployment)."
    )
    temporal_task_queue: str = "cairn"
    temporal_tls: bool = Field(
        default=False,
        description=(
            "TLS to Temporal with the system's root CAs; implied by any SERVICE_TEMPORAL_TLS_* "
            "setting below, and by an API key."
        ),
    )
    temporal_tls_ca: Path | None = Field(
        default=None, description="PEM file of the CA that signed the Temporal frontend's cert."
    )
    temporal_tls_cert: Path | None = Field(
        default=None, description="PEM file of this process's client certificate (mTLS)."
    )
    temporal_tls_key: Path | None = Field(
        default=None, description="PEM file of that certificate's private key (mTLS)."
    )
    temporal_tls_server_name: str = Field(
        default="",
        description="Name the frontend's certificate is checked against (and sent as SNI), when "
        "it is not the address's host.",
    )
    temporal_api_key: SecretStr = Field(
        default=SecretStr(""),
        description="Temporal Cloud API key, sent as `authorization: Bearer <key>` (TLS on).",
    )
    payload_keys: Annotated[SecretStr, AfterValidator(_checked_keyring)] = Field(
        default=SecretStr(""),
        description=(
            "Keyring of the workflow payload codec, `id:base64key,...` (32-byte keys): the first "
            "encrypts, all decrypt. Empty: payloads reach Temporal in the clear. `cairn dev` "
            "makes one in .cairn/payload-keys."
        ),
    )
    worker_queues: Literal["all", "service", "embeddings"] = Field(
        default="all",
        description=(
            "What `cairn worker` polls: `all` (the service queue and the embedding queue, the "
            "model in the same process), `service` (every workflow and activity but the entry "
            "writes and embedding; no model loaded) or `embeddings` (only the embedding queue: "
            "the entry workflows beside the model; needs Temporal and Postgres, not S3)."
        ),
    )
    worker_workflow_task_slots: int = Field(
        default_factory=lambda: 4 * _cores(),
        ge=1,
        le=1024,  # 4 per core of a 256-core machine; more only queues inside the worker
        description=(
            "Workflow tasks the service queue's worker runs at once (default 4 per core). "
            "Beyond it work waits in Temporal's task queue, which dispatches by priority and "
            "takes the teams' turns (`schemas.priorities`); work taken into the worker is "
            "served in arrival order, whatever its team."
        ),
    )
    embedding_workflow_task_slots: int = Field(
        default_factory=lambda: 2 * _cores(),
        ge=1,
        le=512,  # one model run embeds this many texts at most: its memory grows with them
        description=(
            "Entry writes the embedding queue's worker runs at once (default 2 per core): "
            "each holds its slot through its embedding and insert. A model run embeds the "
            "writes in the worker together and each waits for the whole run, so a write of "
            "a quiet team waits at most about two runs of this many texts (bench/fairness.py)."
        ),
    )
    worker_shutdown_grace_s: float = Field(
        default=30.0,
        ge=0,
        description=(
            "On SIGTERM or SIGINT `cairn worker` stops polling and gives the activities in "
            "flight this long to finish before cancelling them, then exits 0."
        ),
    )
    worker_deployment: str = Field(
        default="cairn",
        pattern=r"^[^.]+$",
        description=(
            "The Temporal Worker Deployment this worker belongs to (no `.`): every replica of "
            "one deployment serves the same queues, and its versions are rolled out together."
        ),
    )
    worker_build_id: str = Field(
        default="",
        description=(
            "This worker's version within the deployment; empty = the package version plus a "
            "hash of the registered workflow code (`workers.versioning.code_build_id`)."
        ),
    )
    worker_set_current: Literal["first", "always", "never"] = Field(
        default="first",
        description=(
            "Whether this worker makes its version the deployment's current one at start: "
            "`first` when the deployment has none yet (a fresh deployment's first worker "
            "bootstraps it; later builds wait for an operator's `temporal worker deployment "
            "set-current-version`), `always` (`cairn dev`), `never` (only an operator). A "
            "versioned worker gets no task until its version is current or ramping."
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
        description=(
            "Temporal Web UI base URL: `tasks_console_link` points there, and the codec endpoint "
            "answers cross-origin requests from its origin only."
        ),
    )
    operators: str = Field(
        default="",
        description=(
            "Emails of the humans who may read workflow payloads through the codec endpoint "
            "(`/codec/decode`), comma-separated; empty: nobody."
        ),
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

    @model_validator(mode="after")
    def _client_cert_with_its_key(self) -> Settings:
        if (self.temporal_tls_cert is None) != (self.temporal_tls_key is None):
            raise ValueError("SERVICE_TEMPORAL_TLS_CERT and SERVICE_TEMPORAL_TLS_KEY go together")
        return self

    @property
    def rate_limits(self) -> dict[str, Rate]:
        """Every bucket's rate, from its `SERVICE_RATE_LIMIT_<BUCKET>` setting."""
        return {
            name.removeprefix("rate_limit_"): Rate.parse(getattr(self, name))
            for name in type(self).model_fields
            if name.startswith("rate_limit_") and name != "rate_limit_enabled"
        }

    @property
    def operator_emails(self) -> frozenset[str]:
        return frozenset(e.strip().lower() for e in self.operators.split(",") if e.strip())

    @property
    def payload_keyring(self) -> PayloadKeyring:
        return PayloadKeyring.parse(self.payload_keys.get_secret_value())

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
