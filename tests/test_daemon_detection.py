"""Detection inside the daemon: ticks and fast-path samples on the emulated fabric, served by the app."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from netd.api.app import create_app
from netd.commands.run import build_daemon
from netd.config.settings import load_config
from netd.daemon.loop import Daemon
from netd.detect.fast_wait import wait_running_fast_path
from netd.detect.wiring import build_detection, fast_path_gaps
from netd.sources.collect import Sampler
from tests.driven_wait import DrivenWait


@pytest.mark.slow
def test_fast_path_in_the_daemon_on_the_emulated_fabric(tmp_path: Path) -> None:
    overrides = {
        "fabric": "emulated",
        "interval": 1.0,
        "emulator": {"state_dir": tmp_path / "emu", "sim_ms_per_tick": 5.0},
        "detect": {"fast_interval": 0.1, "fast_calm_interval": 0.0},  # fixed cadence: exact counts
    }
    cfg = load_config(None, environ={}, overrides=overrides)
    daemon, _ = build_daemon(cfg)
    try:
        assert daemon.detection is not None and daemon.detection.fast_interval_s == 0.1
        assert daemon.detection.links is None  # no netlink for emulated netdevs
        published = daemon.tick()
        for _ in range(4):  # fast samples advance the emulator by their own interval...
            daemon.fast_tick()
            # a calm sample changes no finding: the published state stays, its counts wait for the tick
            assert daemon.state() is published
        assert daemon.detection.state().fast_calm_samples == 4  # the detection's own view is current
        state = daemon.tick()  # ...and the tick by the rest
        assert daemon.emulator is not None and daemon.emulator.elapsed_s == pytest.approx(2.0)
        a = state.anomalies
        assert a is not None and a.fast_samples == 4 and a.fast_interval_s == 0.1
        # no pause on this fabric: the four samples are put aside, and so is the second tick's own
        # PFC sample; only its tick input is evaluated (the first tick evaluates both)
        assert (a.fast_calm_samples, a.evaluations) == (4, 2 + 1)
        client = TestClient(create_app(daemon.state, daemon.last_tick_age_s, cfg.interval))
        assert client.get("/v1/anomalies").json()["host"] == "emu-host0"
        assert "netd_anomaly_fast_path_samples_total 4.0" in client.get("/metrics").text
        # the loop itself takes fast samples between its ticks
        stop = threading.Event()
        loop = threading.Thread(target=daemon.run, args=(stop,))
        loop.start()
        time.sleep(2.5)
        stop.set()
        loop.join(10)
        later = daemon.state()
        assert later is not None and later.anomalies is not None
        assert later.ticks >= 3 and later.anomalies.fast_samples > 4
    finally:
        daemon.close()


@pytest.mark.parametrize("budget", [0.0, 1e-5])
def test_calm_samples_measured_by_the_daemon_stretch_to_the_budget(tmp_path: Path, budget: float) -> None:
    """The budget is judged by the loop thread's real CPU time: a real calm sample of the emulated
    host (well over 1 µs) exceeds 0.001 % of a core at 0.1 s, so the interval stretches (to half the
    tick interval at most, so that a calm sample still falls between two ticks); without a budget it
    stays at fast_calm_interval."""
    overrides = {
        "fabric": "emulated",
        "emulator": {"state_dir": tmp_path / "emu", "sim_ms_per_tick": 5.0},
        "detect": {"fast_interval": 0.05, "fast_calm_interval": 0.1, "fast_calm_cpu_budget": budget},
    }
    cfg = load_config(None, environ={}, overrides=overrides)
    daemon, _ = build_daemon(cfg)
    try:
        daemon.tick()
        for _ in range(3):
            daemon.fast_tick()
        detection = daemon.detection
        assert detection is not None and detection.state().fast_calm_samples == 3
        if budget:
            assert 0.1 < detection.fast_interval_s <= cfg.interval / 2
        else:
            assert detection.fast_interval_s == 0.1
        state = daemon.tick()
        assert state.anomalies is not None and state.anomalies.fast_interval_s == detection.fast_interval_s
    finally:
        daemon.close()


def test_build_detection_choices(mlx5_host) -> None:
    root, _ = mlx5_host
    collector = Sampler(root, ethtool_backend="files")
    try:
        base = {"sysfs_root": root}
        off = load_config(None, environ={}, overrides=base | {"detect": {"enabled": False}})
        assert build_detection(off, collector, emulated=False) is None
        no_fast = build_detection(
            load_config(None, environ={}, overrides=base | {"detect": {"fast_interval": 0}}),
            collector,
            emulated=False,
        )
        assert no_fast is not None and no_fast.fast_interval_s == 0.0
        defaults = load_config(None, environ={}, overrides=base)
        on = build_detection(defaults, collector, emulated=False)
        assert on is not None and on.fast_interval_s == defaults.detect.fast_calm_interval  # calm so far
        assert on.links is None  # a captured tree is not /sys: its netdevs are not this kernel's
        assert on.pfc_reader is not None
        got = on.pfc_reader({"ens1f0np0": ("rx_prio3_pause", "tx_prio3_pause")})
        assert set(got) == {"ens1f0np0"}  # only the wanted statistics of the wanted netdevs
        assert set(got["ens1f0np0"].stats) == {"rx_prio3_pause", "tx_prio3_pause"}
    finally:
        collector.close()


# (tick s, fast_interval, fast_calm_interval) -> the keys the daemon warns about: a sample is taken only
# when it falls at least half an interval before the next tick (wait_running_fast_path)
GAP_CASES = [
    (1.0, 0.05, 0.1, []),  # the defaults
    (1.0, 0.05, 0.66, []),
    (1.0, 0.05, 0.7, ["fast_calm_interval"]),  # calm: only the tick's own sample
    (1.0, 0.8, 0.0, ["fast_interval"]),  # a fixed cadence that never samples
    (1.0, 0.8, 0.5, ["fast_interval"]),  # calm <= fast: the fixed cadence is fast_interval's
    (10.0, 0.05, 1.0, []),  # slow ticks: a calm sample a second fits
    (0.1, 0.05, 0.1, []),  # 0.1 s ticks: every tick is the calm sample asked for
    (0.2, 0.05, 0.15, ["fast_calm_interval"]),  # 0.2 s ticks: PFC every 0.2 s, not every 0.15 s
    (0.5, 0.8, 0.0, []),  # a fixed cadence slower than the ticks: they give more than it asks
]


@pytest.mark.parametrize(("tick", "fast", "calm", "keys"), GAP_CASES)
def test_a_fast_path_that_cannot_sample_between_ticks_is_named(
    tick: float, fast: float, calm: float, keys: list[str]
) -> None:
    d = load_config(None, environ={}).detect.model_copy(
        update={"fast_interval": fast, "fast_calm_interval": calm}
    )
    problems = fast_path_gaps(d, tick)
    assert [p.split()[1] for p in problems] == keys
    # the claim, against the loop's own wait: an interval named is shorter than the tick's and takes no
    # sample before the tick; one not named takes at least one, or is no shorter than the tick's
    assert (fast < tick and _samples_between_ticks(fast, tick) == 0) == ("fast_interval" in keys)
    if calm > fast:
        assert (calm < tick and _samples_between_ticks(calm, tick) == 0) == ("fast_calm_interval" in keys)


def _samples_between_ticks(step: float, tick: float) -> int:
    now = [0.0]
    taken: list[float] = []

    wait_running_fast_path(tick, step, DrivenWait(now), lambda: now[0], lambda: taken.append(now[0]))
    return len(taken)


def test_the_daemon_warns_of_a_fast_path_without_samples(mlx5_host, caplog: pytest.LogCaptureFixture) -> None:
    root, _ = mlx5_host
    collector = Sampler(root, ethtool_backend="files")
    try:
        cfg = load_config(
            None, environ={}, overrides={"sysfs_root": root, "detect": {"fast_calm_interval": 0.9}}
        )
        with caplog.at_level(logging.WARNING, logger="netd.anomalies"):
            assert build_detection(cfg, collector, emulated=False) is not None
        assert "[detect] fast_calm_interval = 0.9 s takes no fast-path sample" in caplog.text
    finally:
        collector.close()


def test_a_daemon_without_detection_publishes_none(mlx5_host) -> None:
    root, _ = mlx5_host
    daemon = Daemon(Sampler(root, ethtool_backend="files"), 1.0)
    try:
        assert daemon.tick().anomalies is None
        daemon.fast_tick()  # a no-op
    finally:
        daemon.close()


def test_a_slow_daemon_still_judges_its_own_ticks(mlx5_host) -> None:
    root, _ = mlx5_host
    collector = Sampler(root, ethtool_backend="files")
    try:
        slow = load_config(None, environ={}, overrides={"sysfs_root": root, "interval": 10.0})
        detection = build_detection(slow, collector, emulated=False)
        assert detection is not None and detection.cfg.max_gap == 30.0
    finally:
        collector.close()
