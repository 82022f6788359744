"""A congested port's CNP rise is congestion, not a baseline shift — from the scorer's first tick at the
level, before the congestion finding has waited out its sustain (issue 17's benchmark found 32 false
``baseline_shift`` findings on incast receivers once the finding waited for ``congestion_sustain``)."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from netd.detect.engine import DetectionEngine
from netd.detect.inputs import DetectInput, PortCongestion
from tests.detect.helpers import HOST, busy, cfg, pfc, port, prio, tick, with_levels

KEY = ("mlx5_0", 1)
CALM = 60  # ticks of calm history: the baseline judges from 60 on


def hot_tick(t: float, cnp_per_s: float, level: str | None) -> DetectInput:
    counters = busy(ce=0.03 if cnp_per_s else 0.0) | {"cnp_sent": cnp_per_s}
    inp = tick(t, port(counters=counters, priorities=(prio(3),)))
    return inp if level is None else with_levels(inp, {KEY: level})


def opened(steps: list[tuple[float, str | PortCongestion]]) -> list[tuple[str, int]]:
    """(kind, step index) of every finding opened over ``steps`` of (CNPs sent per s, scorer level)."""
    engine = DetectionEngine(cfg(congestion_sustain=2.0), HOST)
    for i in range(CALM):
        engine.evaluate(hot_tick(float(i + 1), 0.0, "ok"))
    got = []
    for j, (cnps, level) in enumerate(steps):
        t = float(CALM + j + 1)
        inp = hot_tick(t, cnps, level if isinstance(level, str) else None)
        if isinstance(level, PortCongestion):
            inp = dataclasses.replace(inp, congestion=MappingProxyType({KEY: level}))
        events = engine.evaluate(inp)
        # a PFC fast sample between ticks carries no levels: the last tick's still hold
        events += engine.evaluate(pfc(t + 0.5, port(priorities=(prio(3),))))
        got += [(e.finding.kind, j) for e in events if e.action in ("opened", "reopened")]
    return got


def rise(*levels: str | PortCongestion, cnps: float = 3000.0) -> list[tuple[float, str | PortCongestion]]:
    return [(cnps, level) for level in levels]


SENDER = PortCongestion(
    "congested", 0.6, MappingProxyType({"ce_fraction": 0.1, "cnp_per_packet": 0.6}), MappingProxyType({})
)
CASES = [
    ("an incast's receiver, congested from the rise on", rise(*["congested"] * 4), [("congestion", 1)]),
    (
        "the scorer's smoothing reaches the level a tick after the CNPs rise",
        rise("busy", "congested", "congested", "congested"),
        [("congestion", 2)],
    ),
    (
        "the incast ends: its last partial second's CNPs under a falling level open nothing",
        rise(*["congested"] * 4) + rise("ok", cnps=1500.0) + rise("ok", "ok", cnps=0.0),
        [("congestion", 1)],
    ),
    (
        "a shift open before the congestion is superseded while it lasts, reported again if CNPs stay high",
        rise("ok", "ok", "congested", "congested", "congested") + rise("ok", "ok", "ok"),
        [("baseline_shift", 1), ("congestion", 3), ("baseline_shift", 5)],
    ),
    ("CNPs far above the port's history, no congestion: a shift", rise(*["ok"] * 4), [("baseline_shift", 1)]),
    ("busy is not congested: a shift", rise(*["busy"] * 4), [("baseline_shift", 1)]),
    ("a level carried by CNPs handled explains no CNPs sent", rise(*[SENDER] * 4), [("baseline_shift", 1)]),
]


@pytest.mark.parametrize(("what", "steps", "expected"), CASES, ids=[c[0] for c in CASES])
def test_congestion_explains_the_cnp_rise_from_its_first_tick(what: str, steps: list, expected: list) -> None:
    assert opened(steps) == expected
