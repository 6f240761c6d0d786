"""The deploy files (infra/deploy/) against the settings they feed.

Every `SERVICE_*`/`TASK_*`/`OTEL_*` variable the Compose file or the Helm values set must be a
setting of `infra/settings.py` (its env names read from the pydantic-settings model) or, for
`OTEL_*`, a variable of the OpenTelemetry SDK; every Cairn process must get each setting it
needs (no default, or a default that only suits the embedded stack); and the values each
process gets must validate as its `Settings`.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk import environment_variables as otel_sdk_env
from pydantic import AliasChoices

from infra.devstack import SEARCH_ATTRIBUTES
from infra.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "infra" / "deploy"
COMPOSE = "compose.yaml"
HELM_VALUES = "helm/cairn/values.yaml"
TEMPORAL_SETUP = "helm/cairn/files/temporal-setup.sh"
CHECKED_PREFIXES = ("SERVICE_", "TASK_", "OTEL_")

# What each kind of Cairn process reads (field names of Settings), beyond the settings with no
# default at all: the addresses and secrets whose defaults only suit `cairn dev`.
_TEMPORAL = {"temporal_address", "temporal_namespace", "temporal_task_queue", "payload_keys"}
_DATA = {
    "database_url",
    "s3_endpoint",
    "s3_bucket",
    "s3_access_key",
    "s3_secret_key",
    "secret_key",
}
NEEDS: Mapping[str, set[str]] = {
    "api": {"base_url", "api_host", *_TEMPORAL, *_DATA},
    "worker:service": {"worker_queues", *_TEMPORAL, *_DATA},
    "worker:all": {*_TEMPORAL, *_DATA},
    "worker:embeddings": {"worker_queues", "database_url", *_TEMPORAL},
    "migrate": {"database_url"},
    "mcp": {"mcp_host", "mcp_public_url", "mcp_api_url"},
}
# the processes the files must run, by kind
EXPECTED_KINDS = {"api", "worker:service", "worker:embeddings", "migrate", "mcp"}
SECRET_PLACEHOLDER = "a-placeholder-secret-of-forty-bytes-0123456"
# a secret with a format of its own gets a placeholder in that format (by variable name)
_KEYRING_PLACEHOLDER = "k1:" + "A" * 43 + "="
PLACEHOLDERS = {
    "CAIRN_PAYLOAD_KEYS": _KEYRING_PLACEHOLDER,
    "SERVICE_PAYLOAD_KEYS": _KEYRING_PLACEHOLDER,
}


def setting_env_names() -> dict[str, str]:
    """Each environment variable pydantic-settings reads for Settings → the field it fills."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    names: dict[str, str] = {}
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            choices = [choice for choice in alias.choices if isinstance(choice, str)]
        elif isinstance(alias, str):
            choices = [alias]
        else:
            choices = [prefix + name]
        for choice in choices:
            names[choice.upper()] = name
    return names


def otel_sdk_names() -> set[str]:
    return {
        value
        for value in vars(otel_sdk_env).values()
        if isinstance(value, str) and value.startswith("OTEL_")
    }


@dataclass
class Process:
    """One Cairn process (or another container) as a deploy file describes it."""

    where: str
    command: list[str]
    env: dict[str, str]
    secret_env: set[str] = field(default_factory=set)
    cairn: bool = True

    @property
    def kind(self) -> str:
        verb = self.command[0] if self.command else "api"  # the image's default command
        if verb == "worker":
            return f"worker:{self.env.get('SERVICE_WORKER_QUEUES', 'all')}"
        return verb

    @property
    def names(self) -> set[str]:
        return set(self.env) | self.secret_env


# --- reading the files -------------------------------------------------------------------------

_INTERPOLATION = re.compile(r"\$\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def _compose_value(value: object) -> str:
    """A Compose value with `${VAR:-default}` as its default and `${VAR:?error}` (a value the
    operator must give) as a placeholder."""

    def substitute(match: re.Match[str]) -> str:
        if match["op"] in (":-", "-"):
            return match["arg"]
        return PLACEHOLDERS.get(match["name"], SECRET_PLACEHOLDER)

    text = "true" if value is True else "false" if value is False else str(value)
    return _INTERPOLATION.sub(substitute, text)


def _env_mapping(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if isinstance(raw, list):  # the `- KEY=value` form
        pairs = (str(item).split("=", 1) for item in raw)
        return {pair[0]: _compose_value(pair[1] if len(pair) > 1 else "") for pair in pairs}
    assert isinstance(raw, dict), raw
    return {str(key): _compose_value(value) for key, value in raw.items()}


def compose_processes(compose: dict[str, Any]) -> Iterator[Process]:
    for name, service in compose["services"].items():
        build = service.get("build") or {}
        cairn = isinstance(build, dict) and build.get("dockerfile") == "infra/deploy/Dockerfile"
        command = service.get("command") or []
        yield Process(
            where=f"{COMPOSE}: services.{name}",
            command=[str(part) for part in command] if isinstance(command, list) else [command],
            env=_env_mapping(service.get("environment")),
            cairn=cairn,
        )


def helm_processes(values: dict[str, Any]) -> Iterator[Process]:
    groups = values["envGroups"]
    for section in ("components", "jobs"):
        for name, spec in values[section].items():
            env: dict[str, str] = {}
            secret_env: set[str] = set()
            for group_name in spec.get("envGroups", []):
                assert group_name in groups, f"{section}.{name}: no envGroups.{group_name}"
                env.update({k: str(v) for k, v in (groups[group_name].get("env") or {}).items()})
                secret_env.update(groups[group_name].get("secretEnv") or [])
            env.update({k: str(v) for k, v in (spec.get("env") or {}).items()})
            secret_env.update(spec.get("secretEnv") or [])
            yield Process(
                where=f"{HELM_VALUES}: {section}.{name}",
                command=[str(part) for part in spec.get("command") or []],
                env=env,
                secret_env=secret_env,
                cairn="script" not in spec,  # a script job runs in another image
            )


def load_processes(deploy: Path) -> list[Process]:
    compose = yaml.safe_load((deploy / COMPOSE).read_text())
    values = yaml.safe_load((deploy / HELM_VALUES).read_text())
    return [*compose_processes(compose), *helm_processes(values)]


# --- the checks (each returns its findings, so a copy with a fault can show it is caught) -------


def unknown_variables(processes: list[Process]) -> list[str]:
    settings = setting_env_names()
    otel = otel_sdk_names()
    return [
        f"{process.where}: {name} is no setting of infra/settings.py"
        for process in processes
        for name in sorted(process.names)
        if name.upper().startswith(CHECKED_PREFIXES)
        and name.upper() not in settings
        and name.upper() not in otel
    ]


def missing_settings(processes: list[Process]) -> list[str]:
    env_of_field: dict[str, set[str]] = {}
    for env_name, field_name in setting_env_names().items():
        env_of_field.setdefault(field_name, set()).add(env_name)
    no_default = {name for name, info in Settings.model_fields.items() if info.is_required()}
    findings = []
    for process in processes:
        if not process.cairn:
            continue
        if process.kind not in NEEDS:
            findings.append(f"{process.where}: unknown process kind {process.kind}")
            continue
        given = {name.upper() for name in process.names}
        for field_name in sorted(no_default | NEEDS[process.kind]):
            if not env_of_field[field_name] & given:
                findings.append(f"{process.where} ({process.kind}) lacks {field_name}")
    return findings


def invalid_values(processes: list[Process], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Settings() as each Cairn process builds it from exactly the environment it is given."""
    findings = []
    for process in processes:
        if not process.cairn:
            continue
        with monkeypatch.context() as env:
            for name in setting_env_names():
                env.delenv(name, raising=False)
            for name, value in process.env.items():
                env.setenv(name, value)
            for name in process.secret_env:
                env.setenv(name, PLACEHOLDERS.get(name, SECRET_PLACEHOLDER))
            try:
                Settings()
            except ValueError as exc:
                findings.append(f"{process.where}: {exc}")
    return findings


# --- the tests ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def processes() -> list[Process]:
    return load_processes(DEPLOY)


def test_every_variable_the_deploy_files_set_is_a_setting(processes: list[Process]) -> None:
    assert unknown_variables(processes) == []


def test_every_process_gets_the_settings_it_needs(processes: list[Process]) -> None:
    assert missing_settings(processes) == []


def test_the_values_validate_as_settings(
    processes: list[Process], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert invalid_values(processes, monkeypatch) == []


def test_both_files_run_the_whole_topology(processes: list[Process]) -> None:
    for source in (COMPOSE, HELM_VALUES):
        kinds = {p.kind for p in processes if p.cairn and p.where.startswith(source)}
        assert kinds == EXPECTED_KINDS, source
    for kind in NEEDS:  # the table names real settings
        assert NEEDS[kind] <= set(Settings.model_fields), kind


def test_the_temporal_setup_creates_every_search_attribute() -> None:
    script = (DEPLOY / TEMPORAL_SETUP).read_text()
    assert set(SEARCH_ATTRIBUTES.values()) == {"Keyword"}  # the script creates Keywords
    listed = re.search(r"for attribute in ([\w ]+); do", script)
    assert listed is not None
    assert set(listed[1].split()) == set(SEARCH_ATTRIBUTES)


def _faulty_copy(tmp_path: Path, edit: str, replacement: str) -> Path:
    copy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, copy)
    values = copy / HELM_VALUES
    text = values.read_text()
    assert edit in text
    values.write_text(text.replace(edit, replacement, 1))
    return copy


def test_a_bogus_variable_is_caught(tmp_path: Path) -> None:
    copy = _faulty_copy(
        tmp_path,
        "SERVICE_WORKER_QUEUES: service",
        "SERVICE_WORKER_QUEUES: service\n      SERVICE_WORKER_QUEUE_DEPTH: '4'",
    )
    found = unknown_variables(load_processes(copy))
    assert found == [
        f"{HELM_VALUES}: components.worker: SERVICE_WORKER_QUEUE_DEPTH is no setting of "
        "infra/settings.py"
    ]


def test_a_missing_setting_is_caught(tmp_path: Path) -> None:
    copy = _faulty_copy(tmp_path, "      - SERVICE_DATABASE_URL\n", "")
    found = missing_settings(load_processes(copy))
    assert found == [
        f"{HELM_VALUES}: components.api (api) lacks database_url",
        f"{HELM_VALUES}: components.worker (worker:service) lacks database_url",
        f"{HELM_VALUES}: jobs.migrate (migrate) lacks database_url",
    ]


def test_an_invalid_value_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = _faulty_copy(
        tmp_path, "SERVICE_WORKER_QUEUES: embeddings", "SERVICE_WORKER_QUEUES: embedding"
    )
    found = invalid_values(load_processes(copy), monkeypatch)
    assert len(found) == 1
    assert found[0].startswith(f"{HELM_VALUES}: components.embeddingWorker:")


def test_the_chart_can_turn_on_a_scrape_endpoint_per_process_and_annotate_the_pods() -> None:
    values = yaml.safe_load((DEPLOY / HELM_VALUES).read_text())
    assert values["metrics"] == {"enabled": False, "port": 9464}  # off unless asked
    template = (DEPLOY / "helm/cairn/templates/workloads.yaml").read_text()
    named = set(re.findall(r"\b(?:SERVICE|OTEL)_[A-Z_]+", template))
    assert named == {"SERVICE_METRICS_PORT"} and named <= set(setting_env_names())
    for annotation in ("prometheus.io/scrape", "prometheus.io/port", "prometheus.io/path"):
        assert annotation in template


@pytest.mark.parametrize("path", ["otel-collector.yaml", "helm/otel-collector-values.yaml"])
def test_the_collector_exports_somewhere_real(path: str) -> None:
    document = yaml.safe_load((DEPLOY / path).read_text())
    config = document.get("config", document)
    pipelines = config["service"]["pipelines"]
    assert pipelines["traces"]["exporters"] == ["otlp"]
    assert pipelines["metrics"]["exporters"] == ["prometheus"]
    assert "debug" not in config["exporters"]


def test_the_temporal_tls_files_are_mounted_where_the_settings_look() -> None:
    """The chart mounts `temporalTlsSecret` at the folder the commented SERVICE_TEMPORAL_TLS_*
    paths (and the temporal CLI's, for the setup job) name, in every pod and hook job."""
    values = (DEPLOY / HELM_VALUES).read_text()
    named = set(re.findall(r"(/etc/cairn/temporal-tls)/(?:ca|tls)\.(?:crt|key)", values))
    assert named == {"/etc/cairn/temporal-tls"}
    assert yaml.safe_load(values)["temporalTlsSecret"] == ""
    for template in ("workloads.yaml", "jobs.yaml"):
        text = (DEPLOY / "helm" / "cairn" / "templates" / template).read_text()
        assert "mountPath: /etc/cairn/temporal-tls, readOnly: true" in text, template
        assert "secretName: {{ . }}" in text and "$.Values.temporalTlsSecret" in text, template
