"""Where metrics go, as the standard OTEL_* variables say (infra/telemetry.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from infra.telemetry import export_interval, exporting_metrics, metrics_endpoint

OTEL = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_METRICS_EXPORTER",
    "OTEL_METRIC_EXPORT_INTERVAL",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTEL:
        monkeypatch.delenv(name, raising=False)


def test_no_endpoint_no_metrics() -> None:
    assert not exporting_metrics()


def test_the_shared_endpoint_gets_the_metrics_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
    assert exporting_metrics()
    assert metrics_endpoint() == "http://collector:4318/v1/metrics"


def test_a_metrics_endpoint_is_used_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://other:9090/otlp/metrics")
    assert metrics_endpoint() == "http://other:9090/otlp/metrics"


def test_exporter_none_keeps_traces_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    assert not exporting_metrics()


def test_the_export_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    assert export_interval() == timedelta(seconds=60)
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "250")
    assert export_interval() == timedelta(milliseconds=250)
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "soon")
    assert export_interval() == timedelta(seconds=60)
