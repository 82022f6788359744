"""Hand-computed checks of the DCQCN rules and of the parameter set they read."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from cc.model import RANGES, DcqcnParams, NpState, RpState, np_step, red_mark_probability, rp_step

LINE = 200_000.0
# No alpha period and no increase timer fits in a 1 µs step, and nothing is sent: a step is the CNP alone.
QUIET = DcqcnParams(rp_dce_tcp_rtt=55, rp_time_reset=300, rp_rate_reduce_monitor_period=1)


def one_flow(
    params: DcqcnParams,
    *,
    rc: float = LINE,
    rt: float = LINE,
    alpha: float = 1.0,
    seen_cnp: bool = True,
    line: float = LINE,
) -> RpState:
    state = RpState.new(1, line, params)
    state.rc[:], state.rt[:], state.alpha[:], state.seen_cnp[:] = rc, rt, alpha, seen_cnp
    return state


def step(
    state: RpState,
    params: DcqcnParams,
    *,
    cnp: bool = False,
    dt: float = 1.0,
    sent: float = 0.0,
    line: float = LINE,
) -> float:
    return float(rp_step(state, np.array([cnp]), np.array([sent]), dt, params, line)[0])


@pytest.mark.parametrize(
    ("changes", "alpha", "seen", "rc_after", "alpha_after"),
    [
        ({}, 1.0, True, 100_000.0, 1.0),  # Rc(1 - alpha/2), alpha <- (1-g) alpha + g
        ({}, 0.5, True, 150_000.0, (1 - 5 / 1024) * 0.5 + 5 / 1024),
        ({"rp_gd": 10}, 0.5, True, 100_000.0, None),  # gd 10: cut by alpha
        ({"rp_gd": 10}, 1.0, True, 100_000.0, None),  # a full cut is limited to min_dec_fac 50 %
        ({"rp_min_dec_fac": 80}, 1.0, True, 160_000.0, None),
        ({}, 0.1, False, LINE * (1 - 1023 / 2048), None),  # first CNP: alpha <- initial 1023/1024
        ({"rp_rate_to_set_on_first_cnp": 20_000}, 1.0, False, 20_000.0, None),
        ({"rp_min_rate": 150_000}, 1.0, True, 150_000.0, None),  # floor at rp_min_rate
    ],
)
def test_one_cnp_cut(
    changes: dict[str, int], alpha: float, seen: bool, rc_after: float, alpha_after: float | None
) -> None:
    params = dataclasses.replace(QUIET, **changes)
    state = one_flow(params, alpha=alpha, seen_cnp=seen)
    assert step(state, params, cnp=True) == 1.0
    assert state.rc[0] == pytest.approx(rc_after)
    assert state.rt[0] == LINE
    if alpha_after is not None:
        assert state.alpha[0] == pytest.approx(alpha_after)


def test_target_follows_rate_only_after_timer_increase_unless_clamped() -> None:
    for clamp, rt_after in ((0, LINE), (1, 100_000.0)):
        params = dataclasses.replace(QUIET, rp_clamp_tgt_rate=clamp)
        state = one_flow(params, rc=100_000.0)
        step(state, params, cnp=True)
        assert state.rt[0] == rt_after


@pytest.mark.parametrize("periods", [1, 5, 50])
def test_alpha_decays_once_per_period_without_cnp(periods: int) -> None:
    params = DcqcnParams(rp_dce_tcp_rtt=55)
    state = one_flow(params, alpha=0.8)
    for _ in range(periods):
        step(state, params, dt=55.0)
    assert state.alpha[0] == pytest.approx(0.8 * (1 - params.g) ** periods)


def test_a_cnp_raises_alpha_even_when_the_alpha_period_is_one_step() -> None:
    """SIGCOMM'15 Sec. 3.3: on CNP "alpha <- (1 - g) alpha + g"; the decay "alpha <- (1 - g) alpha"
    only when a period of K µs ends without one. With the mlx5 default K = 1 µs = dt, the step that
    carries the CNP used to decay alpha too, which left it where it was."""
    params = DcqcnParams()  # rp_dce_tcp_rtt = 1 µs
    g = params.g
    state = one_flow(params, alpha=0.5)
    step(state, params, cnp=True)
    assert state.alpha[0] == pytest.approx((1 - g) * 0.5 + g, rel=1e-12)
    step(state, params)
    assert state.alpha[0] == pytest.approx((1 - g) * ((1 - g) * 0.5 + g), rel=1e-12)


@pytest.mark.parametrize("interval", [1, 4, 50])
def test_alpha_under_periodic_cnps_settles_at_the_papers_fixed_point(interval: int) -> None:
    """One CNP every n alpha periods (K = dt = 1 µs): per cycle the paper's rules give
    a <- (1 - g)^(n - 1) ((1 - g) a + g), whose fixed point just after a CNP is a* = g / (1 - (1 - g)^n).
    The fluid model (Zhu et al., CoNEXT'16, Eq. 2: d alpha/dt = g/tau' [(1 - (1 - p)^(tau' Rc)) - alpha])
    settles where alpha equals the fraction of periods that carry a CNP, 1/n, which the cycle's mean
    approaches for small g."""
    params = DcqcnParams(rp_rate_reduce_monitor_period=1)
    g = params.g
    state = one_flow(params, alpha=1.0)
    cycle = []
    cycles = 6_000 // interval + 1  # (1 - g)^6000 < 1e-12: the start is forgotten
    for t in range(cycles * interval):
        step(state, params, cnp=t % interval == 0)
        if t >= (cycles - 1) * interval:
            cycle.append(float(state.alpha[0]))
    after_cnp = cycle[0]
    assert after_cnp == pytest.approx(g / (1 - (1 - g) ** interval), rel=1e-9)
    assert np.mean(cycle) == pytest.approx(1 / interval, rel=0.02 + interval * g / 2)


def test_fast_recovery_then_additive_increase() -> None:
    """The authors' ns-3 code (ns3-rdma ``rpr_fast_time``) counts the event before it chooses: with
    F = 5 the first four timer events are fast recovery and the fifth is already additive."""
    params = DcqcnParams.paper()  # F = 5, T = 55 µs, R_AI = 40 Mb/s
    line = 400_000.0  # keep Rt clear of the line-rate clamp
    state = one_flow(params, rc=100_000.0, rt=200_000.0, line=line)
    for expected in (150_000.0, 175_000.0, 187_500.0, 193_750.0):
        step(state, params, dt=55.0, line=line)
        assert (state.rc[0], state.rt[0]) == pytest.approx((expected, 200_000.0))
    for _ in range(3):
        rc, rt = state.rc[0], state.rt[0] + 40
        step(state, params, dt=55.0, line=line)
        assert (state.rc[0], state.rt[0]) == pytest.approx(((rt + rc) / 2, rt))


def test_hyper_increase_once_both_stages_passed_threshold() -> None:
    params = DcqcnParams(rp_threshold=1, rp_time_reset=300, rp_byte_reset=10_000)
    state = one_flow(params, rc=100_000.0, rt=150_000.0)
    state.timer_stage[:], state.byte_stage[:] = 4, 3  # the timer event makes 5: i = min - F + 1 = 3
    step(state, params, dt=300.0)
    assert state.rt[0] == pytest.approx(150_000.0 + 3 * 50)
    assert state.rc[0] == pytest.approx((150_150.0 + 100_000.0) / 2)


@pytest.mark.parametrize("threshold", [1, 2, 5])
def test_stages_count_the_event_first_as_the_authors_code_does(threshold: int) -> None:
    """Byte and timer events alternate, one per step. The authors' ns-3 code (ns3-rdma
    ``rpr_fast_byte``/``rpr_fast_time``) counts an event before choosing: fast recovery (Rt unchanged)
    while its count is below F, additive (+R_AI) once either count reached F (``rpr_active_select``),
    hyper (+i R_HAI, i = min(counts) - F + 1, ``rpr_hyper_increase``) once both did."""
    params = DcqcnParams(
        rp_threshold=threshold, rp_time_reset=200, rp_byte_reset=1_000_000, rp_ai_rate=5, rp_hai_rate=50
    )
    line = 400_000.0
    state = one_flow(params, rc=100_000.0, rt=100_000.0, line=line)
    for event in range(1, 4 * threshold + 4):
        rt = float(state.rt[0])
        sent = 1_000_000.0 if event % 2 else 0.0  # odd steps: a byte event; even ones: the timer's
        step(state, params, dt=100.0, sent=sent, line=line)
        byte, timer = (event + 1) // 2, event // 2  # counts after this event
        if max(byte, timer) < threshold:
            expected = 0.0
        elif min(byte, timer) < threshold:
            expected = 5.0
        else:
            expected = (min(byte, timer) - threshold + 1) * 50.0
        assert float(state.rt[0]) - rt == pytest.approx(expected), event


def test_byte_counter_drives_increase_and_cnp_resets_it() -> None:
    params = DcqcnParams(rp_threshold=1, rp_time_reset=131_071, rp_byte_reset=1000)
    state = one_flow(params, rc=100_000.0)
    step(state, params, sent=2500.0)
    assert state.byte_stage[0] == 2 and state.byte_counter[0] == 500.0
    assert state.rc[0] > 100_000.0
    step(state, params, cnp=True, sent=5000.0)
    reset = (state.byte_stage, state.byte_counter, state.timer_stage, state.inc_timer_us)
    assert [float(counter[0]) for counter in reset] == [0.0] * 4


def test_rates_never_exceed_line_rate() -> None:
    params = DcqcnParams(rp_byte_reset=1)
    state = one_flow(params, rc=1_000.0, rt=1_000.0)
    for _ in range(100):
        step(state, params, dt=1000.0, sent=1e9)
    assert state.rc[0] <= state.rt[0] <= LINE


@pytest.mark.parametrize(
    ("period", "dt", "steps", "cuts"), [(4, 1.0, 12, 3), (4, 10.0, 3, 8), (50, 10.0, 20, 4)]
)
def test_at_most_one_cut_per_monitor_period(period: int, dt: float, steps: int, cuts: int) -> None:
    params = dataclasses.replace(QUIET, rp_rate_reduce_monitor_period=period, rp_min_dec_fac=99)
    state = one_flow(params)
    five_cnps = np.array([5.0])  # in every step
    total = sum(float(rp_step(state, five_cnps, np.zeros(1), dt, params, LINE)[0]) for _ in range(steps))
    assert total == cuts  # = ceil(steps * dt / period) when CNPs never stop
    assert state.rc[0] == pytest.approx(LINE * 0.99**cuts)


@pytest.mark.parametrize(
    ("interval", "dt", "marks", "steps", "cnps"),
    [(4, 1.0, 1, 20, 5), (4, 10.0, 100, 2, 5), (50, 10.0, 3, 20, 4), (0, 10.0, 3, 2, 6)],
)
def test_np_sends_at_most_one_cnp_per_interval(
    interval: int, dt: float, marks: int, steps: int, cnps: int
) -> None:
    params = DcqcnParams(np_min_time_between_cnps=interval)
    state = NpState.new(2)
    sent = [np_step(state, np.array([marks, 0]), dt, params) for _ in range(steps)]
    assert sum(float(s[0]) for s in sent) == cnps
    assert all(s[1] == 0 and s[0] <= marks for s in sent)


@pytest.mark.parametrize(
    ("queue", "p"), [(0, 0.0), (5_000, 0.0), (102_500, 0.005), (200_000, 0.01), (200_001, 1.0), (1e9, 1.0)]
)
def test_red_curve(queue: float, p: float) -> None:
    got = red_mark_probability(np.array([queue]), 5_000, 200_000, 0.01)
    assert got[0] == pytest.approx(p)


def test_paper_profile_in_device_fields() -> None:
    paper = DcqcnParams.paper()
    assert paper.g == 1 / 256 and paper.cut_scale == 0.5
    assert (paper.rp_dce_tcp_rtt, paper.rp_time_reset, paper.np_min_time_between_cnps) == (55, 55, 50)
    assert (paper.rp_byte_reset, paper.rp_threshold, paper.rp_ai_rate) == (10_000_000, 5, 40)
    assert (paper.kmin_bytes, paper.kmax_bytes, paper.pmax) == (5_000, 200_000, 0.01)
    assert DcqcnParams().g == pytest.approx(5 / 1024)


@pytest.mark.parametrize("name", sorted(RANGES))
def test_out_of_range_values_are_rejected_by_name(name: str) -> None:
    lo, hi = RANGES[name]
    bad: dict[str, Any] = {name: hi + 1 if name != "pmax" else 1.5}
    with pytest.raises(ValueError, match=name):
        dataclasses.replace(DcqcnParams(), **bad)
    if lo > 0:
        bad = {name: type(lo)(lo - 1)}
        with pytest.raises(ValueError, match=name):
            dataclasses.replace(DcqcnParams(), **bad)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"kmin_bytes": 10, "kmax_bytes": 5}, "kmin_bytes"),
        ({"xon_bytes": 5_000_000}, "xon_bytes"),
        ({"rp_gd": 10.5}, "rp_gd"),
        ({"pmax": True}, "pmax"),
    ],
)
def test_inconsistent_or_mistyped_values_are_rejected(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(DcqcnParams(), **changes)
