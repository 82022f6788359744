"""What the tuner reads, from what netd observes: NIC counter rates -> :class:`cc.model.observed.HostSignals`.

Per RDMA port, from :func:`netd.series.port_signals.port_signals`: utilisation is the busier
direction of the PMA data rates over the port's speed; the CE fraction, CNP rates and retransmissions
are the port's; the pause fraction is the largest receive pause fraction over the PFC priorities (the
lossless class is the one that pauses). Ports combine as in :func:`cc.model.observed.combine`. Several ticks
average into one interval (:class:`SignalWindow`), so the tuner decides on tens of seconds, not one
noisy tick.
"""

from __future__ import annotations

from collections import deque

from cc.model.observed import HostSignals, combine
from netd.series.port_signals import port_signals
from netd.series.tracker import Observation

__all__ = ["SignalWindow", "host_signals"]


def host_signals(obs: Observation) -> HostSignals | None:
    """This host's signals over one observation; None before rates exist or without a usable port."""
    if not obs.interval_s:
        return None
    per_port = []
    for view in obs.ports:
        sample = view.sample
        if not view.rates or not sample.rate_gbps:
            continue
        sig = port_signals(view, obs.netdev(sample.netdev))
        pauses = [p.rx_pause_fraction for p in sig.pfc if p.rx_pause_fraction is not None]
        per_port.append(
            HostSignals(
                interval_s=obs.interval_s,
                link_gbps=sample.rate_gbps,
                utilization=max(sig.rx_gbps or 0.0, sig.tx_gbps or 0.0) / sample.rate_gbps,
                ce_fraction=sig.ce_fraction or 0.0,
                cnp_sent_per_s=sig.cnp_sent_per_s or 0.0,
                cnp_handled_per_s=sig.cnp_handled_per_s or 0.0,
                pause_fraction=max(pauses, default=0.0),
                retransmits_per_s=sig.retransmits_per_s or 0.0,
            )
        )
    return combine(per_port) if per_port else None


class SignalWindow:
    """The last ``ticks`` observations' signals, averaged (time-weighted) into one."""

    def __init__(self, ticks: int) -> None:
        self._samples: deque[HostSignals] = deque(maxlen=max(1, ticks))

    def add(self, signals: HostSignals | None) -> None:
        if signals is not None:
            self._samples.append(signals)

    def __len__(self) -> int:
        return len(self._samples)

    def clear(self) -> None:
        self._samples.clear()

    def value(self) -> HostSignals | None:
        if not self._samples:
            return None
        total = sum(s.interval_s for s in self._samples)

        def avg(attr: str) -> float:
            return sum(getattr(s, attr) * s.interval_s for s in self._samples) / total

        return HostSignals(
            interval_s=total,
            link_gbps=self._samples[-1].link_gbps,
            utilization=avg("utilization"),
            ce_fraction=avg("ce_fraction"),
            cnp_sent_per_s=avg("cnp_sent_per_s"),
            cnp_handled_per_s=avg("cnp_handled_per_s"),
            pause_fraction=avg("pause_fraction"),
            retransmits_per_s=avg("retransmits_per_s"),
        )
