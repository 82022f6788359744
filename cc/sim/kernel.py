"""The simulator's DCQCN step, compiled: the NP's CNP pacing and the whole RP update per flow.

:func:`cc.model.dcqcn.np_step` and :func:`cc.model.dcqcn.rp_step` are the reference: ~60 numpy calls
per step over ``(rows, flows)`` arrays, each costing 0.4-1.5 µs of overhead at the simulator's sizes.
Here the same rules run as one loop over the flows of every row (numba, :mod:`cc.sim.jit`), the
same arithmetic in the same order, so the two agree to the bit (tests/cc/test_kernel.py compares
them on random states and on whole runs). Three choices make that possible:

* powers with a whole exponent (c cuts, c CNPs, k alpha periods) are products by binary
  exponentiation in both (:func:`cc.model.dcqcn.int_power`), not ``exp``/``log``/``pow``: numpy's
  SIMD versions and libm's differ in the last bit on a few % of inputs;
* the halving of the Rt-Rc gap uses ``ldexp``, exact in both;
* every rule acts on a flow only through that flow's own events (the reference masks its updates the
  same way), so a row's trajectory cannot depend on its batch.

Parameters are read per row from a table (:func:`row_table`), not widened to every flow.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from cc.model import NpState, ParamBatch, RpState
from cc.sim.jit import kernel
from cc.sim.network import MTU_BYTES

__all__ = ["DcqcnRules", "Egress", "PauseLimits", "StepKernel", "row_table"]

Floats = NDArray[np.float64]

# columns of the row table
(
    _AI,
    _HAI,
    _TIME_RESET,
    _BYTE_RESET,
    _BYTE_DIVISOR,
    _THRESHOLD,
    _MIN_RATE,
    _CUT_PERIOD,
    _ALPHA_PERIOD,
    _FIRST_RATE,
    _CLAMP_EVERY,
    _CLAMP_ATI,
    _CNP_GAP,
    _KEEP_ALPHA,
    _CUT_SCALE,
    _MIN_KEEP,
    _INITIAL_ALPHA,
) = range(17)


def row_table(params: ParamBatch) -> Floats:
    """One row per parameter set, one column per value the rules read (``_AI`` ...)."""
    reset = params.rp_byte_reset[:, 0]
    columns = [
        params.rp_ai_rate[:, 0],
        params.rp_hai_rate[:, 0],
        params.rp_time_reset[:, 0],
        reset,
        np.where(reset > 0, reset, np.inf),  # the byte counter off: no event ever
        params.rp_threshold[:, 0],
        params.rp_min_rate[:, 0],
        params.rp_rate_reduce_monitor_period[:, 0],
        params.rp_dce_tcp_rtt[:, 0],
        params.rp_rate_to_set_on_first_cnp[:, 0],
        params.rp_clamp_tgt_rate[:, 0],
        params.rp_clamp_tgt_rate_ati[:, 0],
        params.np_min_time_between_cnps[:, 0],
        1.0 - params.g[:, 0],
        params.cut_scale[:, 0],
        params.min_keep[:, 0],
        params.initial_alpha[:, 0],
    ]
    return np.ascontiguousarray(np.stack(columns, axis=1))


@kernel
def _int_power(base: float, n: float) -> float:
    """:func:`cc.model.dcqcn.int_power` for one number: the same multiplications, same order."""
    result = 1.0
    square = base
    left = n
    while left > 0:
        half = np.floor(left * 0.5)
        if left != 2.0 * half:  # odd (exact for whole numbers below 2**53)
            result *= square
        left = half
        square *= square
    return result


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_FLOW = np.uint64(0xD1B54A32D192ED03)
_STEP = np.uint64(0xAEF17502108EF2D9)
_MASK = 0xFFFFFFFFFFFFFFFF


@kernel
def _mix(z):
    """:func:`cc.sim.draws._mix` (SplitMix64's finaliser) on one uint64."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@kernel
def _uniform(seed, flow_ids, step, out):
    """:func:`cc.sim.draws.uniform` (``seed`` and ``step`` already masked to 64 bits)."""
    base = _mix(np.uint64(seed) * _GOLDEN + np.uint64(step) * _STEP)
    for f in range(flow_ids.size):
        z = _mix(np.uint64(flow_ids[f]) * _FLOW + base)
        out[f] = np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@kernel
def _np_kernel(next_cnp, marked, draws, now, dt, table, ce, cnps):
    """CE packets from marked bytes, stochastically rounded (the engine's step 3), then
    :func:`cc.model.dcqcn.np_step`: CNPs per flow, at most one per ``np_min_time_between_cnps``."""
    rows, flows = marked.shape
    for b in range(rows):
        gap = table[b, _CNP_GAP]
        for f in range(flows):
            count = np.floor(marked[b, f] / MTU_BYTES + draws[f])
            ce[b, f] = count
            if count > 0:
                start = max(next_cnp[b, f], now)
                n = count
                if gap > 0:
                    n = min(max(np.ceil((now + dt - start) / gap), 0.0), count)
                next_cnp[b, f] = start + n * gap
                cnps[b, f] = n
            else:
                cnps[b, f] = 0.0


@kernel
def _rp_kernel(
    rc, rt, alpha, alpha_timer, inc_timer, byte_counter, timer_stage, byte_stage, next_cut, seen,
    cnps, sent, now, dt, line, table, byte_on,
):  # fmt: skip
    """:func:`cc.model.dcqcn.rp_step` flow by flow; the comments name the reference's functions."""
    rows, flows = cnps.shape
    for b in range(rows):
        p = table[b]
        # alpha_decay for a flow whose timer is at 0 (every flow, when the period divides the step):
        # the same operations on the same numbers as below, done once per row
        fresh_periods = np.floor(dt / p[_ALPHA_PERIOD])
        fresh_decay = _int_power(p[_KEEP_ALPHA], fresh_periods)
        fresh_left = dt - fresh_periods * p[_ALPHA_PERIOD]
        for f in range(flows):
            c = cnps[b, f]
            a = alpha[b, f]
            if c > 0:
                # _paced: the cut window (rp_rate_reduce_monitor_period >= 1 µs)
                start = max(next_cut[b, f], now)
                n = min(max(np.ceil((now + dt - start) / p[_CUT_PERIOD]), 0.0), c)
                next_cut[b, f] = start + n * p[_CUT_PERIOD]
                # rate_cut
                cut = n > 0
                first = cut and not seen[b, f]
                if first:
                    a = p[_INITIAL_ALPHA]
                increased = byte_stage[b, f] > 0 or (timer_stage[b, f] > 0 and p[_CLAMP_ATI] > 0)
                if (cut and (increased or p[_CLAMP_EVERY] > 0)) or first:
                    rt[b, f] = rc[b, f]
                keep = max(1.0 - p[_CUT_SCALE] * a, p[_MIN_KEEP])
                r = rc[b, f] * _int_power(keep, n)
                if first and p[_FIRST_RATE] > 0:
                    r = min(p[_FIRST_RATE], line[f])
                rc[b, f] = max(r, p[_MIN_RATE])
                if cut:
                    seen[b, f] = True
                # alpha_on_cnp; the CNP restarts the alpha timer, so no decay this step
                alpha[b, f] = 1.0 - _int_power(p[_KEEP_ALPHA], c) * (1.0 - a)
                alpha_timer[b, f] = 0.0
            elif alpha_timer[b, f] == 0.0:  # 0 + dt is dt: the row's values
                alpha[b, f] = a * fresh_decay
                alpha_timer[b, f] = fresh_left
            else:
                # alpha_decay: once per whole period without a CNP
                timer = alpha_timer[b, f] + dt
                periods = np.floor(timer / p[_ALPHA_PERIOD]) if timer >= p[_ALPHA_PERIOD] else 0.0
                alpha[b, f] = a * _int_power(p[_KEEP_ALPHA], periods)
                alpha_timer[b, f] = timer - periods * p[_ALPHA_PERIOD]
            # increase_events
            # x < d implies x / d < 1 after rounding (and x >= d implies >= 1), so a division
            # whose floor is 0 can be skipped without changing a bit
            it = inc_timer[b, f] + dt
            tev = np.floor(it / p[_TIME_RESET]) if it >= p[_TIME_RESET] else 0.0
            inc_timer[b, f] = it - tev * p[_TIME_RESET]
            bev = 0.0
            if byte_on:
                bc = byte_counter[b, f] + sent[b, f]
                bev = np.floor(bc / p[_BYTE_DIVISOR]) if bc >= p[_BYTE_DIVISOR] else 0.0
                byte_counter[b, f] = bc - bev * p[_BYTE_RESET]
            if c > 0:  # a CNP resets the increase timer, byte counter and stages
                inc_timer[b, f] = 0.0
                byte_counter[b, f] = 0.0
                timer_stage[b, f] = 0.0
                byte_stage[b, f] = 0.0
            elif tev + bev > 0:
                # rate_increase
                k = tev + bev
                fth = p[_THRESHOLD]
                ts = timer_stage[b, f] + tev
                bs = byte_stage[b, f] + bev
                timer_stage[b, f] = ts
                byte_stage[b, f] = bs
                smin = min(ts, bs)
                additive = 1.0 if max(ts, bs) >= fth else 0.0
                hyper = 1.0 if smin >= fth else 0.0
                step = additive * (p[_AI] + hyper * ((smin - fth + 1) * p[_HAI] - p[_AI]))
                gap = rt[b, f] - rc[b, f]
                target = rt[b, f] + k * step
                rt[b, f] = target
                rc[b, f] = target - (step + (gap - step) * math.ldexp(1.0, -int(k)))
            # the upper bounds (cuts keep Rc >= rp_min_rate; increases only raise it)
            top = min(rt[b, f], line[f])
            rt[b, f] = top
            rc[b, f] = min(rc[b, f], top)


@kernel
def _send_kernel(rc, demand, active, paused, ports, port_line, dt, owed, sent_total, tx, sent):
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


@kernel
def _egress_kernel(backlog, marked, queue_flat, seen, keys, link_cap, prios, kmin, slope, pmax, kmax,
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


@kernel
def _pause_kernel(occupancy, was, level, xoff_static, lossy_inf, xon_ratio, key_cap, headroom, counted,
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


class DcqcnRules(Protocol):
    """The parts of a step the engine runs compiled: :class:`StepKernel` in production (the tests
    also run the numpy reference through this interface, to compare)."""

    def np_step(
        self, state: NpState, marked: Floats, seed: int, flow_ids: NDArray[np.int64], t: int, dt_us: float
    ) -> tuple[Floats, Floats]: ...
    def egress(
        self,
        backlog: Floats,
        marked: Floats,
        queue_flat: NDArray[np.int64],
        seen: NDArray[np.bool_] | None,
        egress: Egress,
        emit_b: Floats,
        emit_m: Floats,
    ) -> tuple[Floats, Floats, bool]: ...
    def pause(
        self, occupancy: Floats, was: NDArray[np.bool_], level: Floats, limits: PauseLimits
    ) -> tuple[NDArray[np.bool_], Floats | None]: ...
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
    ) -> Floats: ...
    def rp_step(self, state: RpState, cnps: Floats, sent: Floats, dt_us: float, line: Floats) -> None: ...


class StepKernel:
    """The DCQCN rules of one batch of parameter sets, as the engine calls them each step."""

    def __init__(self, params: ParamBatch) -> None:
        self.table = row_table(params)
        self.byte_on = bool(np.any(params.rp_byte_reset))  # as the reference: counters kept if any row counts

    def np_step(
        self, state: NpState, marked: Floats, seed: int, flow_ids: NDArray[np.int64], t: int, dt_us: float
    ) -> tuple[Floats, Floats]:
        """CE packets ``floor(marked / MTU + u)`` with u from :func:`cc.sim.draws.uniform`, and the
        CNPs :func:`cc.model.dcqcn.np_step` sends for them: ``(ce, cnps)``."""
        draws = np.empty(flow_ids.size)
        _uniform(np.uint64(seed & _MASK), flow_ids, np.uint64(t & _MASK), draws)
        ce, cnps = np.empty_like(marked), np.empty_like(marked)
        _np_kernel(state.next_cnp_us, marked, draws, state.now_us, dt_us, self.table, ce, cnps)
        state.now_us += dt_us
        return ce, cnps

    def egress(
        self,
        backlog: Floats,
        marked: Floats,
        queue_flat: NDArray[np.int64],
        seen: NDArray[np.bool_] | None,
        egress: Egress,
        emit_b: Floats,
        emit_m: Floats,
    ) -> tuple[Floats, Floats, bool]:
        """Switch egress (the engine's steps 1-2): bytes leave ``backlog``/``marked`` into
        ``emit_b``/``emit_m``; returns what stays in each queue and what left it, ``(rows, keys)``
        each, and whether any queue was deep enough to mark."""
        e = egress
        rows = backlog.shape[0]
        standing, departed = np.zeros(rows * e.keys), np.empty(rows * e.keys)
        marking = _egress_kernel(
            backlog, marked, queue_flat, seen, e.keys, e.link_cap, e.prios, e.kmin, e.slope, e.pmax, e.kmax,
            e.kmin_floor, emit_b, emit_m, standing, departed,
        )  # fmt: skip
        return standing.reshape(rows, e.keys), departed.reshape(rows, e.keys), bool(marking)

    def pause(
        self, occupancy: Floats, was: NDArray[np.bool_], level: Floats, limits: PauseLimits
    ) -> tuple[NDArray[np.bool_], Floats | None]:
        """PFC (the engine's step 5) from what each ingress holds: the keys paused now, and where
        the headroom overflowed, the share of each ingress to drop (else None). ``level``, the drop
        level of each pause, is updated in place."""
        e = limits
        paused, ratio = np.empty(occupancy.shape, dtype=bool), np.empty_like(occupancy)
        overflow = _pause_kernel(
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
        _send_kernel(rc, demand, active, paused, ports, port_line, dt_us, owed, sent_total, tx, sent)
        return sent

    def rp_step(self, state: RpState, cnps: Floats, sent: Floats, dt_us: float, line: Floats) -> None:
        """:func:`cc.model.dcqcn.rp_step`, with ``line`` the line rate per flow column."""
        s = state
        _rp_kernel(
            s.rc, s.rt, s.alpha, s.alpha_timer_us, s.inc_timer_us, s.byte_counter, s.timer_stage,
            s.byte_stage, s.next_cut_us, s.seen_cnp, cnps, sent, s.now_us, dt_us, line, self.table,
            self.byte_on,
        )  # fmt: skip
        s.now_us += dt_us
