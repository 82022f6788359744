"""Change points against each port's own history: a CNP rate far above what this port usually sends.

Absolute thresholds miss a port that normally sends no CNPs and now sends a few thousand a second
(an ECN threshold set too low on one switch port, a new job pattern): still below "congested", but
far outside its history. Per port, the last ``baseline_window`` tick rates of CNPs sent (this port as
notification point) form the baseline:

* centre: the median; spread: the larger of ``1.4826 x MAD`` (the normal-consistent median absolute
  deviation) and the 95th percentile's distance from the median / 1.645. A port that is mostly idle
  has MAD 0 and its bursts live in the upper tail, so a port with regular bursts gets a wide spread;
* a rate above ``median + max(baseline_z x spread, baseline_min_rate)`` for ``baseline_persist_ticks``
  consecutive ticks is a ``baseline_shift`` finding; it resolves after as many ticks back inside.

Nothing is judged before ``baseline_min_samples`` ticks. Every rate joins the history, so a lasting
change becomes the new normal as it fills the upper tail of the window.

A port the congestion scorer holds congested (:func:`netd.detect.congestion.congested_ports`: the
level a congestion finding is made of, before or after its sustain) is congestion, not a shift: its
ticks count towards no shift (an incast's receiver sends CNPs far above its history from the first
second, and without this the shift opened before the congestion finding's sustain was out, or in the
tick after the incast ended), and the engine suppresses a shift that was already open.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from netd.config.detect import DetectConfig
from netd.detect.base import PerPortDetector, port_scope
from netd.detect.congestion import congested_ports
from netd.detect.findings import Candidate, Severity
from netd.detect.inputs import DetectInput, PortInput

__all__ = ["KIND_BASELINE", "BaselineDetector", "robust_threshold"]

KIND_BASELINE = "baseline_shift"
SIGNAL = "cnp_sent"
_MAD_TO_SIGMA = 1.4826
_Z95 = 1.645


def robust_threshold(history: list[float], z: float, min_rate: float) -> tuple[float, float, float]:
    """(threshold, median, spread) of a history (unsorted)."""
    values = sorted(history)
    n = len(values)
    median = _quantile(values, 0.5)
    mad = _quantile(sorted(abs(v - median) for v in values), 0.5)
    tail = (values[min(n - 1, int(0.95 * n))] - median) / _Z95
    spread = max(_MAD_TO_SIGMA * mad, tail)
    return median + max(z * spread, min_rate), median, spread


def _quantile(sorted_values: list[float], q: float) -> float:
    n = len(sorted_values)
    mid = (n - 1) * q
    lo = int(mid)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (mid - lo)


@dataclass(slots=True)
class _Baseline:
    history: deque[float]
    over: int = 0
    under: int = 0
    active: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)
    # robust_threshold of the history as it is, with the (z, min_rate) it was computed for: two sorts
    # per port per tick otherwise, while a calm port's history (all zeros) never changes
    judged: tuple[float, float, tuple[float, float, float]] | None = None


def _judged(st: _Baseline, z: float, min_rate: float) -> tuple[float, float, float]:
    if st.judged is None or st.judged[:2] != (z, min_rate):
        st.judged = (z, min_rate, robust_threshold(list(st.history), z, min_rate))
    return st.judged[2]


class BaselineDetector(PerPortDetector[tuple[str, int], _Baseline]):
    kinds: tuple[str, ...] = (KIND_BASELINE,)

    def __init__(self, cfg: DetectConfig) -> None:
        super().__init__(cfg)
        self._congested: set[tuple[str, int]] = set()  # this tick's, from the scorer's levels

    def _tick(self, inp: DetectInput) -> None:
        self._congested = congested_ports(inp, self.cfg)
        super()._tick(inp)

    def _step(self, p: PortInput, dt: float) -> None:
        delta = p.counter(SIGNAL)
        if delta is None:
            return  # an unknown delta is no sample: neither history nor a judgement
        rate = delta / dt
        cfg = self.cfg
        st = self._state.get(p.key)
        if st is None:
            st = self._state[p.key] = _Baseline(deque(maxlen=cfg.baseline_window))
        if p.key in self._congested:
            st.over = 0  # explained by congestion; an open shift is kept (and suppressed) as it was
        elif len(st.history) >= cfg.baseline_min_samples:
            threshold, median, spread = _judged(st, cfg.baseline_z, cfg.baseline_min_rate)
            if rate > threshold:
                st.over, st.under = st.over + 1, 0
                st.evidence = {
                    "cnp_sent_per_s": round(rate, 1),
                    "baseline_median": round(median, 1),
                    "baseline_spread": round(spread, 1),
                    "threshold": round(threshold, 1),
                    "history_ticks": len(st.history),
                }
            else:
                st.over, st.under = 0, st.under + 1
            if st.over >= cfg.baseline_persist_ticks:
                st.active = True
            elif st.active and st.under >= cfg.baseline_persist_ticks:
                st.active = False
        if not (len(st.history) == st.history.maxlen and st.history[0] == rate):
            st.judged = None  # the history's values change (a full one that drops a like value does not)
        st.history.append(rate)

    def _finding(self, host: str, p: PortInput, key: tuple[str, int], st: _Baseline) -> Candidate | None:
        if not st.active:
            return None
        ev = st.evidence
        text = (
            f"{p.device}/{p.port} sends {ev['cnp_sent_per_s']:.0f} CNPs/s against a usual "
            f"{ev['baseline_median']:.0f}/s (threshold {ev['threshold']:.0f}/s): traffic arriving here "
            "is being ECN-marked far more than before, though below the congestion thresholds; first "
            "check a changed ECN/RED profile on the ToR port and new traffic patterns towards this port"
        )
        return Candidate(KIND_BASELINE, port_scope(host, p), Severity.WARNING, text, dict(ev))
