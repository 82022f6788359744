"""The composition root: fabric choice, ticks, published state, and the HTTP app over it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from netd.api.app import create_app
from netd.commands.run import build_daemon, choose_fabric
from netd.config.settings import load_config
from netd.emulated.child import EmulatorProcess
from netd.emulated.fabric_host import EmulatedFabric
from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from tests.conftest import write_ethtool


def test_fabric_choice(tmp_path: Path, mlx5_host):
    root, _ = mlx5_host
    empty = tmp_path / "empty"
    empty.mkdir()
    assert choose_fabric(load_config(None, environ={}, overrides={"sysfs_root": empty})).emulated
    hw = choose_fabric(load_config(None, environ={}, overrides={"sysfs_root": root}))
    assert not hw.emulated and "mlx5_0, mlx5_1" in hw.reason
    forced = load_config(None, environ={}, overrides={"sysfs_root": root, "fabric": "emulated"})
    assert choose_fabric(forced).emulated


def test_hardware_ticks_publish_rates_and_the_app_serves_them(mlx5_host):
    root, tree = mlx5_host
    cfg = load_config(None, environ={}, overrides={"sysfs_root": root, "host": "h1"})
    daemon, choice = build_daemon(cfg)
    assert not choice.emulated and daemon.emulator is None
    clock = iter([0.0, 0.0, 10.0, 10.0, 11.0, 11.0])
    daemon._clock = lambda: next(clock)
    try:
        app = create_app(daemon.state, daemon.last_tick_age_s, cfg.interval)
        client = TestClient(app)
        assert client.get("/v1/ports").status_code == 503  # nothing published yet
        daemon.tick()
        tree.set_counters("mlx5_0", 1, {"np_cnp_sent": 500, "port_rcv_data": 1000})
        stats = dict.fromkeys(mlx5_ethtool_names((3,)), 0) | {"rx_prio3_pause": 100}
        write_ethtool(root, "ens1f0np0", stats)
        state = daemon.tick()
        assert state.ticks == 2

        doc = client.get("/v1/ports").json()
        assert doc["host"] == "h1" and doc["emulated"] is False
        port = doc["ports"][0]
        assert (port["device"], port["netdev"]) == ("mlx5_0", "ens1f0np0")
        assert port["counters"]["port_rcv_data"]["value"] == 4000  # words -> bytes
        assert port["counters"]["np_cnp_sent"]["name"] == "cnp_sent"
        assert port["ethtool"]["rx_prio3_pause"]["value"] == 100
        assert client.get("/v1/ports/mlx5_1/1").json()["device"] == "mlx5_1"
        assert client.get("/v1/ports/mlx5_9/1").status_code == 404
        metrics = client.get("/metrics").text
        assert 'netd_rdma_cnp_sent_total{device="mlx5_0",port="1"} 500.0' in metrics
        assert 'netd_pfc_pause_frames_total{direction="rx",netdev="ens1f0np0",priority="3"} 100.0' in metrics
        assert client.get("/healthz").json() == {"status": "ok"}
    finally:
        daemon.close()


def test_readyz_follows_the_age_of_the_last_tick(mlx5_host):
    root, _ = mlx5_host
    cfg = load_config(None, environ={}, overrides={"sysfs_root": root})
    daemon, _ = build_daemon(cfg)
    now = [0.0]
    daemon._clock = lambda: now[0]
    try:
        client = TestClient(create_app(daemon.state, daemon.last_tick_age_s, cfg.interval))
        assert client.get("/readyz").status_code == 503
        daemon.tick()
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["ready"] is True
        now[0] = daemon.state().observation.snapshot.monotonic + 60  # the loop is stuck
        assert client.get("/readyz").status_code == 503
    finally:
        daemon.close()


@pytest.mark.parametrize(
    ("calm_interval", "age", "ready"),
    [(5.0, 15.5, True), (5.0, 16.5, False), (0.0, 3.5, True), (0.0, 4.5, False)],
)
def test_freshness_allows_for_the_calm_cadence(mlx5_host, calm_interval: float, age: float, ready: bool):
    """/readyz and the watchdog's rule: younger than 3 of the longest tick intervals plus 1 s; while
    the host is calm, ticks are calm_interval apart (1 s ticks: 16 s with calm_interval 5, else 4 s)."""
    from netd.commands.run import tick_fresh

    root, _ = mlx5_host
    cfg = load_config(None, environ={}, overrides={"sysfs_root": root, "calm_interval": calm_interval})
    daemon, _ = build_daemon(cfg)
    now = [0.0]
    daemon._clock = lambda: now[0]
    try:
        client = TestClient(create_app(daemon.state, daemon.last_tick_age_s, daemon.longest_interval_s))
        daemon.tick()
        now[0] = daemon.state().observation.snapshot.monotonic + age
        assert (client.get("/readyz").status_code == 200) is ready
        assert tick_fresh(daemon) is ready
    finally:
        daemon.close()


def test_emulated_daemon_reads_its_own_host(tmp_path: Path):
    cfg = load_config(
        None, environ={"NETD_EMULATOR_STATE_DIR": str(tmp_path / "emu")}, overrides={"sysfs_root": tmp_path}
    )
    daemon, choice = build_daemon(cfg)
    try:
        assert choice.emulated and daemon.emulator is not None
        daemon.tick()
        state = daemon.tick()
        snap = state.observation.snapshot
        assert snap.emulated and snap.host == "emu-host0"
        assert len(snap.ports) == 2 and set(snap.ethtool) == {"ens1f0np0", "ens1f1np1"}
        assert daemon.collector.sysfs_root == tmp_path / "emu" / "host0"
    finally:
        daemon.close()


@pytest.mark.parametrize("in_process", [False, True])
def test_the_emulated_fabric_runs_where_configured(tmp_path: Path, in_process: bool):
    overrides = {"fabric": "emulated", "emulator": {"state_dir": tmp_path / "emu", "in_process": in_process}}
    daemon, _ = build_daemon(load_config(None, environ={}, overrides=overrides))
    try:
        assert isinstance(daemon.emulator, EmulatedFabric if in_process else EmulatorProcess)
        sent = [
            sum(p.counters["port_xmit_data"].value for p in daemon.tick().observation.snapshot.ports)
            for _ in range(2)
        ]
        assert sent[1] > sent[0]  # the fabric advanced between the ticks
    finally:
        daemon.close()


@pytest.mark.slow
def test_an_emulated_hosts_tree_read_directly_is_still_emulated(tmp_path: Path):
    """`netd run --sysfs-root <state>/host1` reads synthetic counters: the emulator's marker beside the tree
    says so, whatever flag started this daemon (and its host name is the emulated host's, not this VM's)."""
    fabric = EmulatedFabric(tmp_path / "emu", tors=1, hosts_per_tor=2, ports_per_host=1, seed=3)
    try:
        fabric.advance(0.05)
        cfg = load_config(None, environ={}, overrides={"sysfs_root": fabric.host_root(1)})
        daemon, choice = build_daemon(cfg)
        try:
            assert not choice.emulated and daemon.emulator is None  # no emulator of its own...
            assert daemon.collector.emulated and daemon.collector.host == "emu-host1"  # ...yet synthetic
            state = daemon.tick()
            assert state.observation.snapshot.emulated
            metrics = TestClient(create_app(daemon.state, daemon.last_tick_age_s, cfg.interval)).get(
                "/metrics"
            )
            assert "netd_fabric_emulated 1.0" in metrics.text
            assert 'emulated="true"' in metrics.text and 'host="emu-host1"' in metrics.text
        finally:
            daemon.close()
    finally:
        fabric.close()
    copy = tmp_path / "copy" / "host1"  # the same files without the marker: a captured tree, not emulated
    copy.parent.mkdir()
    (tmp_path / "emu" / "host1").rename(copy)
    daemon, _ = build_daemon(load_config(None, environ={}, overrides={"sysfs_root": copy}))
    try:
        assert not daemon.collector.emulated and daemon.collector.host != "emu-host1"
    finally:
        daemon.close()


@pytest.mark.slow
def test_a_dead_emulator_is_a_down_source_then_restarted_not_a_traceback_per_tick(tmp_path: Path, caplog):
    import logging
    import os
    import signal
    import time

    env = {"NETD_EMULATOR_STATE_DIR": str(tmp_path / "emu"), "NETD_EMULATOR_IN_PROCESS": "false"}
    daemon, _ = build_daemon(load_config(None, environ=env, overrides={"sysfs_root": tmp_path}))
    emulator = daemon.emulator
    assert isinstance(emulator, EmulatorProcess)
    try:
        up = {s.source: s.ok for s in daemon.tick().observation.snapshot.sources}
        assert up["emulator"] is True
        os.kill(emulator._proc.pid, signal.SIGKILL)
        with caplog.at_level(logging.WARNING, logger="netd.daemon.loop"):
            states = [daemon.tick() for _ in range(5)]  # no exception: the tick goes on with stale trees
            for _ in range(20):
                daemon.fast_tick()
        assert all(not {s.source: s.ok for s in st.observation.snapshot.sources}["emulator"] for st in states)
        loop = [r for r in caplog.records if r.name == "netd.daemon.loop" and r.levelno >= logging.WARNING]
        assert (
            len(loop) == 1
            and "exited" in loop[0].getMessage()
            and not any(r.exc_info for r in caplog.records)
        )
        # and the failed source is a finding, once (docs/detection.md: counter_read_error)
        assert [
            r.getMessage().count("source:emulator") for r in caplog.records if r.name == "netd.anomalies"
        ] == [1]
        client = TestClient(create_app(daemon.state, daemon.last_tick_age_s, 1.0))
        assert 'netd_source_up{source="emulator"} 0.0' in client.get("/metrics").text
        time.sleep(0.6)  # the first restart waits 0.5 s
        assert {s.source: s.ok for s in daemon.tick().observation.snapshot.sources}["emulator"] is True
        assert emulator.restarts == 1
    finally:
        daemon.close()
