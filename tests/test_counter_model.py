"""The counter model, table-driven: every kind of misbehaviour, what is accepted, what is held and the
totals that must never go backwards (docs/metrics.md, Counter rules)."""

from __future__ import annotations

import math

import pytest

from netd.model.snapshot import Overflow
from netd.series.counter_model import DEFAULT_LINE_GBPS, CounterTrack, DeltaKind, ceiling_per_s

W32 = 1 << 32
N, WR, RS, J, SAT, H, D = (
    DeltaKind.NORMAL,
    DeltaKind.WRAP,
    DeltaKind.RESET,
    DeltaKind.JUMP,
    DeltaKind.SATURATED,
    DeltaKind.HELD,
    DeltaKind.DISCARDED,
)
CEIL = 1000.0  # events per second the "line" allows in these cases

# (name, readings as (value, width), kinds, rates, totals) — one second between readings
CASES = [
    ("steady", [(100, 64), (150, 64), (250, 64)], [N, N], [50.0, 100.0], [100, 150, 250]),
    (
        "backward glitch discarded",
        [(1000, 64), (500, 64), (1020, 64)],
        [H, D],
        [None, 10.0],
        [1000, 1000, 1020],
    ),
    (
        "forward glitch discarded",
        [(1000, 64), (10**12, 64), (1030, 64)],
        [H, D],
        [None, 15.0],
        [1000, 1000, 1030],
    ),
    # restart: the held value counts as events since the restart, the interval's rate stays unknown
    ("reset confirmed", [(5000, 64), (10, 64), (60, 64)], [H, RS], [None, 50.0], [5000, 5000, 5060]),
    ("reset to zero", [(5000, 64), (0, 64), (0, 64)], [H, RS], [None, 0.0], [5000, 5000, 5000]),
    # a confirmed step beyond the line rate is a new baseline, not events
    ("jump confirmed", [(1000, 64), (10**9, 64), (10**9 + 40, 64)], [H, J], [None, 40.0], [1000, 1000, 1040]),
    ("32-bit wrap", [(W32 - 100, 32), (50, 32)], [WR], [150.0], [W32 - 100, W32 + 50]),
    # one 32-bit reading above 2**32 (the source widens it to 64): held, then discarded
    (
        "32-bit overflow read",
        [(1000, 32), (W32 + 5, 64), (1100, 32)],
        [H, D],
        [None, 50.0],
        [1000, 1000, 1100],
    ),
    # a wrap of more than half the range is not believed without confirmation
    (
        "32-bit drop not a wrap",
        [(2_000_000_000, 32), (100, 32), (150, 32)],
        [H, RS],
        [None, 50.0],
        [2 * 10**9, 2 * 10**9, 2 * 10**9 + 150],
    ),
    (
        "two wild reads then back",
        [(1000, 64), (10, 64), (10**12, 64), (1090, 64)],
        [H, H, D],
        [None, None, 30.0],
        [1000, 1000, 1000, 1090],
    ),
]


@pytest.mark.parametrize(("name", "readings", "kinds", "rates", "totals"), CASES, ids=[c[0] for c in CASES])
def test_counter_track(name, readings, kinds, rates, totals):
    track = CounterTrack(readings[0][0])
    got_kinds, got_rates, got_totals = [], [], [track.total]
    for value, width in readings[1:]:
        kind, rate = track.step(value, 1.0, CEIL, width, Overflow.WRAP)
        got_kinds.append(kind)
        got_rates.append(rate)
        got_totals.append(track.total)
    assert got_kinds == kinds
    assert got_rates == [None if r is None else pytest.approx(r) for r in rates]
    assert got_totals == totals
    assert got_totals == sorted(got_totals)  # monotonic through everything


def test_saturated_counter_has_no_rate():
    track = CounterTrack(65_000)
    assert track.step(65_535, 1.0, CEIL, 16, Overflow.SATURATE) == (SAT, None)
    assert track.step(65_535, 1.0, CEIL, 16, Overflow.SATURATE) == (SAT, None)  # stuck: unknown, not 0
    assert track.total == 65_535


def test_same_instant_accepts_without_rate():
    track = CounterTrack(10)
    assert track.step(20, None, CEIL) == (N, None)
    assert track.total == 20


def test_short_interval_judged_as_a_tenth_of_a_second():
    # hw_counters are cached by the driver: 0.01 s after the last read may show 0.1 s worth
    track = CounterTrack(0)
    assert track.step(100, 0.01, CEIL)[0] is N
    assert track.step(100 + 101, 0.01, CEIL)[0] is H


@pytest.mark.parametrize(
    ("name", "gbps", "expected"),
    [
        # bytes at line rate (Gb/s / 8), 2x headroom
        ("rx_bytes", 100.0, 100e9 / 8 * 2),
        ("port_rcv_data", 200.0, 200e9 / 8 * 2),
        # packets/events: one per 64-byte frame at most
        ("rx_packets", 100.0, 100e9 / 8 / 64 * 2),
        ("rx_prio3_pause", 400.0, 400e9 / 8 / 64 * 2),
        # pause duration in µs: one second per second
        ("rx_prio3_pause_duration", 100.0, 2e6),
        ("port_xmit_wait", 100.0, None),
        # rate unknown (absent or garbage): the fastest port shipping
        ("rx_packets", None, DEFAULT_LINE_GBPS * 1e9 / 8 / 64 * 2),
        ("rx_packets", 0.0, DEFAULT_LINE_GBPS * 1e9 / 8 / 64 * 2),
    ],
)
def test_ceiling(name, gbps, expected):
    got = ceiling_per_s(name, gbps)
    assert got == expected if expected is None else math.isclose(got, expected)
