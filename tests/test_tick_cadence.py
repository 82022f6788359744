"""The calm cadence (netd.daemon.cadence): what counts as calm, on a real tree read by a real daemon,
and which slots the loop passes over, driven through its own wait on an injected clock."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from netd.bench.static_tree import StaticHost
from netd.commands.run import build_daemon
from netd.config.settings import Config
from netd.daemon.cadence import CALM_AFTER, CalmCadence, calm, longest_tick_s, slots_per_calm_tick
from netd.daemon.loop import Daemon
from netd.sources.ethtool_text import format_ethtool_text, parse_ethtool_text

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


def test_slots_pass_only_after_a_calm_streak_and_never_more_than_the_span() -> None:
    c = CalmCadence(3)
    for _ in range(CALM_AFTER - 1):
        c.ticked(True)
        assert not c.pass_over(False)  # not calm long enough: every slot ticks
    c.ticked(True)
    assert c.stretched
    assert [c.pass_over(False) for _ in range(3)] == [True, True, False]  # 2 passed, the 3rd ticks
    c.ticked(True)
    assert c.pass_over(False)
    assert not c.pass_over(True)  # pause seen: this slot ticks, and the streak starts again
    c.ticked(True)
    assert not c.stretched and not c.pass_over(False)
    c.ticked(False)
    for _ in range(CALM_AFTER):
        assert not c.pass_over(False)
        c.ticked(True)
    assert c.pass_over(False)


def test_without_a_calm_span_no_slot_passes() -> None:
    c = CalmCadence(1)
    for _ in range(3 * CALM_AFTER):
        c.ticked(True)
        assert not c.pass_over(False)
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


class _Until(threading.Event):
    """The loop's stop flag on a driven clock: a timed wait moves the clock; set once it reaches ``end``."""

    def __init__(self, now: list[float], end: float) -> None:
        super().__init__()
        self.now, self.end = now, end

    def wait(self, timeout: float | None = None) -> bool:
        self.now[0] += timeout or 0.0
        if self.now[0] >= self.end:
            self.set()
        return self.is_set()


def test_the_loop_passes_calm_slots_and_ticks_every_slot_while_anything_happens(host: _Host) -> None:
    """Interval 1 s, calm_interval 2 s, 40 s on a driven clock: calm ticks 2 s apart after the streak;
    ECN marks from t=20 to t=30 bring a tick at every slot from the first tick that sees them; pause
    seen by the fast path at t=36.5 brings the tick at the next slot although the last tick was calm.
    Every passed slot took a fast-path sample in the tick's place."""
    now = [0.0]
    # no topology thread: its waits would move the driven clock too
    daemon, _ = build_daemon(Config(sysfs_root=host.root, calm_interval=2.0, topology={"enabled": False}))
    daemon._clock = lambda: now[0]  # type: ignore[method-assign]
    assert daemon.detection is not None
    daemon.detection._clock = lambda: now[0]  # type: ignore[method-assign]
    ticks: list[float] = []
    samples: list[float] = []
    real_tick, real_fast = daemon.tick, daemon.fast_tick

    def tick():  # type: ignore[no-untyped-def]
        if 20.0 <= now[0] < 30.0:
            _ecn(host)
        host.advance(1.0)
        ticks.append(round(now[0], 3))
        return real_tick()

    def fast_tick() -> None:
        if 36.4 < now[0] < 36.6:
            _pause(host)
            host.advance(0.0)
        samples.append(now[0])
        real_fast()

    daemon.tick, daemon.fast_tick = tick, fast_tick  # type: ignore[method-assign]
    try:
        daemon.run(_Until(now, 44.5))
    finally:
        daemon.close()
    gaps = {a: round(b - a, 3) for a, b in itertools.pairwise(ticks)}  # tick -> time to the next
    assert ticks[: CALM_AFTER + 1] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # the streak, one slot each
    assert {gaps[t] for t in ticks if 6.0 <= t < 19.0} == {2.0}  # calm: every other slot
    onset = min(t for t in ticks if t >= 20.0)
    assert onset <= 21.0  # the first tick after the marks began (a calm tick is <= 2 s away)
    assert all(t in ticks for t in range(int(onset), 31))  # every slot while they go on
    # every slot while they go on (the last tick to see them is 29's) and through the streak after
    assert all(gaps[t] == 1.0 for t in ticks if onset <= t < 29.0 + CALM_AFTER)
    assert 35.0 not in ticks and 36.0 in ticks  # calm again, ticks 2 s apart
    assert 37.0 in ticks  # pause seen at 36.5 by a fast sample: the next slot ticks though 36 was calm
    st = daemon.state()
    assert st is not None
    passed = st.health.passed
    assert passed == 44 - len(ticks)  # every slot 1..44 either ticked or was passed over
    assert passed >= 8 and st.health.skipped == 0 and st.health.late == 0
    passed_slots = sorted(set(range(1, 45)) - {int(t) for t in ticks})
    taken = {round(s, 3) for s in samples}
    assert all(float(s) in taken for s in passed_slots)  # a fast sample at each passed slot
