"""Congestion findings follow the congestion scorer's level, held for `congestion_sustain` seconds."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from netd.detect.congestion import KIND_CONGESTION, CongestionDetector
from netd.detect.inputs import DetectInput, PortCongestion
from tests.detect.helpers import busy, cfg, port, prio, tick, with_levels

KEY = ("mlx5_0", 1)


def at(t: float, level: str | None, priorities: tuple | None = None) -> DetectInput:
    ports = port(counters=busy(ce=0.01, cnp_per_packet=0.002), priorities=priorities or (prio(3),))
    return with_levels(tick(t, ports), {} if level is None else {KEY: level})


# (what, scorer level per 1 s tick, expected severity per tick: None = no finding); sustain 2 s. A tick's
# level judges the second that ends at it, so two ticks at a level are 2 s held.
SEQUENCES = [
    ("ok all along", ["ok"] * 4, [None] * 4),
    ("busy is a level but not a finding by default", ["busy"] * 4, [None] * 4),
    (
        "congested on two 1 s ticks is 2 s held: a warning",
        ["congested"] * 4,
        [None, "warning", "warning", "warning"],
    ),
    ("a burst shorter than the sustain is no incident", ["congested", "ok", "congested", "ok"], [None] * 4),
    (
        "the clock restarts after a dip",
        ["congested", "busy", "congested", "congested"],
        [None, None, None, "warning"],
    ),
    ("severe is critical", ["severe"] * 3 + ["congested"], [None, "critical", "critical", "warning"]),
    (
        "resolved when the scorer leaves the level",
        ["congested"] * 3 + ["busy"],
        [None, "warning", "warning", None],
    ),
    ("no level known for the port: nothing judged", [None] * 4, [None] * 4),
]


@pytest.mark.parametrize(("what", "levels", "severities"), SEQUENCES, ids=[s[0] for s in SEQUENCES])
def test_a_finding_is_a_sustained_scorer_level(what: str, levels: list, severities: list) -> None:
    d = CongestionDetector(cfg(congestion_sustain=2.0))
    got = []
    for i, level in enumerate(levels):
        found = d.evaluate(at(float(i + 1), level))
        got.append(found[0].severity.value if found else None)
    assert got == severities


def test_zero_sustain_opens_at_once_and_the_level_is_configurable() -> None:
    d = CongestionDetector(cfg(congestion_sustain=0.0, congestion_finding_level="busy"))
    (c,) = d.evaluate(at(1.0, "busy"))
    assert c.severity.value == "info"


# (what, tick lengths in s, congestion_sustain s, index of the first tick with a finding: None = none)
HELD = [
    ("1 s ticks, 2 s: the second tick", [1.0] * 4, 2.0, 1),
    ("a late read then an early one still makes 2 s", [1.03, 0.98, 1.0], 2.0, 1),
    ("0.5 s ticks, 2 s: the fourth tick", [0.5] * 6, 2.0, 3),
    ("2.5 s at 1 s ticks needs a third tick, never two", [1.0] * 4, 2.5, 2),
    ("one tick of 2 s", [2.0, 2.0], 2.0, 0),
    ("sustain 0: the first tick", [1.0] * 2, 0.0, 0),
]


@pytest.mark.parametrize(("what", "dts", "sustain", "first"), HELD, ids=[h[0] for h in HELD])
def test_the_level_is_held_from_the_start_of_the_first_interval_judged_at_it(
    what: str, dts: list[float], sustain: float, first: int | None
) -> None:
    """The regression of issue 17's benchmark: counting from the first tick's own time made every
    finding wait one tick more than its sustain (congestion median latency 3.5 s instead of 2.5 s)."""
    d = CongestionDetector(cfg(congestion_sustain=sustain))
    now, got = 100.0, []
    for dt in dts:
        now += dt
        inp = dataclasses.replace(at(now, "congested"), interval_s=dt)
        got.append(bool(d.evaluate(inp)))
    assert got.index(True) == first and all(got[first:])


def test_finding_scope_evidence_and_explanation_carry_the_scorers_judgement() -> None:
    d = CongestionDetector(cfg(congestion_sustain=2.0))
    assert not d.evaluate(at(1.0, "congested"))
    (c,) = d.evaluate(at(2.0, "congested"))
    assert c.kind == KIND_CONGESTION and c.scope.priority == 3
    ev = c.evidence
    assert ev["level"] == "congested" and ev["score"] == 0.6 and ev["sustained_s"] == 2.0
    assert ev["contributions"] == {"ce_fraction": 0.5, "pause_fraction": 0.1}
    assert ev["ce_fraction"] == pytest.approx(0.01)  # the port's own counters this tick, for the reader
    assert c.explanation.startswith("mlx5_0/1 congested for 2 s (score 0.60: 3.00% of received RoCE")


def test_priority_is_named_only_when_the_port_has_one_pfc_priority() -> None:
    d = CongestionDetector(cfg(congestion_sustain=0.0))
    (c,) = d.evaluate(at(1.0, "congested", priorities=(prio(3), prio(4))))
    assert c.scope.priority is None


def test_retired_threshold_keys_still_load_and_change_nothing(caplog) -> None:
    old = cfg(congestion_ce_fraction=(0.1, 0.2, 0.3), congestion_exit_ticks=9)
    assert old == cfg()
    assert "congestion_ce_fraction is no longer used" in caplog.text


@pytest.mark.parametrize(
    ("contributions", "finding"),
    [
        ({"ce_fraction": 0.5, "pause_fraction": 0.1}, True),
        ({"ce_fraction": 0.3, "cnp_per_packet": 0.3}, True),  # a receiver that also sends into congestion
        ({"ce_fraction": 0.1, "cnp_per_packet": 0.6}, False),  # an incast sender: its CNPs carry the level
        ({"ce_fraction": 0.1, "loss_per_packet": 1.0}, False),  # a loss burst: the loss detector's
        ({"pause_fraction": 0.9}, False),  # paused, not marked: a storm or spreading
        ({"link_down": 1.0}, False),
    ],
)
def test_only_a_level_carried_by_marked_arrivals_is_a_congestion_finding(contributions, finding) -> None:
    d = CongestionDetector(cfg(congestion_sustain=0.0))
    verdict = PortCongestion("severe", 0.9, MappingProxyType(contributions), MappingProxyType({}))
    inp = dataclasses.replace(at(1.0, None), congestion=MappingProxyType({KEY: verdict}))
    assert bool(d.evaluate(inp)) is finding
