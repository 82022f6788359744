"""What the simulator measures while it runs, per batch row and per queue key.

Cheap per-step accumulations only; :mod:`cc.metrics` turns them into a run's figures. Queue lengths
go into a log-spaced histogram per switch egress queue (percentiles to within one bin, ~4 %), with
the exact maximum kept beside it. PFC accounting follows a NIC's ethtool counters: pause time in µs,
a frame when a pause starts and one per refresh interval (half the longest pause quanta) while it
lasts, and a transition when it ends.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from cc.network import Network

__all__ = ["QUEUE_EDGES", "Recorder"]

Floats = np.ndarray  # float arrays (numpy stubs type bincount results as int)

QUEUE_EDGES = np.concatenate(([0.0, 1.0], np.geomspace(1e3, 1e9, 361)))
"""Histogram bin edges in bytes: an empty-queue bin, then 1 KB .. 1 GB at 60 bins per decade."""


class Recorder:
    """Accumulators for one run over the window [``start_us``, ``stop_us``): a warm-up before it and
    a drain after it (letting the window's flows finish) are excluded from every figure."""

    def __init__(
        self, net: Network, batch: int, n_ports: int, start_us: float = 0.0, queues: bool = True
    ) -> None:
        self.net, self.batch = net, batch
        keys = net.K + 1
        self.start_us = start_us
        self.queues = queues  # False: no queue histograms (the emulator needs only counters)
        self.stop_us = math.inf
        self.switch_keys = np.flatnonzero(net.key_is_switch)
        n_sw, n_bins = len(self.switch_keys), len(QUEUE_EDGES)
        self.queue_hist = np.zeros((batch, n_sw, n_bins), dtype=np.int64)
        self._hist_flat = self.queue_hist.reshape(-1)
        # searchsorted(side="right") is one past the bin index: fold the -1 into the base
        self._hist_base = (np.arange(batch)[:, None] * n_sw + np.arange(n_sw)[None, :]) * n_bins - 1
        self.queue_max = np.zeros((batch, n_sw))
        self.departed = np.zeros((batch, keys))  # bytes each key's queue sent
        self.pause_us = np.zeros((batch, keys))
        self.pause_us_always = np.zeros((batch, keys))  # whole run, warm-up included (for live signals)
        self.pause_frames = np.zeros((batch, keys))
        self.pause_transitions = np.zeros((batch, keys))
        self._was_paused = np.zeros((batch, keys), dtype=bool)
        self._pause_clock = np.zeros((batch, keys))
        self._any_paused = False
        self.busy_us = np.zeros((batch, n_ports))  # time each receiver had unfinished flows to it
        self.measured_us = 0.0
        self.drops = np.zeros(batch)

    def counting(self, now_us: float) -> bool:
        return self.start_us <= now_us < self.stop_us

    def on_queues(self, now_us: float, dt: float, qlen: Floats, departed: Floats) -> None:
        if not (self.queues and self.start_us <= now_us < self.stop_us):
            return
        self.measured_us += dt
        q = qlen[:, self.switch_keys]
        bins = np.searchsorted(QUEUE_EDGES, q, side="right")
        self._hist_flat[self._hist_base + bins] += 1  # one bin per (row, queue): indices are unique
        np.maximum(self.queue_max, q, out=self.queue_max)
        self.departed += departed

    def on_calm(
        self, now_us: float, span: float, steps: int, departed: Floats, receivers_busy: np.ndarray
    ) -> None:
        """A jump over ``steps`` calm steps: empty queues, steady departures, no pause."""
        if not self.start_us <= now_us < self.stop_us:
            return
        self.measured_us += span
        self.queue_hist[:, :, 0] += steps
        self.departed += departed * steps
        self.busy_us += receivers_busy * span

    def on_busy(self, now_us: float, busy_dt: Floats) -> None:
        """``busy_dt``: dt where a receiver has unfinished flows towards it, else 0."""
        if self.start_us <= now_us < self.stop_us:
            self.busy_us += busy_dt

    def on_pause(self, now_us: float, dt: float, seen: NDArray[np.bool_] | None) -> None:
        """``seen``: which keys' upstream obeys a pause this step (None = nothing paused anywhere)."""
        if seen is None:
            if self._any_paused:
                self._any_paused = False
                self.pause_transitions += self._was_paused * self.counting(now_us)
                self._was_paused[:] = False
                self._pause_clock[:] = 0.0
            return
        counting = self.counting(now_us)
        self.pause_us_always += seen * dt
        clock = (self._pause_clock + dt) * seen
        refreshes = np.floor(clock / self.net.key_refresh_us)
        self._pause_clock = clock - refreshes * self.net.key_refresh_us
        if counting:
            self.pause_us += seen * dt
            self.pause_frames += (seen & ~self._was_paused) + refreshes
            self.pause_transitions += self._was_paused & ~seen
        self._was_paused = seen
        self._any_paused = True

    def on_drop(self, now_us: float, dropped: Floats) -> None:
        if self.counting(now_us):
            self.drops += dropped
