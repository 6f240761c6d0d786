"""How the Temporal client is configured from settings, without a server: the TLS of each
kind of cluster (issue 31 §2), and the dev stack's payload keyring and UI codec endpoint (§1)."""

from __future__ import annotations

import stat
from pathlib import Path

from pydantic import SecretStr
from temporalio.service import TLSConfig

import cairn
from infra.devstack import TemporalDevServer
from infra.payload_codec import PayloadKeyring
from infra.settings import Settings
from infra.temporal import tls_config


def test_no_tls_setting_leaves_the_choice_to_the_sdk() -> None:
    # None: the SDK turns TLS on exactly when an API key is given (Temporal Cloud)
    assert tls_config(Settings()) is None
    assert tls_config(Settings(temporal_api_key=SecretStr("k"))) is None


def test_tls_alone_uses_the_system_roots() -> None:
    assert tls_config(Settings(temporal_tls=True)) is True


def test_pem_files_and_a_server_name_make_an_mtls_config(tmp_path: Path) -> None:
    for name in ("ca.pem", "client.pem", "client.key"):
        (tmp_path / name).write_bytes(f"-----{name}-----".encode())
    config = tls_config(
        Settings(
            temporal_tls_ca=tmp_path / "ca.pem",
            temporal_tls_cert=tmp_path / "client.pem",
            temporal_tls_key=tmp_path / "client.key",
            temporal_tls_server_name="temporal.internal",
        )
    )
    assert config == TLSConfig(
        server_root_ca_cert=b"-----ca.pem-----",
        client_cert=b"-----client.pem-----",
        client_private_key=b"-----client.key-----",
        domain="temporal.internal",
    )
    # a server name alone (a private CA already trusted by the system): TLS, that name checked
    named = tls_config(Settings(temporal_tls_server_name="temporal.internal"))
    assert named == TLSConfig(domain="temporal.internal")


def test_cairn_dev_keeps_one_payload_keyring(tmp_path: Path) -> None:
    first = cairn._payload_keys_file(tmp_path)
    assert PayloadKeyring.parse(first).current_id == "dev-1"
    assert cairn._payload_keys_file(tmp_path) == first  # kept across restarts
    mode = (tmp_path / "payload-keys").stat().st_mode
    assert stat.S_IMODE(mode) == 0o600


def test_cairn_dev_points_the_ui_at_the_codec_endpoint(tmp_path: Path) -> None:
    endpoint = cairn.codec_endpoint(Settings(base_url="http://127.0.0.1:8000/"))
    assert endpoint == "http://127.0.0.1:8000/codec"
    server = TemporalDevServer(db_file=None, ui_port=8233, codec_endpoint=endpoint)
    command = server.command()
    assert command[command.index("--ui-codec-endpoint") + 1] == endpoint
    headless = TemporalDevServer(db_file=None, ui_port=None, codec_endpoint=endpoint).command()
    assert "--headless" in headless and "--ui-codec-endpoint" not in headless
