"""The tuner's contract, with a synthetic model in place of the twins' simulation (fast, exact).

The synthetic model: the incast situation's tail slowdown falls as Kmin and the increase timer fall,
until Kmin goes below 200 KB where utilisation collapses (guarding while the signals do not rule out
throttled greedy flows); the collective situation gets worse below
Kmin 400 KB (a guard while collective traffic runs). So the best admissible point is known, and every
rule can be checked against it. The collective guard's own rules are in test_tuner_guard.py.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cc.model import DcqcnParams, HostSignals
from cc.tune import KNOBS, SafetyBounds, Tuner, TunerPolicy, TwinResult
from cc.tune.space import knob

BUSY = HostSignals(
    interval_s=1.0,
    link_gbps=200.0,
    utilization=0.3,
    ce_fraction=0.05,
    cnp_sent_per_s=5e3,
    cnp_handled_per_s=4e3,
    pause_fraction=0.0,
)
QUIET = dataclasses.replace(BUSY, ce_fraction=0.0, cnp_sent_per_s=0.0, cnp_handled_per_s=0.0)


def synthetic(signals: HostSignals, params: list[DcqcnParams]) -> dict[str, list[TwinResult]]:
    def incast(p: DcqcnParams) -> TwinResult:
        k = p.kmin_bytes / 800e3
        slowdown = 20 * math.sqrt(k) * (p.rp_time_reset / 300) ** 0.3
        util = 0.8 if p.kmin_bytes >= 200e3 else 0.6
        return TwinResult(slowdown, util, 0.0, p.kmin_bytes / 1e3)

    def collective(p: DcqcnParams) -> TwinResult:
        return TwinResult(5.0 if p.kmin_bytes >= 400e3 else 7.0, 0.8, 0.0, 100.0)

    return {"incast": [incast(p) for p in params], "collective": [collective(p) for p in params]}


def tuner(**kw: object) -> Tuner:
    bounds = kw.pop("bounds", SafetyBounds(frozen=()))
    return Tuner(bounds, TunerPolicy(**kw), evaluator=synthetic)  # type: ignore[arg-type]


def rung_moves(old: DcqcnParams, new: DcqcnParams) -> dict[str, int]:
    """How many ladder rungs each knob moved."""
    moved = {}
    for k in KNOBS:
        a, b = float(getattr(old, k.field)), float(getattr(new, k.field))
        if a != b:
            between = [v for v in k.ladder if min(a, b) < v < max(a, b)]
            moved[k.name] = len(between) + 1
    return moved


def test_quiet_host_holds_and_says_why() -> None:
    rec = tuner().observe(QUIET, DcqcnParams())
    assert rec.action == "hold" and rec.params == DcqcnParams() and not rec.changes
    assert "nothing for DCQCN to do" in rec.reasons[0]


def test_a_change_moves_at_most_two_knobs_one_rung_each_and_is_explained() -> None:
    t = tuner()
    rec = t.observe(BUSY, DcqcnParams())
    assert rec.action == "change"
    moved = rung_moves(rec.previous, rec.params)
    assert 1 <= len(moved) <= 2 and set(moved.values()) == {1}
    assert "ecn_thresholds" in moved  # the synthetic model's best first step marks earlier
    text = rec.explain()
    assert "CE-marked" in text and "CNPs" in text  # the signal that motivated it
    assert "model 'incast': tail FCT slowdown" in text and "expected:" in text  # what it expects
    assert "rule: " in text  # the problem it addresses
    assert rec.switch_changes and rec.changes[0].effect


# CNPs handled per second at which 0.7 % of the packets BUSY carries (4096 B each) drew a CNP: the
# collective twin counts from 0.5 % and has all the weight at 2.5 % (0.1 here); BUSY has 0.22 %.
COLLECTIVE = dataclasses.replace(BUSY, cnp_handled_per_s=0.007 * 0.3 * 200e9 / 8 / 4096)


@pytest.mark.parametrize(
    ("signals", "kmin"),
    [
        (COLLECTIVE, 400_000),  # a collective runs: its twin's guard stops marking at 400 KB
        # none runs, and no throttled greedy flow either: neither the collective guard nor the incast
        # twin's elephant utilisation holds, so marking goes down to the ladder's bottom
        (BUSY, 50_000),
    ],
)
def test_following_the_recommendations_reaches_the_best_admissible_point_and_stops(
    signals: HostSignals, kmin: int
) -> None:
    t = tuner(watch=1)
    params, seen = DcqcnParams(), []
    for _ in range(30):
        rec = t.observe(signals, params)
        seen.append(rec.action)
        params = rec.params
    assert params.kmin_bytes == kmin
    assert params.rp_time_reset == 20  # the bottom of the timer's ladder
    assert seen[-3:] == ["hold"] * 3  # no oscillation once there


@settings(max_examples=25, deadline=None)
@given(
    lo=st.sampled_from([50e3, 100e3, 200e3, 400e3]),
    hi=st.sampled_from([800e3, 1.6e6, 3.2e6]),
    timer=st.sampled_from([(40, 600), (75, 300), (150, 1200)]),
)
def test_recommendations_never_leave_the_safety_bounds(lo: float, hi: float, timer: tuple[int, int]) -> None:
    bounds = SafetyBounds({"ecn_thresholds": (lo, hi), "rp_time_reset": timer})
    t = Tuner(bounds, TunerPolicy(watch=1), evaluator=synthetic)
    params = bounds.clamp(DcqcnParams())
    for _ in range(12):
        params = t.observe(BUSY, params).params
        assert lo <= params.kmin_bytes <= hi and timer[0] <= params.rp_time_reset <= timer[1]


def test_parameters_outside_the_bounds_are_first_brought_back_inside() -> None:
    bounds = SafetyBounds({"rp_ai_rate": (10, 80)})
    rec = Tuner(bounds, evaluator=synthetic).observe(QUIET, DcqcnParams(rp_ai_rate=5))
    assert rec.action == "hold"  # quiet: nothing to do at all
    rec = Tuner(bounds, evaluator=synthetic).observe(BUSY, DcqcnParams(rp_ai_rate=5))
    assert rec.action == "change" and rec.params.rp_ai_rate == 10
    assert "outside the configured safety bounds" in rec.reasons[0]


def test_frozen_knobs_never_move() -> None:
    t = Tuner(SafetyBounds(frozen=("ecn_thresholds", "pmax")), TunerPolicy(watch=1), evaluator=synthetic)
    params = DcqcnParams()
    for _ in range(10):
        params = t.observe(BUSY, params).params
    assert (params.kmin_bytes, params.kmax_bytes, params.pmax) == (800_000, 3_200_000, 0.2)
    assert params.rp_time_reset < 300  # the NIC knob still moves


def test_small_predicted_gains_are_not_worth_a_change() -> None:
    rec = tuner(margin=0.6, reverse_margin=0.6).observe(BUSY, DcqcnParams())
    assert rec.action == "hold" and "below the 60% margin" in rec.reasons[1]


def test_a_regression_after_a_change_is_rolled_back_and_the_move_banned() -> None:
    t = tuner(watch=2, ban=5)
    start = DcqcnParams()
    first = t.observe(BUSY, start)
    assert first.action == "change"
    t.observe(BUSY, start)  # the intervals before the change (dry run: nothing applied yet)
    paused = dataclasses.replace(BUSY, pause_fraction=0.05)
    assert t.observe(paused, first.params).action == "hold"  # watching: 1 of 2 intervals
    rec = t.observe(paused, first.params)
    assert rec.action == "rollback" and rec.params == start
    assert "PFC pause rose" in rec.reasons[0] and "banned" in rec.reasons[1]
    for _ in range(5):  # while banned, the rolled-back knobs stay where they are
        again = t.observe(BUSY, start)
        assert set(rung_moves(start, again.params)).isdisjoint(rung_moves(start, first.params))
    assert t.observe(BUSY, start).params == first.params  # the ban has expired: tried again


def test_undoing_the_last_change_needs_the_larger_reverse_margin() -> None:
    calls = {"n": 0}

    def flip(signals: HostSignals, params: list[DcqcnParams]) -> dict[str, list[TwinResult]]:
        calls["n"] += 1  # first marking earlier looks 20 % better, then marking later does
        base, rows = params[0], [TwinResult(10.0, 0.8, 0.0, 1.0)]
        for p in params[1:]:
            earlier = p.kmin_bytes < base.kmin_bytes
            rows.append(TwinResult(8.0 if earlier == (calls["n"] == 1) else 10.0, 0.8, 0.0, 1.0))
        return {"incast": rows, "collective": [TwinResult(5.0, 0.8, 0.0, 1.0)] * len(params)}

    only_ecn = SafetyBounds(frozen=tuple(k.name for k in KNOBS if k.name != "ecn_thresholds"))
    t = Tuner(only_ecn, TunerPolicy(watch=1, margin=0.15, reverse_margin=0.3), evaluator=flip)
    first = t.observe(BUSY, DcqcnParams())
    assert first.action == "change" and first.params.kmin_bytes == 400_000
    assert any(r.startswith("rule: ") and "marking earlier" in r for r in first.reasons)
    back = t.observe(BUSY, first.params)  # accepted after one interval; "marking later" now looks 20 % better
    assert back.action == "hold" and "30% margin" in back.reasons[1]


def test_policy_and_bounds_are_validated() -> None:
    with pytest.raises(ValueError, match="margin"):
        TunerPolicy(margin=0.3, reverse_margin=0.1)
    with pytest.raises(ValueError, match="unknown knob"):
        SafetyBounds({"rp_nonsense": (1, 2)})
    with pytest.raises(ValueError, match="bounds for rp_ai_rate"):
        SafetyBounds({"rp_ai_rate": (0, 10)})
    assert knob("rp_time_reset").ladder == tuple(sorted(knob("rp_time_reset").ladder))
