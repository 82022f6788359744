"""DCQCN (Zhu et al., SIGCOMM 2015) as vectorised rules over flows.

The three agents of the paper, each a handful of small functions over numpy arrays of shape
``(n_flows,)``: the switch congestion point (CP) marks ECN with a RED curve, the receiver's
notification point (NP) turns CE marks into paced CNPs, and the sender's reaction point (RP) cuts on
CNPs and recovers from its timer and byte counter. Rates are Mb/s, times µs, sizes bytes (the mlx5
units of :class:`cc.params.DcqcnParams`).

States are mutated in place: the fabric calls these rules thousands of times per second of simulated
time, and allocating new state objects per step would dominate the cost. Several events of one kind
within one step are folded in closed form (k halvings of the Rt-Rc gap, c alpha updates), with the
increase stage taken at the start of the step; that is exact whenever a step holds at most one event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from cc.params import DcqcnParams

__all__ = [
    "NpState",
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


def red_mark_probability(queue_bytes: Floats, kmin: float, kmax: float, pmax: float) -> Floats:
    """CP: "p = 0 if q <= Kmin; Pmax (q - Kmin)/(Kmax - Kmin) if Kmin < q <= Kmax; 1 if q > Kmax"."""
    q = np.asarray(queue_bytes, dtype=np.float64)
    ramp = np.maximum(q - kmin, 0.0) * (pmax / max(kmax - kmin, 1e-9))
    return np.asarray(np.where(q > kmax, 1.0, np.minimum(ramp, pmax)))


def _paced(count: Floats, next_allowed: Floats, t0: float, dt: float, interval: float) -> Floats:
    """How many of ``count`` events in [t0, t0+dt) pass a "one per ``interval``" gate.

    The first may fire at ``max(t0, next_allowed)``, the following ones every ``interval``; the
    gate's ``next_allowed`` is advanced in place. Both NP pacing and the RP cut window use it.
    """
    start = np.maximum(next_allowed, t0)
    if interval > 0:
        slots = np.maximum(np.ceil((t0 + dt - start) / interval), 0.0)
        n = np.minimum(count, slots)
    else:
        n = np.asarray(count, dtype=np.float64)
    np.copyto(next_allowed, start + n * interval, where=n > 0)
    return n


@dataclass(slots=True)
class NpState:
    """Notification point: per flow, the earliest time the next CNP may leave."""

    next_cnp_us: Floats
    now_us: float = 0.0

    @classmethod
    def new(cls, n_flows: int) -> NpState:
        return cls(next_cnp_us=np.full(n_flows, -np.inf))


def np_step(
    state: NpState, ce_packets: NDArray[np.int64] | Floats, dt_us: float, params: DcqcnParams
) -> Floats:
    """NP: "send a CNP unless one was sent for that flow in the last N µs" for CE packets in a step.

    Returns CNPs sent per flow during ``dt_us``; never more than the CE packets, never more than one
    per ``np_min_time_between_cnps`` per flow.
    """
    marked = np.asarray(ce_packets, dtype=np.float64)
    cnps = _paced(marked, state.next_cnp_us, state.now_us, dt_us, params.np_min_time_between_cnps)
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
    def new(cls, n_flows: int, line_rate_mbps: float, params: DcqcnParams) -> RpState:
        """Flows start at line rate, as in the paper; alpha starts at the first-CNP value."""
        zeros = np.zeros(n_flows)
        return cls(
            rc=np.full(n_flows, float(line_rate_mbps)),
            rt=np.full(n_flows, float(line_rate_mbps)),
            alpha=np.full(n_flows, params.initial_alpha),
            alpha_timer_us=zeros.copy(),
            inc_timer_us=zeros.copy(),
            byte_counter=zeros.copy(),
            timer_stage=zeros.copy(),
            byte_stage=zeros.copy(),
            next_cut_us=np.full(n_flows, -np.inf),
            seen_cnp=np.zeros(n_flows, dtype=bool),
        )


def rate_cut(state: RpState, cuts: Floats, params: DcqcnParams, line_rate_mbps: float) -> None:
    """On CNP: "Rt <- Rc; Rc <- Rc(1 - alpha/2)", once per ``cuts`` entry.

    mlx5 refinements: the cut never leaves less than ``rp_min_dec_fac`` % of Rc nor less than
    ``rp_min_rate``; the first CNP of a flow sets alpha to ``rp_initial_alpha_value`` (and the rate to
    ``rp_rate_to_set_on_first_cnp`` when non-zero); with ``rp_clamp_tgt_rate`` = 0, Rt only follows Rc
    if a timer increase happened since the previous cut.
    """
    cut = cuts > 0
    first = cut & ~state.seen_cnp
    state.alpha[first] = params.initial_alpha
    clamp = cut if params.rp_clamp_tgt_rate else cut & (state.timer_stage > 0)
    np.copyto(state.rt, state.rc, where=clamp | first)
    keep = np.maximum(1.0 - params.cut_scale * state.alpha, params.min_keep) ** cuts
    state.rc *= keep
    if params.rp_rate_to_set_on_first_cnp:
        state.rc[first] = min(float(params.rp_rate_to_set_on_first_cnp), line_rate_mbps)
    np.maximum(state.rc, params.rp_min_rate, out=state.rc)
    state.seen_cnp |= cut


def alpha_on_cnp(state: RpState, cnps: Floats, g: float) -> None:
    """On CNP: "alpha <- (1 - g) alpha + g"; c CNPs compose to 1 - (1 - g)^c (1 - alpha)."""
    state.alpha[:] = 1.0 - (1.0 - g) ** cnps * (1.0 - state.alpha)


def alpha_decay(state: RpState, dt_us: float, period_us: float, g: float) -> None:
    """ "If no CNP for K µs: alpha <- (1 - g) alpha", once per whole period elapsed without a CNP."""
    state.alpha_timer_us += dt_us
    periods = np.floor(state.alpha_timer_us / period_us)
    state.alpha *= (1.0 - g) ** periods
    state.alpha_timer_us -= periods * period_us


def increase_events(
    state: RpState, sent_bytes: Floats, dt_us: float, params: DcqcnParams
) -> tuple[Floats, Floats]:
    """Rate-increase events: one per ``rp_time_reset`` µs and one per ``rp_byte_reset`` bytes sent."""
    state.inc_timer_us += dt_us
    timer = np.floor(state.inc_timer_us / params.rp_time_reset)
    state.inc_timer_us -= timer * params.rp_time_reset
    if not params.rp_byte_reset:
        return timer, np.zeros_like(timer)
    state.byte_counter += sent_bytes
    byte = np.floor(state.byte_counter / params.rp_byte_reset)
    state.byte_counter -= byte * params.rp_byte_reset
    return timer, byte


def rate_increase(state: RpState, timer: Floats, byte: Floats, params: DcqcnParams) -> None:
    """Apply ``timer + byte`` increase events per flow.

    Paper: the first F events are fast recovery "Rc <- (Rt + Rc)/2"; then additive increase
    "Rt <- Rt + R_AI, Rc <- (Rt + Rc)/2"; once both timer and byte counter exceeded F, hyper increase
    "Rt <- Rt + i R_HAI, Rc <- (Rt + Rc)/2" with i = min(stages) - F. k events with Rt step s leave the
    gap d = Rt - Rc at s + (d - s)/2^k, which is k applications of the rule.
    """
    k = timer + byte
    if not np.count_nonzero(k):
        return
    f = params.rp_threshold
    stage_min = np.minimum(state.timer_stage, state.byte_stage)
    additive = np.maximum(state.timer_stage, state.byte_stage) >= f
    hyper = stage_min > f
    step = additive * (params.rp_ai_rate + hyper * ((stage_min - f) * params.rp_hai_rate - params.rp_ai_rate))
    gap = state.rt - state.rc
    state.rt += k * step
    state.rc[:] = state.rt - (step + (gap - step) * 0.5**k)
    state.timer_stage += timer
    state.byte_stage += byte


def rp_step(
    state: RpState,
    cnp_mask: NDArray[np.bool_] | Floats,
    sent_bytes: Floats,
    dt_us: float,
    params: DcqcnParams,
    line_rate_mbps: float,
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
    if any_cnp:
        quiet = cnps == 0  # multiplying by it zeroes what a CNP resets
        cuts = _paced(cnps, state.next_cut_us, state.now_us, dt_us, params.rp_rate_reduce_monitor_period)
        rate_cut(state, cuts, params, line_rate_mbps)
        alpha_on_cnp(state, cnps, g)
        state.alpha_timer_us *= quiet
    else:
        cuts = np.zeros_like(cnps)
    alpha_decay(state, dt_us, params.rp_dce_tcp_rtt, g)
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
