"""Change points against each port's own CNP history (median / MAD, with a tail-aware spread)."""

from __future__ import annotations

import pytest

from netd.detect.baseline import KIND_BASELINE, BaselineDetector, robust_threshold
from tests.detect.helpers import cfg, port, tick

THRESHOLD_CASES = [
    # (what, history, expected threshold with z=6 and min_rate=200)
    ("an idle port: the minimum rise", [0.0] * 100, 200.0),
    ("a steady port: median + 6 x 1.4826 x MAD", [1000.0, 1100.0, 900.0] * 40, 1000.0 + 6 * 1.4826 * 100),
    ("a quiet steady port: at least the minimum rise", [1000.0, 1010.0, 990.0] * 40, 1200.0),
    (
        "a port with regular bursts: the upper tail widens the spread",
        [0.0] * 90 + [10_000.0] * 10,
        6 * 10_000.0 / 1.645,
    ),
]


@pytest.mark.parametrize(
    ("what", "history", "expected"), THRESHOLD_CASES, ids=[c[0] for c in THRESHOLD_CASES]
)
def test_robust_threshold(what: str, history: list[float], expected: float) -> None:
    threshold, _, _ = robust_threshold(history, z=6.0, min_rate=200.0)
    assert threshold == pytest.approx(expected, rel=1e-3)


def run(rates: list[float]) -> list[bool]:
    d = BaselineDetector(cfg())  # judged from 60 ticks on, over a 300-tick window
    return [bool(d.evaluate(tick(float(i + 1), port(counters={"cnp_sent": r})))) for i, r in enumerate(rates)]


def test_warm_up_then_a_persistent_jump() -> None:
    got = run([0.0] * 60 + [3000.0, 3000.0, 3000.0, 0.0, 0.0])
    assert got[60:] == [False, True, True, True, False]  # 2 ticks over to open, 2 under to close
    assert not any(got[:60])


def test_a_lasting_change_becomes_the_new_normal() -> None:
    """Every rate joins the history: once a shift fills the top 5 % of the window, it is the norm."""
    got = run([0.0] * 200 + [3000.0] * 40)
    assert got[201] and not got[-1]
    assert 205 < 200 + got[200:].index(False, 2) < 225


def test_nothing_is_judged_before_the_warm_up() -> None:
    assert not any(run([5000.0] * 59))


def test_a_single_tick_blip_is_not_a_change() -> None:
    assert not any(run([0.0] * 60 + [5000.0, 0.0, 5000.0, 0.0]))


def test_small_rises_stay_under_the_minimum() -> None:
    assert not any(run([0.0] * 60 + [150.0] * 5))


def test_evidence() -> None:
    d = BaselineDetector(cfg())
    found = []
    for i, r in enumerate([100.0] * 60 + [4000.0, 4000.0]):
        found = d.evaluate(tick(float(i + 1), port(counters={"cnp_sent": r})))
    (c,) = found
    assert c.kind == KIND_BASELINE
    assert c.evidence["cnp_sent_per_s"] == 4000.0 and c.evidence["baseline_median"] == 100.0


@pytest.mark.parametrize(
    ("what", "rates"),
    [
        ("calm: a full window of zeros keeps dropping zeros", [0.0] * 400),
        ("a step once the window is full", [0.0] * 320 + [3000.0] * 20 + [0.0] * 20),
        ("a period that divides the window: drops equal what comes", [0.0, 10.0, 20.0] * 150),
        ("a period that does not", [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0] * 60),
    ],
)
def test_a_reused_threshold_gives_the_same_findings_as_computing_it_each_tick(
    what: str, rates: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The threshold is computed again only when the history's values change; judging every tick from
    scratch must open and close exactly the same findings."""
    import netd.detect.baseline as baseline

    c = cfg()
    d = BaselineDetector(c)
    for i, r in enumerate(rates):
        d.evaluate(tick(float(i + 1), port(counters={"cnp_sent": r})))
        for st in d._state.values():  # the reused threshold is the one of the history as it is now
            if st.judged is not None:
                fresh = robust_threshold(list(st.history), c.baseline_z, c.baseline_min_rate)
                assert baseline._judged(st, c.baseline_z, c.baseline_min_rate) == fresh, (what, i)
    cached = run(rates)
    monkeypatch.setattr(baseline, "_judged", lambda st, z, m: robust_threshold(list(st.history), z, m))
    assert run(rates) == cached
