"""The default emulated fabric (what a fresh `netd run` reads) shows PFC, ECN and CNPs in its first
minute, read through netd's real sources, and stays healthy: no critical finding, no storm."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from netd.config.settings import load_config
from netd.congestion.host import host_inputs
from netd.congestion.scorer import CongestionScorer
from netd.detect.findings import FindingEvent
from netd.detect.pfc import stormed_ports
from netd.detect.service import Detection
from netd.emulated.fabric_host import EmulatedFabric
from netd.emulated.hiccups import ReceiverHiccups
from netd.series.tracker import SeriesTracker
from netd.sources.collect import Sampler

PAUSE = ("rx_prio3_pause", "tx_prio3_pause", "rx_prio3_pause_duration", "tx_prio3_pause_duration")
RDMA = ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled")


def _totals(collector: Sampler) -> dict[str, int]:
    snap = collector.collect()
    out = dict.fromkeys(PAUSE + RDMA, 0)
    for sample in snap.ethtool.values():
        for name in PAUSE:
            out[name] += sample.stats.get(name, 0)
    for port in snap.ports:
        for name in RDMA:
            if name in port.counters:
                out[name] += port.counters[name].value
    return out


@pytest.mark.slow
def test_the_first_minute_of_the_default_fabric_shows_pfc_ecn_and_cnps_and_no_critical_finding(
    tmp_path: Path,
):
    """60 one-second ticks of emulated time (the emulator's clock is the wall time it is told), with the
    daemon's settings: host 0's counters, as netd's sources read them, move for PFC pause received and
    sent, ECN-marked packets and CNPs; the detectors, run on every tick as the daemon runs them, open no
    critical finding."""
    cfg = load_config(None, environ={})
    fabric = EmulatedFabric(tmp_path / "emu", sim_ms_per_tick=cfg.emulator.sim_ms_per_tick)
    collector = Sampler(fabric.host_root(0), ethtool_backend="files", host="emu-host0", emulated=True)
    events: list[FindingEvent] = []
    now = [0.0]
    detection = Detection(
        cfg.detect, "emu-host0", clock=lambda: now[0], wall=lambda: 1e9 + now[0], listener=events.append
    )
    tracker, scorer = SeriesTracker(), CongestionScorer()
    try:
        before = _totals(collector)
        for _ in range(60):
            fabric.advance(1.0)
            now[0] += 1.0
            obs = tracker.update(dataclasses.replace(collector.collect(), monotonic=now[0]))
            report = scorer.update(host_inputs(obs, None, stormed_ports(detection.state())), now[0])
            detection.on_observation(obs, report)
        after = _totals(collector)
    finally:
        collector.close()
        fabric.close()
    moved = {name: after[name] - before[name] for name in before}
    assert all(v > 0 for v in moved.values()), moved
    # brief: at most a few stalls of 10 ms each in a minute, paused well under 1% of the time
    assert moved["tx_prio3_pause_duration"] < 0.01 * 60e6 and moved["rx_prio3_pause_duration"] < 0.01 * 60e6
    critical = [e.finding for e in events if e.finding.severity.value == "critical"]
    assert not critical, [f.explanation for f in critical]
    assert not {e.finding.kind for e in events} & {"pfc_storm", "pause_storm"}


@pytest.mark.slow
def test_a_stall_never_fills_a_fast_path_sample_past_the_storm_fraction(tmp_path: Path):
    """The fast path samples pause every 50-75 ms and calls a storm at 80% of a sample paused: the
    default stalls, seen in 50 ms slices, stay at a fifth of that, on both the stalled and fed ports."""
    cfg = load_config(None, environ={})
    fabric = EmulatedFabric(tmp_path / "emu", sim_ms_per_tick=cfg.emulator.sim_ms_per_tick)
    slice_s, sim_ms = cfg.detect.fast_interval, cfg.emulator.sim_ms_per_tick * cfg.detect.fast_interval
    peak = {"rx": 0.0, "tx": 0.0}
    try:
        for _ in range(int(25 / slice_s)):  # past the first two stalls (5 s and 20 s)
            d = fabric.advance(slice_s, sim_ms=sim_ms, render=())
            for side in peak:
                paused = getattr(d, f"{side}_pause_duration_us")
                peak[side] = max(peak[side], float(np.max(paused)) / d.sim_us)
    finally:
        fabric.close()
    assert 0 < peak["tx"] < cfg.detect.pfc_pause_fraction / 2, peak
    assert 0 < peak["rx"] < cfg.detect.pfc_pause_fraction / 2, peak


def test_stalls_go_round_the_hosts_and_host_0_both_pauses_and_is_paused_first():
    h = ReceiverHiccups(4, 2, period_s=15.0, first_s=5.0, stall_s=0.01)
    stalls = [h.stall(k) for k in range(9)]
    assert [(s.host, s.port) for s in stalls] == [
        (0, 0),
        (1, 0),
        (2, 0),
        (3, 0),
        (0, 1),
        (1, 1),
        (2, 1),
        (3, 1),
        (0, 0),
    ]
    assert stalls[0].feeders == ((3, 0),) and stalls[1].feeders == ((0, 0),)
    assert [s.start_s for s in stalls[:3]] == [5.0, 20.0, 35.0] and stalls[0].end_s == pytest.approx(5.01)
    # a slice sees exactly the stalls that overlap it, including one it starts inside
    assert [s.start_s for s in h.within(5.005, 1.0)] == [5.0]
    assert h.within(6.0, 13.0) == [] and [s.start_s for s in h.within(0.0, 60.0)] == [5.0, 20.0, 35.0, 50.0]
    with pytest.raises(ValueError):
        ReceiverHiccups(4, 2, period_s=0.01, stall_s=0.01)
