"""Turn a run's recordings into the figures a user reads: goodput, utilisation, queue, CE, CNPs, PFC.

Every figure is measured, over the run's measurement window (after ``warmup_s``):

* **goodput**: in-order payload the receivers' responders accepted (their per-QP counters);
* **utilisation** of a bottleneck port: bytes that arrived over that link at the far end (the wire
  tap at the peer's ingress) divided by the port's rate and the window;
* **queue p50/p99**: the backlog each RoCE data packet found when it reached the bottleneck queue
  (the congestion point's per-packet histogram, 2 KiB buckets, interpolated);
* **CE fraction**: CE-marked / all RoCE data packets that arrived at the receiver's port;
* **CNPs**: CNPs that arrived at the switches from the receivers (wire tap), per second;
* **convergence**: when the flows settled on a fair share of the bottleneck: the start of the final
  stretch of 0.5 s windows in which per-flow goodput has a Jain index >= 0.95 and the flows together
  fill >= 80 % of the bottleneck capacity (entered at those levels, left only below 0.9 / 70 %, so
  noise around the fixed point does not restart it); None if they never settle. A symmetric start
  (every flow at line rate, all paused alike) is fair but not converged, hence the capacity test;
  **jain**: the index of per-flow goodput from convergence (or the window start) to the end.
* **controller**: the reaction points' steps, how many came later than the cut period (each one a
  stretch in which no flow could react; a starved machine, not DCQCN), and the longest gap in ms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netd.lab.dataplane import QBUCKET_BYTES
from netd.lab.runner import RunResult, Sample

__all__ = ["JAIN_CONVERGED", "convergence_s", "jain_index", "percentile_kb", "summarize"]

JAIN_CONVERGED = 0.95
CONVERGENCE_WINDOW_S = 0.5


def jain_index(x: list[float] | np.ndarray) -> float | None:
    a = np.asarray(x, dtype=float)
    if not len(a) or not np.any(a > 0):
        return None
    return float(a.sum() ** 2 / (len(a) * (a**2).sum()))


def percentile_kb(hist: np.ndarray, q: float) -> float | None:
    """The q-th percentile (0..1) of a bucketed histogram, linear within a bucket, in KB."""
    total = hist.sum()
    if total <= 0:
        return None
    cum = np.cumsum(hist)
    i = int(np.searchsorted(cum, q * total))
    before = cum[i - 1] if i else 0
    frac = (q * total - before) / hist[i] if hist[i] else 0.0
    return round((i + frac) * QBUCKET_BYTES / 1000, 1)


def _hist_max_kb(hist: np.ndarray) -> float | None:
    nonzero = np.nonzero(hist > 0)[0]
    return None if not len(nonzero) else round((int(nonzero[-1]) + 1) * QBUCKET_BYTES / 1000, 1)


def _qdisc_delta(result: RunResult, port_id: int, key: str) -> int | None:
    a = result.start_stats["ports"][str(port_id)].get("qdisc", {})
    b = result.end_stats["ports"][str(port_id)].get("qdisc", {})
    return int(b[key]) - int(a[key]) if key in a and key in b else None


def _delta(result: RunResult, port_id: int, key: str) -> int:
    a, b = result.start_stats["ports"][str(port_id)], result.end_stats["ports"][str(port_id)]
    return int(b[key]) - int(a[key])


def _at(samples: list[Sample], t: float) -> Sample:
    return min(samples, key=lambda s: abs(s.t - t))


def _flow_rates(a: Sample, b: Sample) -> np.ndarray:
    dt = max(b.t - a.t, 1e-9)
    return (np.array(b.delivered, dtype=float) - np.array(a.delivered, dtype=float)) * 8 / dt / 1e6


def convergence_s(samples: list[Sample], flows: list[int], capacity_mbps: float) -> float | None:
    """Start of the final fair-and-full stretch (see the module docstring), seconds since the start."""
    settled_at: float | None = None
    for end in samples:
        if end.t < CONVERGENCE_WINDOW_S:
            continue
        rates = _flow_rates(_at(samples, end.t - CONVERGENCE_WINDOW_S), end)[flows]
        j = jain_index(rates) or 0.0
        fill = float(rates.sum()) / capacity_mbps if capacity_mbps else 0.0
        if settled_at is None and j >= JAIN_CONVERGED and fill >= 0.8:
            settled_at = end.t
        elif settled_at is not None and (j < 0.9 or fill < 0.7):
            settled_at = None
    return None if settled_at is None else round(settled_at, 3)


def summarize(result: RunResult) -> dict[str, Any]:
    sc, layout = result.scenario, result.state.layout
    w0, w1 = result.window
    window = max(w1 - w0, 1e-9)
    first, last = _at(result.samples, w0), result.samples[-1]
    goodput = _flow_rates(first, last)
    bottlenecks: list[dict[str, Any]] = []
    for pid in sc.focus:
        port = layout.port(pid)
        rate = sc.shape.get(pid, port.rate_mbps)
        peer = layout.port(port.peer_id)
        a = np.array(result.start_stats["ports"][str(pid)]["qhist"], dtype=float)
        b = np.array(result.end_stats["ports"][str(pid)]["qhist"], dtype=float)
        data = _delta(result, peer.id, "in_data")
        bottlenecks.append(
            {
                "port": f"{port.node.name}/{port.ifname}",
                "toward": peer.node.name,
                "rate_mbps": rate,
                "utilization": round(_delta(result, peer.id, "in_bytes") * 8 / (rate * 1e6 * window), 4),
                "queue_p50_kb": percentile_kb(b - a, 0.50),
                "queue_p99_kb": percentile_kb(b - a, 0.99),
                "queue_max_kb": _hist_max_kb(b - a),
                "drops": _qdisc_delta(result, pid, "drops"),
                "ce_fraction": round(_delta(result, peer.id, "in_ce") / data, 4) if data else None,
                "marked": _delta(result, pid, "cp_marked"),
            }
        )
    receivers = sorted({f.dst for f in result.flows})
    ce = sum(_delta(result, layout.host_port(h).id, "in_ce") for h in receivers)
    data = sum(_delta(result, layout.host_port(h).id, "in_data") for h in receivers)
    cnps = sum(_delta(result, layout.host_facing(h).id, "in_cnp") for h in receivers)
    flows = list(range(len(result.flows)))
    capacity = sum(b["rate_mbps"] for b in bottlenecks) or layout.link_mbps
    conv = convergence_s(result.samples, flows, capacity)
    fair_from = max(w0, conv or w0)
    jain = jain_index(_flow_rates(_at(result.samples, fair_from), last))
    return {
        "scenario": sc.name,
        "description": sc.description,
        "lab": layout.name,
        "window_s": [round(w0, 3), round(w1, 3)],
        "goodput_gbps": round(float(goodput.sum()) / 1000, 6),
        "utilization": round(min(b["utilization"] for b in bottlenecks), 4) if bottlenecks else None,
        "queue_p50_kb": bottlenecks[0]["queue_p50_kb"] if bottlenecks else None,
        "queue_p99_kb": bottlenecks[0]["queue_p99_kb"] if bottlenecks else None,
        "ce_fraction": round(ce / data, 4) if data else None,
        "cnps": cnps,
        "cnp_per_s": round(cnps / window, 1),
        "convergence_s": conv,
        "jain": None if jain is None else round(jain, 4),
        "capacity_mbps": capacity,
        "bottlenecks": bottlenecks,
        "flows": [
            {
                "src": f"h{f.src}",
                "dst": f"h{f.dst}",
                "label": f.label,
                "qpn": q,
                "goodput_mbps": round(float(g), 2),
                "final_rate_mbps": round(last.rc_mbps[i], 2),
            }
            for i, (f, q, g) in enumerate(zip(result.flows, result.qpns, goodput, strict=True))
        ],
        "drops": sum(_qdisc_delta(result, p.id, "drops") or 0 for p in layout.ports if p.is_switch),
        "phases": _phases(result),
        "pfc": _pfc(result),
        "hosts": _hosts(result),
        "rate_trace": _trace(result.samples),
        "controller": result.controller,
    }


def _phases(result: RunResult) -> list[dict[str, Any]]:
    """Goodput before, during and after each stuck-host period (the storm scenario)."""
    out = []
    for host, t_on, t_off in result.scenario.stuck:
        edges = [0.0, t_on, t_off, result.window[1]]
        for name, (a, b) in zip(
            ("before", "stuck", "after"), zip(edges, edges[1:], strict=False), strict=True
        ):
            if b - a < 0.1:
                continue
            rates = _flow_rates(_at(result.samples, a), _at(result.samples, b))
            out.append(
                {
                    "host": f"h{host}",
                    "phase": name,
                    "from_s": round(a, 2),
                    "to_s": round(b, 2),
                    "goodput_mbps": round(float(rates.sum()), 2),
                }
            )
    return out


def _pfc(result: RunResult) -> dict[str, Any]:
    layout = result.state.layout
    out: dict[str, Any] = {
        "xoff_sent": 0,
        "pause_frames_received": 0,
        "paused_ports": {},
        "reaction_max_ms": result.end_stats.get("pfc_event_lag_max_ms"),
    }
    for p in layout.ports:
        if not p.is_switch:
            continue
        a = result.start_stats["ports"][str(p.id)].get("pfc", {})
        b = result.end_stats["ports"][str(p.id)].get("pfc", {})
        out["xoff_sent"] += b.get("xoff_sent", 0) - a.get("xoff_sent", 0)
        out["pause_frames_received"] += b.get("pause_frames_rx", 0) - a.get("pause_frames_rx", 0)
        paused = b.get("paused_s", 0.0) - a.get("paused_s", 0.0)
        if paused > 0:
            out["paused_ports"][f"{p.node.name}/{p.ifname}"] = round(paused, 3)
    return out


def _hosts(result: RunResult) -> dict[str, dict[str, int]]:
    keys = (
        "ecn_marked_rx",
        "cnp_sent",
        "cnp_handled",
        "out_of_sequence",
        "packet_seq_err",
        "local_ack_timeout_err",
        "rx_pause",
        "rx_pause_duration_us",
        "tx_pause",
        "pause_storm_warning",
        "pacer_late_ns",
    )
    out = {}
    for h, (a, b) in enumerate(zip(result.host_start, result.host_end, strict=True)):
        delta = {k: b[k] - a[k] for k in keys if b[k] - a[k]}
        if delta:
            out[f"h{h}"] = delta
    return out


def _trace(samples: list[Sample], every_s: float = 0.25) -> dict[str, list[Any]]:
    """The reaction points' rates (Mb/s) every ``every_s``: the DCQCN rate trace."""
    ts: list[float] = []
    rates: list[list[float]] = []
    next_t = 0.0
    for s in samples:
        if s.t >= next_t:
            ts.append(round(s.t, 2))
            rates.append([round(r, 1) for r in s.rc_mbps])
            next_t = s.t + every_s
    return {"t": ts, "mbps": rates}
