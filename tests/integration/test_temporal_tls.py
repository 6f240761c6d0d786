"""Temporal behind TLS (issue 31 §2), through a real TLS front: Debian's nginx terminates TLS with
`ssl_verify_client on` (mTLS) and passes gRPC on to the dev server. The certificates are made
here (a CA, the front's certificate for a name that is not the address, a client certificate).

A client without the certificate is refused; the chart's setup script creates a namespace and
the search attributes through the front with the CLI's TLS variables; the whole stack (API and
worker) on that namespace, with SERVICE_TEMPORAL_TLS_* set, runs the smoke flow (an agent
registers, writes an entry, reads it back); an API key reaches the server as `authorization`."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from actors import Actor, Actors, new_diary
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from faultstack import fault_settings, fault_stack
from pydantic import SecretStr
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client
from temporalio.service import TLSConfig
from test_temporal_setup_script import run_setup_script
from waiting import wait_until

from infra.devstack import ChildProcess, free_port, wait_for_port
from infra.settings import Settings
from infra.temporal import connect

SERVER_NAME = "temporal.cairn.test"  # on the front's certificate; the address is 127.0.0.1
NGINX_CONF = """
daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 256; }}
http {{
    log_format authorization '$http_authorization';
    access_log {root}/access.log authorization;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl http2;
        ssl_certificate {root}/front.pem;
        ssl_certificate_key {root}/front.key;
        ssl_client_certificate {root}/ca.pem;
        ssl_verify_client on;
        client_max_body_size 64m;
        location / {{
            grpc_pass grpc://{temporal};
            # a worker's long poll answers after up to a minute and more
            grpc_read_timeout 300s;
            grpc_send_timeout 300s;
        }}
    }}
}}
"""


@dataclass(frozen=True)
class TlsFront:
    address: str
    root: Path

    @property
    def ca(self) -> Path:
        return self.root / "ca.pem"

    @property
    def cert(self) -> Path:
        return self.root / "client.pem"

    @property
    def key(self) -> Path:
        return self.root / "client.key"

    def settings_of(self, settings: Settings, **more: Any) -> Settings:
        return settings.model_copy(
            update={
                "temporal_address": self.address,
                "temporal_tls_ca": self.ca,
                "temporal_tls_cert": self.cert,
                "temporal_tls_key": self.key,
                "temporal_tls_server_name": SERVER_NAME,
                **more,
            }
        )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *extensions: tuple[x509.ExtensionType, bool],
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, signer = issuer if issuer is not None else (name, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(signer, hashes.SHA256())


def write_pki(root: Path) -> None:
    """A CA, the front's certificate (for SERVER_NAME) and a client certificate, as PEM files."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate(
        "cairn test CA", ca_key, None, (x509.BasicConstraints(ca=True, path_length=0), True)
    )
    issuer = (ca.subject, ca_key)
    front_key = ec.generate_private_key(ec.SECP256R1())
    front = _certificate(
        SERVER_NAME,
        front_key,
        issuer,
        (x509.SubjectAlternativeName([x509.DNSName(SERVER_NAME)]), False),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _certificate(
        "cairn worker",
        client_key,
        issuer,
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False),
    )
    for name, cert, key in (
        ("ca", ca, ca_key),
        ("front", front, front_key),
        ("client", client, client_key),
    ):
        (root / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (root / f"{name}.key").write_bytes(_key_pem(key))
        (root / f"{name}.key").chmod(0o600)


@pytest.fixture(scope="module")
def tls_front(
    temporal_address: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TlsFront]:
    root = tmp_path_factory.mktemp("tls-front")
    write_pki(root)
    port = free_port()
    conf = root / "nginx.conf"
    conf.write_text(NGINX_CONF.format(root=root, port=port, temporal=temporal_address))
    nginx = ChildProcess("nginx", ["nginx", "-p", str(root), "-c", str(conf)], root / "nginx.out")
    nginx.start()
    try:
        wait_for_port(port, timeout=30, process=nginx.process)
        yield TlsFront(f"127.0.0.1:{port}", root)
    finally:
        nginx.stop()


@pytest.fixture(scope="module")
async def tls_namespace(tls_front: TlsFront) -> str:
    """A namespace and Cairn's search attributes, made by the chart's setup script through the
    front with the `temporal` CLI's TLS variables (as the setup job sets them)."""
    namespace = f"tls-{uuid.uuid4().hex[:8]}"
    await run_setup_script(
        tls_front.address,
        namespace,
        {
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(tls_front.ca),
            "TEMPORAL_TLS_CLIENT_CERT_PATH": str(tls_front.cert),
            "TEMPORAL_TLS_CLIENT_KEY_PATH": str(tls_front.key),
            "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME,
        },
    )
    return namespace


async def test_a_client_without_the_certificate_is_refused(tls_front: TlsFront) -> None:
    without_cert = TLSConfig(server_root_ca_cert=tls_front.ca.read_bytes(), domain=SERVER_NAME)
    with pytest.raises(RuntimeError, match="Failed client connect"):
        await Client.connect(tls_front.address, tls=without_cert)
    with pytest.raises(RuntimeError, match="Failed client connect"):
        await Client.connect(tls_front.address)  # no TLS at all
    # the same client with the certificate is let through
    with_cert = TLSConfig(
        server_root_ca_cert=tls_front.ca.read_bytes(),
        domain=SERVER_NAME,
        client_cert=tls_front.cert.read_bytes(),
        client_private_key=tls_front.key.read_bytes(),
    )
    assert await Client.connect(tls_front.address, tls=with_cert)


@pytest.fixture(scope="module")
async def tls_stack(
    database_url: str, s3: Any, tls_front: TlsFront, tls_namespace: str
) -> AsyncIterator[Any]:
    base = fault_settings(database_url, tls_front.address, s3)
    async with fault_stack(tls_front.settings_of(base, temporal_namespace=tls_namespace)) as stack:
        yield stack


async def test_the_stack_runs_its_smoke_flow_through_mtls(tls_stack: Any) -> None:
    assert tls_stack.temporal.namespace != "default"
    async with aiohttp.ClientSession(base_url=tls_stack.base_url) as http:
        agent: Actor = await Actors(tls_stack, http).agent()
        diary = await new_diary(agent)
        text = f"written through the TLS front {uuid.uuid4().hex[:8]}"
        status, entry = await agent.call(
            "POST", f"/diaries/{diary['id']}/entries", json={"content": text}
        )
        assert status == 201, entry
        status, read = await agent.call("GET", f"/entries/{entry['id']}")
        assert (status, read["content"]) == (200, text)
        async with http.get("/health/ready") as response:
            ready = await response.json()
            assert ready["checks"]["temporal"] == "ok", ready


async def test_an_api_key_reaches_the_server_as_authorization(
    database_url: str, s3: Any, tls_front: TlsFront
) -> None:
    key = f"cairn-test-key-{uuid.uuid4().hex}"
    settings = tls_front.settings_of(
        fault_settings(database_url, tls_front.address, s3), temporal_api_key=SecretStr(key)
    )
    client = await connect(settings, tracing=False)
    await client.workflow_service.get_system_info(GetSystemInfoRequest())
    log = tls_front.root / "access.log"
    await wait_until(lambda: f"Bearer {key}" in log.read_text(), what="the key in the front's log")


def test_a_client_certificate_needs_its_key() -> None:
    with pytest.raises(ValueError, match="go together"):
        Settings(temporal_tls_cert=Path("client.pem"))
