"""Congestion scores in [0, 1] per host port, ToR and spine: the formula. Pure.

**Port.** Four signals, each a per-tick ratio (so a busy port is not a congested one):

=================== ========================================================== =====================
signal              definition (per second over the tick)                      ramp lo → hi (weight)
=================== ========================================================== =====================
``ce_fraction``     ECN-CE-marked RoCE packets received / RDMA packets received 0.001 → 0.05 (0.8)
``cnp_per_packet``  CNPs handled (rate cuts) / RDMA packets sent                0.0001 → 0.01 (0.6)
``pause_fraction``  fraction of the second a PFC priority was paused (rx) or    0.01 → 0.30 (1.0)
                    pausing its peer (tx), the larger over priorities
``loss_per_packet`` (loss/error events + retransmits) / RDMA packets            1e-6 → 1e-3 (1.0)
=================== ========================================================== =====================

Each signal becomes a sub-score by a linear ramp, ``s = clamp((x - lo) / (hi - lo), 0, 1)``: below
``lo`` it is noise (a line-rate all-reduce marks a few packets and scores 0), at ``hi`` and above it
is saturated. The sub-scores combine like independent causes (a weighted noisy-OR)::

    score = 1 - prod_i (1 - w_i * s_i)

so one saturated signal of weight w scores w, and agreeing signals push the score towards 1. A
signal the NIC does not report (rxe has no ECN counters) is absent and contributes nothing. A port
whose link is down scores 1 (``link_down``): it cannot carry traffic at all.

**ToR and spine.** Host counters cannot tell which hop marked or paused a packet, so a ToR's score
summarises the up ports below it and a spine's the ToRs below it, as the mean of the mean and the
maximum (``agg = (mean + max) / 2``): one hot port makes its ToR half as hot as itself, every port
hot makes it as hot as its ports. Down ports are counted separately, not as congestion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["SIGNALS", "Components", "Ramp", "ScoreModel", "aggregate"]

SIGNALS = ("ce_fraction", "cnp_per_packet", "pause_fraction", "loss_per_packet")


@dataclass(frozen=True, slots=True)
class Ramp:
    lo: float
    hi: float

    def __post_init__(self) -> None:
        if not 0 <= self.lo < self.hi:
            raise ValueError(f"ramp needs 0 <= lo < hi, got lo={self.lo}, hi={self.hi}")

    def __call__(self, x: float) -> float:
        return min(max((x - self.lo) / (self.hi - self.lo), 0.0), 1.0)


@dataclass(frozen=True, slots=True)
class Components:
    """The four signals of one port (None: the NIC does not report it, or no rate yet), and the packet
    rates the two per-packet ratios were taken over (None: not known, e.g. read back from Prometheus)."""

    ce_fraction: float | None = None
    cnp_per_packet: float | None = None
    pause_fraction: float | None = None
    loss_per_packet: float | None = None
    rx_packets_per_s: float | None = None
    tx_packets_per_s: float | None = None

    def as_dict(self) -> dict[str, float | None]:
        return {name: getattr(self, name) for name in SIGNALS}


@dataclass(frozen=True, slots=True)
class ScoreModel:
    ramps: Mapping[str, Ramp] = field(
        default_factory=lambda: {
            "ce_fraction": Ramp(0.001, 0.05),
            "cnp_per_packet": Ramp(0.0001, 0.01),
            "pause_fraction": Ramp(0.01, 0.30),
            "loss_per_packet": Ramp(1e-6, 1e-3),
        }
    )
    weights: Mapping[str, float] = field(
        default_factory=lambda: {
            "ce_fraction": 0.8,
            "cnp_per_packet": 0.6,
            "pause_fraction": 1.0,
            "loss_per_packet": 1.0,
        }
    )

    # Below this many packets/s a per-packet ratio is noise (3 of 5 packets marked is not 60 %
    # congestion): ce_fraction is not judged under it on receive, cnp_per_packet on send.
    min_packets_per_s: float = 1000.0

    def __post_init__(self) -> None:
        for name in SIGNALS:
            if name not in self.ramps or name not in self.weights:
                raise ValueError(f"score model needs a ramp and a weight for {name}")
            if not 0 <= self.weights[name] <= 1:
                raise ValueError(f"weight of {name} must be in [0, 1], got {self.weights[name]}")

    def port(self, components: Components, up: bool = True) -> tuple[float, dict[str, float]]:
        """(score, contribution of each present signal: its weighted sub-score)."""
        if not up:
            return 1.0, {"link_down": 1.0}
        values = [getattr(components, name) for name in SIGNALS]
        scores, parts, used = self.ports(
            np.array([[v] for v in values], dtype=float),  # None: NaN, absent
            np.array([components.rx_packets_per_s], dtype=float),
            np.array([components.tx_packets_per_s], dtype=float),
        )
        return float(scores[0]), {name: float(parts[j, 0]) for j, name in enumerate(SIGNALS) if used[j, 0]}

    def ports(
        self,
        values: np.ndarray,
        rx_packets_per_s: np.ndarray,
        tx_packets_per_s: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`port` for many up ports at once (the formula's one implementation).

        ``values``: one row per signal (``SIGNALS`` order), one column per port, NaN where absent; a
        value that is not a finite number is absent too (it cannot be scored; netd's own sources
        never give one); the packet rates: NaN where not known. Returns (score per port, each
        signal's contribution, whether it counted).
        """
        ramps = [self.ramps[name] for name in SIGNALS]
        lo, span, weight = np.array(
            [[[r.lo] for r in ramps], [[r.hi - r.lo] for r in ramps], [[self.weights[n]] for n in SIGNALS]],
            dtype=float,
        )
        used = np.isfinite(values)
        # below min_packets_per_s a per-packet ratio does not count; an unknown rate (NaN) does not exclude
        used[SIGNALS.index("ce_fraction")] &= ~(rx_packets_per_s < self.min_packets_per_s)
        used[SIGNALS.index("cnp_per_packet")] &= ~(tx_packets_per_s < self.min_packets_per_s)
        sub = (values - lo) / span
        sub = np.where(0.0 > sub, 0.0, sub)  # Ramp: min(max(sub, 0.0), 1.0), NaN kept
        sub = np.where(1.0 < sub, 1.0, sub)
        parts = weight * sub
        # keep = 1.0, then keep *= 1.0 - part for each signal that counts, in SIGNALS order (x * 1.0 = x)
        keep = np.cumprod(np.where(used, 1.0 - parts, 1.0), axis=0)[-1]
        return 1.0 - keep, parts, used


def aggregate(scores: Sequence[float]) -> float:
    """A ToR from its ports, a spine from its ToRs: (mean + max) / 2; 0 for nothing."""
    if not scores:
        return 0.0
    return (sum(scores) / len(scores) + max(scores)) / 2.0
