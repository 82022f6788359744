"""Labelled faults on top of the emulated fabric, for measuring the detectors: the layer and the base.

The fabric model (cc/) produces healthy dynamics — line-rate all-reduce, incast congestion with
DCQCN and PFC. A :class:`FaultLayer` installed as the emulator's hook then rewrites what one host
port reports during a known time window, the way the fault would show on an mlx5 NIC. The faults
themselves are in :mod:`netd.emulated.fault_kinds`:

* :class:`StuckReceiver` — a host stops draining: its NIC pauses the ToR continuously
  (``tx_prio3_pause``), and the ToR pauses every port feeding it, which can no longer transmit: a PFC
  storm on the feeders (labelled ``pfc_storm``) from a pausing receiver (labelled ``pause_storm``);
* :class:`SpreadingVictim` — a port paused part of the time without its own flows being marked;
* :class:`LossBurst` — out-of-sequence, NAK, retransmit and timeout counters move;
* :class:`LinkFlap` — carrier losses (``link_down_events_phy``, PMA ``link_downed``), the port state
  DOWN while down, no traffic;
* :class:`CounterSaturation` — a 16-bit PMA error counter pinned at its maximum until reset;
* :class:`CounterStall` — the PMA data counters freeze while ethtool keeps counting;
* :class:`CnpShift` — a port starts sending a few thousand CNPs/s, below the congestion thresholds.

Times are emulation seconds (``EmulatedFabric.elapsed_s``); a fault covering part of a slice applies
in proportion. Edits to the model's deltas happen before the emulator scales them to wall time (so
a duration is a fraction of ``sim_us``); edits to raw counters happen after, in wall units.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cc.sim.fabric import PortDeltas
from netd.emulated.fabric_host import EmulatedFabric

__all__ = ["Fault", "FaultLayer", "Label", "SliceDeltas"]


@dataclass(frozen=True, slots=True)
class Label:
    """Ground truth: a detector of ``kind`` should report this scope between ``start_s`` and ``end_s``."""

    kind: str
    host: int
    port: int
    start_s: float
    end_s: float
    priority: int | None = None
    subject: str | None = None


class SliceDeltas:
    """Float copies of the PortDeltas arrays a slice's faults change."""

    def __init__(self, deltas: PortDeltas) -> None:
        self.deltas = deltas
        self.arrays: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            self.arrays[name] = getattr(self.deltas, name).astype(np.float64)
        return self.arrays[name]

    def result(self) -> PortDeltas:
        changed = {k: np.maximum(np.rint(v), 0).astype(np.int64) for k, v in self.arrays.items()}
        return dataclasses.replace(self.deltas, **changed)


@dataclass
class Fault(ABC):
    """One injected fault; subclasses edit deltas and/or counters and say what should be detected."""

    host: int
    port: int
    start_s: float
    end_s: float

    def overlap(self, start_s: float, wall_s: float) -> float:
        """Fraction of the slice [start_s, start_s + wall_s) the fault covers."""
        if wall_s <= 0:
            return 0.0
        return max(0.0, min(self.end_s, start_s + wall_s) - max(self.start_s, start_s)) / wall_s

    def touches(self, start_s: float, wall_s: float) -> bool:
        """Whether the slice needs this fault's counter edits (some also act just after their end)."""
        return self.overlap(start_s, wall_s) > 0

    # Optional hooks (no-ops here): a fault edits the model's deltas, the rendered counters, or both.
    def edit_deltas(  # noqa: B027
        self, d: SliceDeltas, ov: float, slice_s: tuple[float, float], refresh_us: float
    ) -> None:
        """Change the model's deltas for the slice ``(start_s, wall_s)`` (sim units)."""

    def edit_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float, ov: float) -> None:  # noqa: B027
        """Change raw counters after scaling (wall units)."""

    @abstractmethod
    def labels(self) -> list[Label]:
        """The ground truth this fault should produce."""


class FaultLayer:
    """The emulator hook (``EmulatedFabric.hook``) that applies a list of faults."""

    def __init__(self, faults: Sequence[Fault], link_gbps: float = 200.0) -> None:
        self.faults = list(faults)
        self.refresh_us = 0xFFFF * 512 / (link_gbps * 1000.0) / 2  # a pause refreshed at half its quanta

    def labels(self) -> list[Label]:
        return [label for f in self.faults for label in f.labels()]

    def on_deltas(self, deltas: PortDeltas, start_s: float, wall_s: float) -> PortDeltas:
        d = SliceDeltas(deltas)
        for f in self.faults:
            ov = f.overlap(start_s, wall_s)
            if ov > 0:
                f.edit_deltas(d, ov, (start_s, wall_s), self.refresh_us)
        return d.result() if d.arrays else deltas

    def on_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float) -> None:
        for f in self.faults:
            if f.touches(start_s, wall_s):
                f.edit_counters(fabric, start_s, wall_s, f.overlap(start_s, wall_s))
