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
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from cc.model import NpState, ParamBatch, RpState
from cc.sim.jit import kernel

__all__ = ["DcqcnRules", "StepKernel", "row_table"]

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


@kernel
def _np_kernel(next_cnp, ce, now, dt, table, cnps):
    """:func:`cc.model.dcqcn.np_step`: CNPs per flow, at most one per ``np_min_time_between_cnps``."""
    rows, flows = ce.shape
    for b in range(rows):
        gap = table[b, _CNP_GAP]
        for f in range(flows):
            count = ce[b, f]
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
            else:
                # alpha_decay: once per whole period without a CNP
                timer = alpha_timer[b, f] + dt
                periods = np.floor(timer / p[_ALPHA_PERIOD])
                alpha[b, f] = a * _int_power(p[_KEEP_ALPHA], periods)
                alpha_timer[b, f] = timer - periods * p[_ALPHA_PERIOD]
            # increase_events
            it = inc_timer[b, f] + dt
            tev = np.floor(it / p[_TIME_RESET])
            inc_timer[b, f] = it - tev * p[_TIME_RESET]
            bev = 0.0
            if byte_on:
                bc = byte_counter[b, f] + sent[b, f]
                bev = np.floor(bc / p[_BYTE_DIVISOR])
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


class DcqcnRules(Protocol):
    """What the engine calls each step; :class:`StepKernel` in production (the tests also run the
    numpy reference through this interface, to compare)."""

    def np_step(self, state: NpState, ce: Floats, dt_us: float) -> Floats: ...
    def rp_step(self, state: RpState, cnps: Floats, sent: Floats, dt_us: float, line: Floats) -> None: ...


class StepKernel:
    """The DCQCN rules of one batch of parameter sets, as the engine calls them each step."""

    def __init__(self, params: ParamBatch) -> None:
        self.table = row_table(params)
        self.byte_on = bool(np.any(params.rp_byte_reset))  # as the reference: counters kept if any row counts

    def np_step(self, state: NpState, ce: Floats, dt_us: float) -> Floats:
        """:func:`cc.model.dcqcn.np_step`."""
        cnps = np.empty_like(ce)
        _np_kernel(state.next_cnp_us, ce, state.now_us, dt_us, self.table, cnps)
        state.now_us += dt_us
        return cnps

    def rp_step(self, state: RpState, cnps: Floats, sent: Floats, dt_us: float, line: Floats) -> None:
        """:func:`cc.model.dcqcn.rp_step`, with ``line`` the line rate per flow column."""
        s = state
        _rp_kernel(
            s.rc, s.rt, s.alpha, s.alpha_timer_us, s.inc_timer_us, s.byte_counter, s.timer_stage,
            s.byte_stage, s.next_cut_us, s.seen_cnp, cnps, sent, s.now_us, dt_us, line, self.table,
            self.byte_on,
        )  # fmt: skip
        s.now_us += dt_us
