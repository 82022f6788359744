"""DCQCN (Zhu et al., SIGCOMM 2015) as vectorised rules over flows.

The three agents of the paper, each a handful of small functions over numpy arrays of shape
``(n_flows,)``: the switch congestion point (CP) marks ECN with a RED curve, the receiver's
notification point (NP) turns CE marks into paced CNPs, and the sender's reaction point (RP) cuts on
CNPs and recovers from its timer and byte counter. Rates are Mb/s, times µs, sizes bytes (the mlx5
units of :class:`cc.model.params.DcqcnParams`).

States are mutated in place: the fabric calls these rules thousands of times per second of simulated
time, and allocating new state objects per step would dominate the cost. Several events of one kind
within one step are folded in closed form (k halvings of the Rt-Rc gap, c alpha updates), with the
increase stage taken after the step's events; that is exact whenever a step holds at most one event.

States may have any shape (``(n_flows,)``, or ``(batch, n_flows)`` when the simulator evaluates several
operating points at once), and the parameters may be a :class:`~cc.model.params.DcqcnParams` (one value per
knob) or a :class:`~cc.model.batch.ParamBatch` (arrays that broadcast against the state, one row per
operating point). No rule branches on a parameter's value in Python, so both behave identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "NpState",
    "RpParams",
    "RpState",
    "alpha_decay",
    "alpha_on_cnp",
    "increase_events",
    "np_step",
    "rate_cut",
    "rate_increase",
    "red_mark_probability",
    "rp_step",
]

Floats = NDArray[np.float64]
Value = float | Floats
"""A parameter: one number, or an array that broadcasts against the state."""


class RpParams(Protocol):
    """What the NP and RP rules read: :class:`cc.model.params.DcqcnParams` or
    :class:`cc.model.batch.ParamBatch`. Hashable, so per-parameter constants can be cached."""

    def __hash__(self) -> int: ...

    @property
    def rp_ai_rate(self) -> Value: ...
    @property
    def rp_hai_rate(self) -> Value: ...
    @property
    def rp_time_reset(self) -> Value: ...
    @property
    def rp_byte_reset(self) -> Value: ...
    @property
    def rp_threshold(self) -> Value: ...
    @property
    def rp_min_rate(self) -> Value: ...
    @property
    def rp_rate_reduce_monitor_period(self) -> Value: ...
    @property
    def rp_dce_tcp_rtt(self) -> Value: ...
    @property
    def rp_rate_to_set_on_first_cnp(self) -> Value: ...
    @property
    def rp_clamp_tgt_rate(self) -> Value: ...
    @property
    def rp_clamp_tgt_rate_ati(self) -> Value: ...
    @property
    def np_min_time_between_cnps(self) -> Value: ...
    @property
    def g(self) -> Value: ...
    @property
    def cut_scale(self) -> Value: ...
    @property
    def min_keep(self) -> Value: ...
    @property
    def initial_alpha(self) -> Value: ...


def red_mark_probability(queue_bytes: Floats, kmin: Value, kmax: Value, pmax: Value) -> Floats:
    """CP: "p = 0 if q <= Kmin; Pmax (q - Kmin)/(Kmax - Kmin) if Kmin < q <= Kmax; 1 if q > Kmax"."""
    q = np.asarray(queue_bytes, dtype=np.float64)
    ramp = np.maximum(q - kmin, 0.0) * (pmax / np.maximum(np.subtract(kmax, kmin), 1e-9))
    return np.asarray(np.where(q > kmax, 1.0, np.minimum(ramp, pmax)))


def _paced(
    count: Floats, next_allowed: Floats, t0: float, dt: float, interval: Value, positive: bool = False
) -> Floats:
    """How many of ``count`` events in [t0, t0+dt) pass a "one per ``interval``" gate.

    The first may fire at ``max(t0, next_allowed)``, the following ones every ``interval``; the
    gate's ``next_allowed`` is advanced in place. Both NP pacing and the RP cut window use it.
    An interval of 0 lets every event through; ``positive`` says no interval is 0 (a faster path).
    """
    start = np.maximum(next_allowed, t0)
    if positive or np.ndim(interval) == 0 and interval > 0:
        n = np.ceil((t0 + dt - start) / interval)
        np.maximum(n, 0.0, out=n)
        np.minimum(n, count, out=n)
    else:
        gated = np.greater(interval, 0)
        slots = np.ceil((t0 + dt - start) / np.where(gated, interval, 1.0))
        n = np.where(gated, np.minimum(count, np.maximum(slots, 0.0)), count)
    # Only a gate that saw events moves: a flow's gate never depends on whether other flows (or
    # other rows of a batch) had events, so the compiled step can update it flow by flow.
    np.add(start, n * interval, out=next_allowed, where=np.greater(count, 0))
    return n


def int_power(base: Value, n: Floats) -> Floats:
    """``base ** n`` for whole ``n`` >= 0 by binary exponentiation: the same multiplications in the
    same order as :mod:`cc.sim.kernel`'s compiled step, so both give the same bits. (numpy's SIMD
    ``exp``/``log``/``power`` and libm's differ in the last bit on a few % of inputs.)"""
    result = np.ones_like(n)
    square = np.broadcast_to(np.asarray(base, dtype=np.float64), result.shape).copy()
    left = n.copy()
    while np.count_nonzero(left > 0):
        odd = np.fmod(left, 2.0) == 1.0
        np.multiply(result, square, out=result, where=odd)
        left = np.floor(left * 0.5)
        square *= square
    return result


@dataclass(slots=True)
class NpState:
    """Notification point: per flow, the earliest time the next CNP may leave."""

    next_cnp_us: Floats
    now_us: float = 0.0

    @classmethod
    def new(cls, n_flows: int | tuple[int, ...]) -> NpState:
        return cls(next_cnp_us=np.full(n_flows, -np.inf))


def np_step(state: NpState, ce_packets: NDArray[np.int64] | Floats, dt_us: float, params: RpParams) -> Floats:
    """NP: "send a CNP unless one was sent for that flow in the last N µs" for CE packets in a step.

    Returns CNPs sent per flow during ``dt_us``; never more than the CE packets, never more than one
    per ``np_min_time_between_cnps`` per flow.
    """
    marked = np.asarray(ce_packets, dtype=np.float64)
    gated = _constants(params, dt_us).cnp_gated
    cnps = _paced(marked, state.next_cnp_us, state.now_us, dt_us, params.np_min_time_between_cnps, gated)
    state.now_us += dt_us
    return cnps


@dataclass(slots=True)
class RpState:
    """Reaction point, one entry per flow. Stages count increase events since the last CNP."""

    rc: Floats  # current rate, Mb/s
    rt: Floats  # target rate, Mb/s
    alpha: Floats
    alpha_timer_us: Floats  # time since the last alpha event
    inc_timer_us: Floats  # rate-increase timer (period rp_time_reset)
    byte_counter: Floats  # bytes since the last byte-counter event (period rp_byte_reset)
    timer_stage: Floats
    byte_stage: Floats
    next_cut_us: Floats  # earliest time of the next allowed cut
    seen_cnp: NDArray[np.bool_]
    now_us: float = 0.0

    @classmethod
    def new(cls, n_flows: int | tuple[int, ...], line_rate_mbps: Value, params: RpParams) -> RpState:
        """Flows start at line rate, as in the paper; alpha starts at the first-CNP value."""
        zeros = np.zeros(n_flows)
        return cls(
            rc=zeros + line_rate_mbps,
            rt=zeros + line_rate_mbps,
            alpha=zeros + params.initial_alpha,
            alpha_timer_us=zeros.copy(),
            inc_timer_us=zeros.copy(),
            byte_counter=zeros.copy(),
            timer_stage=zeros.copy(),
            byte_stage=zeros.copy(),
            next_cut_us=np.full(n_flows, -np.inf),
            seen_cnp=np.zeros(n_flows, dtype=bool),
        )


def rate_cut(state: RpState, cuts: Floats, params: RpParams, line_rate_mbps: Value) -> None:
    """On CNP: "Rt <- Rc; Rc <- Rc(1 - alpha/2)", once per ``cuts`` entry.

    mlx5 refinements: the cut never leaves less than ``rp_min_dec_fac`` % of Rc nor less than
    ``rp_min_rate``; the first CNP of a flow sets alpha to ``rp_initial_alpha_value`` (and the rate to
    ``rp_rate_to_set_on_first_cnp`` when non-zero); with ``rp_clamp_tgt_rate`` = 0, Rt only follows Rc
    on the first cut after an increase event (a byte-counter one, or a timer one when
    ``rp_clamp_tgt_rate_ati`` is 1).
    """
    cut = cuts > 0
    first = cut & ~state.seen_cnp
    np.copyto(state.alpha, params.initial_alpha, where=first)
    constants = _constants(params, 0.0)
    clamp_every_cut = constants.clamp_every_cut
    if clamp_every_cut is True:
        clamp = cut
    else:  # Rt <- Rc only on the first cut after an increase event (the mlx5 default)
        increased = state.byte_stage > 0
        if constants.clamp_after_timer is True:
            increased |= state.timer_stage > 0
        elif constants.clamp_after_timer is None:
            increased |= (state.timer_stage > 0) & np.greater(params.rp_clamp_tgt_rate_ati, 0)
        if clamp_every_cut is None:
            increased |= np.greater(params.rp_clamp_tgt_rate, 0)
        clamp = cut & increased
    np.copyto(state.rt, state.rc, where=clamp | first)
    keep = np.maximum(1.0 - params.cut_scale * state.alpha, params.min_keep)
    state.rc *= int_power(keep, cuts)  # c cuts in one step
    first_rate = params.rp_rate_to_set_on_first_cnp
    if constants.first_rate_on:
        forced = np.minimum(first_rate, line_rate_mbps)
        np.copyto(state.rc, forced, where=first & np.greater(first_rate, 0))
    np.maximum(state.rc, params.rp_min_rate, out=state.rc)
    state.seen_cnp |= cut


def alpha_on_cnp(state: RpState, cnps: Floats, g: Value) -> None:
    """On CNP: "alpha <- (1 - g) alpha + g"; c CNPs compose to 1 - (1 - g)^c (1 - alpha)."""
    raised = 1.0 - int_power(1.0 - g, cnps) * (1.0 - state.alpha)
    np.copyto(state.alpha, raised, where=np.greater(cnps, 0))


def alpha_decay(state: RpState, dt_us: Value, period_us: Value, g: Value) -> None:
    """ "If no CNP for K µs: alpha <- (1 - g) alpha", once per whole period elapsed without a CNP.
    ``dt_us`` may be 0 where a CNP came in the step: its timer restarted, so no period expires."""
    state.alpha_timer_us += dt_us
    periods = np.floor(state.alpha_timer_us / period_us)
    state.alpha *= int_power(1.0 - g, periods)
    state.alpha_timer_us -= periods * period_us


class _Constants(NamedTuple):
    """Per-(params, dt) values the step needs, computed once: the rules run thousands of times."""

    alpha_decay: Floats | None  # (1 - g)^(dt / K) when every row's K divides dt exactly, else None
    byte_divisor: Value  # rp_byte_reset, with inf where the byte counter is off
    byte_counter_on: bool
    first_rate_on: bool
    cnp_gated: bool  # every row paces CNPs (np_min_time_between_cnps > 0)
    # Flags set in every row (True), in none (False), or only in some (None): the rules take the
    # general path only for None, and skip a flag's operations where it is the same everywhere.
    clamp_every_cut: bool | None  # rp_clamp_tgt_rate: Rt <- Rc on every cut
    clamp_after_timer: bool | None  # rp_clamp_tgt_rate_ati: a timer increase re-arms Rt <- Rc


@lru_cache(maxsize=256)
def _constants(params: RpParams, dt_us: float) -> _Constants:
    ratio = dt_us / np.asarray(params.rp_dce_tcp_rtt, dtype=np.float64)
    exact = bool(np.all(ratio == np.floor(ratio)))
    reset = np.asarray(params.rp_byte_reset, dtype=np.float64)
    return _Constants(
        alpha_decay=int_power(1.0 - np.asarray(params.g, dtype=np.float64), np.floor(ratio))
        if exact
        else None,
        byte_divisor=np.where(reset > 0, reset, np.inf),
        byte_counter_on=bool(np.any(reset)),
        first_rate_on=bool(np.any(params.rp_rate_to_set_on_first_cnp)),
        cnp_gated=bool(np.all(np.greater(params.np_min_time_between_cnps, 0))),
        clamp_every_cut=_all_or_none(np.greater(params.rp_clamp_tgt_rate, 0)),
        clamp_after_timer=_all_or_none(np.greater(params.rp_clamp_tgt_rate_ati, 0)),
    )


def _all_or_none(flags: NDArray[np.bool_] | np.bool_) -> bool | None:
    """True if every flag is set, False if none is, None if the rows differ."""
    return True if np.all(flags) else False if not np.any(flags) else None


def increase_events(
    state: RpState, sent_bytes: Floats, dt_us: float, params: RpParams
) -> tuple[Floats, Floats]:
    """Rate-increase events: one per ``rp_time_reset`` µs and one per ``rp_byte_reset`` bytes sent
    (``rp_byte_reset`` = 0 turns the byte counter off)."""
    state.inc_timer_us += dt_us
    timer = np.floor(state.inc_timer_us / params.rp_time_reset)
    if np.count_nonzero(timer):
        state.inc_timer_us -= timer * params.rp_time_reset
    constants = _constants(params, dt_us)
    if not constants.byte_counter_on:
        return timer, np.zeros_like(timer)
    state.byte_counter += sent_bytes
    byte = np.floor(state.byte_counter / constants.byte_divisor)
    if np.count_nonzero(byte):
        state.byte_counter -= byte * params.rp_byte_reset
    return timer, byte


def rate_increase(state: RpState, timer: Floats, byte: Floats, params: RpParams) -> None:
    """Apply ``timer + byte`` increase events per flow.

    Paper: fast recovery "Rc <- (Rt + Rc)/2", then additive increase "Rt <- Rt + R_AI,
    Rc <- (Rt + Rc)/2", and once both the timer and the byte counter passed F, hyper increase
    "Rt <- Rt + i R_HAI, Rc <- (Rt + Rc)/2". The stage boundaries are those of the authors' ns-3 code
    (bobzhuyb/ns3-rdma ``qbb-net-device.cc``, and HPCC's ``rdma-hw.cc`` for the timer alone): an event
    first counts itself (``rpr_fast_time``: ``m_rpTimeStage++``), then it is fast recovery while that
    count is below F, additive once either count reached F (``rpr_active_select``), hyper once both
    did, with i = min(counts) - F + 1 (``rpr_hyper_increase``). So F = 1, the mlx5 default, has no
    fast-recovery event at all, and F = 5 has four. The stages are those after this step's events
    (exact for one event per step); k events with Rt step s leave the gap d = Rt - Rc at
    s + (d - s)/2^k, which is k applications of the rule.
    """
    k = timer + byte
    if not np.count_nonzero(k):
        return
    f = params.rp_threshold
    state.timer_stage += timer
    state.byte_stage += byte
    stage_min = np.minimum(state.timer_stage, state.byte_stage)
    additive = np.maximum(state.timer_stage, state.byte_stage) >= f
    hyper = stage_min >= f
    step = additive * (
        params.rp_ai_rate + hyper * ((stage_min - f + 1) * params.rp_hai_rate - params.rp_ai_rate)
    )
    gap = state.rt - state.rc
    state.rt += k * step
    halved = state.rt - (step + (gap - step) * np.ldexp(1.0, -k.astype(np.int64)))  # the gap halves per event
    np.copyto(state.rc, halved, where=k > 0)  # a flow without events keeps Rc to the bit


def rp_step(
    state: RpState,
    cnp_mask: NDArray[np.bool_] | Floats,
    sent_bytes: Floats,
    dt_us: float,
    params: RpParams,
    line_rate_mbps: Value,
) -> Floats:
    """Advance every flow's RP by ``dt_us``; returns the cuts applied per flow.

    ``cnp_mask`` holds the CNPs that reached each flow during the step (a bool mask or counts);
    ``sent_bytes`` what each flow sent. A CNP step cuts (gated by ``rp_rate_reduce_monitor_period``),
    raises alpha and resets the increase timer, byte counter and stages; other flows decay alpha and
    take their increase events. Rates end clamped to [rp_min_rate, line rate].
    """
    cnps = np.asarray(cnp_mask, dtype=np.float64)
    g = params.g
    any_cnp = bool(np.count_nonzero(cnps))
    constants = _constants(params, dt_us)
    if any_cnp:
        # 1 where no CNP came, 0 where one did: multiplying by it zeroes what a CNP resets (a float
        # mask, because numpy multiplies by a bool array at twice the cost, casting as it goes)
        quiet = np.equal(cnps, 0.0).astype(np.float64)
        period = params.rp_rate_reduce_monitor_period  # >= 1 µs by its range
        cuts = _paced(cnps, state.next_cut_us, state.now_us, dt_us, period, positive=True)
        rate_cut(state, cuts, params, line_rate_mbps)
        alpha_on_cnp(state, cnps, g)
        state.alpha_timer_us *= quiet
    else:
        cuts = cnps  # all zero: no cut
    # Alpha decays only where a period ended without a CNP (SIGCOMM'15 Sec. 3.3, "if no CNP for K
    # µs"; the mlx5 timer "CNP in period -> raise, none -> decay"): a CNP row raised alpha above and
    # restarted its timer, so decaying it too would cancel the raise at K = dt.
    decay = constants.alpha_decay
    if decay is not None:  # every alpha period fits the step a whole number of times: no timer to keep
        if any_cnp:
            state.alpha *= np.where(quiet > 0, decay, 1.0)
        else:
            state.alpha *= decay
    else:
        alpha_decay(state, quiet * dt_us if any_cnp else dt_us, params.rp_dce_tcp_rtt, g)
    timer, byte = increase_events(state, sent_bytes, dt_us, params)
    if any_cnp:
        timer *= quiet
        byte *= quiet
    rate_increase(state, timer, byte, params)
    if any_cnp:
        for counter in (state.inc_timer_us, state.byte_counter, state.timer_stage, state.byte_stage):
            counter *= quiet
    # Cuts keep Rc >= rp_min_rate and increases only raise it, so only the upper bounds need a clamp.
    np.minimum(state.rt, line_rate_mbps, out=state.rt)
    np.minimum(state.rc, state.rt, out=state.rc)
    state.now_us += dt_us
    return cuts
