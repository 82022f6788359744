"""The calm cadence (netd.daemon.cadence): what counts as calm, on a real tree read by a real daemon,
and which slots the loop passes over, driven through its own wait on an injected clock."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from netd.bench.static_tree import StaticHost
from netd.commands.run import build_daemon
from netd.config.settings import Config
from netd.daemon.cadence import CALM_AFTER, CalmCadence, calm, longest_tick_s, slots_per_calm_tick
from netd.daemon.loop import Daemon
from netd.sources.ethtool_text import format_ethtool_text, parse_ethtool_text
from tests.driven_wait import DrivenWait

DEVICE, NETDEV = "mlx5_0", "ens1f0np0"


@pytest.mark.parametrize(
    ("interval", "calm_interval", "slots"),
    [
        (1.0, 2.0, 2),
        (1.0, 0.0, 1),  # off
        (1.0, 1.0, 1),  # no longer than a tick
        (10.0, 2.0, 1),  # shorter than a tick: every slot
        (1.0, 2.5, 2),  # whole intervals, rounded down
        (0.1, 2.0, 20),
        (0.1, 0.3, 3),  # 0.3 / 0.1 is 2.9999999999999996 in floats
        (0.3, 0.9, 3),
    ],
)
def test_a_calm_tick_spans_whole_intervals(interval: float, calm_interval: float, slots: int) -> None:
    assert slots_per_calm_tick(interval, calm_interval) == slots
    assert longest_tick_s(interval, calm_interval) == pytest.approx(interval * slots)


def _slots(c: CalmCadence, n: int) -> list[bool]:
    """Whether each of ``n`` slots in a row passes, nothing wanting a tick."""
    out = []
    for _ in range(n):
        out.append(c.may_pass())
        if out[-1]:
            c.passed()
    return out


def test_slots_pass_only_after_a_calm_streak_and_never_more_than_the_span() -> None:
    c = CalmCadence(3)
    for _ in range(CALM_AFTER - 1):
        c.ticked(True)
        assert not c.may_pass()  # not calm long enough: every slot ticks
    c.ticked(True)
    assert c.stretched
    assert _slots(c, 3) == [True, True, False]  # two slots passed, the third is the calm tick's
    c.ticked(True)
    assert _slots(c, 1) == [True]
    assert c.may_pass()
    c.interrupted()  # pause seen, or a counter moved: this slot ticks, and the streak starts again
    assert not c.may_pass()
    c.ticked(True)
    assert not c.stretched and not c.may_pass()
    c.ticked(False)
    for _ in range(CALM_AFTER):
        assert not c.may_pass()
        c.ticked(True)
    assert c.may_pass()


def test_without_a_calm_span_no_slot_passes() -> None:
    c = CalmCadence(1)
    for _ in range(3 * CALM_AFTER):
        c.ticked(True)
        assert not c.may_pass()
    assert not c.stretched


class _Host:
    """A one-NIC static host whose counters move like a calm fabric, plus what a case adds on top."""

    def __init__(self, root: Path) -> None:
        self.static = StaticHost(root, 1)
        self.root = root
        self.hw: dict[str, int] = {}  # extra hw_counters values of mlx5_0 port 1 (absolute)
        self.ethtool: dict[str, int] = {}  # extra ethtool statistics of its netdev (absolute)

    def advance(self, seconds: float) -> None:
        self.static.advance(seconds)
        if self.hw:
            self.static.tree.set_counters(DEVICE, 1, self.hw)
        if self.ethtool:
            path = self.root / "ethtool" / NETDEV
            stats = dict(parse_ethtool_text(path.read_text()).stats)
            stats.update(self.ethtool)
            tmp = path.with_name(f".{NETDEV}.tmp")
            tmp.write_text(format_ethtool_text(stats))
            os.replace(tmp, path)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[_Host]:
    h = _Host(tmp_path / "sys")
    yield h
    h.static.close()


def _daemon(host: _Host, **cfg: object) -> Daemon:
    daemon, _ = build_daemon(Config(sysfs_root=host.root, **cfg))  # type: ignore[arg-type]
    return daemon


def _ecn(h: _Host) -> None:
    h.hw["np_ecn_marked_roce_packets"] = h.hw.get("np_ecn_marked_roce_packets", 0) + 500


def _cnp(h: _Host) -> None:
    h.hw["rp_cnp_handled"] = h.hw.get("rp_cnp_handled", 0) + 50


def _loss(h: _Host) -> None:
    h.hw["out_of_sequence"] = h.hw.get("out_of_sequence", 0) + 3


def _pause(h: _Host) -> None:
    h.ethtool["rx_prio3_pause"] = h.ethtool.get("rx_prio3_pause", 0) + 1000
    h.ethtool["rx_prio3_pause_duration"] = h.ethtool.get("rx_prio3_pause_duration", 0) + 20_000


def _down(h: _Host) -> None:
    h.static.tree.set_port_state(DEVICE, 1, "1: DOWN", "3: Disabled")


def _unreadable(h: _Host) -> None:
    h.static.tree.set_raw(DEVICE, 1, "hw_counters", "rp_cnp_handled", "not a number\n")


def _backwards(h: _Host) -> None:
    h.hw["port_rcv_packets"] = 1  # a traffic counter steps back: held for the next reading to judge


def _nothing(h: _Host) -> None:
    pass


@pytest.mark.parametrize(
    ("change", "is_calm"),
    [
        (_nothing, True),  # traffic moves, nothing else: calm
        (_ecn, False),
        (_cnp, False),
        (_loss, False),
        (_pause, False),
        (_down, False),
        (_unreadable, False),
        (_backwards, False),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) else str(v),
)
def test_what_a_calm_tick_is(host: _Host, change: Callable[[_Host], None], is_calm: bool) -> None:
    daemon = _daemon(host)
    try:
        before = None
        for _ in range(3):  # rates and a settled scorer
            host.advance(1.0)
            st = daemon.tick()
            assert before is None or calm(st, before), "a calm fabric's traffic alone must read as calm"
            before = st
        change(host)
        host.advance(1.0)
        assert calm(daemon.tick(), before) is is_calm
    finally:
        daemon.close()


@pytest.mark.parametrize(
    ("detect", "longest"),
    [
        ({}, 5.0),  # the defaults: the fast path reads pause between ticks
        ({"fast_interval": 0.0}, 1.0),  # ticks are the only pause reads: every slot ticks
        ({"fast_interval": 0.0, "enabled": False}, 5.0),  # no detection to delay
    ],
)
def test_the_calm_cadence_needs_pause_read_between_ticks(
    host: _Host, caplog: pytest.LogCaptureFixture, detect: dict[str, object], longest: float
) -> None:
    daemon = _daemon(host, detect=detect)
    try:
        assert daemon.longest_interval_s == longest
        assert ("calm_interval 5 ignored" in caplog.text) is (longest == 1.0)
    finally:
        daemon.close()


def test_a_port_down_since_start_leaves_the_host_calm(host: _Host) -> None:
    """An uncabled port is down from the first tick and scores severe (a down link); nothing about it
    changes, so the host is calm (it would never be, and every tick would run, on many real hosts)."""
    _down(host)
    daemon = _daemon(host)
    try:
        host.advance(1.0)
        before = daemon.tick()
        for _ in range(3):
            host.advance(1.0)
            st = daemon.tick()
            assert st.congestion is not None
            assert {s.name.split(":")[1]: s.level for s in st.congestion.ports}["mlx5_0/1"] == "severe"
            assert calm(st, before)
            before = st
    finally:
        daemon.close()


def test_a_first_tick_and_an_open_finding_are_not_calm(host: _Host) -> None:
    daemon = _daemon(host)
    try:
        host.advance(1.0)
        first = daemon.tick()
        assert not calm(first, None)
        _down(host)  # the link goes down: a finding opens after link_down_ticks and stays open
        states = [first]
        for _ in range(4):
            host.advance(1.0)
            states.append(daemon.tick())
        last = states[-1]
        assert last.anomalies is not None and last.anomalies.active
        assert not calm(last, states[-2])  # the port's state no longer changes: the finding keeps it
    finally:
        daemon.close()


def test_the_loop_passes_calm_slots_and_ticks_every_slot_while_anything_happens(
    host: _Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interval 1 s, calm_interval 3 s, on a driven clock, counters moving with it. Calm ticks come
    3 s apart once 5 ticks in a row were calm. CE marks that start at t=19.5 make slot 20 tick, though
    it would have passed (its look at the congestion counters saw them), and every slot ticks while
    they go on and through the next calm streak; pause at t=34.5, seen by the fast path, makes slot
    35 tick; one out-of-sequence packet at t=46.5, slot 47. Each passed slot took a fast-path sample."""
    now = [0.0]
    # snapshots on the driven clock too, so rates (and the congestion level pause raises) are the
    # driven time's, not however long the test took
    monkeypatch.setattr(
        "netd.sources.collect.time", SimpleNamespace(monotonic=lambda: now[0], time=time.time)
    )
    # no topology thread: its waits would move the driven clock too
    daemon, _ = build_daemon(Config(sysfs_root=host.root, calm_interval=3.0, topology={"enabled": False}))
    daemon._clock = lambda: now[0]  # type: ignore[method-assign]
    assert daemon.detection is not None
    daemon.detection._clock = lambda: now[0]  # type: ignore[method-assign]

    def counters(t: float) -> None:
        host.hw["np_ecn_marked_roce_packets"] = int(max(0.0, min(t, 25.0) - 19.5) * 500)
        host.ethtool["rx_prio3_pause"] = 1000 if t >= 34.5 else 0
        host.ethtool["rx_prio3_pause_duration"] = 20_000 if t >= 34.5 else 0
        host.hw["out_of_sequence"] = 1 if t >= 46.5 else 0

    ticks: list[float] = []
    samples: list[float] = []
    real_tick, real_fast = daemon.tick, daemon.fast_tick

    published: dict[float, int] = {}  # tick -> passed slots the published state counted before it
    opened: dict[float, int] = {}  # tick -> findings opened since start, before it

    def tick():  # type: ignore[no-untyped-def]
        ticks.append(round(now[0], 3))
        st = daemon.state()
        published[ticks[-1]] = -1 if st is None else st.health.passed
        opened[ticks[-1]] = -1 if st is None or st.anomalies is None else sum(st.anomalies.totals.values())
        return real_tick()

    def fast_tick() -> None:
        samples.append(round(now[0], 3))
        real_fast()

    daemon.tick, daemon.fast_tick = tick, fast_tick  # type: ignore[method-assign]
    try:
        # the tree's counters follow the driven clock (counters(t): the extra values at time t)
        daemon.run(DrivenWait(now, end=50.5, moved=lambda t0, t1: (counters(t1), host.advance(t1 - t0))))
    finally:
        daemon.close()
    assert ticks == [
        *(1.0, 2.0, 3.0, 4.0, 5.0, 6.0),  # the first tick, then the calm streak
        *(9.0, 12.0, 15.0, 18.0),  # calm: 3 s apart
        *range(20, 31),  # CE marks from 19.5 (slot 20 would have passed) to 25, then the streak
        33.0,
        *range(35, 41),  # pause at 34.5 (slot 35 would have passed), then the streak
        *(43.0, 46.0),
        *range(47, 51),  # an out-of-sequence packet at 46.5 (slot 47 would have passed): a loss
    ]  # finding opens, and every slot ticks while it is open
    st = daemon.state()
    assert st is not None
    passed = sorted(set(range(1, 49)) - {int(t) for t in ticks})
    assert st.health.passed == len(passed) and st.health.skipped == 0 and st.health.late == 0
    assert all(float(s) in samples for s in passed)  # a fast sample at each passed slot
    assert published[9.0] == 2 and published[12.0] == 4  # the count is published at each passed slot
    # calm ticks 3 s apart on a moving tree raise nothing: no finding before the first CE mark
    assert opened[20.0] == 0 and st.anomalies is not None and sum(st.anomalies.totals.values()) > 0
