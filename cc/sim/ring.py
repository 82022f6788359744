"""Bytes on the wire: what each step emitted, kept until every link delay has passed.

A step writes its emissions into one slot of a ring of ``depth`` steps: per flow column, what its NIC
sent and what each hop's queue forwarded (and how much of that carries a CE mark). A step's arrivals
are gathered from earlier slots: arrival position a of a column (hop a, or its receiver at a = H)
comes from the emission slot whose link ends there, emitted ``lo`` steps ago with weight 1 - w and
one step before that with weight w, for a link delay of ``lo + w`` steps.

Why gather rather than scatter each emission to its arrival step: numpy scatters element by element
(``a[index] += b``), at about three times the cost of a gather, and a scatter target has to be
cleared once read. The queue emissions ``(batch, flows, hops)`` are contiguous in the slot so that
the engine computes them in place with whole-array operations.
"""

from __future__ import annotations

import numpy as np

__all__ = ["EmissionRing"]


class EmissionRing:
    """Emission slots for ``depth`` steps of ``batch`` rows, ``capacity`` columns and ``hops`` hops.

    Both buffers (bytes and CE-marked bytes) are flat: the hop emissions ``(depth, batch, capacity,
    hops)``, then the NIC emissions ``(depth, batch, capacity)``, then one element that stays zero (the
    source of arrival positions no link reaches). The marks buffer's NIC part stays zero as well: a
    NIC emits no CE marks.
    """

    def __init__(self, depth: int, batch: int, hops: int) -> None:
        self.depth, self.batch, self.hops = depth, batch, hops
        self.capacity = 0
        self.fractional = False  # some link delay is not a whole number of steps
        self._allocate(0)

    def _allocate(self, capacity: int) -> None:
        D, B, H = self.depth, self.batch, self.hops
        self.capacity = capacity
        self._n_hop = D * B * capacity * H
        self._n_nic = D * B * capacity
        self.bytes = np.zeros(self._n_hop + self._n_nic + 1)
        self.marks = np.zeros_like(self.bytes)
        self.hop_bytes = self.bytes[: self._n_hop].reshape(D, B, capacity, H)
        self.hop_marks = self.marks[: self._n_hop].reshape(D, B, capacity, H)
        self.nic_bytes = self.bytes[self._n_hop : -1].reshape(D, B, capacity)
        self._hop_index = np.zeros((2, D, B, capacity, H), dtype=np.int64)  # [lo steps, lo + 1] ago
        self._rx_index = np.zeros((2, D, B, capacity), dtype=np.int64)
        self._hop_weight = np.zeros((2, capacity, H))  # [whole, part]
        self._rx_weight = np.zeros((2, capacity))
        self._sources = np.full((capacity, H + 1), -1, dtype=np.int64)  # per arrival position
        self._delays = np.zeros((capacity, H + 1), dtype=np.int64)

    def grow(self, capacity: int) -> None:
        """More columns; what is in flight stays where it is. Call :meth:`route` for every column
        afterwards (the gathers' offsets depend on the capacity)."""
        old_hop, old_nic, old_marks = self.hop_bytes, self.nic_bytes, self.hop_marks
        n = self.capacity
        self._allocate(capacity)
        self.hop_bytes[:, :, :n] = old_hop
        self.hop_marks[:, :, :n] = old_marks
        self.nic_bytes[:, :, :n] = old_nic

    def clear(self, cols: np.ndarray) -> None:
        """Nothing in flight for ``cols`` (a new flow in a reused column)."""
        self.hop_bytes[:, :, cols] = 0.0
        self.hop_marks[:, :, cols] = 0.0
        self.nic_bytes[:, :, cols] = 0.0

    def route(self, cols: np.ndarray, target: np.ndarray, lo: np.ndarray, w: np.ndarray) -> None:
        """Set where the arrivals of ``cols`` come from.

        Per column, emission slot e (0: the NIC, j: hop j - 1's queue) reaches arrival position
        ``target[e]`` (H: the receiver, H + 1: nowhere) after ``lo[e] + w[e]`` steps.
        """
        H, F = self.hops, self.capacity
        n = len(cols)
        # per (column, arrival position a in 0..H): the emission slot feeding it, or -1
        source = np.full((n, H + 1), -1, dtype=np.int64)
        delay = np.zeros((n, H + 1), dtype=np.int64)
        part = np.zeros((n, H + 1))
        c, e = np.nonzero(target <= H)
        a = target[c, e]
        source[c, a], delay[c, a], part[c, a] = e, lo[c, e], w[c, e]
        self._sources[cols], self._delays[cols] = source, delay
        self._hop_weight[0][cols], self._hop_weight[1][cols] = 1.0 - part[:, :H], part[:, :H]
        self._rx_weight[0][cols], self._rx_weight[1][cols] = 1.0 - part[:, H], part[:, H]
        if not self.fractional and np.any(part):
            self.fractional = True  # from now on the second gather is read, for every column
            self._index(np.arange(F), 1)
        for k in (0, 1) if self.fractional else (0,):
            self._index(cols, k)

    def _index(self, cols: np.ndarray, k: int) -> None:
        """Gather indices of ``cols``: the emissions of ``lo + k`` steps before each phase."""
        D, B, H, F = self.depth, self.batch, self.hops, self.capacity
        source, delay = self._sources[cols][None, None], self._delays[cols][None, None]
        phase = np.arange(D)[:, None, None, None]
        when = (phase - delay - k) % D  # (D, 1, n, H + 1)
        slot = (when * B + np.arange(B)[None, :, None, None]) * F + cols[None, None, :, None]
        index = np.where(source > 0, slot * H + (source - 1), self._n_hop + slot)  # (D, B, n, H + 1)
        index[np.broadcast_to(source < 0, index.shape)] = self._n_hop + self._n_nic  # the zero
        self._hop_index[k][:, :, cols] = index[..., :H]
        self._rx_index[k][:, :, cols] = index[..., H]

    def gathers(
        self, phase: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Where step ``phase``'s arrivals come from, as flat indices into :attr:`bytes` and
        :attr:`marks`: at each hop ``(batch, capacity, hops)`` and each receiver ``(batch,
        capacity)`` from ``lo`` steps ago, the same from ``lo + 1`` steps ago, and the weights of
        the two ``[whole, part]``, ``(2, capacity, hops)`` and ``(2, capacity)``. A position gets
        ``earlier * part + later * whole`` when :attr:`fractional`, else ``later``."""
        return (
            self._hop_index[0, phase],
            self._rx_index[0, phase],
            self._hop_index[1, phase],
            self._rx_index[1, phase],
            self._hop_weight,
            self._rx_weight,
        )

    def all_gathers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`gathers` for every phase at once: the hop and receiver indices ``(2, depth, ...)``
        (``[lo steps ago, lo + 1]``) and the two weight arrays, for a loop that indexes by phase."""
        return self._hop_index, self._rx_index, self._hop_weight, self._rx_weight
