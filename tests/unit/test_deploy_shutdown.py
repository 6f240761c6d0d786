"""The image and the deploy files stop `cairn api` and `cairn mcp` the way the processes drain
(docs/deployment.md "Shutdown and draining"): tini is PID 1, and nothing SIGKILLs a process
before its preStop, drain delay and grace have passed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "infra" / "deploy"
DRAINING = ("api", "mcp")  # the commands that drain on SIGTERM
SHUTDOWN_ENV = ("SERVICE_SHUTDOWN_DRAIN_S", "SERVICE_SHUTDOWN_GRACE_S", "SERVICE_REQUEST_WAIT_S")


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "helm/cairn/values.yaml").read_text())
    return loaded


def _setting(name: str) -> float:
    value = Settings.model_fields[name.removeprefix("SERVICE_").lower()].default
    assert isinstance(value, float)
    return value


def _seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)s", text)
    assert match is not None, text
    return float(match[1])


def test_tini_is_pid_1_of_the_image() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"apt-get install [^\n]*\btini\b", dockerfile)
    entrypoint = re.findall(r"^ENTRYPOINT (.+)$", dockerfile, re.MULTILINE)
    assert [yaml.safe_load(line) for line in entrypoint] == [["tini", "--", "cairn"]]


def test_the_charts_shutdown_values_are_the_settings_defaults(values: dict[str, Any]) -> None:
    """The image run anywhere else (docker run, compose) stops as it does under the chart."""
    env = values["envGroups"]["shutdown"]["env"]
    assert {name: float(env[name]) for name in SHUTDOWN_ENV} == {
        name: _setting(name) for name in SHUTDOWN_ENV
    }
    # a request waiting on a workflow gets its answer before the grace runs out
    assert _setting("SERVICE_SHUTDOWN_GRACE_S") > _setting("SERVICE_REQUEST_WAIT_S")


def test_no_draining_pod_is_killed_before_it_has_drained(values: dict[str, Any]) -> None:
    env = values["envGroups"]["shutdown"]["env"]
    drain_and_grace = sum(float(env[name]) for name in SHUTDOWN_ENV[:2])
    draining = {
        name: spec for name, spec in values["components"].items() if spec["command"][0] in DRAINING
    }
    assert set(draining) == {"api", "mcp"}
    for name, spec in draining.items():
        assert "shutdown" in spec["envGroups"], name
        assert spec["terminationGracePeriodSeconds"] > spec["preStopSeconds"] + drain_and_grace
    assert values["components"]["api"]["probes"]["readiness"] == "/health/ready"
    assert values["components"]["mcp"]["probes"]["readiness"] == "/readyz"


def test_the_template_reads_the_grace_period_and_the_prestop(values: dict[str, Any]) -> None:
    template = (DEPLOY / "helm/cairn/templates/workloads.yaml").read_text()
    assert "terminationGracePeriodSeconds: {{ $spec.terminationGracePeriodSeconds" in template
    assert "{{- with $spec.preStopSeconds }}" in template
    assert 'exec: {command: ["sleep", "{{ . }}"]}' in template


def test_compose_waits_for_the_drain_before_it_kills() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    drain_and_grace = _setting("SERVICE_SHUTDOWN_DRAIN_S") + _setting("SERVICE_SHUTDOWN_GRACE_S")
    for name, service in compose["services"].items():
        if service.get("command", [None])[0] in DRAINING:
            assert _seconds(service["stop_grace_period"]) > drain_and_grace, name
