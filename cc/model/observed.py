"""What a host can observe of DCQCN, as one value the tuner reads.

On a real host these come from the NIC's counters (netd turns ``rp_cnp_handled``,
``np_ecn_marked_roce_packets``, ``rx_prioN_pause_duration``, PMA data counters and retransmit
counters into rates); in the simulator, from the same quantities per host port.
:func:`cc.tune.online.signals_from_ports` builds them from two snapshots of the simulator's port
counters, so the tuner sees exactly what netd would show for the same traffic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["HostSignals", "combine"]


@dataclass(frozen=True, slots=True)
class HostSignals:
    """One interval of one host (or a fabric's ports combined). Rates are per second.

    ``utilization``: the busier direction's bytes over the link's capacity. ``ce_fraction``: CE-marked
    packets / packets received. ``pause_fraction``: share of the interval the NIC was paused (PFC
    received on the lossless priority).
    """

    interval_s: float
    link_gbps: float
    utilization: float
    ce_fraction: float
    cnp_sent_per_s: float
    cnp_handled_per_s: float
    pause_fraction: float
    retransmits_per_s: float = 0.0

    def __post_init__(self) -> None:
        if not (self.interval_s > 0 and self.link_gbps > 0):
            raise ValueError("interval_s and link_gbps must be > 0")

    @property
    def congested(self) -> bool:
        """Anything DCQCN reacts to: marks, CNPs, pauses or retransmissions."""
        return bool(
            self.ce_fraction > 0
            or self.cnp_handled_per_s > 0
            or self.pause_fraction > 0
            or self.retransmits_per_s > 0
        )

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def combine(samples: Sequence[HostSignals]) -> HostSignals:
    """Several ports (or hosts) as one: means of utilisation and rates, the worst CE and pause
    fractions (the tuner must protect the most congested port), summed retransmissions."""
    if not samples:
        raise ValueError("nothing to combine")
    return HostSignals(
        interval_s=max(s.interval_s for s in samples),
        link_gbps=float(np.mean([s.link_gbps for s in samples])),
        utilization=float(np.mean([s.utilization for s in samples])),
        ce_fraction=max(s.ce_fraction for s in samples),
        cnp_sent_per_s=float(np.mean([s.cnp_sent_per_s for s in samples])),
        cnp_handled_per_s=float(np.mean([s.cnp_handled_per_s for s in samples])),
        pause_fraction=max(s.pause_fraction for s in samples),
        retransmits_per_s=float(sum(s.retransmits_per_s for s in samples)),
    )
