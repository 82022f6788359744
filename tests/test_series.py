"""Deltas, wraps, resets and saturation (table-driven), and the tracker's totals and rates."""

from __future__ import annotations

import pytest

from netd.model.snapshot import (
    Counter,
    CounterGroup,
    EthtoolSample,
    Overflow,
    PortSample,
    Snapshot,
    frozen_map,
)
from netd.series.tracker import DeltaKind, SeriesTracker, counter_delta

W32 = 1 << 32


@pytest.mark.parametrize(
    ("prev", "cur", "width", "overflow", "scale", "expected"),
    [
        # plain increase
        (10, 15, 64, Overflow.WRAP, 1, (5, DeltaKind.NORMAL)),
        (10, 10, 64, Overflow.WRAP, 1, (0, DeltaKind.NORMAL)),
        # 32-bit q-counter wraps: 2^32-10 -> 5 is +15
        (W32 - 10, 5, 32, Overflow.WRAP, 1, (15, DeltaKind.WRAP)),
        # a large drop of a 32-bit counter is a reset, not a wrap of more than half the range
        (1_000_000_000, 100, 32, Overflow.WRAP, 1, (100, DeltaKind.RESET)),
        # 64-bit counters never wrap in practice: going backwards is a reset
        (1_000, 7, 64, Overflow.WRAP, 1, (7, DeltaKind.RESET)),
        # 16-bit PMA error counter stuck at 0xffff: saturated, the delta is a lower bound
        (65_000, 65_535, 16, Overflow.SATURATE, 1, (535, DeltaKind.SATURATED)),
        (65_535, 65_535, 16, Overflow.SATURATE, 1, (0, DeltaKind.SATURATED)),
        # 4-bit local_link_integrity_errors at 15
        (15, 15, 4, Overflow.SATURATE, 1, (0, DeltaKind.SATURATED)),
        # saturating counter cleared (perfquery -R): a reset
        (65_535, 3, 16, Overflow.SATURATE, 1, (3, DeltaKind.RESET)),
        # legacy 32-bit data counter in words, scaled to bytes: saturates at (2^32-1)*4
        ((W32 - 1) * 4, (W32 - 1) * 4, 32, Overflow.SATURATE, 4, (0, DeltaKind.SATURATED)),
        # scaled wrap (words -> bytes)
        ((W32 - 1) * 4, 8, 32, Overflow.WRAP, 4, (12, DeltaKind.WRAP)),
        # a previous reading above the declared width cannot be unwrapped (was: a negative delta)
        (W32 + 5, 100, 32, Overflow.WRAP, 1, (100, DeltaKind.RESET)),
    ],
)
def test_counter_delta(prev, cur, width, overflow, scale, expected):
    assert counter_delta(prev, cur, width=width, overflow=overflow, scale=scale) == expected


def _snap(t: float, counters: dict[str, tuple[int, int, Overflow]], ethtool: dict[str, int] | None = None):
    port = PortSample(
        device="mlx5_0",
        port=1,
        netdev="eth0",
        link_layer="Ethernet",
        state="ACTIVE",
        phys_state="LinkUp",
        rate_gbps=200.0,
        counters=frozen_map(
            {
                name: Counter(name, name, CounterGroup.HW, value, width, overflow)
                for name, (value, width, overflow) in counters.items()
            }
        ),
    )
    eth = {"eth0": EthtoolSample("eth0", frozen_map(ethtool or {}))}
    return Snapshot(timestamp=1000 + t, monotonic=t, host="h", ports=(port,), ethtool=frozen_map(eth))


def test_tracker_totals_and_rates_across_wrap_and_reset():
    tracker = SeriesTracker()
    first = tracker.update(_snap(0.0, {"q": (W32 - 100, 32, Overflow.WRAP), "big": (500, 64, Overflow.WRAP)}))
    assert first.interval_s is None
    assert first.ports[0].rates == {}
    assert first.ports[0].totals == {"q": W32 - 100, "big": 500}

    second = tracker.update(_snap(2.0, {"q": (100, 32, Overflow.WRAP), "big": (10, 64, Overflow.WRAP)}))
    view = second.ports[0]
    assert second.interval_s == 2.0
    assert view.totals["q"] == W32 + 100  # unwrapped: never goes backwards
    assert view.rates["q"] == pytest.approx(100.0)
    assert view.totals["big"] == 500  # went backwards: held, no rate, the total unchanged
    assert "big" not in view.rates and view.held == {"big"} and view.resets == frozenset()

    third = tracker.update(_snap(3.0, {"q": (300, 32, Overflow.WRAP), "big": (30, 64, Overflow.WRAP)}))
    view = third.ports[0]
    assert view.resets == {"big"} and view.held == frozenset()  # confirmed: it restarted
    assert view.totals["big"] == 530  # the 10 counted since the restart, then 20 more
    assert view.rates["big"] == pytest.approx(20.0)
    assert tracker.events == {"wrap": 1, "held": 1, "reset": 1}


def test_tracker_glitch_never_reaches_rates_and_uses_the_line_rate():
    tracker = SeriesTracker()
    tracker.update(_snap(0.0, {"ecn": (1000, 64, Overflow.WRAP)}))
    # 200 Gb/s allows at most 2 * 200e9 / 8 / 64 = 7.8e8 events/s: 1e12 in one second is a glitch
    spike = tracker.update(_snap(1.0, {"ecn": (10**12, 64, Overflow.WRAP)}))
    assert spike.ports[0].rates == {} and spike.ports[0].totals["ecn"] == 1000
    back = tracker.update(_snap(2.0, {"ecn": (3000, 64, Overflow.WRAP)}))
    assert back.ports[0].rates["ecn"] == pytest.approx(1000.0)  # over both seconds
    assert back.ports[0].totals["ecn"] == 3000
    # a burst the line allows is believed at once
    burst = tracker.update(_snap(3.0, {"ecn": (3000 + 5 * 10**8, 64, Overflow.WRAP)}))
    assert burst.ports[0].rates["ecn"] == pytest.approx(5e8)


def test_tracker_saturated_counter_has_no_rate():
    tracker = SeriesTracker()
    tracker.update(_snap(0.0, {"symbol_error": (65535, 16, Overflow.SATURATE)}))
    obs = tracker.update(_snap(1.0, {"symbol_error": (65535, 16, Overflow.SATURATE)}))
    assert obs.ports[0].saturated == {"symbol_error"}
    assert "symbol_error" not in obs.ports[0].rates  # unknown, not 0.0


def test_tracker_flags_saturation_on_first_reading():
    tracker = SeriesTracker()
    obs = tracker.update(_snap(0.0, {"symbol_error": (65535, 16, Overflow.SATURATE)}))
    assert obs.ports[0].saturated == {"symbol_error"}


def test_tracker_forgets_vanished_counters():
    tracker = SeriesTracker()
    tracker.update(_snap(0.0, {"a": (100, 64, Overflow.WRAP)}))
    tracker.update(_snap(1.0, {}))  # device gone this tick
    back = tracker.update(_snap(2.0, {"a": (5, 64, Overflow.WRAP)}))
    # it came back (driver reload): a fresh series, not a "reset" against a stale value
    assert back.ports[0].totals == {"a": 5}
    assert back.ports[0].resets == frozenset()


def test_tracker_ethtool_rates_and_non_increasing_time():
    tracker = SeriesTracker()
    tracker.update(_snap(0.0, {}, {"rx_prio3_pause": 10}))
    obs = tracker.update(_snap(0.5, {}, {"rx_prio3_pause": 20}))
    assert obs.netdevs["eth0"].rates["rx_prio3_pause"] == pytest.approx(20.0)
    same = tracker.update(_snap(0.5, {}, {"rx_prio3_pause": 30}))
    assert same.interval_s is None and same.netdevs["eth0"].rates == {}
    assert same.netdevs["eth0"].totals["rx_prio3_pause"] == 30


def test_a_32_bit_counter_read_beyond_its_width_once_through_the_real_source(tmp_path) -> None:
    """The reported bug: out_of_sequence (32-bit) read 2**32 + x once gave -1.86e19/s and a total that
    dropped. Now the odd reading is held and discarded, and the total only grows."""
    from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
    from netd.sources.rdma import RdmaSysfs

    with SysfsTree(tmp_path) as tree:
        tree.add_device(DeviceSpec("mlx5_0"))
        source, tracker = RdmaSysfs(tree.root), SeriesTracker()
        seen = []
        for t, value in enumerate((1000, W32 + 1100, 1200, 1300)):
            tree.set_counters("mlx5_0", 1, {"out_of_sequence": value})
            (port,) = source.read(float(t))
            snap = Snapshot(timestamp=1000.0 + t, monotonic=float(t), host="h", ports=(port,))
            view = tracker.update(snap).ports[0]
            seen.append((view.totals["out_of_sequence"], view.rates.get("out_of_sequence")))
        source.close()
    assert seen == [(1000, None), (1000, None), (1200, 100.0), (1300, 100.0)]
