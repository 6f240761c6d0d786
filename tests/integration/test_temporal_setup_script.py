"""infra/deploy's Temporal setup script (run by Compose and the Helm hook in temporalio/admin-tools)
against the dev server, with the `temporal` CLI of the venv: it creates the namespace and every
search attribute the workflows set, and a second run changes nothing and succeeds."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client

from infra.devstack import SEARCH_ATTRIBUTES

SCRIPT = Path(__file__).resolve().parents[2] / "infra/deploy/helm/cairn/files/temporal-setup.sh"
SCRIPT_TIMEOUT_SEC = 120


async def run_setup_script(
    temporal_address: str, namespace: str, more_env: dict[str, str] | None = None
) -> str:
    """The script as the setup job runs it; `more_env` adds the CLI's own variables (TLS)."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TEMPORAL_ADDRESS": temporal_address,
        "TEMPORAL_NAMESPACE": namespace,
        **(more_env or {}),
    }
    process = await asyncio.create_subprocess_exec(
        "sh",
        str(SCRIPT),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), SCRIPT_TIMEOUT_SEC)
    assert process.returncode == 0, output.decode()
    return output.decode()


async def test_the_setup_script_creates_the_namespace_and_search_attributes(
    temporal_address: str,
) -> None:
    namespace = f"setup-{uuid.uuid4().hex[:8]}"
    await run_setup_script(temporal_address, namespace)
    again = await run_setup_script(temporal_address, namespace)  # idempotent
    for name in SEARCH_ATTRIBUTES:
        assert f"search attribute {name} exists" in again

    client = await Client.connect(temporal_address, namespace=namespace)
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    custom = {name: IndexedValueType.Name(kind) for name, kind in listed.custom_attributes.items()}
    expected = {
        name: f"INDEXED_VALUE_TYPE_{kind.upper()}" for name, kind in SEARCH_ATTRIBUTES.items()
    }
    assert {name: custom.get(name) for name in SEARCH_ATTRIBUTES} == expected
