"""The incast twin's utilisation guards only while the signals do not rule out its elephants, and a
search's twins are drawn at its load bucket's value (issue 20, third round).

The incast twin's utilisation is its two permanent elephants' rate recovery after each cut: the bursts
and short flows it also carries never hold the bottleneck busy alone. Greedy flows held at a standing
queue draw CNPs on a large share of their packets; an interval below the 0.5 % CNPs per packet sent
(on enough packets to tell) positively shows no such traffic, and then that figure does not guard.

The synthetic twins use the figures the real ones gave from the mlx5 defaults at 200G (docs/tuning.md,
"What the incast twin's utilisation guards"): Kmin 800 -> 400 KB lowers the incast twin's tail slowdown
by ~20 % and its utilisation to 0.80x, and leaves the collective twin unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import pytest

from cc.model import DcqcnParams, HostSignals
from cc.tune import Tuner, TunerPolicy, TwinResult
from cc.tune.guard import admissible, read, utilization_waived
from cc.tune.tuner import LOAD_BUCKETS
from tests.cc.test_tuner_guard import ECN_ONLY
from tests.cc.test_tuner_guard import signals as guard_signals

DEFAULTS = DcqcnParams()


def signals(density: float, utilization: float = 0.2, interval_s: float = 0.002) -> HostSignals:
    """One 2 ms interval at 200G in which ``density`` of the packets sent drew a CNP (1 % marked)."""
    return guard_signals(density, utilization, interval_s, ce_fraction=0.01)


BURSTS = signals(0.003)  # the benchmark's incasts at the defaults: 0.27-0.35 %
EDGE = signals(0.00499)
THROTTLED = signals(0.007)  # greedy flows held at a standing queue draw more
SATURATED = signals(0.05)
FEW = signals(0.0, utilization=0.001)  # 12 packets: cannot tell


def twins(signals: HostSignals, params: list[DcqcnParams]) -> dict[str, list[TwinResult]]:
    def incast(p: DcqcnParams) -> TwinResult:
        if p.kmin_bytes >= 800e3:
            return TwinResult(20.0, 0.86, 0.0, 700.0)
        return TwinResult(16.0, 0.86 * 0.80, 0.0, 400.0)

    return {
        "incast": [incast(p) for p in params],
        "collective": [TwinResult(5.0, 0.8, 0.0, 100.0) for _ in params],
    }


@pytest.mark.parametrize(
    ("s", "waived"),
    [
        (BURSTS, {"incast"}),
        (EDGE, {"incast"}),
        (THROTTLED, set()),
        (SATURATED, set()),
        (FEW, set()),  # cannot rule anything out
    ],
)
def test_the_elephant_utilisation_guards_unless_the_signals_rule_out_throttled_flows(
    s: HostSignals, waived: set[str]
) -> None:
    assert utilization_waived(read(s)) == waived


BASE = {"incast": TwinResult(20.0, 0.86, 0.0, 700.0), "collective": TwinResult(5.0, 0.8, 0.0, 100.0)}


@pytest.mark.parametrize(
    ("incast", "waived", "ok"),
    [
        (TwinResult(16.0, 0.69, 0.0, 400.0), {"incast"}, True),  # utilisation 0.80x, not guarding
        (TwinResult(16.0, 0.69, 0.0, 400.0), set(), False),  # ... guarding
        (TwinResult(21.0, 0.86, 0.0, 400.0), {"incast"}, False),  # slowdown +5 % still guards
        (TwinResult(16.0, 0.86, 0.001, 400.0), {"incast"}, False),  # and pauses
        (TwinResult(16.0, 0.85, 0.0, 400.0), set(), True),  # within the 3 % tolerance
    ],
)
def test_a_waived_utilisation_leaves_the_other_guards(incast: TwinResult, waived: set[str], ok: bool) -> None:
    cand = {"incast": incast, "collective": BASE["collective"]}
    assert admissible(BASE, cand, 0.03, frozenset(), frozenset(waived)) is ok


@pytest.mark.parametrize(
    ("window", "kmin"),
    [
        ([BURSTS, BURSTS], 400_000),  # no throttled greedy flow: the first rung is taken
        ([EDGE, EDGE], 400_000),
        ([BURSTS, THROTTLED], 800_000),  # the last interval decides what runs now
        ([BURSTS, SATURATED], 800_000),
        ([BURSTS, FEW], 800_000),
    ],
)
def test_the_first_marking_rung_is_refused_only_for_traffic_the_elephants_stand_for(
    window: list[HostSignals], kmin: int
) -> None:
    t = Tuner(ECN_ONLY, TunerPolicy(watch=2), evaluator=twins)
    for s in window[:-1]:
        t.observe(s, DEFAULTS)
    rec = t.observe(window[-1], DEFAULTS)
    assert rec.params.kmin_bytes == kmin
    waived = [r for r in rec.reasons if r.startswith("utilisation not guarded")]
    assert bool(waived) is (kmin == 400_000)
    if waived:
        assert "'incast' utilisation 86% -> 69%" in waived[0]
        assert not any(r.startswith("guard relaxed") for r in rec.reasons)  # not a relaxed guard


def test_an_admitted_rung_is_not_undone_when_marking_raises_the_cnp_density() -> None:
    """Earlier marking raises CNPs per packet for the same traffic; the waiver is no guard that gave
    way, so no way back is recommended (the regression check watches the host's utilisation)."""
    t = Tuner(ECN_ONLY, TunerPolicy(watch=2), evaluator=twins)
    t.observe(BURSTS, DEFAULTS)
    rung1 = t.observe(BURSTS, DEFAULTS).params
    assert rung1.kmin_bytes == 400_000
    rec = t.observe(THROTTLED, rung1)
    assert rec.action == "hold" and rec.params == rung1


class Recorder:
    def __init__(self) -> None:
        self.loads: list[float] = []

    def __call__(
        self, link_gbps: float, load: float, candidates: Sequence[DcqcnParams], seeds: Iterable[int]
    ) -> dict[str, list[TwinResult]]:
        self.loads.append(load)
        return twins(signals(0.0), list(candidates))


@pytest.mark.parametrize(
    ("utilizations", "drawn"),
    [
        ([0.165, 0.174], 0.15),  # one bucket (3 of 20), whichever interval comes first
        ([0.174, 0.165], 0.15),
        ([0.233, 0.226], 0.25),
        ([0.01], 0.05),  # clipped to the twins' range first
        ([0.9], 0.4),
    ],
)
def test_the_twins_are_drawn_at_the_load_buckets_value(utilizations: list[float], drawn: float) -> None:
    sim = Recorder()
    t = Tuner(ECN_ONLY, TunerPolicy(watch=2, replications=1), simulate=sim)
    for u in utilizations:
        t.observe(dataclasses.replace(THROTTLED, utilization=u), DEFAULTS)
    assert sim.loads == [drawn]  # one search for the bucket, at its value
    assert drawn * LOAD_BUCKETS == pytest.approx(round(drawn * LOAD_BUCKETS))
