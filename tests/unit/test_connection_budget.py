"""The connection budget of the Helm chart (docs/deployment.md "Connection budget").

Every replica of every Cairn process, with the settings the chart gives it (the settings'
defaults for the rest), holds at most `infra.db.connection_budget` connections on the primary;
their sum stays under Postgres's default `max_connections` less the connections it reserves for
superusers. Temporal keeps its own Postgres (../temporal-values.yaml): nothing of it counts
here. A replica pool (`SERVICE_DATABASE_READ_URL`) counts against the replica.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_deploy_files import (
    DEPLOY,
    HELM_VALUES,
    PLACEHOLDERS,
    SECRET_PLACEHOLDER,
    Process,
    helm_processes,
)

from infra.db import connection_budget
from infra.settings import Settings

POSTGRES_MAX_CONNECTIONS = 100  # the server's default
SUPERUSER_RESERVED = 3  # superuser_reserved_connections' default: not ours to use


def settings_of(process: Process, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings() as the process builds it from exactly the environment the chart gives it."""
    with monkeypatch.context() as env:
        for name in list(Settings.model_fields):
            env.delenv(f"SERVICE_{name.upper()}", raising=False)
        for name, value in process.env.items():
            env.setenv(name, value)
        for name in process.secret_env:
            env.setenv(name, PLACEHOLDERS.get(name, SECRET_PLACEHOLDER))
        return Settings()


def chart_connections(deploy: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Each component's and job's most connections on the primary, all its replicas together."""
    values = yaml.safe_load((deploy / HELM_VALUES).read_text())
    replicas = {name: int(spec["replicas"]) for name, spec in values["components"].items()}
    found = {}
    for process in helm_processes(values):
        if not process.cairn:
            continue
        name = process.where.rsplit(".", 1)[1]
        command = process.command[0] if process.command else "api"
        per_replica = connection_budget(settings_of(process, monkeypatch), command)
        found[name] = replicas.get(name, 1) * per_replica  # a job runs once
    return found


def test_the_chart_stays_under_postgres_default_max_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = chart_connections(DEPLOY, monkeypatch)
    # api: 3 replicas x 2 processes x (6 reads + 2 messages + 2 rate) ...
    assert found == {"api": 60, "worker": 18, "embeddingWorker": 8, "mcp": 0, "migrate": 1}
    assert sum(found.values()) <= POSTGRES_MAX_CONNECTIONS - SUPERUSER_RESERVED


def test_a_larger_deployment_is_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The count follows the values: one more API replica costs its processes' pools."""
    copy = tmp_path / "deploy"
    (copy / HELM_VALUES).parent.mkdir(parents=True)
    text = (DEPLOY / HELM_VALUES).read_text()
    api = "    command: [api]\n    replicas: 3\n"
    assert api in text
    (copy / HELM_VALUES).write_text(text.replace(api, api.replace("3", "4")))
    found = chart_connections(copy, monkeypatch)
    assert found["api"] == 80
    assert sum(found.values()) > POSTGRES_MAX_CONNECTIONS - SUPERUSER_RESERVED


def test_the_budget_counts_every_pool_of_a_process() -> None:
    """The formula, pool by pool: an API process's three pools (the rate limiter's only when
    limits are on), a worker's one, migrate's one connection, none for the MCP server."""
    settings = Settings(
        api_processes=3,
        database_pool_max=7,
        database_message_pool_max=2,
        database_rate_pool_max=3,
        database_read_pool_max=50,  # on the replica: not counted
    )
    assert connection_budget(settings, "api") == 3 * (7 + 2 + 3)
    unlimited = settings.model_copy(update={"rate_limit_enabled": False})
    assert connection_budget(unlimited, "api") == 3 * (7 + 2)
    assert connection_budget(settings, "worker") == 7
    assert connection_budget(settings, "migrate") == 1
    assert connection_budget(settings, "mcp") == 0
