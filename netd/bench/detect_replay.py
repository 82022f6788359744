"""Replaying a labelled trace through the daemon's whole pipeline, on the emulation's clock.

For every host of an emulated fabric at once, as the daemon does for one: the fabric model renders
sysfs trees and ethtool captures (with the trace's faults applied), the real sources read them, the
series layer makes rates, and one :class:`~netd.detect.service.Detection` per host (fast path included)
evaluates them. Only the clock differs: time is the emulation's — a tick per emulated second,
fast-path samples in between at each host's own adaptive cadence (the fabric advances from one
event to the next) — so a long trace runs as fast as the CPU allows and latencies are
exact. Every finding is recorded with its opening and resolution time for scoring (netd.bench.detect_eval).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from netd.api.progress import Progress
from netd.bench.detect_eval import Observed
from netd.config.detect import DetectConfig
from netd.config.service import CongestionConfig
from netd.congestion.host import host_inputs, scorer_from_config
from netd.detect.findings import FindingEvent
from netd.detect.pfc import stormed_ports
from netd.detect.service import Detection, pfc_reader
from netd.emulated.fabric_host import EmulatedFabric
from netd.emulated.faults import FaultLayer
from netd.emulated.traces import Trace
from netd.series.tracker import SeriesTracker
from netd.sources.collect import Sampler

__all__ = ["EPOCH", "TraceRun", "run_trace"]

EPOCH = 1_800_000_000.0  # wall clock of emulation second 0 (only shown, never used for durations)
_EPS = 1e-9


@dataclasses.dataclass
class TraceRun:
    trace: Trace
    findings: list[Observed]
    hosts: int
    fast_samples: int
    fast_cpu_s: float
    tick_cpu_s: float
    ticks: int


def _port_index(device: str | None) -> int | None:
    return int(device.rsplit("_", 1)[1]) if device and device.startswith("mlx5_") else None


def run_trace(
    trace: Trace,
    cfg: DetectConfig,
    *,
    sim_ms_per_s: float,
    seed: int,
    tick_s: float = 1.0,
    congestion: CongestionConfig | None = None,
    progress: Progress | None = None,
) -> TraceRun:
    fast = cfg.fast_interval
    shm = Path("/dev/shm")
    parent = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    findings: dict[str, Observed] = {}
    now = [0.0]

    def listen(host: int) -> Any:
        def on_event(event: FindingEvent) -> None:
            f, s = event.finding, event.finding.scope
            if event.action == "opened":
                findings[f.id] = Observed(f.kind, host, _port_index(s.device), s.priority, s.subject, now[0])
            elif event.action == "resolved":
                findings[f.id].closed_s = now[0]
            elif event.action == "reopened":
                findings[f.id].closed_s = None

        return on_event

    with tempfile.TemporaryDirectory(prefix="netd-bench-detect-", dir=parent) as tmp:
        fabric = EmulatedFabric(
            Path(tmp), seed=seed, sim_ms_per_tick=sim_ms_per_s * tick_s, workload=trace.workload
        )
        fabric.hook = FaultLayer(trace.faults)
        hosts = range(fabric.n_hosts)
        collectors = [
            Sampler(fabric.host_root(h), ethtool_backend="files", host=fabric.host_name(h), emulated=True)
            for h in hosts
        ]
        trackers = [SeriesTracker() for _ in hosts]
        scorers = [
            scorer_from_config(congestion or CongestionConfig()) for _ in hosts
        ]  # as the daemon: score, then detect
        # Time is simulated and a replay's CPU time says nothing of a host's read: the cadence must not
        # depend on the machine running the bench, so the calm CPU budget is off here.
        paced = cfg.model_copy(update={"fast_calm_cpu_budget": 0.0})
        detections = [
            Detection(
                paced,
                fabric.host_name(h),
                pfc_reader=_reader(c) if fast > 0 else None,
                clock=lambda: now[0],
                wall=lambda: EPOCH + now[0],
                listener=listen(h),
                pfc_probe=_reader(c, recheck_names=False) if fast > 0 else None,  # as the daemon
            )
            for h, c in zip(hosts, collectors, strict=True)
        ]
        tick_cpu = 0.0
        ticks = int(trace.duration_s // tick_s)
        due = [d.fast_interval_s for d in detections]  # each host's next fast sample (its own cadence)
        try:
            for k in range(ticks):
                if progress is not None:
                    progress.update(
                        note=f"{trace.name} trace, {k * tick_s:g}/{trace.duration_s:g} emulated s"
                    )
                tick_at = (k + 1) * tick_s
                while True:
                    # the next event: a host's fast sample (the last slot before a tick is the tick's,
                    # as in the daemon's wait_running_fast_path), else the tick
                    step = [d.fast_interval_s for d in detections]
                    pending = [t for t, s in zip(due, step, strict=True) if s > 0 and t <= tick_at - s / 2]
                    at = min(pending, default=tick_at)
                    if at > now[0] + _EPS:
                        fabric.advance(at - now[0], sim_ms=sim_ms_per_s * (at - now[0]))
                        now[0] = at
                    if not pending:
                        break
                    for h, d in enumerate(detections):
                        if step[h] > 0 and abs(due[h] - at) <= _EPS:
                            d.take_fast_sample()
                            due[h] = at + d.fast_interval_s
                for c, tracker, scorer, d in zip(collectors, trackers, scorers, detections, strict=True):
                    snap = dataclasses.replace(c.collect(), monotonic=now[0], timestamp=EPOCH + now[0])
                    obs = tracker.update(snap)
                    t0 = time.thread_time()
                    inputs = host_inputs(obs, None, stormed_ports(d.state()))
                    d.on_observation(obs, scorer.update(inputs, snap.timestamp))
                    tick_cpu += time.thread_time() - t0
                due = [now[0] + d.fast_interval_s for d in detections]
        finally:
            for c in collectors:
                c.close()
            fabric.close()
    return TraceRun(
        trace,
        list(findings.values()),
        len(hosts),
        sum(d.state().fast_samples for d in detections),
        sum(d.state().fast_cpu_seconds for d in detections),
        tick_cpu,
        ticks,
    )


def _reader(c: Sampler, recheck_names: bool = True) -> Any:
    source = c.ethtool
    assert source is not None
    return pfc_reader(source, recheck_names)
