"""The collective guard gives way only while the signals positively show no collective traffic, and
the tuner moves back to a point that passes it at the first interval that shows one (issue 20).

Signals are built from the definition of the classification (CNPs handled per 4096-byte packet the
busier direction carried: the collective twin counts from 0.5 %, fully at 2.5 %), with the synthetic
model of test_tuner.py: marking below Kmin 400 KB breaks the collective twin's guard, below 200 KB the
incast twin's utilisation.
"""

from __future__ import annotations

import dataclasses

import pytest

from cc.model import DcqcnParams, HostSignals
from cc.tune import SafetyBounds, Tuner, TunerPolicy
from cc.tune.guard import read, relaxable
from tests.cc.test_tuner import synthetic

PACKET = 4096


def signals(
    density: float, utilization: float = 0.3, interval_s: float = 0.002, ce_fraction: float = 0.05
) -> HostSignals:
    """One interval at 200G in which ``density`` of the packets sent drew a CNP (marks on, no pause)."""
    per_s = utilization * 200e9 / 8 / PACKET
    return HostSignals(
        interval_s=interval_s,
        link_gbps=200.0,
        utilization=utilization,
        ce_fraction=ce_fraction,
        cnp_sent_per_s=5e3,
        cnp_handled_per_s=density * per_s,
        pause_fraction=0.0,
    )


NONE = signals(0.002)  # bursts over uncongested traffic
EDGE = signals(0.005)  # at the threshold: weight 0 still
SOME = signals(0.007)  # a collective at 10 % weight
FULL = signals(0.05)  # every flow throttled
FEW = signals(0.0, utilization=0.001)  # 12 packets in 2 ms: a collective's CNPs could all be missing

RUNG1 = dataclasses.replace(DcqcnParams(), kmin_bytes=400_000, kmax_bytes=1_600_000)
ECN_ONLY = SafetyBounds(
    frozen=(
        "rp_time_reset",
        "rp_ai_rate",
        "rp_hai_rate",
        "rp_dce_tcp_g",
        "np_min_time_between_cnps",
        "rp_min_rate",
        "pmax",
    )
)


@pytest.mark.parametrize(
    ("s", "weight", "can_tell"),
    [(NONE, 0.0, True), (EDGE, 0.0, True), (SOME, 0.1, True), (FULL, 1.0, True), (FEW, 0.0, False)],
)
def test_signals_are_read_for_collective_traffic(s: HostSignals, weight: float, can_tell: bool) -> None:
    r = read(s)
    assert r.collective == pytest.approx(weight)
    assert r.can_tell is can_tell
    assert r.no_collective is (can_tell and weight == 0.0)
    assert r.weights() == pytest.approx({"incast": 1 - weight, "collective": weight})


@pytest.mark.parametrize(
    ("window", "gives_way"),
    [
        ([NONE, NONE], True),
        ([NONE, EDGE], True),
        ([NONE], False),  # one interval is not the watch window
        ([SOME, NONE], False),  # a collective seen in the window
        ([NONE, FULL], False),
        ([FEW, NONE], False),  # an interval that cannot tell
    ],
)
def test_the_guard_gives_way_only_on_a_full_window_without_collective(
    window: list[HostSignals], gives_way: bool
) -> None:
    assert relaxable([read(s) for s in window], watch=2) is gives_way


def tuner() -> Tuner:
    return Tuner(ECN_ONLY, TunerPolicy(watch=2), evaluator=synthetic)


@pytest.mark.parametrize(
    ("window", "action", "kmin"),
    [
        ([NONE, NONE], "change", 200_000),  # guard off: Kmin down to the incast twin's limit
        ([NONE, EDGE], "change", 200_000),
        ([SOME, SOME], "hold", 400_000),  # guard on: the collective twin would get 40 % slower
        ([NONE, SOME], "hold", 400_000),
        ([FULL, FULL], "hold", 400_000),
        ([NONE, FEW], "hold", 400_000),  # cannot tell: the guard stays
        ([NONE], "hold", 400_000),  # a fresh tuner has seen one interval only
    ],
)
def test_the_collective_guard_is_on_unless_the_signals_show_none(
    window: list[HostSignals], action: str, kmin: int
) -> None:
    t = tuner()
    for s in window[:-1]:
        t.observe(s, RUNG1)
    rec = t.observe(window[-1], RUNG1)
    assert (rec.action, rec.params.kmin_bytes) == (action, kmin)
    relaxed = [r for r in rec.reasons if r.startswith("guard relaxed")]
    assert bool(relaxed) is (action == "change")


def relaxed_change(t: Tuner) -> DcqcnParams:
    t.observe(NONE, RUNG1)
    rec = t.observe(NONE, RUNG1)
    assert rec.action == "change" and rec.params.kmin_bytes == 200_000
    return rec.params


@pytest.mark.parametrize(
    ("seen", "back"),
    [(SOME, True), (FULL, True), (FEW, True), (EDGE, False), (NONE, False)],
)
def test_a_reappearing_collective_moves_back_at_the_next_decision(seen: HostSignals, back: bool) -> None:
    t = tuner()
    relaxed = relaxed_change(t)
    rec = t.observe(seen, relaxed)  # the first interval with the relaxed point in force (watching)
    if back:
        assert rec.action == "change" and rec.params == RUNG1 and rec.previous == relaxed
        assert [c.name for c in rec.changes] == ["kmin_bytes", "kmax_bytes"]
        assert any(r.startswith("guard restored") for r in rec.reasons)
    else:
        assert rec.action == "hold" and "watching the last change" in rec.reasons[-1]


def test_the_way_back_is_recommended_until_applied_and_then_the_guard_holds() -> None:
    t = tuner()
    relaxed = relaxed_change(t)
    for _ in range(3):  # a dry run or a rate-limited applier keeps the relaxed point in force
        assert t.observe(SOME, relaxed).params == RUNG1
    rec = t.observe(SOME, RUNG1)
    assert rec.params == RUNG1  # guarded again: the collective twin keeps Kmin at 400 KB
    assert not any(r.startswith("guard relaxed") for r in rec.reasons)


def test_a_relaxed_change_applied_late_is_still_covered() -> None:
    t = tuner()
    relaxed = relaxed_change(t)
    t.observe(NONE, RUNG1)  # not applied yet: the tuner sees the old point in force
    rec = t.observe(SOME, relaxed)  # applied now, while a collective starts
    assert rec.action == "change" and rec.params == RUNG1


def test_the_explanations_say_why_the_guard_gave_way_and_why_it_came_back() -> None:
    t = tuner()
    t.observe(NONE, RUNG1)
    rec = t.observe(NONE, RUNG1)
    why = next(r for r in rec.reasons if r.startswith("guard relaxed"))
    assert "the last 2 intervals show no collective traffic" in why
    assert "at most 0.20% of packets sent drew a CNP, below the 0.5%" in why
    assert "'collective' tail FCT slowdown 5.0 -> 7.0" in why  # the synthetic twin's figures
    assert "kmin_bytes 400000, kmax_bytes 1.6e+06" in why  # where it will return to
    back = t.observe(SOME, rec.params)
    text = next(r for r in back.reasons if r.startswith("guard restored"))
    assert "collective traffic shows again (0.70% of packets sent drew a CNP: collective weight 10%)" in text
    blind = Tuner(ECN_ONLY, TunerPolicy(watch=2), evaluator=synthetic)
    relaxed_change(blind)
    text = next(r for r in blind.observe(FEW, rec.params).reasons if r.startswith("guard restored"))
    assert (
        "cannot tell whether collective traffic runs (12 packets in the interval, fewer than the 2,000"
        in text
    )


def test_after_a_way_back_the_guard_stays_on_for_ban_decisions() -> None:
    t = Tuner(ECN_ONLY, TunerPolicy(watch=2, ban=4), evaluator=synthetic)
    relaxed = relaxed_change(t)
    assert "stays on for the next 4 decisions" in t.observe(SOME, relaxed).reasons[-1]
    actions = [t.observe(NONE, RUNG1).params.kmin_bytes for _ in range(5)]
    assert actions == [400_000] * 4 + [200_000]  # decisions 5-8 guarded, the 9th relaxes again
