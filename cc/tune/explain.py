"""Words and figures for the tuner's recommendations: what changes, which signals, what the model expects."""

from __future__ import annotations

import math

from cc.model import DcqcnParams, HostSignals
from cc.tune.guard import COLLECTIVE_FROM, MIN_CNPS_AT_THRESHOLD, Reading
from cc.tune.recommendation import Change
from cc.tune.space import KNOBS, Move, knob
from cc.tune.twins import TwinResult

__all__ = [
    "changes",
    "guard_relaxed",
    "guard_return",
    "move_names",
    "predicted",
    "ratio",
    "situation",
    "trigger",
]


def ratio(new: float, old: float) -> float:
    if math.isinf(new) or math.isnan(new):
        return 10.0
    return new / old if old > 0 and math.isfinite(old) else 1.0


def move_names(moves_: tuple[Move, ...]) -> str:
    return ", ".join(str(m) for m in moves_) or "pulling the point inside the safety bounds"


def changes(old: DcqcnParams, new: DcqcnParams) -> tuple[Change, ...]:
    out = []
    fields = [(k.field, k) for k in KNOBS] + [("kmax_bytes", knob("ecn_thresholds"))]
    for name, k in fields:
        a, b = float(getattr(old, name)), float(getattr(new, name))
        if a != b:
            out.append(Change(name, a, b, k.unit, k.scope, k.raising if b > a else k.lowering))
    return tuple(out)


def trigger(s: HostSignals) -> str:
    parts = [f"utilisation {s.utilization:.0%} of {s.link_gbps:g} Gb/s"]
    if s.pause_fraction > 0:
        parts.append(f"PFC-paused {s.pause_fraction:.2%} of the time")
    if s.ce_fraction > 0:
        parts.append(f"{s.ce_fraction:.2%} of received packets CE-marked")
    if s.cnp_handled_per_s > 0 or s.cnp_sent_per_s > 0:
        parts.append(f"CNPs {s.cnp_handled_per_s:.0f}/s handled, {s.cnp_sent_per_s:.0f}/s sent")
    if s.retransmits_per_s > 0:
        parts.append(f"{s.retransmits_per_s:.0f} retransmissions/s")
    return "signals: " + ", ".join(parts)


def situation(weights: dict[str, float]) -> str:
    ranked = sorted(weights.items(), key=lambda kv: -kv[1])
    return (
        "situation: "
        + ", ".join(f"{name} {w:.0%}" for name, w in ranked)
        + " (from CNPs handled per packet sent)"
    )


def predicted(results: dict[str, list[TwinResult]] | None, i: int | None) -> dict[str, dict[str, float]]:
    if results is None or i is None:
        return {}
    out: dict[str, dict[str, float]] = {}
    for name, rows in results.items():
        b, c = rows[0], rows[i + 1]
        out[name] = {
            "tail_fct_slowdown": b.objective,
            "tail_fct_slowdown_proposed": c.objective,
            "utilization": b.utilization,
            "utilization_proposed": c.utilization,
            "pause_fraction": b.pause_fraction,
            "pause_fraction_proposed": c.pause_fraction,
        }
    return out


def guard_relaxed(
    window: list[Reading],
    results: dict[str, list[TwinResult]],
    i: int,
    given_way: list[str],
    anchor: DcqcnParams,
    proposed: DcqcnParams,
) -> str:
    """Why a change that fails a twin's guard is made anyway, and what undoes it."""
    worst = max(r.density for r in window)
    fewest = min(r.packets for r in window)
    figures = "; ".join(
        f"'{name}' tail FCT slowdown {b.objective:.1f} -> {c.objective:.1f}, "
        f"utilisation {b.utilization:.0%} -> {c.utilization:.0%}"
        for name in given_way
        for b, c in ((results[name][0], results[name][i + 1]),)
    )
    back = ", ".join(f"{c.name} {c.proposed:g}" for c in changes(proposed, anchor))
    return (
        f"guard relaxed: the last {len(window)} intervals show no collective traffic (at most "
        f"{worst:.2%} of packets sent drew a CNP, below the {COLLECTIVE_FROM:.1%} where collectives "
        f"count, on at least {fewest:,.0f} packets an interval), so the model of a collective ({figures}) "
        f"does not block this change; at the first interval that shows collective traffic, or cannot "
        f"tell, the tuner moves back to the last parameters that passed that guard ({back})"
    )


def guard_return(reading: Reading, ban: int) -> str:
    """Why the tuner moves back to the last point that passed the collective guard."""
    if not reading.can_tell:
        seen = (
            f"the signals cannot tell whether collective traffic runs ({reading.packets:,.0f} packets in "
            f"the interval, fewer than the {MIN_CNPS_AT_THRESHOLD / COLLECTIVE_FROM:,.0f} needed)"
        )
    else:
        seen = (
            f"collective traffic shows again ({reading.density:.2%} of packets sent drew a CNP: "
            f"collective weight {reading.collective:.0%})"
        )
    return (
        f"guard restored: {seen}; moving back to the last parameters that passed the collective guard, "
        f"which had given way while no collective ran; it stays on for the next {ban} decisions"
    )


def utilization_waived(
    reading: Reading, results: dict[str, list[TwinResult]], i: int, names: list[str]
) -> str:
    """Why a change that lowers an elephant twin's utilisation is made anyway."""
    figures = "; ".join(
        f"'{name}' utilisation {b.utilization:.0%} -> {c.utilization:.0%}"
        for name in names
        for b, c in ((results[name][0], results[name][i + 1]),)
    )
    return (
        f"utilisation not guarded ({figures}): that model's utilisation is the recovery of its "
        f"permanent elephants, and {reading.density:.2%} of the {reading.packets:,.0f} packets sent in "
        f"the interval drew a CNP, below the {COLLECTIVE_FROM:.1%} that greedy flows held at a standing "
        "queue show; the regression check still watches this host's own utilisation after the change"
    )
