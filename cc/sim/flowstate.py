"""The simulator's per-flow state, and flows coming and going.

:class:`FlowState` owns every array with a flow axis (RP and NP state, bytes sent and delivered,
queue backlogs per hop, the rings of bytes and CNPs in flight) and the bookkeeping around them:
admitting flows when their start time comes, stopping greedy flows at their stop time, noticing
when a flow has finished (everything it had to send was delivered), recording its completion time,
and folding its counters onto its host ports before its column is reused. The dynamics live in
:class:`cc.sim.engine.Engine`, which extends it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from cc.model import NpState, ParamBatch, RpState
from cc.sim.network import Network
from cc.sim.recorder import Recorder
from cc.sim.ring import EmissionRing
from cc.sim.slots import SlotTable, pad_flows
from cc.sim.traffic import FlowSpec

__all__ = ["PORT_COUNTERS", "FlowRecords", "FlowState", "Snapshot"]

PORT_COUNTERS = (
    "tx_bytes",  # at the sender's port, retransmissions included
    "rx_bytes",  # at the receiver's port
    "ecn_marked",  # CE packets at the receiver (np_ecn_marked_roce_packets)
    "cnp_sent",  # at the receiver (np_cnp_sent)
    "cnp_handled",  # at the sender (rp_cnp_handled)
    "out_of_sequence",  # packets the receiver saw missing (drops)
    "nak",  # sequence-error NAKs at the sender (packet_seq_err)
    "timeouts",  # tail losses the sender only learns of by timeout (local_ack_timeout_err)
)
_AT_SENDER = {"tx_bytes", "cnp_handled", "nak", "timeouts"}
_RP_FIELDS = (
    "rc",
    "rt",
    "alpha",
    "alpha_timer_us",
    "inc_timer_us",
    "byte_counter",
    "timer_stage",
    "byte_stage",
    "next_cut_us",
    "seen_cnp",
)


@dataclass(frozen=True, slots=True)
class Snapshot:
    now_us: float
    ports: dict[str, np.ndarray]  # cumulative port counters, (batch, n_ports) each
    delivered: dict[int, np.ndarray]  # flow id -> bytes delivered so far, per row (live flows only)


class FlowRecords:
    """Per-flow facts for completion times: one entry per admitted flow, finish time per batch row."""

    def __init__(self, batch: int, expected: int) -> None:
        self.batch = batch
        self.specs: list[FlowSpec] = []
        self.ideal_us: list[float] = []
        self.finish_us = np.full((batch, max(expected, 1)), np.nan)

    def add(self, spec: FlowSpec, ideal_us: float) -> int:
        flow_id = len(self.specs)
        self.specs.append(spec)
        self.ideal_us.append(ideal_us)
        if flow_id >= self.finish_us.shape[1]:
            self.finish_us = pad_flows(self.finish_us, 1, 2 * self.finish_us.shape[1], np.nan)
        return flow_id


class FlowState:
    recorder: Recorder  # set by the engine

    def __init__(
        self, net: Network, params: ParamBatch, flows: Iterable[FlowSpec], record: bool, capacity: int = 16
    ) -> None:
        self.net, self.config, self.params = net, net.config, params
        self.batch = B = len(params)
        topo = net.topology
        self.n_ports = topo.n_ports
        self.t = 0
        self._source = iter(flows)
        self._next: FlowSpec | None = next(self._source, None)
        self._admitted = 0
        expected = len(flows) if isinstance(flows, Sequence) else 0
        self.records: FlowRecords | None = FlowRecords(B, expected) if record else None
        self.slots = SlotTable(net, B, self.n_ports, 0)
        line = np.array([topo.port_gbps(p) * 1e3 for p in range(self.n_ports)])
        self.port_line = np.tile(line, B)
        self.ports = {name: np.zeros((B, self.n_ports)) for name in PORT_COUNTERS}
        self.dst_active = np.zeros((B, self.n_ports), dtype=np.int64)
        self.busy_dt: np.ndarray = np.zeros((B, self.n_ports))  # dt where a receiver has live flows to it
        self.cnp_depth = int((net.hop_max + 1) * max(1, net.key_delay_steps.max()) + 2)
        self.shared_nic = False
        self._calm_steps = 0
        self.baseline: Snapshot | None = None
        self._next_stop = math.inf
        H = net.hop_max
        self.active = np.zeros((B, 0), dtype=bool)
        self.sent, self.delivered, self.owed = np.zeros((B, 0)), np.zeros((B, 0)), np.zeros((B, 0))
        self.acc = {name: np.zeros((B, 0)) for name in PORT_COUNTERS}
        self.rp = RpState.new((B, 0), 0.0, params)
        self.np_state = NpState.new((B, 0))
        self.backlog, self.marked = np.zeros((B, 0, H)), np.zeros((B, 0, H))
        self.ring = EmissionRing(self.slots.depth, B, H)
        self.cnp_ring = np.zeros((self.cnp_depth, B, 0))
        self._grow(capacity)

    # -- capacity --------------------------------------------------------------------------------
    def _grow(self, capacity: int) -> None:
        self.slots.grow(capacity)
        F, B = capacity, self.batch
        self.active = pad_flows(self.active, 1, F, False)
        self.sent, self.delivered = pad_flows(self.sent, 1, F), pad_flows(self.delivered, 1, F)
        self.owed = pad_flows(self.owed, 1, F, np.inf)  # a column with no live flow owes nothing to check
        self._last_sent = np.zeros((B, F))
        self.acc = {name: pad_flows(a, 1, F) for name, a in self.acc.items()}
        for name in _RP_FIELDS:
            setattr(self.rp, name, pad_flows(getattr(self.rp, name), 1, F))
        self.np_state.next_cnp_us = pad_flows(self.np_state.next_cnp_us, 1, F, -np.inf)
        self.backlog, self.marked = pad_flows(self.backlog, 1, F), pad_flows(self.marked, 1, F)
        self.ring.grow(F)
        self._route(np.arange(F))
        self.cnp_ring = pad_flows(self.cnp_ring, 2, F)
        self.zero_bf = np.zeros((B, F))

    # -- flows arriving, stopping, finishing ---------------------------------------------------
    def _admit(self) -> None:
        """Start every flow whose start time falls in this step (together: one pass per array)."""
        dt = self.config.dt_us
        horizon = (self.t + 1) * dt
        due: list[FlowSpec] = []
        while self._next is not None and self._next.start_us < horizon:
            flow, self._next = self._next, next(self._source, None)
            if self._next is not None and self._next.start_us < flow.start_us:
                raise ValueError("flows must come sorted by start_us")
            due.append(flow)
        if not due:
            return
        compiled = [self.net.compile(f) for f in due]
        while len(self.slots.free) < len(due):
            self._grow(2 * self.slots.capacity)
        items = []
        for flow, c in zip(due, compiled, strict=True):
            flow_id = self.records.add(flow, c.ideal_fct_us) if self.records else self._admitted
            self._admitted += 1
            items.append((flow, flow_id, c))
        cols = self.slots.assign(items)
        self._route(cols)
        sizes = np.array([f.size_bytes if f.finite else math.inf for f in due])
        self._reset_columns(cols, np.array([c.line_mbps for c in compiled]), sizes)
        dsts = np.array([f.dst for f in due])
        for dst in dsts:  # (a few per step; np.add.at would do it too, for more ceremony)
            self.dst_active[:, dst] += 1
        self.busy_dt[:, dsts] = dt
        self._calm_steps = 0  # a new flow ends any steady state
        self._next_stop = min(self._next_stop, min(f.stop_us for f in due))
        live = self.slots.flow_id >= 0
        self.shared_nic = bool(np.bincount(self.slots.src_port[live]).max(initial=0) > 1)

    def _reset_columns(self, cols: np.ndarray, line_mbps: np.ndarray, sizes: np.ndarray) -> None:
        """Fresh DCQCN state (a new QP starts at line rate) and empty buffers for new flows."""
        rp = self.rp
        rp.rc[:, cols] = rp.rt[:, cols] = line_mbps
        rp.alpha[:, cols] = self.params.initial_alpha
        for name in ("alpha_timer_us", "inc_timer_us", "byte_counter", "timer_stage", "byte_stage"):
            getattr(rp, name)[:, cols] = 0.0
        rp.next_cut_us[:, cols] = -np.inf
        rp.seen_cnp[:, cols] = False
        self.np_state.next_cnp_us[:, cols] = -np.inf
        self.active[:, cols] = True
        self.owed[:, cols] = sizes
        for array in (self.sent, self.delivered, self.backlog, self.marked):
            array[:, cols] = 0.0
        self.ring.clear(cols)
        self.cnp_ring[:, :, cols] = 0.0

    def _route(self, cols: np.ndarray) -> None:
        """Tell the ring which links the flows in ``cols`` cross (after admission or re-layout)."""
        st = self.slots
        self.ring.route(cols, st.emit_target[cols], st.emit_lo[cols], st.emit_w[cols])

    def _finish_and_stop(self) -> None:
        now = self.t * self.config.dt_us
        st = self.slots
        if now >= self._next_stop:
            stopping = st.stop_us <= now
            self.owed[:, stopping] = np.where(self.active[:, stopping], 0.0, np.inf)
            self._calm_steps = 0
            st.stop_us[stopping] = np.inf
            self._next_stop = float(st.stop_us.min(initial=math.inf))
        sent_out = self.owed <= 0.0  # only live flows: a finished one owes inf
        if not np.count_nonzero(sent_out):
            return
        done = sent_out & (self.delivered >= self.sent - 0.5)
        if not np.count_nonzero(done):
            return
        rows, cols = np.nonzero(done)
        self.active[rows, cols] = False
        self.owed[rows, cols] = np.inf
        np.subtract.at(self.dst_active, (rows, st.dst_port[cols]), 1)
        self.busy_dt = (self.dst_active > 0) * self.config.dt_us
        if self.records is not None:
            self.records.finish_us[rows, st.flow_id[cols]] = now
        free = [int(c) for c in np.unique(cols) if not self.active[:, c].any()]
        if free:
            self._fold(np.array(free))
            for col in free:
                st.release(col)

    def _fold(self, cols: np.ndarray) -> None:
        """Move columns' counters onto their sender's or receiver's port."""
        st, B, n = self.slots, self.batch, self.n_ports
        rows = np.arange(B)[:, None] * n  # one bincount over all rows: (row, port) bins
        at_sender, at_receiver = (rows + st.src_port[cols]).ravel(), (rows + st.dst_port[cols]).ravel()
        for name, values in self.acc.items():
            bins = at_sender if name in _AT_SENDER else at_receiver
            self.ports[name] += np.bincount(bins, values[:, cols].ravel(), minlength=B * n).reshape(B, n)
            values[:, cols] = 0.0

    def snapshot(self) -> Snapshot:
        """Counters and per-flow deliveries now (the engine takes one when measurement starts)."""
        live = np.flatnonzero(self.slots.flow_id >= 0)
        delivered = {int(self.slots.flow_id[c]): self.delivered[:, c].copy() for c in live}
        return Snapshot(self.t * self.config.dt_us, self.port_counters(), delivered)

    def port_counters(self) -> dict[str, np.ndarray]:
        """Cumulative per-port counters, ``(batch, n_ports)`` each."""
        self._fold(np.arange(self.slots.capacity))
        return {name: values.copy() for name, values in self.ports.items()}

    def standing_queues(self) -> np.ndarray:
        """Bytes waiting in each key's egress queue now, ``(batch, K + 1)``."""
        keys = self.net.K + 1
        flat = np.bincount(self.slots.queue_flat, self.backlog.reshape(-1), minlength=self.batch * keys)
        return flat.reshape(self.batch, keys)

    def nic_pause_us(self) -> np.ndarray:
        """µs each host port's NIC has been paused since the start (any priority), ``(batch, ports)``."""
        P, topo = self.net.P, self.net.topology
        keys = np.array([[topo.uplink(p) * P + i for i in range(P)] for p in range(self.n_ports)])
        return np.asarray(self.recorder.pause_us_always[:, keys].sum(axis=2))

    def in_flight(self) -> np.ndarray:
        """Bytes sent and not yet delivered (queued or on a link), per row."""
        return np.asarray((self.sent - self.delivered).sum(axis=1))

    @property
    def now_us(self) -> float:
        return self.t * self.config.dt_us
