"""Loss in a lossless fabric: bursts of the counters that should stay at zero when PFC works.

Summed per port over the tick, as events per second: transport symptoms of loss (out-of-sequence
arrivals, NAK sequence errors, retransmits, local ACK timeouts, exhausted retries), receiver-side
drops (RNR NAKs, ``out_of_buffer``) and the NIC's own discards (``rx_discards_phy``, and
``rx_prio<p>_discards`` on PFC priorities, which should be impossible). At or above
``loss_min_rate`` the port has a finding; at ``loss_critical_rate``, or with any exhausted retry (a
QP went to error), it is critical. It resolves after ``loss_quiet_time`` seconds below the minimum.
The explanation names the dominant counter, because each points somewhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from netd.detect.base import PerPortDetector, port_scope
from netd.detect.findings import Candidate, Severity
from netd.detect.inputs import PortInput

__all__ = ["KIND_LOSS", "LOSS_COUNTERS", "LossDetector"]

KIND_LOSS = "loss"
# vocabulary name -> what it most likely means and the first thing to check
LOSS_COUNTERS: dict[str, str] = {
    "out_of_sequence": "packets lost on the way in: PFC not enabled end to end on this priority, or a switch "
    "dropping; check PFC/DSCP-to-priority mapping on every hop and switch drop counters",
    "seq_err": "the peer saw gaps (NAK sequence errors): packets this port sent were lost; check the "
    "switch's drops and PFC on the path",
    "implied_nak_seq_err": "responses lost (implied NAKs): check the return path's PFC and drops",
    "retransmits": "the transport retransmitted: packets or ACKs were lost; check drops on the path",
    "timeouts": "local ACK timeouts: a peer stopped answering (lost packets, a PFC storm, a dead host); "
    "check the peer's health and PFC storm findings",
    "retries_exceeded": "a QP exhausted its retries and went to error: a connection broke; check the "
    "peer and the application's errors",
    "rnr": "receiver-not-ready NAKs: the peer application does not post receives fast enough",
    "out_of_buffer": "packets dropped for lack of a posted receive WQE: the application here is slow",
}
NETDEV_LOSS = ("rx_discards_phy",)  # NIC dropped for lack of receive buffer
_NETDEV_TEXT = "the NIC dropped packets for lack of receive buffer: PFC towards this NIC is not working"


@dataclass(slots=True)
class _Burst:
    active: bool = False
    quiet_s: float = 0.0
    evidence: dict[str, Any] | None = None
    worst_rate: float = 0.0


class LossDetector(PerPortDetector[tuple[str, int], _Burst]):
    kinds: tuple[str, ...] = (KIND_LOSS,)

    @staticmethod
    def events(p: PortInput) -> dict[str, float]:
        """Loss events this tick by counter (unknown deltas — resets, first readings — left out)."""
        out = {name: d for name in LOSS_COUNTERS if (d := p.counter(name))}
        out.update({name: d for name in NETDEV_LOSS if (d := p.netdev_counters.get(name))})
        for pc in p.priorities:
            if pc.rx_discards:
                out[f"rx_prio{pc.priority}_discards"] = pc.rx_discards
        return out

    def _step(self, p: PortInput, dt: float) -> None:
        st = self._state.setdefault(p.key, _Burst())
        events = self.events(p)
        rate = sum(events.values()) / dt
        if events and rate >= self.cfg.loss_min_rate:
            st.quiet_s = 0.0
            if not st.active or rate >= st.worst_rate:
                st.worst_rate = rate
            st.active = True
            st.evidence = {
                "interval_s": round(dt, 3),
                "events_per_s": round(rate, 2),
                "deltas": events,
                "worst_events_per_s": round(st.worst_rate, 2),
            }
        elif st.active:
            st.quiet_s += dt
            if st.quiet_s >= self.cfg.loss_quiet_time:
                st.active, st.evidence, st.worst_rate = False, None, 0.0

    def _finding(self, host: str, p: PortInput, key: tuple[str, int], st: _Burst) -> Candidate | None:
        if not st.active or st.evidence is None:
            return None
        ev = dict(st.evidence, quiet_s=round(st.quiet_s, 3))
        deltas: dict[str, float] = ev["deltas"]
        dominant = max(deltas, key=lambda k: deltas[k])
        critical = st.worst_rate >= self.cfg.loss_critical_rate or "retries_exceeded" in deltas
        why = LOSS_COUNTERS.get(dominant, _NETDEV_TEXT)
        text = (
            f"{p.device}/{p.port} lost traffic in a lossless fabric: {ev['events_per_s']:.0f} events/s, "
            f"mostly {dominant} — {why}"
        )
        severity = Severity.CRITICAL if critical else Severity.WARNING
        return Candidate(KIND_LOSS, port_scope(host, p), severity, text, ev)
