"""The DCQCN rules of the simulator's step, compiled (numba, :mod:`cc.sim.jit`): the CE draws and
the NP's CNP pacing, and the whole RP update, flow by flow over ``(rows, flows)`` arrays.

:func:`cc.model.dcqcn.np_step` and :func:`cc.model.dcqcn.rp_step` are the reference: the same
arithmetic in the same order, so the two agree to the bit (tests/cc/test_kernel.py). What makes
that possible: powers with a whole exponent (c cuts, c CNPs, k alpha periods) are products by binary
exponentiation in both (:func:`cc.model.dcqcn.int_power`), not ``exp``/``log``/``pow``, whose numpy
SIMD and libm versions differ in the last bit on a few % of inputs; the halving of the Rt-Rc gap is
an exact power of two in both; and every rule acts on a flow only through that flow's own events
(the reference masks its updates the same way), so a row's trajectory cannot depend on its batch.
Parameters are read per row from a table (:func:`row_table`), not widened to every flow.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from cc.model import ParamBatch
from cc.sim.jit import kernel
from cc.sim.network import MTU_BYTES

__all__ = ["np_kernel", "row_table", "rp_kernel", "uniform_into"]

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


_HALVES = np.ldexp(1.0, -np.arange(1076))
"""2**-k, exact (np.ldexp, as the reference); 0 from k = 1075 on, as for every larger k."""


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


@kernel
def _mix(z):
    """:func:`cc.sim.draws._mix` (SplitMix64's finaliser) on one uint64."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@kernel
def uniform_into(seed, flow_ids, step, out):
    """:func:`cc.sim.draws.uniform` (``seed`` and ``step`` already masked to 64 bits)."""
    base = _mix(np.uint64(seed) * _GOLDEN + np.uint64(step) * _STEP)
    for f in range(flow_ids.size):
        z = _mix(np.uint64(flow_ids[f]) * _FLOW + base)
        out[f] = np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@kernel
def np_kernel(next_cnp, marked, draws, now, dt, table, ecn, cnp_sent, ring, t, delay):
    """CE packets from marked bytes, stochastically rounded (the engine's step 3), counted in
    ``ecn``; then :func:`cc.model.dcqcn.np_step`: CNPs per flow, at most one per
    ``np_min_time_between_cnps``, counted in ``cnp_sent`` and put on their way back (``ring``,
    arriving ``delay`` steps after step ``t``). Returns whether any CNP was sent."""
    rows, flows = marked.shape
    depth = ring.shape[0]
    sent_any = False
    for b in range(rows):
        gap = table[b, _CNP_GAP]
        for f in range(flows):
            count = np.floor(marked[b, f] / MTU_BYTES + draws[f])
            if count > 0:
                ecn[b, f] += count
                start = max(next_cnp[b, f], now)
                n = count
                if gap > 0:
                    n = min(max(np.ceil((now + dt - start) / gap), 0.0), count)
                next_cnp[b, f] = start + n * gap
                if n > 0:
                    cnp_sent[b, f] += n
                    ring[(t + delay[f]) % depth, b, f] += n
                    sent_any = True
    return sent_any


@kernel
def rp_kernel(
    rc, rt, alpha, alpha_timer, inc_timer, byte_counter, timer_stage, byte_stage, next_cut, seen,
    cnps, sent, now, dt, line, table, byte_on,
):  # fmt: skip
    """:func:`cc.model.dcqcn.rp_step` flow by flow; the comments name the reference's functions."""
    rows, flows = cnps.shape
    for b in range(rows):
        # the row's parameters in locals: loads the compiler need not repeat after every store
        p = table[b]
        ai, hai, fth, min_rate = p[_AI], p[_HAI], p[_THRESHOLD], p[_MIN_RATE]
        time_reset, byte_reset, byte_divisor = p[_TIME_RESET], p[_BYTE_RESET], p[_BYTE_DIVISOR]
        alpha_period, keep_alpha, cut_period = p[_ALPHA_PERIOD], p[_KEEP_ALPHA], p[_CUT_PERIOD]
        # alpha_decay for a flow whose timer is at 0 (every flow, when the period divides the step):
        # the same operations on the same numbers as below, done once per row
        fresh_periods = np.floor(dt / alpha_period)
        fresh_decay = _int_power(keep_alpha, fresh_periods)
        fresh_left = dt - fresh_periods * alpha_period
        for f in range(flows):
            c = cnps[b, f]
            a, r, target = alpha[b, f], rc[b, f], rt[b, f]
            ts, bs = timer_stage[b, f], byte_stage[b, f]
            if c > 0:
                # _paced: the cut window (rp_rate_reduce_monitor_period >= 1 µs)
                start = max(next_cut[b, f], now)
                n = min(max(np.ceil((now + dt - start) / cut_period), 0.0), c)
                next_cut[b, f] = start + n * cut_period
                # rate_cut
                cut = n > 0
                first = cut and not seen[b, f]
                if first:
                    a = p[_INITIAL_ALPHA]
                increased = bs > 0 or (ts > 0 and p[_CLAMP_ATI] > 0)
                if (cut and (increased or p[_CLAMP_EVERY] > 0)) or first:
                    target = r
                keep = max(1.0 - p[_CUT_SCALE] * a, p[_MIN_KEEP])
                r = r * _int_power(keep, n)
                if first and p[_FIRST_RATE] > 0:
                    r = min(p[_FIRST_RATE], line[f])
                r = max(r, min_rate)
                if cut:
                    seen[b, f] = True
                # alpha_on_cnp; the CNP restarts the alpha timer, so no decay this step
                a = 1.0 - _int_power(keep_alpha, c) * (1.0 - a)
                alpha_timer[b, f] = 0.0
            elif alpha_timer[b, f] == 0.0:  # 0 + dt is dt: the row's values
                a = a * fresh_decay
                alpha_timer[b, f] = fresh_left
            else:
                # alpha_decay: once per whole period without a CNP
                timer = alpha_timer[b, f] + dt
                periods = np.floor(timer / alpha_period) if timer >= alpha_period else 0.0
                a = a * _int_power(keep_alpha, periods)
                alpha_timer[b, f] = timer - periods * alpha_period
            alpha[b, f] = a
            # increase_events. x < d implies x / d < 1 after rounding (and x >= d implies >= 1),
            # so a division whose floor is 0 can be skipped without changing a bit
            it = inc_timer[b, f] + dt
            tev = np.floor(it / time_reset) if it >= time_reset else 0.0
            it = it - tev * time_reset
            bev = 0.0
            bc = byte_counter[b, f]
            if byte_on:
                bc = bc + sent[b, f]
                bev = np.floor(bc / byte_divisor) if bc >= byte_divisor else 0.0
                bc = bc - bev * byte_reset
            if c > 0:  # a CNP resets the increase timer, byte counter and stages
                it, bc, ts, bs = 0.0, 0.0, 0.0, 0.0
            elif tev + bev > 0:
                # rate_increase
                k = tev + bev
                ts = ts + tev
                bs = bs + bev
                smin = min(ts, bs)
                additive = 1.0 if max(ts, bs) >= fth else 0.0
                hyper = 1.0 if smin >= fth else 0.0
                step = additive * (ai + hyper * ((smin - fth + 1) * hai - ai))
                gap = target - r
                target = target + k * step
                r = target - (step + (gap - step) * (_HALVES[int(k)] if k < _HALVES.size else 0.0))
            inc_timer[b, f], byte_counter[b, f] = it, bc
            timer_stage[b, f], byte_stage[b, f] = ts, bs
            # the upper bounds (cuts keep Rc >= rp_min_rate; increases only raise it)
            top = min(target, line[f])
            rt[b, f] = top
            rc[b, f] = min(r, top)
