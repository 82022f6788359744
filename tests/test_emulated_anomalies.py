"""On the emulated fabric (`netd run`'s default), congestion findings follow the incast phases that
land on this host's ports, and nothing else fires: the all-reduce at line rate, the incast senders and
the idle gaps stay quiet. Ground truth comes from the emulator's own schedule."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from netd.config.settings import load_config
from netd.detect.findings import FindingEvent
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


def test_congestion_follows_the_incasts_and_nothing_else_fires(tmp_path: Path) -> None:
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
    receiver_ticks = covered = 0
    try:
        for tick in range(40):
            t0 = fabric.fabric.now_us
            fabric.advance(1.0)
            now[0] += 1.0
            receivers = incast_receivers(fabric, t0, fabric.fabric.now_us)
            seen = len(events)
            state = detection.on_observation(
                tracker.update(dataclasses.replace(collector.collect(), monotonic=now[0]))
            )
            for e in events[seen:]:
                f = e.finding
                assert f.kind == "congestion", (tick, f.kind, f.explanation)
                if e.action == "opened":  # opens only in a tick that held an incast onto that port
                    assert (0, int((f.scope.device or "").rsplit("_", 1)[1])) in receivers, (tick, f.scope)
            if tick and receivers:
                receiver_ticks += len(receivers)
                active = {(0, int((f.scope.device or "").rsplit("_", 1)[1])) for f in state.active}
                covered += len(receivers & active)
    finally:
        collector.close()
        fabric.close()
    assert receiver_ticks >= 5 and any(e.action == "opened" for e in events)
    assert covered >= 0.8 * receiver_ticks, (covered, receiver_ticks)
