"""What a host can observe of DCQCN, as one value the tuner reads.

On a real host these come from the NIC's counters (netd turns ``rp_cnp_handled``,
``np_ecn_marked_roce_packets``, ``rx_prioN_pause_duration``, PMA data counters and retransmit
counters into rates); in the simulator, from the same quantities per host port.
:func:`signals_from_ports` builds them from two snapshots of the simulator's port counters, so the
tuner sees exactly what netd would show for the same traffic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from cc.network import MTU_BYTES

__all__ = ["HostSignals", "combine", "signals_from_ports"]


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


def signals_from_ports(
    before: dict[str, np.ndarray],
    after: dict[str, np.ndarray],
    pause_us: np.ndarray,
    interval_us: float,
    port_gbps: Sequence[float],
    row: int = 0,
) -> list[HostSignals]:
    """Per host port signals over an interval, from cumulative port counters taken at its ends and
    the µs each port's NIC was paused in it. Ports that neither sent nor received are left out."""
    delta = {name: after[name][row] - before[name][row] for name in after}
    seconds = interval_us / 1e6
    out: list[HostSignals] = []
    for port, gbps in enumerate(port_gbps):
        tx, rx = delta["tx_bytes"][port], delta["rx_bytes"][port]
        if tx <= 0 and rx <= 0:
            continue
        packets = rx / MTU_BYTES
        out.append(
            HostSignals(
                interval_s=seconds,
                link_gbps=gbps,
                utilization=float(max(tx, rx) * 8 / (gbps * 1e9 * seconds)),
                ce_fraction=float(min(delta["ecn_marked"][port] / packets, 1.0)) if packets > 0 else 0.0,
                cnp_sent_per_s=float(delta["cnp_sent"][port] / seconds),
                cnp_handled_per_s=float(delta["cnp_handled"][port] / seconds),
                pause_fraction=float(min(pause_us[port] / interval_us, 1.0)),
                retransmits_per_s=float((delta["nak"][port] + delta["timeouts"][port]) / seconds),
            )
        )
    return out
