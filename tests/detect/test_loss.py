"""Loss in a lossless fabric: which counters, how much, for how long."""

from __future__ import annotations

import pytest

from netd.detect.loss import KIND_LOSS, LossDetector
from tests.detect.helpers import cfg, port, prio, tick

CASES = [
    # (what, counter deltas, netdev deltas, priority discards, severity or None, dominant counter)
    ("no loss", {"out_of_sequence": 0.0, "seq_err": 0.0}, {}, None, None, None),
    ("out-of-sequence arrivals", {"out_of_sequence": 50.0}, {}, None, "warning", "out_of_sequence"),
    ("below the minimum rate", {"out_of_sequence": 0.5}, {}, None, None, None),
    (
        "a heavy burst is critical",
        {"out_of_sequence": 800.0, "timeouts": 400.0},
        {},
        None,
        "critical",
        "out_of_sequence",
    ),
    (
        "an exhausted retry is critical at any rate",
        {"retries_exceeded": 1.0},
        {},
        None,
        "critical",
        "retries_exceeded",
    ),
    ("NIC receive-buffer drops", {}, {"rx_discards_phy": 30.0}, None, "warning", "rx_discards_phy"),
    ("drops on a PFC priority", {}, {}, 12.0, "warning", "rx_prio3_discards"),
    ("RNR NAKs point at the application", {"rnr": 20.0}, {}, None, "warning", "rnr"),
]


@pytest.mark.parametrize(
    ("what", "counters", "netdev", "discards", "severity", "dominant"), CASES, ids=[c[0] for c in CASES]
)
def test_loss(
    what: str, counters: dict, netdev: dict, discards: float | None, severity: str | None, dominant
):
    p = port(counters=counters, netdev_counters=netdev, priorities=(prio(3, rx_discards=discards),))
    found = LossDetector(cfg()).evaluate(tick(1.0, p))
    assert [c.severity.value for c in found] == ([severity] if severity else [])
    if severity:
        assert found[0].kind == KIND_LOSS and f"mostly {dominant}" in found[0].explanation
        assert found[0].evidence["deltas"][dominant] > 0


def test_quiet_time_before_resolving() -> None:
    d = LossDetector(cfg(loss_quiet_time=3.0))
    assert d.evaluate(tick(1.0, port(counters={"out_of_sequence": 100.0})))
    got = [bool(d.evaluate(tick(float(t), port(counters={"out_of_sequence": 0.0})))) for t in range(2, 6)]
    assert got == [True, True, False, False]


def test_an_unknown_delta_is_not_loss() -> None:
    """A counter that reset has no delta in the input (the feed leaves it out): nothing to judge."""
    assert not LossDetector(cfg()).evaluate(tick(1.0, port(counters={"seq_err": 0.0})))
