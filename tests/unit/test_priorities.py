"""The priority table (`schemas.priorities`) and fairness switched on wherever Temporal runs: the
dev server's flags and the chart's dynamic config say the same (issue 30 §5)."""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml

from infra.devstack import DRAIN_TEMPORAL_FLAGS, FAIRNESS_TEMPORAL_FLAGS, TemporalDevServer
from schemas.priorities import PRIORITY_KEYS, WorkKind, fairness_key
from workflows.common import work_priority

TEMPORAL_VALUES = (
    Path(__file__).resolve().parents[2] / "infra" / "deploy" / "helm" / "temporal-values.yaml"
)
FAIRNESS_CONFIG = {"matching.useNewMatcher": True, "matching.enableFairness": True}
DRAIN_CONFIG = {"frontend.enableCancelWorkerPollsOnShutdown": True}


def dev_server_config(flags: list[str]) -> dict[str, object]:
    """The `--dynamic-config-value name=value` pairs of a dev server's command line."""
    pairs = [flags[i + 1] for i, flag in enumerate(flags) if flag == "--dynamic-config-value"]
    return {name: yaml.safe_load(value) for name, value in (p.split("=", 1) for p in pairs)}


def test_requests_go_before_follow_ups_and_follow_ups_before_sweeps() -> None:
    ordered = [PRIORITY_KEYS[kind] for kind in (WorkKind.REQUEST, WorkKind.FOLLOW_UP)]
    assert ordered[0] < ordered[1] < PRIORITY_KEYS[WorkKind.SWEEP]
    assert set(PRIORITY_KEYS) == set(WorkKind)
    assert all(1 <= key <= 5 for key in PRIORITY_KEYS.values())  # the server's default range


def test_the_fairness_key_is_the_owning_team() -> None:
    team = uuid.uuid4()
    key = fairness_key(team)
    assert key == str(team)
    assert key is not None and len(key.encode()) <= 64  # Temporal's limit
    assert fairness_key(None) is None
    priority = work_priority(WorkKind.REQUEST, team)
    assert (priority.priority_key, priority.fairness_key) == (1, str(team))
    assert work_priority(WorkKind.SWEEP).fairness_key is None


def test_the_dev_server_runs_with_fairness() -> None:
    server = TemporalDevServer(db_file=None, port=7233, ui_port=None)
    assert dev_server_config(server.command()).items() >= FAIRNESS_CONFIG.items()
    assert dev_server_config(list(FAIRNESS_TEMPORAL_FLAGS)) == FAIRNESS_CONFIG


def test_the_dev_server_can_run_without_fairness_for_the_before_figure() -> None:
    server = TemporalDevServer(db_file=None, port=7233, ui_port=None, fairness=False)
    assert not dev_server_config(server.command()).keys() & FAIRNESS_CONFIG.keys()


def test_the_dev_server_completes_a_stopping_workers_polls_with_or_without_fairness() -> None:
    for fairness in (True, False):
        server = TemporalDevServer(db_file=None, port=7233, ui_port=None, fairness=fairness)
        assert dev_server_config(server.command()).items() >= DRAIN_CONFIG.items()
    assert dev_server_config(list(DRAIN_TEMPORAL_FLAGS)) == DRAIN_CONFIG


def test_the_charts_temporal_runs_with_the_dev_servers_fairness_and_drain() -> None:
    dynamic = yaml.safe_load(TEMPORAL_VALUES.read_text())["server"]["dynamicConfig"]
    chart = {name: [rule["value"] for rule in rules] for name, rules in dynamic.items()}
    expected = FAIRNESS_CONFIG | DRAIN_CONFIG
    assert {name: [value] for name, value in expected.items()}.items() <= chart.items()
