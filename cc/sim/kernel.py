"""The parts of the simulator's step that run compiled, behind one interface the engine calls.

A step of :class:`cc.sim.engine.Engine` was ~130 numpy calls over ``(rows, flows, hops)`` arrays,
each 0.4-1.5 µs of overhead at the simulator's sizes whatever the work. The hot parts now run as
numba loops (:mod:`cc.sim.kernel_rules`: CE draws, NP and RP; :mod:`cc.sim.kernel_fabric`:
arrivals, switch egress, NIC, PFC), with the same arithmetic in the same order as the numpy code
they replace, which the tests keep as the reference (tests/cc/reference.py implements
:class:`StepKernel`'s methods in numpy) and compare bit for bit. The engine keeps the bookkeeping around them
(admission, completion, calm-stretch jumps, pauses), and :mod:`cc.sim.kernel_loop` runs whole
stretches of steps in one call where none of that is due (``fused``; the reference steps one by one).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from cc.model import NpState, ParamBatch, RpState
from cc.sim.ring import EmissionRing

__all__ = ["Egress", "PauseLimits", "StepKernel"]

Floats = NDArray[np.float64]
MASK = 0xFFFFFFFFFFFFFFFF  # the draws hash 64-bit seeds and steps

# why the compiled loop (cc.sim.kernel_loop) returned, and the slots of its counts[] and clocks[]
DONE, CALM, FINISH, TAIL = range(4)
EXITS = ("done", "calm", "finish", "tail")  # their names, for Engine.loop_exits
T, CNP_LIVE, CALM_STEPS, MARKING = range(4)
NP_NOW, RP_NOW, MEASURED, LEFT = range(4)


class Egress(NamedTuple):
    """What the switch egress of a step reads besides the queues: fixed per network and parameters."""

    keys: int  # K + 1 queue keys per row, the last one the trash key of unused hops
    link_cap: Floats  # bytes per step of each link, (links,)
    prios: int  # P priorities per link, keys are link * P + priority, highest priority first
    kmin: Floats  # RED: Kmin per (row, key), 0 where ECN is off (the ramp then has slope 0)
    slope: Floats  # Pmax / (Kmax - Kmin) per (row, key)
    pmax: Floats
    kmax: Floats  # inf where ECN is off
    kmin_floor: float  # the lowest Kmin of any switch key: no mark below it


class PauseLimits(NamedTuple):
    """What the PFC decision of a step reads besides the buffers: fixed per network and parameters."""

    xoff: Floats  # the static XOFF per (row, key), inf where the priority is lossy
    lossy_inf: Floats  # 0 where lossless, inf where lossy (no dynamic XOFF there), (1, keys)
    xon_ratio: Floats  # XON / XOFF per row, (rows, 1)
    key_cap: Floats  # bytes a key's link carries per step (inf for the trash key), (keys,)
    headroom: Floats  # PFC headroom per key above its XOFF, (keys,)
    counted: NDArray[np.int64]  # keys inside a switch (their bytes are in its pool) ...
    switch_of: NDArray[np.int64]  # ... and the switch of each of them
    ingress_col: NDArray[np.int64]  # the switch of each key, n_switches for none
    pool: float  # shared buffer bytes per switch
    alpha: float  # dynamic threshold: alpha x free pool
    n_switches: int


class StepKernel:
    """The parts of a step the engine runs compiled, for one batch of parameter sets (the tests'
    numpy reference, tests/cc/reference.py, overrides each method)."""

    fused = True  # the engine may run many steps in one call (cc.sim.kernel_loop); the reference may not

    def __init__(self, params: ParamBatch) -> None:
        # numba comes with these modules, so only a process that simulates loads it (~120 MB of
        # RSS and 0.2-0.6 s; the daemon imports the tuner, which simulates only when it decides)
        from cc.sim import kernel_fabric, kernel_rules

        self._fabric, self._rules = kernel_fabric, kernel_rules
        self.table = kernel_rules.row_table(params)
        self.byte_on = bool(np.any(params.rp_byte_reset))  # as the reference: counters kept if any row counts

    def np_step(
        self,
        state: NpState,
        marked: Floats,
        seed: int,
        flow_ids: NDArray[np.int64],
        t: int,
        dt_us: float,
        ecn: Floats,
        cnp_sent: Floats,
        cnp_ring: Floats,
        cnp_delay: NDArray[np.int64],
    ) -> bool:
        """CE packets ``floor(marked / MTU + u)`` with u from :func:`cc.sim.draws.uniform`, added to
        ``ecn``, and the CNPs :func:`cc.model.dcqcn.np_step` sends for them, added to ``cnp_sent``
        and to ``cnp_ring[(t + cnp_delay) % depth]``, where the senders find them. Returns whether
        any CNP was sent."""
        draws = np.empty(flow_ids.size)
        self._rules.uniform_into(np.uint64(seed & MASK), flow_ids, np.uint64(t & MASK), draws)
        sent = self._rules.np_kernel(
            state.next_cnp_us, marked, draws, state.now_us, dt_us, self.table, ecn, cnp_sent, cnp_ring, t,
            cnp_delay,
        )  # fmt: skip
        state.now_us += dt_us
        return bool(sent)

    def arrive(
        self, ring: EmissionRing, phase: int, backlog: Floats, marked: Floats, delivered: Floats, rx: Floats
    ) -> tuple[Floats, bool]:
        """The step's arrivals from ``ring``: into each hop's ``backlog``/``marked``, and to each
        receiver (``delivered`` and the ``rx`` counter); returns the receivers' marked bytes and
        whether any is non-zero."""
        g = ring.gathers(phase)
        delivered_m = np.empty_like(delivered)
        any_marked = self._fabric.arrive_kernel(
            ring.bytes, ring.marks, *g, ring.fractional, backlog, marked, delivered, rx, delivered_m
        )
        return delivered_m, bool(any_marked)

    def egress(
        self,
        backlog: Floats,
        marked: Floats,
        queue_flat: NDArray[np.int64],
        ingress_flat: NDArray[np.int64],
        seen: NDArray[np.bool_] | None,
        egress: Egress,
        emit_b: Floats,
        emit_m: Floats,
    ) -> tuple[Floats, Floats, bool, Floats, float]:
        """Switch egress (the engine's steps 1-2): bytes leave ``backlog``/``marked`` into
        ``emit_b``/``emit_m``; returns what stays in each queue and what left it, ``(rows, keys)``
        each, whether any queue was deep enough to mark, what each ingress holds afterwards
        ``(rows, keys)``, and the bytes left in all queues (a bound for PFC's early exit)."""
        e = egress
        rows = backlog.shape[0]
        standing, departed = np.zeros(rows * e.keys), np.empty(rows * e.keys)
        held = np.zeros(rows * e.keys)
        marking, left = self._fabric.egress_kernel(
            backlog, marked, queue_flat, ingress_flat, seen, e.keys, e.link_cap, e.prios, e.kmin, e.slope,
            e.pmax, e.kmax, e.kmin_floor, emit_b, emit_m, standing, departed, held,
        )  # fmt: skip
        shape = (rows, e.keys)
        return (
            standing.reshape(shape),
            departed.reshape(shape),
            bool(marking),
            held.reshape(shape),
            float(left),
        )

    def pause(
        self, occupancy: Floats, was: NDArray[np.bool_], level: Floats, limits: PauseLimits
    ) -> tuple[NDArray[np.bool_], Floats | None]:
        """PFC (the engine's step 5) from what each ingress holds: the keys paused now, and where
        the headroom overflowed, the share of each ingress to drop (else None). ``level``, the drop
        level of each pause, is updated in place."""
        e = limits
        paused, ratio = np.empty(occupancy.shape, dtype=bool), np.empty_like(occupancy)
        overflow = self._fabric.pause_kernel(
            occupancy, was, level, e.xoff, e.lossy_inf, e.xon_ratio, e.key_cap, e.headroom, e.counted,
            e.switch_of, e.ingress_col, e.pool, e.alpha, e.n_switches, paused, ratio,
        )  # fmt: skip
        return paused, ratio if overflow else None

    def send(
        self,
        rc: Floats,
        demand: Floats,
        active: NDArray[np.bool_],
        paused: NDArray[np.bool_] | None,
        ports: NDArray[np.int64] | None,
        port_line: Floats,
        dt_us: float,
        owed: Floats,
        sent_total: Floats,
        tx: Floats,
    ) -> Floats:
        """Bytes each flow's NIC sends this step (the engine's step 4); ``owed``, ``sent_total``
        and ``tx`` are updated in place."""
        sent = np.empty_like(rc)
        self._fabric.send_kernel(
            rc, demand, active, paused, ports, port_line, dt_us, owed, sent_total, tx, sent
        )
        return sent

    def rp_step(self, state: RpState, cnps: Floats, sent: Floats, dt_us: float, line: Floats) -> None:
        """:func:`cc.model.dcqcn.rp_step`, with ``line`` the line rate per flow column."""
        s = state
        self._rules.rp_kernel(
            s.rc, s.rt, s.alpha, s.alpha_timer_us, s.inc_timer_us, s.byte_counter, s.timer_stage,
            s.byte_stage, s.next_cut_us, s.seen_cnp, cnps, sent, s.now_us, dt_us, line, self.table,
            self.byte_on,
        )  # fmt: skip
        s.now_us += dt_us
