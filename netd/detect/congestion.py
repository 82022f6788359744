"""Congestion findings: a port the congestion scorer holds at ``congested`` (or worse) for a while.

"Congested" has one meaning in netd: the level of the port's congestion score (netd.congestion:
ECN-CE fraction received, CNPs handled per packet sent, pause fraction, loss per packet, smoothed,
with hysteresis), the same level `/v1/congestion`, `netd status` and `netd_port_congestion_level`
show. This detector does not judge counters itself; it turns a *sustained* level into a finding:

* opened when the port's level has stayed at ``congestion_finding_level`` or above for
  ``congestion_sustain`` seconds (a single incast burst that the scorer already smooths away is not an
  incident) and the level is carried by the port's arriving traffic being CE-marked (the CE fraction
  contributes at least as much as CNPs handled, pause or loss: a sender's level is carried by its
  CNPs, a victim's by pause, a lossy port's by loss, and those have their own findings); severity
  follows the level (busy info, congested warning, severe critical);
* resolved when the level falls below it (the scorer's hysteresis already keeps it from flapping).

A tick's level judges the counters of the interval that ends at the tick, so the level is held from
the *start* of the first interval judged at it: two 1 s ticks at ``congested`` are 2 s held. (Counting
from the first tick's own time needed a third tick: a whole second more for every finding.) Until the
sustain is complete the port is still congested in the one meaning: :func:`congested_ports` lets the
engine treat it so (a CNP baseline shift on it is that congestion, not a shift of its own).

Congestion is reported where it happens: at the port whose arriving traffic the switch marks.
Senders see the same event as CNPs handled and pause received: those are in the evidence, and raise
their own findings only as spreading or a storm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netd.config.detect import LEVELS, DetectConfig
from netd.detect.base import PerPortDetector, port_scope, ratio
from netd.detect.findings import Candidate, Severity
from netd.detect.inputs import DetectInput, PortCongestion, PortInput

__all__ = ["KIND_CONGESTION", "CongestionDetector", "congested_ports"]

KIND_CONGESTION = "congestion"
_LEVEL_INDEX: dict[str, int] = {name: i for i, name in enumerate(LEVELS)}
# Tick intervals jitter around the configured one (a late read lengthens one and shortens the next):
# a quarter of a tick absorbs that, and never makes a sustain of whole ticks one tick shorter.
_TICK_SLACK = 0.25
_SEVERITY = {1: Severity.INFO, 2: Severity.WARNING, 3: Severity.CRITICAL}
_SIGNAL_WORDS = {
    "ce_fraction": "of received RoCE packets CE-marked",
    "cnp_per_packet": "CNPs handled per packet sent",
    "pause_fraction": "of the time paused",
    "loss_per_packet": "loss events per packet",
}


@dataclass(slots=True)
class _PortLevel:
    level: int = 0
    since: float | None = None  # when the port reached the finding level (monotonic)
    evidence: dict[str, Any] | None = None
    priority: int | None = None


class CongestionDetector(PerPortDetector[tuple[str, int], _PortLevel]):
    kinds: tuple[str, ...] = (KIND_CONGESTION,)

    def __init__(self, cfg: DetectConfig) -> None:
        super().__init__(cfg)
        self._congestion: Mapping[tuple[str, int], PortCongestion] = {}
        self._now = 0.0

    def _tick(self, inp: DetectInput) -> None:
        self._congestion, self._now = inp.congestion, inp.monotonic
        super()._tick(inp)

    def _step(self, p: PortInput, dt: float) -> None:
        st = self._state.setdefault(p.key, _PortLevel())
        judged = self._congestion.get(p.key)
        st.level = _queued_level(judged)
        if judged is None or st.level < self.cfg.level_index(self.cfg.congestion_finding_level):
            st.since, st.evidence = None, None
            return
        if st.since is None:
            st.since = self._now - dt  # the level judges this tick's whole interval
        if self._now - st.since + _TICK_SLACK * dt < self.cfg.congestion_sustain:
            return
        if st.evidence is None:  # a new episode: its scope (priority) stays fixed for its life
            st.priority = _lossless_priority(p)
        st.evidence = _evidence(p, dt, judged, self._now - st.since)

    def _finding(self, host: str, p: PortInput, key: tuple[str, int], st: _PortLevel) -> Candidate | None:
        ev = st.evidence
        if ev is None:
            return None
        text = (
            f"{p.device}/{p.port} {LEVELS[st.level]} for {ev['sustained_s']:.0f} s "
            f"(score {ev['score']:.2f}: {_dominant(ev)}) — the switch queue towards this port is "
            "congested (incast or a hot receiver); first check which senders target it (CNPs handled "
            "on their hosts) and the ToR port's ECN thresholds"
        )
        scope = port_scope(host, p, st.priority)
        return Candidate(KIND_CONGESTION, scope, _SEVERITY[st.level], text, ev)


def congested_ports(inp: DetectInput, cfg: DetectConfig) -> set[tuple[str, int]]:
    """(device, port) of the ports the scorer holds at ``congestion_finding_level`` or above, carried by
    CE-marked arrivals, this tick: congested in the one meaning, whether or not the finding has waited
    out its sustain yet."""
    least = cfg.level_index(cfg.congestion_finding_level)
    return {key for key, judged in inp.congestion.items() if _queued_level(judged) >= least}


def _queued_level(judged: PortCongestion | None) -> int:
    """The scorer's level index when the port's arriving traffic carries it, else 0 (ok)."""
    return _LEVEL_INDEX.get(judged.level, 0) if judged is not None and _queueing(judged) else 0


def _queueing(judged: PortCongestion) -> bool:
    """The level is carried by the marks on the port's *arriving* traffic: the CE fraction contributes
    at least as much as any other signal. A sender's level is carried by the CNPs it handles, a
    victim's by pause, a lossy port's by loss: those are the receiver's finding's evidence, or the PFC
    storm, spreading and loss detectors' findings, not a second congestion finding per incast."""
    parts = judged.contributions
    ce = parts.get("ce_fraction", 0.0)
    return ce > 0 and ce >= max((v for k, v in parts.items() if k != "ce_fraction"), default=0.0)


def _evidence(p: PortInput, dt: float, judged: PortCongestion, sustained_s: float) -> dict[str, Any]:
    rx = p.counter("rx_packets")
    return {
        "level": judged.level,
        "score": round(judged.score, 4),
        "sustained_s": round(sustained_s, 3),
        "contributions": {k: round(v, 4) for k, v in judged.contributions.items()},
        "signals": {k: None if v is None else round(v, 6) for k, v in judged.signals.items()},
        "interval_s": round(dt, 3),
        "rx_packets_per_s": None if rx is None else round(rx / dt, 1),
        "ce_fraction": None if (ce := ratio(p.counter("ecn_marked"), rx)) is None else round(min(ce, 1.0), 6),
        "cnp_sent_per_s": _rate(p.counter("cnp_sent"), dt),
        "cnp_handled_per_s": _rate(p.counter("cnp_handled"), dt),
    }


def _dominant(ev: dict[str, Any]) -> str:
    """The signals that made the score, largest contribution first, in words."""
    parts = sorted(ev["contributions"].items(), key=lambda kv: -kv[1])
    words = []
    for name, _ in parts[:2]:
        value = ev["signals"].get(name)
        if value is None or name not in _SIGNAL_WORDS:
            continue
        shown = f"{value:.2%}" if name in ("ce_fraction", "pause_fraction") else f"{value:.2g}"
        words.append(f"{shown} {_SIGNAL_WORDS[name]}")
    return ", ".join(words) or "link down"


def _lossless_priority(p: PortInput) -> int | None:
    """ECN/CNP counters are per port; name the priority only when the port has exactly one PFC one."""
    return p.priorities[0].priority if len(p.priorities) == 1 else None


def _rate(delta: float | None, dt: float) -> float | None:
    return None if delta is None else round(delta / dt, 1)
