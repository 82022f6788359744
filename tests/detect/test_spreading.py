"""Congestion spreading: a paused port whose own signals are low is a victim, not a source."""

from __future__ import annotations

import pytest

from netd.detect.spreading import KIND_SPREADING, SpreadingDetector
from tests.detect.helpers import busy, cfg, pfc, port, prio, stormed, tick

PPS = 6e6

CASES = [
    # (what, pause fraction, CE fraction, CNPs handled per packet sent, packets sent, severity or None)
    ("paused 40% with no marks of its own: a victim", 0.4, 0.0, 0.0, PPS, "warning"),
    ("paused 60%: it lost more than half its bandwidth", 0.6, 0.0, 0.0, PPS, "critical"),
    ("paused 10% is ordinary", 0.1, 0.0, 0.0, PPS, None),
    ("its own arriving traffic is marked: part of the congestion", 0.4, 0.01, 0.0, PPS, None),
    ("its flows get CNPs: a sender into the congestion", 0.4, 0.0, 0.01, PPS, None),
    ("nothing sent at all: a storm's case", 0.4, 0.0, 0.0, 0, None),
]


@pytest.mark.parametrize(
    ("what", "pause", "ce", "handled", "sent", "severity"), CASES, ids=[c[0] for c in CASES]
)
def test_victim_signature(
    what: str, pause: float, ce: float, handled: float, sent: float, severity: str | None
):
    counters = busy(ce=ce) | {"cnp_handled": handled * sent}
    pc = prio(3, rx_pause_us=pause * 1e6, rx_pause_frames=1000, tx_packets=sent)
    found = SpreadingDetector(cfg()).evaluate(tick(1.0, port(counters=counters, priorities=(pc,))))
    assert [c.severity.value for c in found] == ([severity] if severity else [])
    if severity:
        assert found[0].kind == KIND_SPREADING and found[0].scope.priority == 3
        assert "victim of congestion spreading" in found[0].explanation


def victim_tick(t: float, pause: float) -> object:
    pc = prio(3, rx_pause_us=pause * 1e6, rx_pause_frames=1000, tx_packets=PPS)
    return tick(t, port(counters=busy(), priorities=(pc,)))


def test_exit_after_quiet_ticks() -> None:
    d = SpreadingDetector(cfg(spreading_exit_ticks=2))
    got = [
        bool(d.evaluate(victim_tick(float(t), pause))) for t, pause in enumerate([0.4, 0.0, 0.4, 0.0, 0.0], 1)
    ]
    assert got == [True, True, True, True, False]


def test_a_stormy_fast_sample_inside_the_tick_makes_it_ambiguous() -> None:
    """The edge of a PFC storm looks like a victim in a 1 s aggregate; the fast path tells them apart."""
    d = SpreadingDetector(cfg())
    d.evaluate(pfc(0.9, port(priorities=(stormed(),))))
    assert not d.evaluate(victim_tick(1.0, 0.4))  # not opened on an ambiguous tick
    assert d.evaluate(victim_tick(2.0, 0.4))  # the next clean tick decides
    d.evaluate(pfc(2.9, port(priorities=(stormed(),))))
    assert d.evaluate(victim_tick(3.0, 0.0))  # ...and an ambiguous tick does not count towards clearing
