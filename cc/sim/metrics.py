"""A run's figures, per batch row: throughput, queues, PFC, flow completion, fairness, convergence.

Definitions (every figure covers the measurement window, after any warm-up):

* ``utilization``: bytes delivered to receivers / (receiver line rate x time the receiver had
  unfinished flows towards it) — how well the links that had work were used. ``goodput_gbps``: all
  bytes delivered to receivers per second.
* queues: switch egress queue occupancy (bytes left after each step's service), pooled over the
  queues that forwarded traffic; p50/p99 from a log-spaced histogram, max exact. Also per port.
* ``pause_fraction``: PFC pause time summed over the links that carried traffic (NIC uplinks and
  switch ports) / (their number x window). ``nic_pause_fraction``: the same over NIC uplinks only —
  what a host sees in ``rx_prioN_pause_duration``.
* FCT slowdown: completion time / the same flow alone on an idle fabric, for finite flows that
  started in the window, p50/p99 overall and per size class; unfinished flows are counted apart.
* ``jain_fairness``: Jain's index over the window throughputs of the greedy ("long") flows.
* ``convergence_us`` (with a trace): time from the last long flow's start until Jain's index over
  their windowed rates first reaches 0.99 (two flows within ~20 % of each other); ``rate_cv``: mean
  coefficient of variation of each long flow's windowed rate after that start (lower = steadier).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from cc.sim.engine import Engine
from cc.sim.recorder import QUEUE_EDGES

__all__ = ["CONVERGED_JAIN", "SIZE_CLASSES", "PortStats", "RunMetrics", "run_metrics"]

CONVERGED_JAIN = 0.99

SIZE_CLASSES = (("small", 0.0, 100e3), ("medium", 100e3, 1e6), ("large", 1e6, math.inf))
"""Flow size classes for FCT slowdown, in bytes: [low, high)."""


@dataclass(frozen=True, slots=True)
class PortStats:
    link: str  # "node->node"
    priority: int
    utilization: float
    queue_p50_kb: float
    queue_p99_kb: float
    queue_max_kb: float
    pause_us: float


@dataclass(frozen=True, slots=True)
class RunMetrics:
    window_us: float
    goodput_gbps: float
    utilization: float
    queue_p50_kb: float
    queue_p99_kb: float
    queue_max_kb: float
    pause_fraction: float
    nic_pause_fraction: float
    drops_bytes: float
    fct_slowdown_p50: float
    fct_slowdown_p99: float
    fct_by_class: dict[str, dict[str, float]]  # size class -> {p50, p99, tail_mean, count}
    fct_by_tag: dict[str, dict[str, float]]  # the flows' pattern (FlowSpec.tag) -> the same
    flows_finished: int
    flows_unfinished: int
    jain_fairness: float | None
    convergence_us: float | None
    rate_cv: float | None
    ports: tuple[PortStats, ...]

    def to_dict(self, ports: bool = False) -> dict[str, Any]:
        doc = asdict(self)
        if not ports:
            doc.pop("ports")
        return doc


def _percentile(hist: np.ndarray, q: float, qmax: float) -> float:
    total = hist.sum()
    if total == 0:
        return 0.0
    index = int(np.searchsorted(np.cumsum(hist), q * total))
    upper = QUEUE_EDGES[index + 1] if index + 1 < len(QUEUE_EDGES) else QUEUE_EDGES[-1]
    return 0.0 if index == 0 else float(min(upper, qmax))


def _jain(x: np.ndarray) -> float:
    return float(x.sum() ** 2 / (len(x) * (x**2).sum())) if len(x) and (x**2).sum() > 0 else 1.0


def run_metrics(engine: Engine, row: int = 0) -> RunMetrics:
    rec, net, topo = engine.recorder, engine.net, engine.topology
    window = max(rec.measured_us, 1e-9)
    P = net.P
    downlink_keys = np.array([topo.downlink(p) * P + i for p in range(topo.n_ports) for i in range(P)])
    uplink_keys = np.array([topo.uplink(p) * P + i for p in range(topo.n_ports) for i in range(P)])
    departed = rec.departed[row]
    rx_bytes = departed[downlink_keys].reshape(topo.n_ports, P).sum(axis=1)
    busy = rec.busy_us[row]
    line = np.array([topo.port_gbps(p) for p in range(topo.n_ports)]) * 1e3 / 8  # bytes per µs
    capacity = float((line * busy).sum())
    utilization = float(rx_bytes.sum() / capacity) if capacity > 0 else 0.0

    hist, qmax = rec.queue_hist[row], rec.queue_max[row]
    switch_departed = departed[rec.switch_keys]
    busy_queues = switch_departed > 0
    pooled = hist[busy_queues].sum(axis=0)
    pooled_max = float(qmax[busy_queues].max(initial=0.0))
    ports: list[PortStats] = []
    for i in np.flatnonzero(busy_queues):
        key = int(rec.switch_keys[i])
        link = topo.links[key // P]
        ports.append(
            PortStats(
                link=f"{link.src}->{link.dst}",
                priority=net.priorities[key % P],
                utilization=float(departed[key] * 8 / (link.gbps * 1e3 * window)),
                queue_p50_kb=_percentile(hist[i], 0.5, qmax[i]) / 1e3,
                queue_p99_kb=_percentile(hist[i], 0.99, qmax[i]) / 1e3,
                queue_max_kb=float(qmax[i]) / 1e3,
                pause_us=float(rec.pause_us[row, key]),
            )
        )

    start = engine.baseline
    sent_ports = engine.port_counters()["tx_bytes"][row]
    if start is not None:
        sent_ports = sent_ports - start.ports["tx_bytes"][row]
    nic_keys = uplink_keys.reshape(topo.n_ports, P)[sent_ports > 0].ravel()
    carrying = np.concatenate((rec.switch_keys[busy_queues], nic_keys))
    pause = rec.pause_us[row]
    pause_fraction = float(pause[carrying].sum() / (len(carrying) * window)) if len(carrying) else 0.0
    nic_pause = float(pause[nic_keys].sum() / (len(nic_keys) * window)) if len(nic_keys) else 0.0

    fct = _fct(engine, row)
    jain, convergence, cv = _fairness(engine, row)
    return RunMetrics(
        window_us=window,
        goodput_gbps=float(rx_bytes.sum() * 8 / window / 1e3),
        utilization=utilization,
        queue_p50_kb=_percentile(pooled, 0.5, pooled_max) / 1e3,
        queue_p99_kb=_percentile(pooled, 0.99, pooled_max) / 1e3,
        queue_max_kb=pooled_max / 1e3,
        pause_fraction=pause_fraction,
        nic_pause_fraction=nic_pause,
        drops_bytes=float(rec.drops[row]),
        jain_fairness=jain,
        convergence_us=convergence,
        rate_cv=cv,
        ports=tuple(ports),
        **fct,
    )


def _fct(engine: Engine, row: int) -> dict[str, Any]:
    records = engine.records
    out: dict[str, Any] = {
        "fct_slowdown_p50": math.nan,
        "fct_slowdown_p99": math.nan,
        "fct_by_class": {},
        "fct_by_tag": {},
        "flows_finished": 0,
        "flows_unfinished": 0,
    }
    if records is None or not records.specs:
        return out
    start_us, stop_us = engine.recorder.start_us, engine.recorder.stop_us
    specs = records.specs
    chosen = np.array([f.finite and start_us <= f.start_us < stop_us for f in specs])
    if not chosen.any():
        return out
    sizes = np.array([f.size_bytes for f in specs])[chosen]
    starts = np.array([f.start_us for f in specs])[chosen]
    ideal = np.array(records.ideal_us)[chosen]
    finish = records.finish_us[row, : len(specs)][chosen]
    done = ~np.isnan(finish)
    slowdown = np.maximum((finish[done] - starts[done]) / ideal[done], 1.0)
    out["flows_finished"], out["flows_unfinished"] = int(done.sum()), int((~done).sum())
    if len(slowdown):
        out["fct_slowdown_p50"] = float(np.percentile(slowdown, 50))
        out["fct_slowdown_p99"] = float(np.percentile(slowdown, 99))
    groups = {
        f"class:{name}": (sizes[done] >= low) & (sizes[done] < high) for name, low, high in SIZE_CLASSES
    }
    tags = np.array([f.tag for f in specs], dtype=object)[chosen][done]
    groups |= {f"tag:{tag}": tags == tag for tag in sorted(set(tags))}
    for group, sel in groups.items():
        if sel.any():
            kind, _, name = group.partition(":")
            values = slowdown[sel]
            p95 = float(np.percentile(values, 95))
            out["fct_by_class" if kind == "class" else "fct_by_tag"][name] = {
                "p50": float(np.percentile(values, 50)),
                "p99": float(np.percentile(values, 99)),
                "tail_mean": float(values[values >= p95].mean()),  # mean of the slowest 5 %
                "count": int(sel.sum()),
            }
    return out


def _fairness(engine: Engine, row: int) -> tuple[float | None, float | None, float | None]:
    records, base = engine.records, engine.baseline
    if records is None or base is None:
        return None, None, None
    long_ids = [i for i, f in enumerate(records.specs) if not f.finite and i in base.delivered]
    if len(long_ids) < 2:
        return None, None, None
    end = engine.snapshot()
    window = max(end.now_us - base.now_us, 1e-9)
    alive = [i for i in long_ids if i in end.delivered]
    got = np.array([end.delivered[i][row] - base.delivered[i][row] for i in alive]) / window
    jain = _jain(got)
    if not engine.trace:
        return jain, None, None
    last_start = max(records.specs[i].start_us for i in long_ids)
    times, series = [], []
    for now, flow_ids, delivered in engine.trace:
        index = {int(f): c for c, f in enumerate(flow_ids) if f >= 0}
        if all(i in index for i in long_ids):
            times.append(now)
            series.append([delivered[row, index[i]] for i in long_ids])
    if len(times) < 3:
        return jain, None, None
    rates = np.diff(np.array(series), axis=0) / np.diff(np.array(times))[:, None]
    t_end = np.array(times[1:])
    after = t_end > last_start
    if not after.any():
        return jain, None, None
    steady = rates[after]
    cv = float(np.mean(steady.std(axis=0) / np.maximum(steady.mean(axis=0), 1e-9)))
    fair = np.flatnonzero(after & np.array([_jain(r) >= CONVERGED_JAIN for r in rates]))
    converged = float(t_end[fair[0]] - last_start) if len(fair) else None
    return jain, converged, cv
