"""GET /v1/anomalies (filters, evidence, errors), the metrics, and `netd anomalies` rendering."""

from __future__ import annotations

import dataclasses
import json

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest

import netd.commands.anomalies as cmd
from netd.api.app import create_app
from netd.cli import main
from netd.commands.anomalies_table import ChangeTracker, render_anomalies
from netd.daemon.state import PublishedState
from netd.detect.engine import DetectionEngine
from netd.exporter import NetdCollector
from netd.model.snapshot import Snapshot
from netd.series.tracker import SeriesTracker
from tests.detect.helpers import HOST, busy, cfg, pfc, port, prio, stormed, tick, with_levels


def anomalies_state():
    """A storm on mlx5_0 prio 3 (active), congestion on mlx5_1 (active), loss on mlx5_1 (resolved)."""
    engine = DetectionEngine(cfg(loss_quiet_time=1.0, congestion_sustain=0.0), HOST)
    for t in (0.1, 0.2, 0.3):
        engine.evaluate(pfc(t, port(priorities=(stormed(),))))
    lossy = port("mlx5_1", counters=busy(ce=0.01) | {"out_of_sequence": 300.0}, priorities=(prio(3),))
    hot = {("mlx5_1", 1): "congested"}  # the congestion scorer's level for the port
    engine.evaluate(with_levels(tick(1.0, port(priorities=(prio(3),)), lossy), hot))
    calm = port("mlx5_1", counters=busy(ce=0.01) | {"out_of_sequence": 0.0}, priorities=(prio(3),))
    engine.evaluate(with_levels(tick(2.0, port(priorities=(prio(3),)), calm), hot))
    return engine.state()


@pytest.fixture
def client() -> TestClient:
    obs = SeriesTracker().update(Snapshot(timestamp=1e9, monotonic=1.0, host=HOST))
    state = PublishedState(observation=obs, anomalies=anomalies_state())
    return TestClient(create_app(lambda: state, lambda: 0.1, 1.0))


def test_list_and_evidence(client: TestClient) -> None:
    doc = client.get("/v1/anomalies").json()
    assert doc["host"] == HOST and doc["fast_interval_s"] == 0.0
    assert [(a["kind"], a["severity"], a["scope"]["device"]) for a in doc["active"]] == [
        ("pfc_storm", "critical", "mlx5_0"),
        ("congestion", "warning", "mlx5_1"),
    ]
    storm = doc["active"][0]
    assert storm["scope"]["priority"] == 3 and storm["evidence"]["rx_pause_fraction"] == 1.0
    assert storm["status"] == "active" and "stuck receiver" in storm["explanation"]
    (loss,) = doc["recent"]
    assert loss["kind"] == "loss" and loss["resolution"] == "cleared" and loss["first_evidence"]["deltas"]
    assert {"kind": "loss", "severity": "warning", "count": 1} in doc["totals"]
    assert "pfc_storm" in doc["kinds"]


@pytest.mark.parametrize(
    ("params", "active", "recent"),
    [
        ({"kind": "pfc_storm"}, ["pfc_storm"], []),
        ({"kind": ["loss", "congestion"]}, ["congestion"], ["loss"]),
        ({"severity": "critical"}, ["pfc_storm"], []),
        ({"device": "mlx5_1"}, ["congestion"], ["loss"]),
        ({"priority": 3}, ["pfc_storm", "congestion"], []),
        ({"status": "active"}, ["pfc_storm", "congestion"], []),
        ({"status": "resolved"}, [], ["loss"]),
        ({"since": 2e9}, [], []),
        ({"limit": 1}, ["pfc_storm"], ["loss"]),
    ],
)
def test_filters(client: TestClient, params: dict, active: list[str], recent: list[str]) -> None:
    doc = client.get("/v1/anomalies", params=params).json()
    assert [a["kind"] for a in doc["active"]] == active and [a["kind"] for a in doc["recent"]] == recent


def test_one_by_id_and_errors(client: TestClient) -> None:
    fid = client.get("/v1/anomalies").json()["active"][0]["id"]
    assert client.get(f"/v1/anomalies/{fid}").json()["kind"] == "pfc_storm"
    assert client.get("/v1/anomalies/nope").status_code == 404
    bad = client.get("/v1/anomalies", params={"kind": "gremlins"})
    assert bad.status_code == 422 and "unknown kind gremlins" in bad.json()["detail"]
    assert client.get("/v1/anomalies", params={"severity": "dire"}).status_code == 422


def test_not_ready_and_disabled() -> None:
    assert TestClient(create_app(lambda: None, lambda: None, 1.0)).get("/v1/anomalies").status_code == 503
    obs = SeriesTracker().update(Snapshot(timestamp=1e9, monotonic=1.0, host=HOST))
    off = TestClient(create_app(lambda: PublishedState(observation=obs), lambda: 0.1, 1.0)).get(
        "/v1/anomalies"
    )
    assert off.status_code == 503 and "[detect] enabled = false" in off.json()["detail"]


def test_metrics() -> None:
    obs = SeriesTracker().update(Snapshot(timestamp=1e9, monotonic=1.0, host=HOST))
    a = dataclasses.replace(anomalies_state(), fast_interval_s=0.1, fast_samples=9, fast_cpu_seconds=0.25)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NetdCollector(lambda: PublishedState(observation=obs, anomalies=a)))
    text = generate_latest(registry).decode()
    assert (
        'netd_anomaly_active{device="mlx5_0",kind="pfc_storm",netdev="mlx5_0_net",port="1",priority="3",'
        'severity="critical"} 1.0'
    ) in text
    assert 'netd_anomalies_total{kind="loss",severity="warning"} 1.0' in text
    assert 'netd_anomalies_total{kind="link_flap",severity="critical"} 0.0' in text  # every kind from 0
    assert 'kind="loss",netdev' not in text  # resolved findings are not active
    assert "netd_anomaly_fast_path_samples_total 9.0" in text
    assert "netd_anomaly_fast_path_cpu_seconds_total 0.25" in text
    assert "netd_anomaly_fast_path_interval_seconds 0.1" in text


def test_table_and_change_lines(client: TestClient) -> None:
    doc = client.get("/v1/anomalies").json()
    text = render_anomalies(doc, width=120)
    assert "ACTIVE (2)" in text and "RECENTLY RESOLVED (1)" in text and "PFC fast path off" in text
    assert all(len(line) <= 120 for line in text.splitlines())
    assert "critical pfc_storm             mlx5_0/1 prio 3" in text
    assert "\x1b[31mcritical\x1b[0m" in render_anomalies(doc, colour=True)
    quiet = render_anomalies(doc | {"active": [], "recent": [], "totals": []})
    assert "ACTIVE (0): none" in quiet
    tracker = ChangeTracker()
    first = tracker.lines(doc)
    assert [line.split()[1] for line in first] == ["ACTIVE", "ACTIVE"]
    assert tracker.lines(doc) == []
    storm = doc["active"][0]
    later = doc | {
        "active": doc["active"][1:],
        "recent": [storm | {"resolution": "cleared", "status": "resolved"}],
    }
    (resolved,) = tracker.lines(later)
    assert "RESOLVED" in resolved and "pfc_storm mlx5_0/1 prio 3" in resolved and "cleared" in resolved
    (opened,) = tracker.lines(doc)
    assert opened.split()[1] == "OPENED"


def test_cli(client: TestClient, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[dict] = []

    def fetch(listen: str, params: dict, timeout_s: float = 2.0) -> dict:
        seen.append(params)
        return client.get("/v1/anomalies", params=params).json()

    monkeypatch.setattr(cmd, "fetch_anomalies", fetch)
    assert main(["anomalies", "--kind", "pfc_storm", "--severity", "warning", "--active"]) == 0
    assert "ACTIVE (1)" in capsys.readouterr().out
    assert seen[-1] == {"status": "active", "limit": 50, "kind": ["pfc_storm"], "severity": "warning"}
    assert main(["anomalies", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["active"]) == 2


def test_cli_without_a_daemon(free_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["anomalies", "--listen", f"127.0.0.1:{free_port}"]) == 2
    assert "start it with `netd run`" in capsys.readouterr().err
