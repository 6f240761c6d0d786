"""The Temporal client: pydantic payloads sealed by the payload codec (infra/payload_codec.py),
tracing, and one place to read failures back.

`problem_from_failure` walks a workflow/update failure's causes to the `ApplicationError` an
activity or validator raised for a `DomainError`, and rebuilds that error for the API.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio.client import Client, Interceptor
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.exceptions import ApplicationError
from temporalio.service import TLSConfig

from infra.payload_codec import encrypting_converter
from infra.settings import Settings
from schemas.errors import DomainError

log = logging.getLogger("cairn.temporal")


async def connect(settings: Settings, *, tracing: bool = True) -> Client:
    """The client of the API, the workers and the admin commands; its workers inherit its data
    converter, so every payload either side writes is sealed with the same keyring."""
    interceptors: list[Interceptor] = [TracingInterceptor()] if tracing else []
    keyring = settings.payload_keyring
    if keyring.current_id is None:
        log.warning("SERVICE_PAYLOAD_KEYS is unset: workflow payloads reach Temporal in the clear")
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=encrypting_converter(keyring),
        interceptors=interceptors,
        tls=tls_config(settings),
        api_key=settings.temporal_api_key.get_secret_value() or None,
    )


def tls_config(settings: Settings) -> TLSConfig | bool | None:
    """TLS to the Temporal frontend: a CA, a client certificate (mTLS) and a server name from
    PEM files when any is set; the system's roots when only SERVICE_TEMPORAL_TLS is; None
    otherwise (the SDK then turns TLS on exactly when an API key is sent, as Cloud needs)."""
    ca, cert, key = settings.temporal_tls_ca, settings.temporal_tls_cert, settings.temporal_tls_key
    if ca or cert or settings.temporal_tls_server_name:
        return TLSConfig(
            server_root_ca_cert=ca.read_bytes() if ca else None,
            client_cert=cert.read_bytes() if cert else None,
            client_private_key=key.read_bytes() if key else None,
            domain=settings.temporal_tls_server_name or None,
        )
    return True if settings.temporal_tls else None


def problem_from_failure(exc: BaseException) -> DomainError | None:
    """The DomainError carried by a failure chain, if any."""
    seen: BaseException | None = exc
    for _ in range(16):
        if seen is None:
            return None
        if isinstance(seen, DomainError):
            return seen
        if isinstance(seen, ApplicationError) and seen.details:
            body = seen.details[0]
            if isinstance(body, dict) and "code" in body and "status" in body:
                return DomainError.from_problem(_as_dict(body))
        seen = seen.__cause__ or getattr(seen, "cause", None)
    return None


def _as_dict(body: dict[Any, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in body.items()}
