"""Which model situations guard a decision, from what the host's signals say is running.

The twins are weighted by CNPs handled per packet sent: ~0.3 % under bursts over mostly uncongested
traffic, several % when every flow is throttled (a throughput-bound collective). The ``collective``
twin guards every decision while collective traffic may be running — when the signals show it (weight
above 0) *or cannot tell* (too few packets in an interval to measure a density at the threshold).
It gives way only when the last ``watch`` intervals all positively show none (weight 0 on enough
packets): a guard protects traffic that is running, not traffic that might run one day. The
``incast`` twin always guards (bursts need no signal to arrive).

The ``incast`` twin's *utilisation* guards only while the signals do not rule out what it measures:
its two permanent elephants hold the bottleneck busy, so its utilisation is their rate recovery after
each cut. Greedy flows throttled at a standing queue draw CNPs on a large share of their packets
(the twin's ports: 2-15 %); on enough packets below :data:`COLLECTIVE_FROM`, the traffic is not that
(docs/tuning.md, "What the incast twin's utilisation guards"). Its slowdown and pause guards stay.

Relaxing is the lead's call on issue 20 (docs/tuning.md, "When the collective guard gives way"); the
tuner pairs it with a return to the last point that passed the guard as soon as a collective shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from cc.model import HostSignals
from cc.tune.twins import TwinResult

__all__ = [
    "COLLECTIVE_FROM",
    "COLLECTIVE_FULL",
    "MIN_CNPS_AT_THRESHOLD",
    "Reading",
    "admissible",
    "failing",
    "read",
    "relaxable",
    "utilization_waived",
]

COLLECTIVE_FROM = 0.005
"""CNPs handled per packet sent above which the collective situation starts to count."""
COLLECTIVE_FULL = 0.025
"""... and at which it has all the weight."""
MIN_CNPS_AT_THRESHOLD = 10.0
"""An interval "can tell" only if traffic at :data:`COLLECTIVE_FROM` would have shown this many CNPs:
with fewer packets, a running collective could show no CNP at all by chance (Poisson, p = e^-10)."""

PACKET_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Reading:
    """One interval's signals read for collective traffic."""

    packets: float  # packets the busier direction carried in the interval
    density: float  # CNPs handled per packet
    collective: float  # the collective twin's weight, 0..1

    @property
    def can_tell(self) -> bool:
        return self.packets * COLLECTIVE_FROM >= MIN_CNPS_AT_THRESHOLD

    @property
    def no_collective(self) -> bool:
        """Positively none: weight 0 on enough packets to have seen one."""
        return self.can_tell and self.collective == 0.0

    def weights(self) -> dict[str, float]:
        return {"incast": 1.0 - self.collective, "collective": self.collective}


def read(s: HostSignals) -> Reading:
    packets = s.utilization * s.link_gbps * 1e9 / 8 / PACKET_BYTES * s.interval_s
    per_second = max(s.utilization * s.link_gbps * 1e9 / 8 / PACKET_BYTES, 1.0)
    density = s.cnp_handled_per_s / per_second
    span = COLLECTIVE_FULL - COLLECTIVE_FROM
    return Reading(packets, density, float(np.clip((density - COLLECTIVE_FROM) / span, 0.0, 1.0)))


def relaxable(window: Iterable[Reading], watch: int) -> bool:
    """The collective guard may give way: ``watch`` intervals, every one positively without collective."""
    readings = list(window)
    return len(readings) >= watch and all(r.no_collective for r in readings)


def utilization_waived(reading: Reading) -> frozenset[str]:
    """Twins whose utilisation does not guard this decision: the ``incast`` twin's, when the interval
    positively shows no throttled greedy traffic (the same reading as "no collective": a CNP density
    below :data:`COLLECTIVE_FROM` on enough packets to tell)."""
    return frozenset({"incast"}) if reading.no_collective else frozenset()


def failing(
    base: dict[str, TwinResult],
    cand: dict[str, TwinResult],
    tolerance: float,
    waived: frozenset[str] = frozenset(),
) -> list[str]:
    """The twins on which ``cand`` is worse than ``base`` beyond ``tolerance`` (slowdown, utilisation
    unless the twin is in ``waived``) or pauses more."""
    return [
        name
        for name, b in base.items()
        if not (
            cand[name].objective <= b.objective * (1 + tolerance)
            and (name in waived or cand[name].utilization >= b.utilization * (1 - tolerance))
            and cand[name].pause_fraction <= b.pause_fraction + 1e-4
        )
    ]


def admissible(
    base: dict[str, TwinResult],
    cand: dict[str, TwinResult],
    tolerance: float,
    relaxed: frozenset[str],
    waived: frozenset[str] = frozenset(),
) -> bool:
    """No guarding twin fails; twins in ``relaxed`` have given way, those in ``waived`` are not held
    to their utilisation."""
    return not set(failing(base, cand, tolerance, waived)) - relaxed
