"""One meaning of "congested": through the whole daemon, the congestion finding, /v1/congestion and
netd_port_congestion_level say the same thing about the same port at the same tick."""

from __future__ import annotations

from fastapi.testclient import TestClient

from netd.api.app import create_app
from netd.commands.run import build_daemon
from netd.config.settings import load_config

PPS = 1_000_000  # RDMA packets per second each way on mlx5_0


def test_finding_api_and_metric_agree_tick_by_tick(mlx5_host):
    root, tree = mlx5_host
    # ticks here are milliseconds apart in real time: no sustain (unit-tested in tests/detect/)
    overrides = {"sysfs_root": root, "host": "h1", "detect": {"congestion_sustain": 0.0}}
    cfg = load_config(None, environ={}, overrides=overrides)
    daemon, _ = build_daemon(cfg)
    now = [0.0]
    daemon._clock = lambda: now[0]
    client = TestClient(create_app(daemon.state, daemon.last_tick_age_s, cfg.interval))
    # CE-marked share of mlx5_0's arrivals per tick: calm, an 8 % incast for 8 s, calm again
    ce = [0.0] * 3 + [0.08] * 8 + [0.0] * 8
    totals = {"port_rcv_packets": 0, "port_xmit_packets": 0, "np_ecn_marked_roce_packets": 0}
    seen_levels, seen_findings = set(), set()
    try:
        for fraction in ce:
            totals["port_rcv_packets"] += PPS
            totals["port_xmit_packets"] += PPS
            totals["np_ecn_marked_roce_packets"] += int(fraction * PPS)
            tree.set_counters("mlx5_0", 1, totals)
            now[0] += 1.0
            daemon.tick()
            items = client.get("/v1/congestion", params={"scope": "port"}).json()["items"]
            api = {(p["labels"]["device"], p["labels"]["port"]): p["level"] for p in items}
            metrics = client.get("/metrics").text
            level = api[("mlx5_0", "1")]
            code = ("ok", "busy", "congested", "severe").index(level)
            assert f'netd_port_congestion_level{{device="mlx5_0",port="1"}} {code:.1f}' in metrics
            anomalies = client.get("/v1/anomalies").json()["active"]
            finding = [a for a in anomalies if a["kind"] == "congestion" and a["scope"]["device"] == "mlx5_0"]
            if finding:  # a finding only while the scorer says congested or worse, and at that level
                assert level in ("congested", "severe") and finding[0]["evidence"]["level"] == level
            seen_levels.add(level)
            seen_findings.add(bool(finding))
        assert {"ok", "congested"} <= seen_levels and seen_findings == {True, False}
        assert api[("mlx5_1", "1")] == "ok"
    finally:
        daemon.close()
