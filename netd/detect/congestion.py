"""Congestion levels per port — ok, busy, congested, severe — with hysteresis so a level does not flap.

Congestion is reported where it happens: at the port whose *arriving* traffic the switch marks. The
signals are normalised by that traffic, so a port at line rate is not "more congested" than an idle
one with the same marking:

* CE fraction: ``np_ecn_marked_roce_packets`` / RDMA packets received;
* CNPs sent (this port as notification point) per RDMA packet received.

A port receiving fewer than ``congestion_min_rx_pps`` packets/s is ``ok`` (a handful of marked
packets is not a fraction worth judging). A level is entered at once when a signal crosses its
threshold, and left only after ``congestion_exit_ticks`` consecutive ticks below the thresholds
scaled by ``congestion_exit_ratio``. Senders see the same event as CNPs handled and pause received:
those are in the evidence, and raise their own findings only as spreading or a storm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from netd.config.detect import LEVELS
from netd.detect.base import PerPortDetector, port_scope, ratio
from netd.detect.findings import Candidate, Severity
from netd.detect.inputs import PortInput

__all__ = ["KIND_CONGESTION", "CongestionDetector", "level_of"]

KIND_CONGESTION = "congestion"
_SEVERITY = {1: Severity.INFO, 2: Severity.WARNING, 3: Severity.CRITICAL}


def level_of(value: float | None, thresholds: tuple[float, float, float], scale: float = 1.0) -> int:
    """0 ok, 1 busy, 2 congested, 3 severe: how many thresholds ``value`` reaches (a zero
    threshold is reached only by a positive value)."""
    if value is None:
        return 0
    return sum(1 for t in thresholds if value >= t * scale and value > 0)


@dataclass(slots=True)
class _PortLevel:
    level: int = 0
    below: int = 0  # consecutive ticks under the exit thresholds of the current level
    evidence: dict[str, Any] | None = None
    priority: int | None = None


class CongestionDetector(PerPortDetector[tuple[str, int], _PortLevel]):
    kinds: tuple[str, ...] = (KIND_CONGESTION,)

    def signals(self, p: PortInput, dt: float) -> dict[str, Any]:
        rx = p.counter("rx_packets")
        enough = rx is not None and rx / dt >= self.cfg.congestion_min_rx_pps
        ce = ratio(p.counter("ecn_marked"), rx) if enough else None
        cnp = ratio(p.counter("cnp_sent"), rx) if enough else None
        return {
            "interval_s": round(dt, 3),
            "rx_packets_per_s": None if rx is None else round(rx / dt, 1),
            "ce_fraction": None if ce is None else round(min(ce, 1.0), 6),
            "cnp_sent_per_packet": None if cnp is None else round(cnp, 6),
            "cnp_sent_per_s": _rate(p.counter("cnp_sent"), dt),
            "ecn_marked_per_s": _rate(p.counter("ecn_marked"), dt),
            "cnp_handled_per_s": _rate(p.counter("cnp_handled"), dt),
            "rx_pause_fraction": {
                pc.priority: round(min((pc.rx_pause_us or 0.0) / (dt * 1e6), 1.0), 4)
                for pc in p.priorities
                if pc.rx_pause_us is not None
            },
        }

    def _level(self, sig: dict[str, Any], scale: float) -> int:
        cfg = self.cfg
        return max(
            level_of(sig["ce_fraction"], cfg.congestion_ce_fraction, scale),
            level_of(sig["cnp_sent_per_packet"], cfg.congestion_cnp_per_packet, scale),
        )

    def _step(self, p: PortInput, dt: float) -> None:
        st = self._state.setdefault(p.key, _PortLevel())
        sig = self.signals(p, dt)
        raw = self._level(sig, 1.0)
        if raw >= st.level:
            st.level, st.below = raw, 0
        else:
            # Leave a level only after a run of ticks under its (lower) exit thresholds.
            exit_level = self._level(sig, self.cfg.congestion_exit_ratio)
            if exit_level < st.level:
                st.below += 1
                if st.below >= self.cfg.congestion_exit_ticks:
                    st.level, st.below = exit_level, 0
            else:
                st.below = 0
        if st.level < self.cfg.level_index(self.cfg.congestion_finding_level):
            st.evidence = None
            return
        if st.evidence is None:  # a new episode: its scope (priority) stays fixed for its life
            st.priority = _lossless_priority(p)
        if raw >= st.level or st.evidence is None:  # the evidence is that of the last tick at the level
            sig.update(level=LEVELS[st.level])
            st.evidence = sig
        st.evidence["ticks_below_exit"] = st.below

    def _finding(self, host: str, p: PortInput, key: tuple[str, int], st: _PortLevel) -> Candidate | None:
        ev = st.evidence
        if ev is None:
            return None
        text = (
            f"{p.device}/{p.port} level {LEVELS[st.level]}: {_pct(ev['ce_fraction'])} of received RoCE "
            f"packets CE-marked, {ev['cnp_sent_per_s'] or 0:.0f} CNPs/s sent — the switch queue towards "
            "this port is congested (incast or a hot receiver); first check which senders target it "
            "(CNPs handled on their hosts) and the ToR port's ECN thresholds"
        )
        scope = port_scope(host, p, st.priority)
        return Candidate(KIND_CONGESTION, scope, _SEVERITY[st.level], text, ev)


def _lossless_priority(p: PortInput) -> int | None:
    """ECN/CNP counters are per port; name the priority only when the port has exactly one PFC one."""
    return p.priorities[0].priority if len(p.priorities) == 1 else None


def _rate(delta: float | None, dt: float) -> float | None:
    return None if delta is None else round(delta / dt, 1)


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.2%}"
