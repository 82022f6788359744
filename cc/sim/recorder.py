"""What the simulator measures while it runs, per batch row and per queue key.

Cheap per-step accumulations only; :mod:`cc.sim.metrics` turns them into a run's figures. Queue lengths
go into a log-spaced histogram per switch egress queue (percentiles to within one bin, ~4 %), with
the exact maximum kept beside it. A step only copies its queue lengths into a buffer, binned
:data:`PENDING_STEPS` steps at a time with :func:`queue_bins`: the bins are log-spaced, so a
logarithm finds them, which costs a quarter of a binary search over the edges (one per element, with
unpredictable branches) once the per-call overhead is shared by a block that still fits the cache.

PFC accounting follows a NIC's ethtool counters: pause time in µs, a frame when a pause starts and
one per refresh interval (half the longest pause quanta) while it lasts, and a transition when it
ends.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from cc.sim.network import Network

__all__ = ["PENDING_STEPS", "QUEUE_EDGES", "Recorder", "queue_bins"]

Floats = np.ndarray  # float arrays (numpy stubs type bincount results as int)

QUEUE_EDGES = np.concatenate(([0.0, 1.0], np.geomspace(1e3, 1e9, 361)))
"""Histogram bin edges in bytes: an empty-queue bin, then 1 KB .. 1 GB at 60 bins per decade."""

_EDGES_PAST_END = np.append(QUEUE_EDGES, np.nan)  # the last bin has no upper edge: no q >= nan

PENDING_STEPS = 32
"""Steps of queue lengths buffered before they are binned together."""


def queue_bins(queue_bytes: Floats) -> NDArray[np.intp]:
    """Index of the :data:`QUEUE_EDGES` bin of each length: ``edges[i] <= q < edges[i + 1]``, the
    last bin open-ended, negative lengths in bin 0 (``np.searchsorted(edges, q, "right") - 1``).

    The logarithm gives the bin of 60-per-decade edges to within rounding; one comparison with the
    bin's own edges on each side settles values that rounding put one bin off.
    """
    q = queue_bytes
    j = np.log10(np.maximum(q, 1e3))
    j *= 60.0
    j -= 180.0  # 60 log10(q / 1 KB): q's position among the 1 KB .. 1 GB edges
    np.floor(j, out=j)
    j.clip(0.0, 360.0, out=j)
    b = j.astype(np.intp)
    b += 2
    b -= q < QUEUE_EDGES[b]  # rounding up, or q below 1 KB (then b = 1, the [1, 1000) bin)
    b += q >= _EDGES_PAST_END[b + 1]  # rounding down
    b -= q < 1.0  # the empty-queue bin
    return b


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
        self._hist = np.zeros((batch, n_sw, n_bins), dtype=np.int64)
        self._hist_base = (np.arange(batch)[:, None] * n_sw + np.arange(n_sw)[None, :]) * n_bins
        self._max = np.zeros((batch, n_sw))
        self._pending = np.zeros((PENDING_STEPS, batch, n_sw))  # queue lengths not yet binned
        self._n_pending = 0
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
        qlen.take(self.switch_keys, axis=1, out=self._pending[self._n_pending])
        self._n_pending += 1
        if self._n_pending == PENDING_STEPS:
            self._bin_pending()
        self.departed += departed

    @property
    def pausing(self) -> bool:
        """Whether a pause was live at the last step (:meth:`on_pause` has transitions to count)."""
        return self._any_paused

    def bins(self) -> tuple[NDArray[np.int64], Floats]:
        """The histogram and the maxima, for a compiled loop (:mod:`cc.sim.kernel_loop`) that bins
        its samples itself (counts and maxima do not depend on the order samples come in)."""
        return self._hist, self._max

    @property
    def queue_hist(self) -> NDArray[np.int64]:
        """Samples per (row, switch queue, :data:`QUEUE_EDGES` bin), one per measured step."""
        self._bin_pending()
        return self._hist

    @property
    def queue_max(self) -> Floats:
        """The longest each (row, switch queue) has been in a measured step, bytes."""
        self._bin_pending()
        return self._max

    def _bin_pending(self) -> None:
        n = self._n_pending
        if not n:
            return
        self._n_pending = 0
        block = self._pending[:n]
        bins = queue_bins(block)
        bins += self._hist_base
        np.add.at(self._hist.reshape(-1), bins.reshape(-1), 1)
        np.maximum(self._max, block.max(axis=0), out=self._max)

    def on_calm(
        self, now_us: float, span: float, steps: int, departed: Floats, receivers_busy: np.ndarray
    ) -> None:
        """A jump over ``steps`` calm steps: empty queues, steady departures, no pause."""
        if not self.start_us <= now_us < self.stop_us:
            return
        self.measured_us += span
        self._hist[:, :, 0] += steps
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
