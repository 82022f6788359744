"""The text form of a scenario summary (netd/lab/summary.py builds the document)."""

from __future__ import annotations

from typing import Any

__all__ = ["render_summary"]


def render_summary(doc: dict[str, Any]) -> str:
    lines = [
        f"netd lab {doc['lab']}: {doc['scenario']} — {doc['description']}",
        f"  window {doc['window_s'][0]:.2f}-{doc['window_s'][1]:.2f} s"
        f"   goodput {doc['goodput_gbps'] * 1000:.1f} Mb/s"
        f"   CE fraction {_fmt(doc['ce_fraction'])}   CNPs {doc['cnps']} ({doc['cnp_per_s']:.0f}/s)"
        f"   convergence {_fmt(doc['convergence_s'], 's')}   Jain {_fmt(doc['jain'])}",
    ]
    for b in doc["bottlenecks"]:
        lines.append(
            f"  {b['port']} -> {b['toward']} ({b['rate_mbps']:g} Mb/s): utilisation {b['utilization']:.3f}, "
            f"queue p50 {_fmt(b['queue_p50_kb'], ' KB')} p99 {_fmt(b['queue_p99_kb'], ' KB')} "
            f"max {_fmt(b['queue_max_kb'], ' KB')}, CE {_fmt(b['ce_fraction'])}, marked {b['marked']}, "
            f"drops {_fmt(b['drops'])}"
        )
    for ph in doc["phases"]:
        lines.append(
            f"  {ph['phase']:>6} ({ph['from_s']:.1f}-{ph['to_s']:.1f} s, {ph['host']} stuck during 'stuck'): "
            f"goodput {ph['goodput_mbps']:.1f} Mb/s"
        )
    pfc = doc["pfc"]
    if pfc["xoff_sent"] or pfc["pause_frames_received"]:
        paused = ", ".join(f"{k} {v}s" for k, v in pfc["paused_ports"].items()) or "none"
        lines.append(
            f"  PFC: {pfc['xoff_sent']} XOFF sent by switches, {pfc['pause_frames_received']} pause frames "
            f"received by switches; egress paused: {paused}"
        )
    lines.append("  flows (goodput / final DCQCN rate, Mb/s):")
    for f in doc["flows"]:
        pair = f"{f['src']}->{f['dst']}"
        lines.append(f"    {pair} {f['label']:<11} {f['goodput_mbps']:7.2f} / {f['final_rate_mbps']:6.1f}")
    trace = doc["rate_trace"]
    if trace["t"]:
        lines.append("  DCQCN rate trace (Mb/s per flow):")
        for t, row in zip(trace["t"], trace["mbps"], strict=True):
            lines.append(f"    {t:5.2f}s " + " ".join(f"{r:6.1f}" for r in row))
    for host, counters in doc["hosts"].items():
        lines.append(f"  {host}: " + ", ".join(f"{k} {v}" for k, v in counters.items()))
    ctl = doc.get("controller")
    if ctl:
        lines.append(
            f"  DCQCN controller: {ctl['steps']} steps, {ctl['late_steps']} later than the cut period, "
            f"longest gap {ctl['max_gap_ms']:g} ms"
        )
    return "\n".join(lines) + "\n"


def _fmt(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:g}{unit}"
