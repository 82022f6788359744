"""The engine's side of the compiled time loop (:mod:`cc.sim.kernel_loop`): hand it the state,
take back the loop's scalars, and finish a step the loop returned in the middle of.

:func:`run_fused` is :meth:`cc.sim.engine.Engine._step` repeated until ``stop_t`` or until something
needs Python; the engine decides when the loop may run (no pause live or being counted, no lossy
priority, no trace) and where it must stop (the end of the run, the next admission, the start of
the measurement window).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cc.sim.kernel import (
    CALM_STEPS,
    CNP_LIVE,
    EXITS,
    FINISH,
    LEFT,
    MARKING,
    MASK,
    MEASURED,
    NP_NOW,
    RP_NOW,
    TAIL,
    T,
)
from cc.sim.recorder import QUEUE_EDGES

if TYPE_CHECKING:
    from cc.sim.engine import Engine

__all__ = ["run_fused"]


def run_fused(engine: Engine, stop_t: int) -> None:
    """Advance ``engine`` by compiled steps towards ``stop_t`` (at least one step), and count the
    call in ``engine.loop_exits`` under the reason it returned."""
    e, st, rec, rp, ring = engine, engine.slots, engine.recorder, engine.rp, engine.ring
    from cc.sim import kernel_loop  # numba comes with the first engine, not with the import

    B, keys, F = e.batch, e.net.K + 1, st.capacity
    hist, queue_max = rec.bins()
    counts = np.array([e.t, e._cnp_live, e._calm_steps, 0], dtype=np.int64)
    clocks = np.array([e.np_state.now_us, rp.now_us, rec.measured_us, 0.0])
    standing, departed, held = np.empty((B, keys)), np.empty((B, keys)), np.empty((B, keys))
    sent, last_sent = np.empty((B, F)), e._last_sent.copy()
    hop_index, rx_index, hop_w, rx_w = ring.all_gathers()
    acc, g, buf, parts, lim = e.acc, e._egress, e.buffer, e.parts, e._pause_limits
    # scalars as the types warm_cache compiled for (an int where a float is expected would compile
    # another variant at run time)
    status = kernel_loop.steps_kernel(
        counts, clocks, int(stop_t), st.fill_steps + st.depth, float(e.config.dt_us),
        np.uint64(e.config.seed & MASK), e.cnp_depth, float(rec.start_us), float(rec.stop_us),
        bool(rec.queues), hist, queue_max, QUEUE_EDGES, rec.switch_keys, rec.departed, rec.busy_us,
        e.busy_dt, float(e._next_stop),
        ring.bytes, ring.marks, hop_index, rx_index, hop_w, rx_w, bool(ring.fractional), ring.hop_bytes,
        ring.hop_marks, ring.nic_bytes,
        e.backlog, e.marked, e.delivered, e.sent, e.owed, e.active, st.demand, st.line, e.port_line,
        st.src_port_flat if e.shared_nic else None,
        acc["rx_bytes"], acc["ecn_marked"], acc["cnp_sent"], acc["cnp_handled"], acc["tx_bytes"],
        e.np_state.next_cnp_us, st.flow_id, e.cnp_ring, st.cnp_delay, parts.table,
        rp.rc, rp.rt, rp.alpha, rp.alpha_timer_us, rp.inc_timer_us, rp.byte_counter, rp.timer_stage,
        rp.byte_stage, rp.next_cut_us, rp.seen_cnp, bool(parts.byte_on),
        st.queue_flat, st.ingress_flat, g.keys, g.link_cap, g.prios, g.kmin, g.slope, g.pmax, g.kmax,
        float(g.kmin_floor), float(e._xon_ratio_floor), float(e._xoff_floor), float(buf.pool),
        float(buf.alpha),
        e.pfc.paused, e._pause_level, lim.xoff, lim.lossy_inf, lim.xon_ratio, lim.key_cap, lim.headroom,
        lim.counted, lim.switch_of, lim.ingress_col, lim.n_switches, np.empty((B, keys), dtype=bool),
        np.empty((B, keys)),
        standing.reshape(-1), departed.reshape(-1), held.reshape(-1), np.empty((B, F)), np.empty(F),
        np.empty((B, F)), sent, last_sent,
    )  # fmt: skip
    e.loop_exits[EXITS[status]] += 1
    e._cnp_live, e._calm_steps = int(counts[CNP_LIVE]), int(counts[CALM_STEPS])
    e.np_state.now_us, rp.now_us, rec.measured_us = (float(x) for x in clocks[[NP_NOW, RP_NOW, MEASURED]])
    e._last_departed, e._last_sent = departed, last_sent
    t, marking = int(counts[T]), bool(counts[MARKING])
    if status == TAIL:  # step t is done up to PFC
        e._tail(t, standing, held, float(clocks[LEFT]), None, marking, sent, departed)
        return
    e.t = t
    if status == FINISH:  # step t - 1 is done up to its bookkeeping
        e._close(marking, standing, sent, departed)
