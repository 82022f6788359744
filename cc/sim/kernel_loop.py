"""Many steps of the simulator in one compiled call (numba, :mod:`cc.sim.jit`).

At one parameter set and 16 flows a step's arithmetic is well under a microsecond, and what cost
~20 µs a step was the Python around it: seven kernel dispatches (~2 µs each with 10-18 array
arguments), the recorder's calls and the calm-stretch test. :func:`steps_kernel` runs the engine's
whole step (:meth:`cc.sim.engine.Engine._step`: arrivals, egress, the recorder's queue samples,
CE draws and NP, the CNPs off their ring, the NIC, the RP, the receivers' busy time, the calm test)
for as many steps as nothing needs Python, calling the same compiled parts in the same order, so
every bit is what the step-by-step path computes (tests/cc/test_kernel.py compares whole runs).

It returns to Python, with a status saying why, where Python must act:

- ``DONE``: the engine's horizon (the end of the run, the next admission, the start of the
  measurement window) is reached;
- ``CALM``: the stretch is calm for long enough that the engine may jump it in closed form;
- ``FINISH`` (the step is complete up to its bookkeeping): a flow has finished or a stop time is
  reached; the engine completes and releases flows, then the calm test;
- ``TAIL`` (the step is complete up to PFC): PFC pauses or drops; the engine decides again and
  runs the drops, the recorder's pause accounting, and the rest of the step.

Entered only while no pause is live or being accounted and no priority is lossy (the engine's
``_fused`` test): then a PFC decision that pauses nothing changes nothing, and the recorder's
pause accounting has nothing to count.
"""

from __future__ import annotations

import numpy as np

from cc.sim.jit import kernel
from cc.sim.kernel import (
    CALM,
    CALM_STEPS,
    CNP_LIVE,
    DONE,
    FINISH,
    LEFT,
    MARKING,
    MEASURED,
    NP_NOW,
    RP_NOW,
    TAIL,
    T,
)  # fmt: skip
from cc.sim.kernel_fabric import arrive_kernel, egress_kernel, pause_kernel, send_kernel
from cc.sim.kernel_rules import np_kernel, rp_kernel, uniform_into

__all__ = ["queue_bin", "steps_kernel"]


@kernel
def _pfc_idle(standing, held, left, xon_ratio_floor, xoff_floor, pool, alpha):
    """Engine._pfc_and_drops' early exit (no pause live, no lossy key): True when no ingress of
    any row can be above its XON, so nothing pauses and nothing drops."""
    floor = xon_ratio_floor * min(xoff_floor, alpha * max(pool - left, 0.0))
    if left <= floor:
        return True
    deepest = -np.inf
    for j in range(held.size):
        deepest = max(deepest, held[j])
    return deepest <= floor


@kernel
def _pauses(occupancy, was, level, xoff, lossy_inf, xon_ratio, key_cap, headroom, counted, switch_of,
            ingress_col, pool, alpha, n_switches, paused, ratio):  # fmt: skip
    """The PFC decision (:func:`cc.sim.kernel_fabric.pause_kernel`): whether it pauses or drops
    anything. If not, PfcState.decide would change nothing while no pause is live (``was`` all
    clear, the levels all inf), and the loop goes on; if so, the engine decides again in Python
    (``level`` is only read where ``was`` is set, so the repeat finds what this one found)."""
    engaged = pause_kernel(occupancy, was, level, xoff, lossy_inf, xon_ratio, key_cap, headroom, counted,
                           switch_of, ingress_col, pool, alpha, n_switches, paused, ratio)  # fmt: skip
    for j in range(paused.size):
        engaged = engaged or paused.flat[j]
    return engaged


@kernel
def queue_bin(q, edges):
    """:func:`cc.sim.recorder.queue_bins` for one length: the bin from a logarithm, then one
    comparison with the bin's own edges on each side (so libm's last bit cannot move it)."""
    j = np.floor(np.log10(max(q, 1e3)) * 60.0 - 180.0)
    b = int(min(max(j, 0.0), 360.0)) + 2
    if q < edges[b]:
        b -= 1
    if b + 1 < edges.size and q >= edges[b + 1]:  # the last bin has no upper edge
        b += 1
    if q < 1.0:
        b -= 1
    return b


@kernel
def _calm(marking, cnp_live, standing, sent, last_sent, rc, demand, active):
    """Engine._step's calm test: nothing marking, no CNP or queue, rates unchanged and at their cap."""
    if marking or cnp_live:
        return False
    for j in range(standing.size):
        if standing[j] != 0.0:
            return False
    rows, flows = sent.shape
    for b in range(rows):
        for f in range(flows):
            if sent[b, f] != last_sent[b, f]:
                return False
            if active[b, f] and not rc[b, f] >= demand[f] * (1 - 1e-9):
                return False
    return True


@kernel
def _finishing(t, dt, next_stop, owed, delivered, sent_total):
    """Whether FlowState._finish_and_stop has anything to do after step ``t - 1``."""
    if t * dt >= next_stop:
        return True
    rows, flows = owed.shape
    for b in range(rows):
        for f in range(flows):
            if owed[b, f] <= 0.0 and delivered[b, f] >= sent_total[b, f] - 0.5:
                return True
    return False


@kernel
def steps_kernel(
    counts, clocks, stop_t, calm_after, dt, seed, cnp_depth,
    rec_start, rec_stop, queues, hist, queue_max, edges, switch_keys, rec_departed, busy_us, busy_dt,
    next_stop,
    wire, wire_marks, hop_index, rx_index, hop_w, rx_w, fractional, hop_bytes, hop_marks, nic_bytes,
    backlog, marked, delivered, sent_total, owed, active, demand, line, port_line, ports,
    rx, ecn, cnp_sent, cnp_handled, tx,
    next_cnp, flow_ids, cnp_ring, cnp_delay, table,
    rc, rt, alpha, alpha_timer, inc_timer, byte_counter, timer_stage, byte_stage, next_cut, seen_cnp,
    byte_on,
    queue_flat, ingress_flat, keys, link_cap, prios, kmin, slope, pmax, kmax, kmin_floor,
    xon_ratio_floor, xoff_floor, pool, alpha_buf,
    was, level, xoff, lossy_inf, xon_ratio, key_cap, headroom, counted, switch_of, ingress_col, n_switches,
    paused, ratio,
    standing, departed, held, delivered_m, draws, cnp_in, sent, last_sent,
):  # fmt: skip
    """Steps from ``counts[T]`` until ``stop_t`` or a reason to return (the module's statuses)."""
    t, cnp_live, calm_steps = counts[T], counts[CNP_LIVE], counts[CALM_STEPS]
    np_now, rp_now, measured = clocks[NP_NOW], clocks[RP_NOW], clocks[MEASURED]
    depth = hop_bytes.shape[0]
    rows, flows = sent.shape
    n_sw = switch_keys.size
    status = DONE
    first = True
    while True:
        if t >= stop_t:
            break
        if calm_steps > calm_after and not first:
            status = CALM
            break
        first = False
        now = t * dt
        phase = t % depth
        counting = rec_start <= now < rec_stop
        marked_any = arrive_kernel(
            wire, wire_marks, hop_index[0, phase], rx_index[0, phase], hop_index[1, phase],
            rx_index[1, phase], hop_w, rx_w, fractional, backlog, marked, delivered, rx, delivered_m,
        )  # fmt: skip
        # 1-2. switch egress (no pause anywhere: seen is None)
        standing[:] = 0.0
        held[:] = 0.0
        marking, left = egress_kernel(
            backlog, marked, queue_flat, ingress_flat, None, keys, link_cap, prios, kmin, slope, pmax,
            kmax, kmin_floor, hop_bytes[phase], hop_marks[phase], standing, departed, held,
        )  # fmt: skip
        if queues and counting:  # Recorder.on_queues, binned at once
            measured += dt
            for b in range(rows):
                for s in range(n_sw):
                    q = standing[b * keys + switch_keys[s]]
                    hist[b, s, queue_bin(q, edges)] += 1
                    queue_max[b, s] = max(queue_max[b, s], q)
            for b in range(rows):
                for k in range(keys):
                    rec_departed[b, k] += departed[b * keys + k]
        # 3. receivers
        if marked_any:
            uniform_into(seed, flow_ids, np.uint64(t), draws)
            if np_kernel(
                next_cnp, delivered_m, draws, np_now, dt, table, ecn, cnp_sent, cnp_ring, t, cnp_delay
            ):
                cnp_live = cnp_depth
        np_now += dt
        # 4. senders
        cnp_in[:] = 0.0
        if cnp_live:
            cnp_live -= 1
            arriving = cnp_ring[t % cnp_ring.shape[0]]
            nonzero = False
            for b in range(rows):
                for f in range(flows):
                    nonzero = nonzero or arriving[b, f] != 0.0
            if nonzero:
                for b in range(rows):
                    for f in range(flows):
                        cnp_in[b, f] = arriving[b, f]
                        arriving[b, f] = 0.0
                        cnp_handled[b, f] += cnp_in[b, f]
        send_kernel(rc, demand, active, None, ports, port_line, dt, owed, sent_total, tx, sent)
        rp_kernel(
            rc, rt, alpha, alpha_timer, inc_timer, byte_counter, timer_stage, byte_stage, next_cut,
            seen_cnp, cnp_in, sent, rp_now, dt, line, table, byte_on,
        )  # fmt: skip
        rp_now += dt
        nic_bytes[phase] = sent
        # 5. PFC with nothing live: its early exit, else a decision that must pause nothing
        if not _pfc_idle(standing, held, left, xon_ratio_floor, xoff_floor, pool, alpha_buf) and _pauses(
            held.reshape((rows, keys)), was, level, xoff, lossy_inf, xon_ratio, key_cap, headroom, counted,
            switch_of, ingress_col, pool, alpha_buf, n_switches, paused, ratio,
        ):  # fmt: skip
            status = TAIL
            clocks[LEFT] = left
            counts[MARKING] = 1 if (marking or marked_any) else 0
            break
        if counting:  # Recorder.on_busy
            for b in range(rows):
                for p in range(busy_dt.shape[1]):
                    busy_us[b, p] += busy_dt[b, p]
        t += 1
        if _finishing(t, dt, next_stop, owed, delivered, sent_total):
            status = FINISH
            counts[MARKING] = 1 if (marking or marked_any) else 0
            break
        if _calm(marking or marked_any, cnp_live, standing, sent, last_sent, rc, demand, active):
            calm_steps += 1
        else:
            calm_steps = 0
        last_sent[:] = sent
    counts[T], counts[CNP_LIVE], counts[CALM_STEPS] = t, cnp_live, calm_steps
    clocks[NP_NOW], clocks[RP_NOW], clocks[MEASURED] = np_now, rp_now, measured
    return status
