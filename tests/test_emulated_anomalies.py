"""On the emulated fabric (`netd run`'s default), congestion findings follow the incast phases that
land on this host's ports, and nothing else fires: the all-reduce at line rate, the incast senders and
the idle gaps stay quiet. Ground truth comes from the emulator's own schedule."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from netd.config.settings import load_config
from netd.congestion.host import host_inputs
from netd.congestion.scorer import CongestionScorer
from netd.detect.findings import FindingEvent
from netd.detect.pfc import stormed_ports
from netd.detect.service import Detection
from netd.emulated.fabric_host import EmulatedFabric
from netd.series.tracker import SeriesTracker
from netd.sources.collect import Sampler


def incast_receivers(fabric: EmulatedFabric, t0_us: float, t1_us: float) -> set[tuple[int, int]]:
    """Host-0 ports that were the target of an incast phase in [t0, t1)."""
    out: set[tuple[int, int]] = set()
    t = t0_us
    while t < t1_us:
        phase = fabric.fabric.workload.phase_at(t)
        if phase.name == "incast":
            out |= {f.dst for f in phase.flows if f.dst[0] == 0}
        t = phase.end_us
    return out


def test_on_the_default_fabric_findings_and_the_congestion_levels_never_disagree(tmp_path: Path) -> None:
    """Every tick: a port with an open congestion finding is one the scorer holds congested or severe
    (what /v1/congestion and netd_port_congestion_level say), and nothing but congestion ever fires on
    the healthy default fabric. (Recall on real incasts: tests/bench/test_detect.py.)"""
    fabric = EmulatedFabric(tmp_path / "emu", sim_ms_per_tick=20.0)
    collector = Sampler(fabric.host_root(0), ethtool_backend="files", host="emu-host0", emulated=True)
    events: list[FindingEvent] = []
    now = [0.0]
    detection = Detection(
        load_config(None, environ={}).detect,
        "emu-host0",
        clock=lambda: now[0],
        wall=lambda: 1e9 + now[0],
        listener=events.append,
    )
    tracker = SeriesTracker()
    scorer = CongestionScorer()  # as the daemon: score the tick, then detect on the scorer's levels
    incast_ticks = 0
    try:
        for _ in range(40):
            t0 = fabric.fabric.now_us
            fabric.advance(1.0)
            now[0] += 1.0
            incast_ticks += bool(incast_receivers(fabric, t0, fabric.fabric.now_us))
            obs = tracker.update(dataclasses.replace(collector.collect(), monotonic=now[0]))
            report = scorer.update(host_inputs(obs, None, stormed_ports(detection.state())), now[0])
            state = detection.on_observation(obs, report)
            levels = {(p.labels["device"], int(p.labels["port"])): p.level for p in report.ports}
            for f in state.active:
                assert f.kind == "congestion", (f.kind, f.explanation)
                assert levels[(f.scope.device, f.scope.port)] in ("congested", "severe"), f.explanation
    finally:
        collector.close()
        fabric.close()
    assert incast_ticks >= 5  # the schedule did hold incasts onto this host
    assert {e.finding.kind for e in events} <= {"congestion"}
