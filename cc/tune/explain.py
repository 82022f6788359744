"""Words and figures for the tuner's recommendations: what changes, which signals, what the model expects."""

from __future__ import annotations

import math

from cc.model import DcqcnParams, HostSignals
from cc.tune.recommendation import Change
from cc.tune.space import KNOBS, Move, knob
from cc.tune.twins import TwinResult

__all__ = ["changes", "move_names", "predicted", "ratio", "situation", "trigger"]


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
