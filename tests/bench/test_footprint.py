"""`netd bench footprint` end to end on a small static host, and the static host itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from netd.bench.kernel_reads import kernel_reads
from netd.bench.static_tree import StaticHost
from netd.errors import BenchError, LabError
from netd.series.tracker import SeriesTracker
from netd.sources.collect import Sampler


def test_static_host_moves_like_a_calm_fabric(tmp_path: Path) -> None:
    host = StaticHost(tmp_path / "sys", nics=2)
    sampler, tracker = Sampler(host.root, host="h"), SeriesTracker()
    try:
        assert host.ports == 4 and [d for d, _ in host.devices] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
        tracker.update(sampler.collect())
        host.advance(2.0)
        snap = sampler.collect()
        obs = tracker.update(snap)
        assert [p.netdev for p in snap.ports] == ["ens1f0np0", "ens1f1np1", "ens2f0np0", "ens2f1np1"]
        assert set(snap.ethtool) == {n for _, n in host.devices}
        assert all(s.ok for s in snap.sources) and not any(p.read_errors for p in snap.ports)
        # 100k packets/s of 4 KiB for the two emulated seconds, and no pause at all
        port = obs.ports[0]
        assert obs.interval_s is not None
        assert port.rate("rx_packets") * obs.interval_s == pytest.approx(200_000)
        assert port.total("rx_bytes") == 200_000 * 4096
        eth = obs.netdevs["ens1f0np0"]
        assert eth.totals["rx_prio3_pause"] == 0 and eth.totals["rx_prio3_packets"] == 200_000
    finally:
        sampler.close()
        host.close()


@pytest.mark.slow  # runs `netd run` for a few seconds
def test_footprint_bench_reports_a_running_daemon() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "netd",
            "bench",
            "footprint",
            "--nics",
            "1",
            "--duration",
            "3",
            "--storm-trace",
            "0",
            "--no-kernel-reads",
            "--calm-interval",
            "0",  # a tick at every interval: a 3 s window holds ticks (5 s apart once calm by default)
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    doc = json.loads(done.stdout)
    assert doc["ports"] == 2 and doc["storm_detect_median_ms"] is None and doc["kernel_reads"] is None
    assert doc["fast_path_cpu_percent"] >= 0 and doc["reference_ms"] > 0
    assert 0 < doc["open_fds"] <= 64 and doc["rss_mib"] > 0 and doc["cpu_percent"] > 0
    assert 0 <= doc["cpu_system_percent"] <= doc["cpu_percent"]
    assert doc["ticks"] >= 1 and doc["ticks_late"] >= 0 and doc["tick_mean_ms"] > 0
    assert doc["calm_interval_s"] == 0 and doc["tick_slots_passed"] == 0
    assert set(doc["targets"]) == {"cpu_percent", "open_fds", "rss_mib", "storm_detect_median_ms"}


def test_footprint_bench_refuses_bad_arguments() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "netd", "bench", "footprint", "--nics", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "netd: --nics must be at least 1, --duration at least 1 s, --storm-trace 0 or at least 60 s"
    ]


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and ip")
def test_kernel_reads_measure_a_real_netdev_and_leave_no_namespace() -> None:
    before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    doc = kernel_reads(queues=4, netdevs=2, samples=3, calm_s=0.01)
    assert doc is not None
    assert doc["statistics"] == 1 + 9 * 4  # veth: peer_ifindex, then 7 per rx and 2 per tx queue
    assert 0 < doc["fast_read_us"] and 0 < doc["tick_read_us"] and 0 < doc["whole_read_us"]
    assert 0 < doc["calm_read_us"]
    assert doc["calm_sample_ms_after_sleep"] > 0 and doc["netdevs"] == 2
    after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    assert after <= before


def test_kernel_reads_are_skipped_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert kernel_reads() is None


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and ip")
def test_a_namespace_that_cannot_be_entered_is_a_bench_error_and_is_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import netd.bench.kernel_reads as kr

    def refuse(netns: str) -> Any:
        raise LabError("setns failed: Operation not permitted")

    monkeypatch.setattr(kr, "in_netns", refuse)
    before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    with pytest.raises(BenchError, match="Operation not permitted"):
        kernel_reads(queues=2, netdevs=1, samples=1, calm_s=0.01)
    after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    assert after <= before
