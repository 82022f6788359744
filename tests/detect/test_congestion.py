"""Congestion levels (normalised by traffic) and their hysteresis."""

from __future__ import annotations

import pytest

from netd.detect.congestion import KIND_CONGESTION, CongestionDetector, level_of
from tests.detect.helpers import busy, cfg, port, prio, tick

LEVEL_CASES = [
    (None, 0),
    (0.0, 0),
    (0.0004, 0),
    (0.0005, 1),
    (0.0019, 1),
    (0.002, 2),
    (0.049, 2),
    (0.05, 3),
    (0.9, 3),
]


@pytest.mark.parametrize(("value", "level"), LEVEL_CASES)
def test_level_of(value: float | None, level: int) -> None:
    assert level_of(value, (0.0005, 0.002, 0.05)) == level


def test_a_zero_threshold_needs_a_positive_value() -> None:
    assert level_of(0.0, (0.0, 0.1, 0.2)) == 0
    assert level_of(1e-9, (0.0, 0.1, 0.2)) == 1


# (what, CE fraction per tick, CNPs per packet per tick, expected severity per tick: None = no finding)
SEQUENCES = [
    ("an all-reduce at line rate with no marks", [0.0] * 4, None, [None] * 4),
    ("busy is a level but not a finding by default", [0.001] * 3, None, [None] * 3),
    ("congested at once, severe at once", [0.003, 0.06], None, ["warning", "critical"]),
    (
        "hysteresis: three ticks under half the threshold to leave",
        [0.003, 0.0, 0.0, 0.0, 0.0],
        None,
        ["warning", "warning", "warning", None, None],
    ),
    (
        "just under the threshold but above half of it holds the level",
        [0.003, 0.0015, 0.0015, 0.0015, 0.0],
        None,
        ["warning"] * 5,
    ),
    ("a dip resets the exit countdown", [0.003, 0.0, 0.0, 0.003, 0.0, 0.0], None, ["warning"] * 6),
    (
        "severe steps down to congested, then out",
        [0.06, 0.003, 0.003, 0.003, 0.0, 0.0, 0.0],
        None,
        ["critical", "critical", "critical", "warning", "warning", "warning", None],
    ),
    (
        "CNPs sent per packet count too (ECN counter absent)",
        [None, None],
        [0.002, 0.03],
        ["warning", "critical"],
    ),
]


@pytest.mark.parametrize(("what", "ce", "cnp", "severities"), SEQUENCES, ids=[s[0] for s in SEQUENCES])
def test_levels_with_hysteresis(what: str, ce: list, cnp: list | None, severities: list) -> None:
    d = CongestionDetector(cfg())
    got = []
    for i, fraction in enumerate(ce):
        counters = busy(ce=fraction or 0.0, cnp_per_packet=cnp[i] if cnp else 0.0)
        if fraction is None:
            del counters["ecn_marked"]
        found = d.evaluate(tick(float(i + 1), port(counters=counters, priorities=(prio(3),))))
        got.append(found[0].severity.value if found else None)
    assert got == severities


def test_too_little_traffic_is_not_judged() -> None:
    d = CongestionDetector(cfg(congestion_min_rx_pps=1000))
    counters = busy(ce=0.5, pps=500)  # half the marked packets, but 500 packets/s
    assert not d.evaluate(tick(1.0, port(counters=counters)))


def test_finding_scope_evidence_and_explanation() -> None:
    d = CongestionDetector(cfg())
    (c,) = d.evaluate(tick(1.0, port(counters=busy(ce=0.01, cnp_per_packet=0.002), priorities=(prio(3),))))
    assert c.kind == KIND_CONGESTION and c.scope.priority == 3
    assert c.evidence["ce_fraction"] == pytest.approx(0.01) and c.evidence["level"] == "congested"
    assert c.evidence["cnp_sent_per_s"] == pytest.approx(0.002 * 200e9 / 8 / 4096, rel=1e-3)
    assert "1.00% of received RoCE packets CE-marked" in c.explanation


def test_priority_is_named_only_when_the_port_has_one_pfc_priority() -> None:
    d = CongestionDetector(cfg())
    (c,) = d.evaluate(tick(1.0, port(counters=busy(ce=0.01), priorities=(prio(3), prio(4)))))
    assert c.scope.priority is None


def test_level_threshold_for_findings_is_configurable() -> None:
    d = CongestionDetector(cfg(congestion_finding_level="busy"))
    (c,) = d.evaluate(tick(1.0, port(counters=busy(ce=0.001))))
    assert c.severity.value == "info"


def test_gaps_and_first_ticks_carry_the_level() -> None:
    d = CongestionDetector(cfg(max_gap=5.0))
    assert not d.evaluate(tick(1.0, port(counters=busy(ce=0.01)), dt=None))  # first sample: no rates
    assert d.evaluate(tick(2.0, port(counters=busy(ce=0.01))))
    assert d.evaluate(tick(30.0, port(counters=busy(ce=0.0, dt=28.0)), dt=28.0))  # not judged: carried
    assert not d.evaluate(tick(31.0))  # the port is gone
