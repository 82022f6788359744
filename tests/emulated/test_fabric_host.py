"""The emulated fabric, read through the real sources (no special path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from netd.emulated.fabric_host import EmulatedFabric, rate_text
from netd.errors import NetdError
from netd.series.tracker import SeriesTracker
from netd.sources.collect import Sampler


@pytest.fixture
def fabric(tmp_path: Path):
    fab = EmulatedFabric(tmp_path / "emu", tors=2, hosts_per_tor=2, ports_per_host=2, seed=3)
    yield fab
    fab.close()


def _observe(fabric: EmulatedFabric, host: int, ticks: int):
    collector = Sampler(fabric.host_root(host), emulated=True)
    tracker = SeriesTracker()
    try:
        observations = []
        for i in range(ticks):
            fabric.advance(1.0)
            snap = collector.collect()
            # monotonic time is the collector's; fake it so rates are per emulated second
            observations.append(tracker.update(snap.__class__(**{**_fields(snap), "monotonic": float(i)})))
        return observations
    finally:
        collector.close()


def _fields(snap):
    return {name: getattr(snap, name) for name in snap.__dataclass_fields__}


def test_every_host_has_an_mlx5_tree_that_the_real_sources_read(fabric: EmulatedFabric):
    for host in range(fabric.n_hosts):
        collector = Sampler(fabric.host_root(host), emulated=True)
        snap = collector.collect()
        collector.close()
        assert [(p.device, p.port, p.netdev, p.driver) for p in snap.ports] == [
            ("mlx5_0", 1, "ens1f0np0", "mlx5"),
            ("mlx5_1", 1, "ens1f1np1", "mlx5"),
        ]
        assert all(s.ok for s in snap.sources)
        assert set(snap.ethtool) == {"ens1f0np0", "ens1f1np1"}
        assert snap.ports[0].rate_gbps == 200.0


def test_counters_follow_dcqcn_invariants(fabric: EmulatedFabric):
    observations = _observe(fabric, 0, 12)
    moved = {"rx_bytes": 0.0, "ecn_marked": 0.0, "cnp_sent": 0.0, "cnp_handled": 0.0}
    for obs in observations[1:]:
        for view in obs.ports:
            for name in moved:
                rate = view.rate(name)
                assert rate is not None and rate >= 0
                moved[name] += rate
            # a notification point sends at most one CNP per marked packet
            assert view.rate("cnp_sent") <= view.rate("ecn_marked")
            # no more bytes than the link carries in a second (200 Gb/s = 25 GB/s)
            assert view.rate("rx_bytes") <= 25e9 * 1.001
            nd = obs.netdevs[view.sample.netdev]
            assert nd.rates["rx_prio3_pause_duration"] <= 1e6  # µs paused per second
            assert not view.resets
    assert all(total > 0 for total in moved.values()), moved


def test_wall_time_scaling_carries_fractions(tmp_path: Path):
    fab = EmulatedFabric(tmp_path / "emu", tors=1, hosts_per_tor=2, ports_per_host=1, sim_ms_per_tick=10)
    try:
        deltas = fab.advance(1.0)
        words = fab._hw[(0, 0)]["port_xmit_data"]
        # 10 ms simulated per tick, scaled to 1 s of wall time: x100 (words are bytes / 4)
        assert abs(words * 4 - int(deltas.tx_bytes[0, 0]) * 100) <= 4
    finally:
        fab.close()


def test_one_emulator_per_state_dir(fabric: EmulatedFabric):
    with pytest.raises(NetdError, match="another netd is running the emulated fabric"):
        EmulatedFabric(fabric.state_dir, tors=1, hosts_per_tor=2)


def test_refuses_a_directory_it_did_not_make(tmp_path: Path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(NetdError, match="not made by netd"):
        EmulatedFabric(tmp_path)
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_restart_cleans_its_own_leftovers(tmp_path: Path):
    first = EmulatedFabric(tmp_path / "emu", tors=1, hosts_per_tor=4)
    first.close()
    second = EmulatedFabric(tmp_path / "emu", tors=1, hosts_per_tor=2)
    try:
        assert sorted(p.name for p in (tmp_path / "emu").iterdir() if p.is_dir()) == ["host0", "host1"]
        with pytest.raises(NetdError, match="out of range"):
            second.host_root(2)
    finally:
        second.close()


@pytest.mark.parametrize(
    ("gbps", "text"),
    [(400, "400 Gb/sec (4X NDR)"), (200, "200 Gb/sec (2X NDR)"), (100, "100 Gb/sec (4X EDR)")],
)
def test_rate_text(gbps, text):
    assert rate_text(gbps) == text
