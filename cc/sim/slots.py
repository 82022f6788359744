"""The simulator's flow columns: which flow occupies which column, and the index arrays they imply.

The engine's per-flow state has a fixed number of columns (``capacity``), shared by every batch
row. A flow takes a free column when it starts and gives it back once it has finished in every row;
the column's static description (path keys, emission targets and delays, line rate, …) is written
once, at admission. Capacity doubles when a workload needs more concurrent flows than it has, which
re-lays every array (rare: at most log2 of the peak concurrency times per run).

Emission slot e of a column (0: its NIC, j: hop j - 1's queue) reaches arrival position
``emit_target[e]`` (j < H: hop j, H: the receiver, H + 1: nowhere) after ``emit_lo + emit_w`` steps;
:class:`cc.sim.ring.EmissionRing` turns that into gathers.
"""

from __future__ import annotations

import heapq

import numpy as np
from numpy.typing import NDArray

from cc.sim.network import CompiledFlow, Network
from cc.sim.traffic import FlowSpec

__all__ = ["SlotTable", "pad_flows"]

Ints = NDArray[np.int64]


def pad_flows(array: np.ndarray, axis: int, capacity: int, fill: float | bool = 0) -> np.ndarray:
    """``array`` grown along its flow ``axis`` to ``capacity`` columns, new ones set to ``fill``."""
    shape = list(array.shape)
    grown = np.full(shape[:axis] + [capacity] + shape[axis + 1 :], fill, dtype=array.dtype)
    grown[(slice(None),) * axis + (slice(0, shape[axis]),)] = array
    return grown


class SlotTable:
    """Static per-column arrays and the flat indices derived from them for a batch of ``batch`` rows."""

    def __init__(self, net: Network, batch: int, n_ports: int, capacity: int) -> None:
        self.net, self.batch, self.n_ports = net, batch, n_ports
        H = net.hop_max
        self.depth = int(max(net.key_delay_steps.max(), 1) + 2)  # ring slots: longest hop + split + 1
        self.capacity = 0
        self.flow_id = np.zeros(0, dtype=np.int64)
        self.free: list[int] = []
        self.queue_key = np.zeros((0, H), dtype=np.int64)
        self.ingress_key = np.zeros((0, H), dtype=np.int64)
        self.emit_target = np.zeros((0, H + 1), dtype=np.int64)
        self.emit_lo = np.ones((0, H + 1), dtype=np.int64)
        self.emit_w = np.zeros((0, H + 1))
        self.src_key = np.zeros(0, dtype=np.int64)
        self.src_port = np.zeros(0, dtype=np.int64)
        self.dst_port = np.zeros(0, dtype=np.int64)
        self.cnp_delay = np.ones(0, dtype=np.int64)
        self.fill_steps = 1  # the longest path, in steps: links are in steady state after that long
        self.line = np.zeros(0)
        self.demand = np.zeros(0)
        self.stop_us = np.zeros(0)
        self.grow(capacity)

    def grow(self, capacity: int) -> None:
        old = self.capacity
        self.capacity = capacity
        self.free.extend(range(old, capacity))
        heapq.heapify(self.free)  # lowest free column first: keeps live columns dense
        trash = self.net.K
        H = self.net.hop_max
        self.flow_id = pad_flows(self.flow_id, 0, capacity, -1)
        self.queue_key = pad_flows(self.queue_key, 0, capacity, trash)
        self.ingress_key = pad_flows(self.ingress_key, 0, capacity, trash)
        self.emit_target = pad_flows(self.emit_target, 0, capacity, H + 1)
        self.emit_lo = pad_flows(self.emit_lo, 0, capacity, 1)
        self.emit_w = pad_flows(self.emit_w, 0, capacity, 0.0)
        self.src_key = pad_flows(self.src_key, 0, capacity, trash)
        self.src_port = pad_flows(self.src_port, 0, capacity, 0)
        self.dst_port = pad_flows(self.dst_port, 0, capacity, 0)
        self.cnp_delay = pad_flows(self.cnp_delay, 0, capacity, 1)
        self.line = pad_flows(self.line, 0, capacity, 1.0)
        self.demand = pad_flows(self.demand, 0, capacity, 0.0)
        self.stop_us = pad_flows(self.stop_us, 0, capacity, np.inf)
        self._relayout()

    def _relayout(self) -> None:
        """Flat indices over (batch, capacity, ...) for bincounts and gathers."""
        B, F, H, keys = self.batch, self.capacity, self.net.hop_max, self.net.K + 1
        rows = np.arange(B)[:, None, None]
        self.queue_flat = (rows * keys + self.queue_key[None]).reshape(-1)
        self.ingress_flat = (rows * keys + self.ingress_key[None]).reshape(-1)
        self.queue_index = self.queue_flat.reshape(B, F, H)  # the same indices, for np.take (views)
        self.ingress_index = self.ingress_flat.reshape(B, F, H)
        self.src_key_flat = rows[:, :, 0] * keys + self.src_key[None]
        self.src_port_flat = rows[:, :, 0] * self.n_ports + self.src_port[None]
        self.dst_port_flat = rows[:, :, 0] * self.n_ports + self.dst_port[None]

    def assign(self, items: list[tuple[FlowSpec, int, CompiledFlow]]) -> np.ndarray:
        """Put flows (spec, id, compiled path) in free columns, all at once; returns the columns.
        The caller grows the table first when fewer columns are free."""
        cols = np.array([heapq.heappop(self.free) for _ in items], dtype=np.int64)
        compiled = [c for _, _, c in items]
        delay = np.array([c.emit_delay for c in compiled])
        lo = np.floor(delay)
        self.flow_id[cols] = [i for _, i, _ in items]
        self.queue_key[cols] = [c.queue_keys for c in compiled]
        self.ingress_key[cols] = [c.ingress_keys for c in compiled]
        self.emit_target[cols] = [c.emit_target for c in compiled]
        self.emit_lo[cols] = lo
        self.emit_w[cols] = delay - lo
        self.src_key[cols] = [c.src_key for c in compiled]
        self.src_port[cols] = [f.src for f, _, _ in items]
        self.dst_port[cols] = [f.dst for f, _, _ in items]
        self.cnp_delay[cols] = [c.cnp_delay_steps for c in compiled]
        self.line[cols] = [c.line_mbps for c in compiled]
        self.demand[cols] = [min(f.demand_mbps, c.line_mbps) for f, _, c in items]
        self.stop_us[cols] = [f.stop_us for f, _, _ in items]
        used = self.emit_target[cols] <= self.net.hop_max  # emissions on the path (not trash)
        fill = int((np.ceil(delay) * used).sum(axis=1).max()) + 1
        self.fill_steps = max(self.fill_steps, fill)
        self._update_columns(cols)
        return cols

    def _update_columns(self, cols: np.ndarray) -> None:
        B, H, keys, F = self.batch, self.net.hop_max, self.net.K + 1, self.capacity
        rows = np.arange(B)[:, None, None]
        self.queue_flat.reshape(B, F, H)[:, cols] = rows * keys + self.queue_key[cols][None]
        self.ingress_flat.reshape(B, F, H)[:, cols] = rows * keys + self.ingress_key[cols][None]
        self.src_key_flat[:, cols] = rows[:, :, 0] * keys + self.src_key[cols][None]
        self.src_port_flat[:, cols] = rows[:, :, 0] * self.n_ports + self.src_port[cols][None]
        self.dst_port_flat[:, cols] = rows[:, :, 0] * self.n_ports + self.dst_port[cols][None]

    def release(self, col: int) -> None:
        self.flow_id[col] = -1
        self.demand[col] = 0.0
        self.stop_us[col] = np.inf
        heapq.heappush(self.free, col)
