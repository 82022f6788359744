"""The discrete-time fabric simulator: DCQCN flows through switch queues, RED/ECN, PFC and links.

Each step of ``dt`` µs, in this order:

1. bytes that finished crossing a link join the egress queue of their next hop (or reach the
   receiver); a queue is one FIFO per (switch port, priority) holding each flow's share;
2. every switch port drains its queues at line rate, strict priority between priorities, unless the
   downstream has paused that priority; departing bytes are CE-marked with the RED probability of
   the queue they leave (marks made upstream stay set) and start crossing the next link;
3. receivers count CE packets (expected marks, stochastically rounded) and their NP paces CNPs,
   which travel back over the path's propagation delay;
4. each sender's RP handles the CNPs that arrived and takes its timer and byte-counter events
   (:func:`cc.model.dcqcn.rp_step`, compiled in :mod:`cc.sim.kernel`); the NIC sends at the
   resulting rates (flows sharing a NIC port split it in proportion; a paused port sends
   nothing), and the bytes start crossing the first link;
5. PFC: each switch ingress (link, priority) holding more than its XOFF — the parameters' XOFF or
   its dynamic share of the switch's free shared buffer, whichever is lower (:mod:`cc.sim.buffer`) —
   pauses its upstream (a switch egress queue or a NIC) until it falls below XON; the pause reaches
   the upstream one link delay later. Bytes beyond XOFF + headroom are dropped (lossless violated),
   and lossy priorities tail-drop above their share; dropped bytes are re-sent.

Everything is vectorised over flows and over a batch of parameter sets (rows); random numbers are
a function of (seed, flow, step) (:mod:`cc.sim.draws`), shared by all rows, so rows with equal
parameters behave identically, candidates are compared on common random numbers, and a row's
trajectory is the same alone and in any batch. Calm stretches (no queue, no CNP or pause in
flight, every flow at its cap for long enough that the links are in steady state) are advanced in
one closed-form jump.

While no pause is live and no priority is lossy, the steps run in a compiled loop
(:mod:`cc.sim.kernel_loop`, driven by :func:`cc.sim.fused.run_fused`) until the next point where
Python must act: an admission, a flow finishing or stopping, the measurement window opening, a calm
stretch to jump, or a PFC decision that pauses or drops. :meth:`Engine._step` is the same step in
Python around the compiled parts, taken otherwise (and by the tests' numpy reference throughout).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from cc.model import DcqcnParams, ParamBatch
from cc.sim.buffer import SharedBuffer
from cc.sim.flowstate import FlowState
from cc.sim.fused import run_fused
from cc.sim.kernel import EXITS, Egress, PauseLimits, StepKernel
from cc.sim.network import MTU_BYTES, Network, SimConfig
from cc.sim.pfc import PfcState
from cc.sim.recorder import Recorder
from cc.sim.topology import Topology
from cc.sim.traffic import FlowSpec

__all__ = ["Engine"]


class Engine(FlowState):
    """Simulate ``flows`` over ``topology`` with each parameter set of ``params`` (one row each).

    ``flows`` is a sequence (recorded per flow, for FCTs) or an endless iterator sorted by start
    time (then ``priorities`` and nothing is recorded per flow). ``measure_from_us`` excludes a
    warm-up from the recorder's figures. ``parts`` builds the compiled parts of the step for a
    parameter batch (:class:`cc.sim.kernel.StepKernel`); tests pass the numpy reference to compare.
    """

    def __init__(
        self,
        topology: Topology,
        flows: Sequence[FlowSpec] | Iterable[FlowSpec],
        params: DcqcnParams | Sequence[DcqcnParams] | ParamBatch,
        config: SimConfig | None = None,
        *,
        priorities: Sequence[int] | None = None,
        measure_from_us: float = 0.0,
        trace_us: float | None = None,
        measure_queues: bool = True,
        parts: Callable[[ParamBatch], StepKernel] = StepKernel,
    ) -> None:
        self._make_parts = parts
        config = config or SimConfig()
        batch = ParamBatch.of(params)
        listed = list(flows) if isinstance(flows, Sequence) else None
        if listed is not None:
            listed.sort(key=lambda f: f.start_us)
            net = Network(topology, config, priorities or sorted({f.priority for f in listed}) or (3,))
            net.reserve_hops(listed)
        else:
            net = Network(topology, config, priorities or (3,))
            net.hop_max = topology.max_switch_hops()
        super().__init__(net, batch, listed if listed is not None else flows, listed is not None)
        self.topology = topology
        self.recorder = Recorder(net, len(batch), topology.n_ports, measure_from_us, measure_queues)
        self._trace_steps = max(1, round(trace_us / config.dt_us)) if trace_us else 0
        self.trace: list[tuple[float, np.ndarray, np.ndarray]] = []
        self.pfc = PfcState(net, len(batch))
        self.buffer = SharedBuffer(net, len(batch))
        self._pause_level = np.full((len(batch), net.K + 1), np.inf)  # XOFF when each pause began
        self._key_cap = np.append(np.repeat(net.link_cap_bytes, net.P), np.inf)
        self._lossy = net.key_is_switch & ~net.key_lossless
        self._any_lossy = bool(self._lossy.any())
        self._no_departures = np.zeros((len(batch), net.K + 1))
        self._last_departed = self._no_departures
        self.loop_exits = dict.fromkeys(EXITS, 0)  # calls of the compiled loop, by why each returned
        self.set_params(batch)

    # -- parameters ----------------------------------------------------------------------------
    def set_params(self, params: DcqcnParams | Sequence[DcqcnParams] | ParamBatch) -> None:
        """Switch every row to new parameters from the next step (a tuner's change)."""
        batch = ParamBatch.of(params)
        if len(batch) != self.batch:
            raise ValueError(f"{len(batch)} parameter sets for a batch of {self.batch}")
        self.params = batch
        self.parts = self._make_parts(batch)
        net = self.net
        scale = net.key_ecn_scale[None, :]
        self._kmin = np.where(batch.ecn_enabled, batch.kmin_bytes * scale, np.inf)
        self._kmax = np.where(batch.ecn_enabled, batch.kmax_bytes * scale, np.inf)
        ramp = np.maximum(self._kmax - np.where(np.isinf(self._kmin), 0.0, self._kmin), 1e-9)
        self._slope = np.where(np.isinf(self._kmin), 0.0, batch.pmax / ramp)  # RED ramp per byte
        self._kmin_ramp = np.where(np.isinf(self._kmin), 0.0, self._kmin)  # finite: inf - inf is NaN
        switch = net.key_is_switch
        self._kmin_floor = float(self._kmin[:, switch].min()) if switch.any() else math.inf
        lossless = net.key_lossless[None, :]
        self._xoff = np.where(lossless, batch.xoff_bytes, np.inf)
        self._lossy_inf = np.where(lossless, 0.0, np.inf)  # no XOFF where there is no PFC
        self._xon_ratio = batch.xon_bytes / batch.xoff_bytes  # XON keeps its ratio to a dynamic XOFF
        any_lossless = bool(net.key_lossless.any())
        self._xoff_floor = float(batch.xoff_bytes.min()) if any_lossless else math.inf
        self._xon_ratio_floor = float(self._xon_ratio.min())
        pmax = np.ascontiguousarray(np.broadcast_to(batch.pmax, self._slope.shape))
        buf = self.buffer
        self._pause_limits = PauseLimits(
            self._xoff, self._lossy_inf, self._xon_ratio, self._key_cap, net.key_headroom, buf.counted,
            buf.counted_switch, buf.ingress_col, buf.pool, buf.alpha, buf.n_switches,
        )  # fmt: skip
        self._egress = Egress(
            net.K + 1,
            net.link_cap_bytes,
            net.P,
            self._kmin_ramp,
            self._slope,
            pmax,
            self._kmax,
            self._kmin_floor,
        )

    # -- running -------------------------------------------------------------------------------
    def run(self, until_us: float) -> None:
        """Advance to ``until_us`` (whole steps; the step that crosses it is completed)."""
        dt = self.config.dt_us
        end = math.ceil(until_us / dt - 1e-9)
        start_step = math.ceil(self.recorder.start_us / dt - 1e-9)
        while self.t < end:
            self._admit()
            if self.baseline is None and self.t >= start_step:
                self.baseline = self.snapshot()  # after admission: flows starting now are measured
            # steady for a path's length, and then for the ring's depth: every emission a gather
            # can still read is the steady one, so resuming after a jump needs no re-alignment
            if self._calm_steps > self.slots.fill_steps + self.slots.depth and self._skip(end):
                continue
            if self._fused():
                run_fused(self, self._horizon(end, start_step))
            else:
                self._step()

    def drain(self, max_us: float) -> bool:
        """Run until every flow has finished (True) or ``max_us`` is reached (False)."""
        dt = self.config.dt_us
        while self.t * dt < max_us:
            if self._next is None and not self.active.any():
                return True
            self.run(min(max_us, (self.t + 64) * dt))
        return self._next is None and not self.active.any()

    def _fused(self) -> bool:
        """Whether the compiled loop may take the next steps: it leaves pauses, lossy drops and the
        trace to :meth:`_step`."""
        loop = self.parts.fused and not (self._any_lossy or self.pfc.live or self._trace_steps)
        return loop and not self.recorder.pausing

    def _horizon(self, end: int, start_step: int) -> int:
        """The step before which Python must act again: ``end``, the start of the measurement
        window, or the next admission (the first step t with start < (t + 1) dt, as :meth:`_admit`)."""
        stop = end
        if self.baseline is None and self.t < start_step:
            stop = min(stop, start_step)
        if self._next is not None:
            start, dt = self._next.start_us, self.config.dt_us
            s = max(self.t + 1, math.floor(start / dt) - 1)
            while not start < (s + 1) * dt:
                s += 1
            stop = min(stop, s)
        return stop

    def _step(self) -> None:
        st, rec, parts = self.slots, self.recorder, self.parts
        dt, t = self.config.dt_us, self.t
        now = t * dt
        phase = t % st.depth
        ring = self.ring
        delivered_m, marked_any = parts.arrive(
            ring, phase, self.backlog, self.marked, self.delivered, self.acc["rx_bytes"]
        )
        seen = self.pfc.seen(t)
        # this step's emissions go to the ring slot written depth steps ago, read for the last time
        emit_b, emit_m = ring.hop_bytes[phase], ring.hop_marks[phase]

        # 1-2. switch egress: serve, mark at dequeue, forward
        standing, departed, marking, held, left = parts.egress(
            self.backlog, self.marked, st.queue_flat, st.ingress_flat, seen, self._egress, emit_b, emit_m
        )
        rec.on_queues(now, dt, standing, departed)

        # 3. receivers: CE marks -> NP -> CNPs on their way back
        if marked_any:
            acc = self.acc
            if parts.np_step(
                self.np_state, delivered_m, self.config.seed, st.flow_id, t, dt, acc["ecn_marked"],
                acc["cnp_sent"], self.cnp_ring, st.cnp_delay,
            ):  # fmt: skip
                self._cnp_live = self.cnp_depth
        else:
            self.np_state.now_us += dt

        # 4. senders: the RP handles arriving CNPs and its increase events, the NIC sends
        cnp_in = self.zero_bf
        if self._cnp_live:
            self._cnp_live -= 1
            arriving = self.cnp_ring[t % self.cnp_depth]
            if np.count_nonzero(arriving):
                cnp_in = arriving.copy()
                arriving.fill(0.0)
                self.acc["cnp_handled"] += cnp_in
        sent = self._inject(seen)
        parts.rp_step(self.rp, cnp_in, sent, dt, st.line)
        ring.nic_bytes[phase] = sent

        # 5. PFC decisions and drops, on what stays in the buffers
        self._tail(t, standing, held, left, seen, marking or marked_any, sent, departed)

    def _tail(
        self, t: int, standing: np.ndarray, held: np.ndarray, left: float, seen: np.ndarray | None,
        marking: bool, sent: np.ndarray, departed: np.ndarray,
    ) -> None:  # fmt: skip
        """Step ``t`` from PFC on: decisions and drops, the recorder's pauses and busy time."""
        dt, rec = self.config.dt_us, self.recorder
        self._pfc_and_drops(t, standing, held, left)
        rec.on_pause(t * dt, dt, seen)
        rec.on_busy(t * dt, self.busy_dt)
        self.t = t + 1
        self._close(marking, standing, sent, departed)

    def _close(self, marking: bool, standing: np.ndarray, sent: np.ndarray, departed: np.ndarray) -> None:
        """The end of a step: flows finishing and stopping, the calm test, the trace."""
        self._finish_and_stop()
        calm = not (marking or self._cnp_live or self.pfc.live or np.count_nonzero(standing))
        if calm and np.array_equal(sent, self._last_sent) and self._at_cap():
            self._calm_steps += 1
        else:
            self._calm_steps = 0
        self._last_sent = sent
        self._last_departed = departed
        if self._trace_steps and self.t % self._trace_steps == 0:
            self.trace.append((self.t * self.config.dt_us, self.slots.flow_id.copy(), self.delivered.copy()))

    _cnp_live = 0

    def _inject(self, seen: np.ndarray | None) -> np.ndarray:
        """Bytes each flow's NIC sends this step."""
        st = self.slots
        paused = None if seen is None else seen.take(st.src_key_flat)
        ports = st.src_port_flat if self.shared_nic else None
        return self.parts.send(
            self.rp.rc, st.demand, self.active, paused, ports, self.port_line, self.config.dt_us,
            self.owed, self.sent, self.acc["tx_bytes"],
        )  # fmt: skip

    def _pfc_and_drops(self, t: int, standing: np.ndarray, held: np.ndarray, left: float) -> None:
        """``held``: what each ingress holds now; ``left``: the bytes in all queues."""
        st = self.slots
        occupancy: np.ndarray | None = held
        if self._any_lossy:
            cap = np.minimum(self.config.lossy_buffer_bytes, self.buffer.egress_limit(held))
            over = np.where(self._lossy, standing - cap, 0.0)
            if over.max() > 0:
                ratio = np.divide(np.maximum(over, 0.0), standing, out=np.zeros_like(over), where=over > 0)
                self._drop(ratio.take(st.queue_index))
                occupancy = None  # the drops changed it
        # no ingress of any row can be above its XON while fewer bytes than that are buffered
        # anywhere, and then nothing needs pausing (pfc.paused is all clear) and nothing drops.
        # (A bound with the XON/XOFF ratio's margin below any pause: how ``left`` was summed,
        # sequentially or pairwise, cannot change a decision.)
        total = left
        floor = self._xon_ratio_floor * min(self._xoff_floor, self.buffer.lower_bound(total))
        if not self.pfc.live and total <= floor:
            return
        if occupancy is None:
            occupancy = self._occupancy()
        if not self.pfc.live and float(occupancy.max()) <= floor:
            return
        # XOFF: the static one or the ingress's dynamic share of its switch's free pool, whichever
        # is lower; XON at XOFF x xon_ratio. What an ingress holds in the shared pool stays there
        # when its dynamic XOFF falls as the pool fills: only what arrives after XOFF goes to the
        # headroom. So a pause's drop level is set when it begins, at XOFF or at what the ingress
        # held before this step's arrivals (at most a link's worth per step), whichever is higher,
        # and kept while the pause lasts (self._pause_level).
        paused, ratio = self.parts.pause(occupancy, self.pfc.paused, self._pause_level, self._pause_limits)
        if ratio is not None:  # headroom exhausted: the lossless promise is broken
            self._drop(ratio.take(st.ingress_index))
        self.pfc.decide(t, paused)

    def _occupancy(self) -> np.ndarray:
        """Bytes each ingress (link, priority) holds in its switch, ``(batch, K + 1)``."""
        B, K1 = self.batch, self.net.K + 1
        flat = np.bincount(self.slots.ingress_flat, self.backlog.reshape(-1), minlength=B * K1)
        return flat.reshape(B, K1)

    def _drop(self, ratio: np.ndarray) -> None:
        """Drop ``ratio`` of every queued share; the sender re-sends the bytes (NAK, or timeout when
        the loss hit a flow's tail and no later packet reveals the gap)."""
        lost = self.backlog * ratio
        self.backlog -= lost
        self.marked -= self.marked * ratio
        per_flow = lost.sum(axis=2)
        hit = per_flow > 0
        tail = hit & (self.owed <= 0)
        self.sent -= per_flow
        self.owed += per_flow
        self.acc["out_of_sequence"] += np.ceil(per_flow / MTU_BYTES)
        self.acc["nak"] += hit & ~tail
        self.acc["timeouts"] += tail
        self.recorder.on_drop(self.t * self.config.dt_us, per_flow.sum(axis=1))

    def _at_cap(self) -> bool:
        """Every live flow sends at its cap (RP at line rate or above its demand): rates cannot move."""
        return bool(np.all((self.rp.rc >= self.slots.demand * (1 - 1e-9)) | ~self.active))

    def _skip(self, end: int) -> bool:
        """Jump over a calm stretch in closed form; False if fewer than two steps can be skipped."""
        dt = self.config.dt_us
        horizon = end
        if self._next is not None:
            horizon = min(horizon, math.floor(self._next.start_us / dt))
        if self._next_stop < math.inf:
            horizon = min(horizon, math.floor(self._next_stop / dt) - 1)
        for edge in (self.recorder.start_us, self.recorder.stop_us):  # never jump across the window
            edge_step = math.ceil(edge / dt) if math.isfinite(edge) else end
            if self.t < edge_step:
                horizon = min(horizon, edge_step)
        if self._trace_steps:
            horizon = min(horizon, (self.t // self._trace_steps + 1) * self._trace_steps - 1)
        per_step = self._last_sent
        sending = per_step > 0
        if sending.any():  # stop before any flow runs out of bytes to send
            left = float(np.min(self.owed[sending] / per_step[sending]))
            if math.isfinite(left):
                horizon = min(horizon, self.t + math.floor(left) - 1)
        steps = horizon - self.t
        if steps < 2:
            self._calm_steps = 0
            return False
        span = steps * dt
        moved = per_step * steps
        self.sent += moved
        self.delivered += moved  # links in steady state deliver what is sent
        self.owed -= moved
        self.acc["tx_bytes"] += moved
        self.acc["rx_bytes"] += moved
        self.parts.rp_step(self.rp, self.zero_bf, moved, span, self.slots.line)
        self.np_state.now_us += span
        self.recorder.on_calm(self.t * dt, span, steps, self._last_departed, self.busy_dt / dt)
        self.t += steps
        return True
