"""The fabric mechanics of the simulator's step, compiled (numba, :mod:`cc.sim.jit`): arrivals off
the wire, the switch egress with its RED marks, the NIC, and the PFC decision on the shared buffer.

Each is the numpy code the engine ran before, written as loops in the same order of operations
(``np.bincount``'s sums in index order, products and quotients as numpy groups them), so results
are the same to the bit; the numpy versions are the tests' reference (tests/cc/reference.py). The
wrappers that call these, and the tuples of constants they read, are in :mod:`cc.sim.kernel`.
"""

from __future__ import annotations

import numpy as np

from cc.sim.jit import kernel

__all__ = ["arrive_kernel", "egress_kernel", "pause_kernel", "send_kernel"]


@kernel
def arrive_kernel(wire, wire_marks, hop_i, rx_i, hop_j, rx_j, hop_w, rx_w, fractional, backlog, marked,
                   delivered, rx, delivered_m):  # fmt: skip
    """This step's arrivals (:class:`cc.sim.ring.EmissionRing`): each hop's bytes and marked bytes
    join its queue, each receiver's are delivered. Returns whether any delivered byte is marked."""
    rows, flows, hops = backlog.shape
    any_marked = False
    for b in range(rows):
        for f in range(flows):
            for h in range(hops):
                i = hop_i[b, f, h]
                got, got_m = wire[i], wire_marks[i]
                if fractional:  # a link of lo + w steps: w of it from one step earlier
                    j = hop_j[b, f, h]
                    got = wire[j] * hop_w[1, f, h] + got * hop_w[0, f, h]
                    got_m = wire_marks[j] * hop_w[1, f, h] + got_m * hop_w[0, f, h]
                backlog[b, f, h] += got
                marked[b, f, h] += got_m
            i = rx_i[b, f]
            got, got_m = wire[i], wire_marks[i]
            if fractional:
                j = rx_j[b, f]
                got = wire[j] * rx_w[1, f] + got * rx_w[0, f]
                got_m = wire_marks[j] * rx_w[1, f] + got_m * rx_w[0, f]
            delivered[b, f] += got
            rx[b, f] += got
            delivered_m[b, f] = got_m
            any_marked = any_marked or got_m != 0.0
    return any_marked


@kernel
def _serve(backlog, marked, queue_flat, seen, keys, link_cap, prios, kmin, slope, pmax, kmax,
           kmin_floor, emit_b, emit_m, qlen, departed):  # fmt: skip
    """Steps 1-2 of the engine: every egress queue serves at line rate (strict priority, nothing if
    paused), each flow's share leaves in proportion, and leaving bytes are CE-marked with the RED
    probability of the queue they saw. ``qlen`` comes zeroed and leaves holding what stays; both it
    and ``departed`` are flat over (row, key). Returns whether any queue could mark."""
    bl, mk = backlog.reshape(-1), marked.reshape(-1)
    eb, em = emit_b.reshape(-1), emit_m.reshape(-1)
    for i in range(bl.size):  # the order np.bincount adds in
        qlen[queue_flat[i]] += bl[i]
    busy = False
    for j in range(qlen.size):
        busy = busy or qlen[j] != 0.0
    if not busy:
        eb[:] = 0.0
        em[:] = 0.0
        departed[:] = 0.0
        return False
    for b in range(backlog.shape[0]):
        base = b * keys
        for link in range(link_cap.size):
            budget = link_cap[link]
            for pi in range(prios):  # highest first
                key = link * prios + pi
                j = base + key
                take = min(qlen[j], budget)
                if seen is not None and seen[b, key]:
                    take = 0.0
                budget -= take
                departed[j] = take
        departed[base + keys - 1] = qlen[base + keys - 1]  # the trash key keeps nothing
    deepest = -np.inf
    share = np.empty(qlen.size)
    saw = np.empty(qlen.size)
    for j in range(qlen.size):
        share[j] = departed[j] / max(qlen[j], 1e-12)  # an empty queue: 0 / tiny
        qlen[j] = qlen[j] - departed[j]
        # a byte leaving during the step saw, on average, what stays plus half of what leaves
        saw[j] = qlen[j] + 0.5 * departed[j]
        deepest = max(deepest, saw[j])
    for i in range(bl.size):
        s = share[queue_flat[i]]
        out = bl[i] * s
        out_m = mk[i] * s
        eb[i] = out
        em[i] = out_m
        bl[i] -= out
        mk[i] -= out_m
    if not deepest > kmin_floor:
        return False
    kf, sl, pm, kx = kmin.reshape(-1), slope.reshape(-1), pmax.reshape(-1), kmax.reshape(-1)
    for j in range(qlen.size):  # RED (cc.model.dcqcn.red_mark_probability), the ramp precomputed
        q = saw[j]
        share[j] = 1.0 if q > kx[j] else min(max((q - kf[j]) * sl[j], 0.0), pm[j])
    for i in range(bl.size):
        em[i] += (eb[i] - em[i]) * share[queue_flat[i]]
    return True


@kernel
def egress_kernel(backlog, marked, queue_flat, ingress_flat, seen, keys, link_cap, prios, kmin, slope, pmax,
                  kmax, kmin_floor, emit_b, emit_m, qlen, departed, held):  # fmt: skip
    """:func:`_serve`, then what each ingress holds in its switch afterwards (``held``, zeroed, flat
    over (row, key): what PFC decides on) and the bytes left in all queues. Returns (any queue
    could mark, bytes left). The sum is sequential, not numpy's pairwise one: the engine only
    compares it with a bound below which nothing can pause, where a last-bit difference decides
    nothing."""
    marking = _serve(backlog, marked, queue_flat, seen, keys, link_cap, prios, kmin, slope, pmax, kmax,
                     kmin_floor, emit_b, emit_m, qlen, departed)  # fmt: skip
    bl = backlog.reshape(-1)
    for i in range(bl.size):  # the order np.bincount adds in
        held[ingress_flat[i]] += bl[i]
    left = 0.0
    for j in range(qlen.size):
        left += qlen[j]
    return marking, left


@kernel
def pause_kernel(occupancy, was, level, xoff_static, lossy_inf, xon_ratio, key_cap, headroom, counted,
                  switch_of, ingress_col, pool, alpha, n_switches, paused, ratio):  # fmt: skip
    """Step 5 of the engine: which ingress keys pause their upstream, the drop level of each pause
    (``level``, updated), and the share of each ingress to drop where its headroom overflowed
    (``ratio``). Returns whether anything overflowed."""
    rows, keys = occupancy.shape
    share = np.empty(n_switches + 1)
    overflow = False
    for b in range(rows):
        used = np.zeros(n_switches)
        for c in range(counted.size):  # the order np.bincount adds in
            used[switch_of[c]] += occupancy[b, counted[c]]
        for s in range(n_switches):
            share[s] = alpha * max(pool - used[s], 0.0)
        share[n_switches] = np.inf
        for k in range(keys):
            occ = occupancy[b, k]
            xoff = min(xoff_static[b, k], share[ingress_col[k]] + lossy_inf[0, k])
            on = occ > xoff or (was[b, k] and occ > xoff * xon_ratio[b, 0])
            paused[b, k] = on
            # a pause's drop level is set when it begins and kept while it lasts (Engine._pfc_and_drops)
            lv = level[b, k] if was[b, k] else max(xoff, occ - key_cap[k])
            level[b, k] = lv if on else np.inf
            beyond = occ - (lv + headroom[k])
            ratio[b, k] = max(beyond, 0.0) / occ if beyond > 0 else 0.0
            overflow = overflow or beyond > 0
    return overflow


@kernel
def send_kernel(rc, demand, active, paused, ports, port_line, dt, owed, sent_total, tx, sent):
    """The NIC: min(Rc, demand) for live flows whose port is not paused; flows sharing a port split
    it in proportion to their rates."""
    rows, flows = rc.shape
    for b in range(rows):
        for f in range(flows):
            r = min(rc[b, f], demand[f]) * (1.0 if active[b, f] else 0.0)
            if paused is not None:
                r *= 0.0 if paused[b, f] else 1.0
            sent[b, f] = r
    if ports is not None:
        load = np.zeros(port_line.size)
        for b in range(rows):  # in the order np.bincount adds them
            for f in range(flows):
                load[ports[b, f]] += sent[b, f]
        for b in range(rows):
            for f in range(flows):
                port = ports[b, f]
                sent[b, f] *= min(1.0, port_line[port] / max(load[port], 1e-9))
    per_us = dt / 8.0
    for b in range(rows):
        for f in range(flows):
            s = min(sent[b, f] * per_us, owed[b, f])
            sent[b, f] = s
            owed[b, f] -= s
            sent_total[b, f] += s
            tx[b, f] += s
