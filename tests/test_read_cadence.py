"""The two read cadences (docs/metrics.md, Read cadence): which RDMA counters are read every tick, which
at ``[rdma] slow_interval``, and what the series layer and the detectors' feed make of the slow ones."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from netd.detect import baseline, counters, feed, loss
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.model.snapshot import Counter, CounterGroup, Overflow, Snapshot, frozen_map
from netd.series.port_signals import ERROR_VOCABULARY
from netd.series.tracker import SeriesTracker
from netd.sources.rdma import RdmaSysfs
from netd.vocabulary.metric_names import TICK_COUNTERS
from tests.test_detect_feed import port_sample

MLX5 = DeviceSpec("mlx5_0", netdev="ens1f0np0", pci="0000:41:00.0")
TICK_FILES = ("port_rcv_data", "np_ecn_marked_roce_packets", "symbol_error", "out_of_sequence")
SLOW_FILES = ("unicast_rcv_packets", "req_cqe_error", "roce_slow_restart", "port_xmit_wait")


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[SysfsTree]:
    with SysfsTree(tmp_path) as t:
        t.add_device(MLX5)
        yield t


# -- which counters are per tick ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("consumer", "names"),
    [
        ("port signals: errors", ERROR_VOCABULARY),
        ("loss detector", frozenset(loss.LOSS_COUNTERS)),
        ("counter stalls", frozenset(vocab for vocab, _ in counters.STALL_PAIRS)),
        ("CNP baseline", frozenset({baseline.SIGNAL})),
        ("link flaps", frozenset({"link_downed"})),
        # port signals, congestion components, congestion spreading
        ("rates", frozenset({"rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "ecn_marked"})),
        (
            "CNPs and retransmits",
            frozenset({"cnp_sent", "cnp_handled", "cnp_ignored", "retransmits", "timeouts"}),
        ),
    ],
)
def test_every_name_a_per_tick_consumer_reads_is_a_tick_counter(consumer: str, names: frozenset[str]) -> None:
    assert names <= TICK_COUNTERS, (
        f"{consumer}: {sorted(names - TICK_COUNTERS)} would be read only every slow_interval"
    )


# -- the source --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slow_interval", "reads", "slow_read_at"),
    [
        (0.0, (0.0, 1.0, 2.0, 3.0), (True, True, True, True)),  # off: everything every call
        (10.0, (0.0, 1.0, 9.0, 10.0, 11.0), (True, False, False, True, False)),
        (10.0, (0.0, 9.7), (True, True)),  # due within 5 %: read now, not a tick late
        (2.0, (0.0, 1.0, 2.0, 3.0, 4.0), (True, False, True, False, True)),
    ],
)
def test_slow_counters_are_read_every_slow_interval_and_carried_over_between(
    tree: SysfsTree, slow_interval: float, reads: tuple[float, ...], slow_read_at: tuple[bool, ...]
) -> None:
    src = RdmaSysfs(tree.root, slow_interval_s=slow_interval)
    try:
        for n, (now, slow) in enumerate(zip(reads, slow_read_at, strict=True)):
            written = {name: 1000 * n + i for i, name in enumerate((*TICK_FILES, *SLOW_FILES))}
            tree.set_counters("mlx5_0", 1, written)
            (port,) = src.read(now)
            assert port.slow_read is slow
            if slow_interval:
                assert frozenset(SLOW_FILES) <= port.slow_counters
            else:
                assert port.slow_counters == frozenset()
            assert port.slow_counters.isdisjoint(TICK_FILES)
            for name in TICK_FILES:  # read on every call
                assert port.counters[name].value // port.counters[name].scale == written[name]
            last_slow = max(i for i in range(n + 1) if slow_read_at[i])
            for name in SLOW_FILES:  # the value of the last slow read, carried over
                assert port.counters[name].value == 1000 * last_slow + (
                    len(TICK_FILES) + SLOW_FILES.index(name)
                )
    finally:
        src.close()


@pytest.fixture
def slow_source(tree: SysfsTree) -> Iterator[RdmaSysfs]:
    src = RdmaSysfs(tree.root, slow_interval_s=10.0)
    yield src
    src.close()


def test_fewer_files_are_read_between_slow_reads(slow_source: RdmaSysfs) -> None:
    (first,) = slow_source.read(0.0)
    every = slow_source.files_read
    slow_source.read(1.0)
    assert slow_source.files_read == every - len(first.slow_counters)
    assert slow_source.files_read < every * 0.6  # mlx5: 23 of 52 files are export-only


def test_a_slow_counters_read_error_is_carried_until_it_reads_again(
    tree: SysfsTree, slow_source: RdmaSysfs
) -> None:
    slow_source.read(0.0)
    tree.set_raw("mlx5_0", 1, CounterGroup.HW, "req_cqe_error", "garbage\n")
    (at_slow,) = slow_source.read(10.0)
    (between,) = slow_source.read(11.0)
    for port in (at_slow, between):  # absent and named, never the last good value
        assert "req_cqe_error" not in port.counters
        assert any(e.startswith("hw_counters/req_cqe_error") for e in port.read_errors)
    tree.set_raw("mlx5_0", 1, CounterGroup.HW, "req_cqe_error", "7\n")
    assert slow_source.read(12.0)[0].read_errors == between.read_errors  # as the last slow read left it
    (fixed,) = slow_source.read(20.0)
    assert fixed.counters["req_cqe_error"].value == 7 and fixed.read_errors == ()


# -- the series layer --------------------------------------------------------------------------


def _snap(t: float, fast: int, slow: int, slow_read: bool, saturated: int = 0) -> Snapshot:
    """A port with one per-tick counter (``rx``), and two on the slow cadence: a 32-bit wrapping one
    (``cqe``) and a saturating one (``wait``)."""
    counters = {
        "rx": Counter("rx", "rx_packets", CounterGroup.PMA, fast, 64, Overflow.WRAP),
        "cqe": Counter("cqe", "req_cqe_error", CounterGroup.HW, slow, 32, Overflow.WRAP),
        "wait": Counter("wait", "port_xmit_wait", CounterGroup.PMA, saturated, 32, Overflow.SATURATE),
    }
    port = dataclasses.replace(
        port_sample("mlx5_0", "eth0", fast),
        counters=frozen_map(counters),
        slow_counters=frozenset({"cqe", "wait"}),
        slow_read=slow_read,
    )
    return Snapshot(timestamp=1000 + t, monotonic=t, host="h", ports=(port,))


# (time, per-tick counter, slow counter as read or carried, slow_read) -> (slow total, slow rate)
_SLOW_SERIES = [
    ((0.0, 0, 100, True), (100, None)),
    ((1.0, 10, 100, False), (100, None)),  # carried before any interval: no rate yet
    ((10.0, 100, 1100, True), (1100, 100.0)),  # +1000 over the 10 s since its last read
    ((11.0, 110, 1100, False), (1100, 100.0)),  # carried: the last interval's rate stands
    ((15.0, 150, 1100, False), (1100, 100.0)),
    ((20.0, 200, 1100, True), (1100, 0.0)),  # read, unchanged: 0 over this interval
    ((30.0, 300, 100, True), (1100, None)),  # backwards: held for the next read, no rate, total stands
    ((31.0, 310, 100, False), (1100, None)),
    # continues from the held one: a reset; the 100 since the restart count, and +500 at 50/s
    ((40.0, 400, 600, True), (1700, 50.0)),
    ((42.0, 420, 600, False), (1700, 50.0)),
    ((50.0, 500, 5, True), (1700, None)),  # backwards again: held
    ((60.0, 600, 2100, True), (3200, 75.0)),  # continues from 600: the 5 was a glitch (+1500 / 20 s)
]


def test_slow_counters_totals_are_monotonic_and_rates_span_their_read_interval() -> None:
    tracker = SeriesTracker()
    last_total = 0
    for (t, fast, slow, slow_read), (total, rate) in _SLOW_SERIES:
        (view,) = tracker.update(_snap(t, fast, slow, slow_read)).ports
        assert view.totals["cqe"] == total, t
        assert view.rates.get("cqe") == rate, t
        assert view.totals["cqe"] >= last_total
        last_total = view.totals["cqe"]
        if t > 0:  # the per-tick counter moves 10 a second every tick, whatever the slow one does
            assert view.rates["rx"] == pytest.approx(10.0), t


def test_a_saturated_slow_counter_stays_flagged_between_its_reads() -> None:
    tracker = SeriesTracker()
    top = (1 << 32) - 1
    for t, slow_read in ((0.0, True), (1.0, False), (10.0, True), (11.0, False), (12.0, False)):
        (view,) = tracker.update(_snap(t, 0, 0, slow_read, saturated=top)).ports
        assert view.saturated == {"wait"}, t
        assert "wait" not in view.rates, t  # a saturated counter's rate is unknown, never 0


def test_the_detectors_feed_gives_no_delta_for_slow_counters() -> None:
    tracker, fd = SeriesTracker(), feed.DetectFeed()
    for t, slow_read in ((0.0, True), (1.0, False), (10.0, True)):
        inp = fd.tick_input(tracker.update(_snap(t, int(10 * t), int(100 * t), slow_read)))
    (port,) = inp.ports
    assert dict(port.counters) == {"rx_packets": 90.0}  # 10/s over the last tick; no req_cqe_error
