"""A draining worker loses no task: the server answers its outstanding polls (issue 30 §2).

Without `frontend.enableCancelWorkerPollsOnShutdown` the SDK drops a stopping worker's polls,
and a task the server had just handed to one waits out its heartbeat timeout before another
worker runs it (a SIGTERM'd worker's import batch was retried 10 s later on the other one in
`tests/e2e/test_worker_shutdown.py`). The dev server every test and `cairn dev` run on turns it
on, and `cairn worker` says at start when its namespace does not.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from infra.devstack import TemporalDevServer, free_port
from workers.main import polls_complete_on_shutdown


@pytest.fixture(scope="module")
def server_without_it(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A dev server of this module's own, its last flag switching the setting back off."""
    root: Path = tmp_path_factory.mktemp("no-drain-temporal")
    off = ("--dynamic-config-value", "frontend.enableCancelWorkerPollsOnShutdown=false")
    server = TemporalDevServer(
        db_file=None, port=free_port(), ui_port=None, log_path=root / "t.log", extra_flags=off
    )
    server.start()
    yield server.address
    server.stop()


async def test_the_suites_server_completes_a_stopping_workers_polls(
    temporal_address: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = await Client.connect(temporal_address)
    with caplog.at_level(logging.WARNING, logger="cairn.worker"):
        assert await polls_complete_on_shutdown(client)
    assert not caplog.records


async def test_a_worker_says_at_start_when_its_server_would_strand_a_task(
    server_without_it: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = await Client.connect(server_without_it)
    with caplog.at_level(logging.WARNING, logger="cairn.worker"):
        assert not await polls_complete_on_shutdown(client)
    (record,) = caplog.records
    assert "frontend.enableCancelWorkerPollsOnShutdown=true" in record.getMessage()
    assert "default" in record.getMessage()  # the namespace named
