"""The daemon's detection runtime: fast path, log lines, listener, and the fast-path scheduler."""

from __future__ import annotations

import logging
import threading

import pytest

from netd.config.settings import load_config
from netd.detect.fast_wait import wait_running_fast_path
from netd.detect.findings import FindingEvent
from netd.detect.service import Detection, log_line
from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.model.snapshot import EthtoolSample, PortSample, Snapshot, frozen_map
from netd.series.tracker import SeriesTracker
from tests.driven_wait import DrivenWait

NAMES = mlx5_ethtool_names((3,))


class Nic:
    """A fake NIC whose priority-3 pause counters the test drives."""

    def __init__(self) -> None:
        self.stats = dict.fromkeys(NAMES, 0)
        self.reads = 0

    def storm(self, dt: float) -> None:
        self.stats["rx_prio3_pause"] += int(11_900 * dt)
        self.stats["rx_prio3_pause_duration"] += int(dt * 1e6)

    def read(self, names: list[str]) -> dict[str, EthtoolSample]:
        self.reads += 1
        return {n: EthtoolSample(n, frozen_map(self.stats)) for n in names}


def observe(tracker: SeriesTracker, nic: Nic, t: float) -> object:
    port = PortSample("mlx5_0", 1, "n0", "Ethernet", "ACTIVE", "LinkUp", 200.0)
    ethtool = frozen_map({"n0": EthtoolSample("n0", frozen_map(dict(nic.stats)))})
    return tracker.update(Snapshot(timestamp=1e9 + t, monotonic=t, host="h", ports=(port,), ethtool=ethtool))


FIXED = {"fast_interval": 0.1, "fast_calm_interval": 0.0, "pfc_detection_time": 0.2}
FREE = lambda: 0.0  # noqa: E731  a CPU clock under which samples cost nothing (no budget applies)


def test_fast_path_finds_a_storm_between_ticks(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    events: list[FindingEvent] = []
    nic, tracker = Nic(), SeriesTracker()
    det = Detection(
        load_config(None, environ={}).detect.model_copy(update=FIXED),
        "h",
        pfc_reader=nic.read,
        clock=lambda: now[0],
        wall=lambda: 1e9 + now[0],
        listener=events.append,
    )
    assert det.fast_interval_s == 0.1
    det.on_observation(observe(tracker, nic, 0.0))  # learns the PFC netdev
    caplog.set_level(logging.WARNING, logger="netd.anomalies")
    for _ in range(4):
        now[0] += 0.1
        nic.storm(0.1)
        state = det.fast_sample()
    assert [f.kind for f in state.active] == ["pfc_storm"] and state.fast_samples == 4
    assert state.fast_cpu_seconds > 0 and nic.reads == 4
    assert [e.action for e in events] == ["opened"] and events[0].finding.started_monotonic == pytest.approx(
        0.2
    )
    (record,) = caplog.records
    assert record.levelno == logging.ERROR and record.getMessage().startswith("event=anomaly_opened id=")
    assert (
        "kind=pfc_storm severity=critical host=h device=mlx5_0 port=1 netdev=n0 priority=3"
        in record.getMessage()
    )


def test_fast_path_cadence_follows_pause() -> None:
    """Calm: every fast_calm_interval; fast_interval from the first sample that shows pause until
    fast_linger seconds after the last one."""
    now = [0.0]
    nic, tracker = Nic(), SeriesTracker()
    cfg = load_config(None, environ={}).detect.model_copy(
        update={"fast_interval": 0.05, "fast_calm_interval": 0.2, "fast_linger": 1.0}
    )
    det = Detection(
        cfg, "h", pfc_reader=nic.read, clock=lambda: now[0], wall=lambda: 1e9 + now[0], cpu_clock=FREE
    )
    det.on_observation(observe(tracker, nic, 0.0))
    assert det.fast_interval_s == 0.2  # no pause seen
    now[0] = 0.2
    det.fast_sample()
    assert det.fast_interval_s == 0.2  # still calm
    nic.storm(0.05)
    now[0] = 0.4
    det.fast_sample()
    # the onset: 50 ms of pause already fill the default 50 ms detection time, so the sample that can
    # confirm it is the earliest allowed, a quarter of fast_interval later
    assert det.fast_interval_s == pytest.approx(0.0125)
    now[0] = 0.4125
    det.fast_sample()  # no new pause: not a storm after all
    assert det.fast_interval_s == 0.05  # pause was seen: fast
    now[0] = 1.39
    det.fast_sample()  # no new pause, but within the linger
    assert det.fast_interval_s == 0.05
    now[0] = 1.41
    assert det.fast_interval_s == 0.2  # a second after the last pause: calm again
    nic.storm(0.2)
    det.on_observation(observe(tracker, nic, 2.0))  # the tick's sample counts too: an onset
    assert det.fast_interval_s == pytest.approx(0.0125)
    fixed = Detection(cfg.model_copy(update={"fast_calm_interval": 0.0}), "h", pfc_reader=nic.read)
    assert fixed.fast_interval_s == 0.05  # calm interval 0: never adaptive


def test_a_storm_is_confirmed_when_its_onset_allows_not_a_whole_interval_later() -> None:
    """A storm that began 30 ms before a calm sample: the next sample comes 20 ms later (50 ms
    detection time minus the 30 ms the onset sample saw) and opens the finding."""
    now = [0.0]
    events: list[FindingEvent] = []
    nic, tracker = Nic(), SeriesTracker()
    cfg = load_config(None, environ={}).detect.model_copy(
        update={"fast_interval": 0.05, "fast_calm_interval": 0.1, "pfc_detection_time": 0.05}
    )
    det = Detection(
        cfg,
        "h",
        pfc_reader=nic.read,
        clock=lambda: now[0],
        wall=lambda: 1e9 + now[0],
        listener=events.append,
        cpu_clock=FREE,
    )
    det.on_observation(observe(tracker, nic, 0.0))
    now[0] = 0.1
    det.fast_sample()
    assert det.fast_interval_s == 0.1  # calm
    nic.stats["tx_prio3_packets"] += 900  # transmitting until the onset
    nic.storm(0.03)
    now[0] = 0.2
    det.fast_sample()
    assert det.fast_interval_s == pytest.approx(0.02) and not events
    nic.storm(0.02)
    now[0] = 0.22
    det.fast_sample()
    assert [(e.action, e.finding.kind) for e in events] == [("opened", "pfc_storm")]


@pytest.mark.parametrize("paused", [0.3, 0.7, 0.79])
def test_sustained_partial_pause_opens_nothing_and_never_races_the_fast_path(paused: float) -> None:
    """A congested priority paused ``paused`` of every sample while it keeps transmitting: an onset is
    seen once, then every sample has a lead but none is fresh. No finding opens and, after that one
    early sample, the loop never samples faster than fast_interval."""
    now = [0.0]
    events: list[FindingEvent] = []
    nic, tracker = Nic(), SeriesTracker()
    cfg = load_config(None, environ={}).detect  # the defaults: adaptive, 50 ms detection time
    det = Detection(
        cfg, "h", pfc_reader=nic.read, clock=lambda: now[0], wall=lambda: 1e9 + now[0], listener=events.append
    )
    det.on_observation(observe(tracker, nic, 0.0))
    steps = []
    for _ in range(200):  # ~10 s of samples, as the loop schedules them
        step = det.fast_interval_s
        steps.append(step)
        now[0] += step
        nic.storm(paused * step)
        nic.stats["tx_prio3_packets"] += 1000
        det.fast_sample()
    assert not events
    early = [s for s in steps if s < cfg.fast_interval]
    assert len(early) == 1 and steps[-1] == cfg.fast_interval


class CostlyNic(Nic):
    """Reading it costs ``cost`` CPU seconds (on the test's CPU clock)."""

    def __init__(self) -> None:
        super().__init__()
        self.cpu = 0.0
        self.cost = 0.0

    def read(self, names: list[str]) -> dict[str, EthtoolSample]:
        self.cpu += self.cost
        return super().read(names)


# (calm sample cost s, budget, tick interval s) -> the calm interval: cost / budget, within
# [fast_calm_interval, min(1 s, half the tick interval)]
BUDGET_CASES = [
    (0.0005, 0.01, 1.0, 0.1),  # 0.5 ms at 0.1 s is 0.5 % of a core: within the budget
    (0.001, 0.01, 1.0, 0.1),  # exactly the budget
    (0.002, 0.01, 1.0, 0.2),  # 2 ms: every 0.2 s keeps it at 1 %
    (0.002, 0.005, 1.0, 0.4),
    (0.05, 0.01, 1.0, 0.5),  # a very slow read: still one calm sample between two ticks
    (0.05, 0.01, 10.0, 1.0),  # with slow ticks, a calm sample a second at most
    (0.007, 0.01, 10.0, 0.7),
    (0.05, 0.0, 1.0, 0.1),  # no budget
]


def _budgeted(tick_s: float = 1.0, **detect: float) -> tuple[Detection, CostlyNic, list[float]]:
    """A detection whose fast path reads a CostlyNic on a driven clock, after one tick; and the clock."""
    now = [0.0]
    nic, tracker = CostlyNic(), SeriesTracker()
    cfg = load_config(None, environ={}).detect.model_copy(
        update={"fast_interval": 0.05, "fast_calm_interval": 0.1, **detect}
    )
    det = Detection(
        cfg,
        "h",
        pfc_reader=nic.read,
        clock=lambda: now[0],
        wall=lambda: 1e9 + now[0],
        cpu_clock=lambda: nic.cpu,
        tick_interval_s=tick_s,
    )
    det.on_observation(observe(tracker, nic, 0.0))
    return det, nic, now


@pytest.mark.parametrize(("cost", "budget", "tick_s", "calm"), BUDGET_CASES)
def test_calm_cadence_stretches_to_the_cpu_budget(
    cost: float, budget: float, tick_s: float, calm: float
) -> None:
    det, nic, now = _budgeted(tick_s, fast_calm_cpu_budget=budget)
    assert det.fast_interval_s == 0.1  # nothing measured yet
    nic.cost = cost
    for _ in range(3):
        now[0] += det.fast_interval_s
        assert not det.take_fast_sample()  # calm
    assert det.fast_interval_s == pytest.approx(calm)
    assert det.state().fast_interval_s == pytest.approx(calm)  # what /metrics shows
    nic.storm(0.01)  # pause: the onset's confirming sample, then the fast cadence, whatever reads cost
    now[0] += 0.05
    det.fast_sample()
    assert det.fast_interval_s == pytest.approx(0.04)
    now[0] += 0.04
    det.fast_sample()
    assert det.fast_interval_s == 0.05


def test_the_budget_follows_a_changed_cost_gradually() -> None:
    """The cost judged is an average: one cheap sample after expensive ones moves it a fifth of the way."""
    det, nic, now = _budgeted()  # the default budget: 1 % of a core
    nic.cost = 0.004
    now[0] += 0.1
    det.take_fast_sample()
    assert det.fast_interval_s == pytest.approx(0.4)
    nic.cost = 0.0005
    now[0] += 0.4
    det.take_fast_sample()
    assert det.fast_interval_s == pytest.approx((0.004 + 0.2 * (0.0005 - 0.004)) / 0.01)  # 0.33 s
    for _ in range(30):
        now[0] += det.fast_interval_s
        det.take_fast_sample()
    assert det.fast_interval_s == 0.1  # cheap again: the configured calm interval


def test_one_slow_calm_sample_does_not_turn_the_fast_path_off() -> None:
    """A first calm sample that costs 20 ms (a cold start, a busy moment) stretches the calm cadence,
    but the loop, which leaves the last slot before a tick to the tick, still takes a calm sample
    between every two ticks: cheap samples bring the cadence back to fast_calm_interval. (Stretched
    to 1 s, no calm sample was ever taken again, and the fast path stayed off for good.)"""
    det, nic, now = _budgeted()  # the default budget, 1 s ticks
    tracker = SeriesTracker()
    det.on_observation(observe(tracker, nic, 0.0))
    costs = iter([0.02])

    def sample() -> None:
        nic.cost = next(costs, 0.0002)
        det.take_fast_sample()
        taken.append(now[0])

    per_tick = []
    for k in range(1, 16):
        taken: list[float] = []
        wait_running_fast_path(float(k), lambda: det.fast_interval_s, DrivenWait(now), lambda: now[0], sample)
        per_tick.append(len(taken))
        det.on_observation(observe(tracker, nic, now[0]))
        now[0] += 0.01  # the tick's own work
    assert per_tick[0] >= 1 and min(per_tick) >= 1  # a calm sample between every two ticks
    assert det.fast_interval_s == 0.1 and per_tick[-1] == 9  # cheap again: the configured cadence


def test_adaptive_slots_ask_for_the_interval_after_every_sample() -> None:
    now = [0.0]
    taken: list[float] = []
    steps = iter([0.2, 0.2, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05])

    wait_running_fast_path(
        1.0, lambda: next(steps), DrivenWait(now), lambda: now[0], lambda: taken.append(now[0])
    )
    # 0.2, then 0.4 (asked after the first sample: 0.2), then every 0.05 up to the tick's half-slot
    assert [round(t, 3) for t in taken] == [
        0.2,
        0.4,
        0.45,
        0.5,
        0.55,
        0.6,
        0.65,
        0.7,
        0.75,
        0.8,
        0.85,
        0.9,
        0.95,
    ]


def test_an_interval_that_raises_leaves_the_wait_to_the_tick(caplog: pytest.LogCaptureFixture) -> None:
    """A bug in the cadence (the detectors' confirm time, the budget) must not end the loop, as a bad
    sample does not: no more samples before this tick, the wait still returns at the tick, logged."""
    now = [0.0]
    taken: list[float] = []
    answers = iter([0.1, 0.1])

    def interval() -> float:
        answer = next(answers, None)
        if answer is None:
            raise ZeroDivisionError("a broken cadence")
        return answer

    with caplog.at_level(logging.ERROR, logger="netd.anomalies"):
        stopped = wait_running_fast_path(
            1.0, interval, DrivenWait(now), lambda: now[0], lambda: taken.append(now[0])
        )
    assert not stopped and now[0] == pytest.approx(1.0)
    assert [round(t, 3) for t in taken] == [0.1, 0.2]  # the second answer's sample, then none
    assert "fast-path interval failed" in caplog.text
    assert (
        wait_running_fast_path(2.0, interval, DrivenWait(now), lambda: now[0], taken.append) is False
    )  # at first ask


def test_without_a_reader_there_is_no_fast_path() -> None:
    det = Detection(load_config(None, environ={}).detect, "h")
    assert det.fast_interval_s == 0.0
    assert det.fast_sample().fast_samples == 1  # harmless if called anyway


def test_log_line_quotes_values() -> None:
    det = Detection(load_config(None, environ={}).detect, "h")
    events: list[FindingEvent] = []
    det._listener = events.append
    nic, tracker = Nic(), SeriesTracker()
    det.on_observation(observe(tracker, nic, 0.0))
    nic.storm(1.0)
    det.on_observation(observe(tracker, nic, 1.0))
    line = log_line(events[0])
    assert 'explanation="mlx5_0/1 prio 3 is paused 100% of the time' in line
    assert "\n" not in line


def test_fast_path_slots_between_ticks() -> None:
    """Slots every 0.1 s after the tick, the last one left to the tick; missed slots are skipped."""
    now = [0.0]
    taken: list[float] = []

    wait_running_fast_path(1.0, 0.1, DrivenWait(now), lambda: now[0], lambda: taken.append(round(now[0], 3)))
    assert taken == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    now[0], taken[:] = 0.0, []

    def slow() -> None:  # a sample that takes 0.25 s: the slots it overran are skipped
        taken.append(round(now[0], 3))
        now[0] += 0.25

    wait_running_fast_path(1.0, 0.1, DrivenWait(now), lambda: now[0], slow)
    assert taken == [0.1, 0.4, 0.7]
    stopped = threading.Event()
    stopped.set()
    assert wait_running_fast_path(1.0, 0.1, stopped, lambda: 0.0, lambda: None) is True


def _fast_path_detection(
    **update: object,
) -> tuple[list[float], list[FindingEvent], Nic, SeriesTracker, Detection]:
    """A Detection on a fake NIC and a settable clock, after its first tick at t = 0."""
    now = [0.0]
    events: list[FindingEvent] = []
    nic, tracker = Nic(), SeriesTracker()
    cfg = load_config(None, environ={}).detect.model_copy(update={**FIXED, **update})
    det = Detection(
        cfg, "h", pfc_reader=nic.read, clock=lambda: now[0], wall=lambda: 1e9 + now[0], listener=events.append
    )
    det.on_observation(observe(tracker, nic, 0.0))
    return now, events, nic, tracker, det


def test_calm_fast_samples_are_put_aside_and_the_last_one_is_the_storms_baseline() -> None:
    """Samples in which no pause statistic moved are read and compared, not evaluated; the last of
    them is evaluated before the first that shows pause, so the storm's first sample covers one fast
    interval (0.1 s of 0.1 s paused: qualifies) and not the 0.5 s since the tick (0.2: would not)."""
    now, events, nic, tracker, det = _fast_path_detection()
    evaluations = det.engine.state().evaluations
    for _ in range(4):  # 0.1 .. 0.4: calm
        now[0] += 0.1
        state = det.fast_sample()
    assert (state.fast_samples, state.fast_calm_samples, nic.reads) == (4, 4, 4)
    assert det.engine.state().evaluations == evaluations  # nothing was evaluated
    for _ in range(2):  # 0.5, 0.6: stormed
        now[0] += 0.1
        nic.storm(0.1)
        state = det.fast_sample()
    assert [f.kind for f in state.active] == ["pfc_storm"]
    assert events[0].finding.started_monotonic == pytest.approx(0.6)  # 0.2 s of qualifying samples
    assert events[0].finding.first_evidence["interval_s"] == pytest.approx(0.1)
    assert state.fast_calm_samples == 4


def test_a_stormed_detector_sees_every_sample_until_restored() -> None:
    """With no linger, the cadence is calm at once; but while a storm is open the samples without
    pause are still evaluated, so it is restored after pfc_restoration_time of them, not later."""
    now, events, nic, tracker, det = _fast_path_detection(fast_linger=0.0, pfc_restoration_time=0.3)
    for _ in range(3):  # 0.1 .. 0.3 stormed: opened at 0.2
        now[0] += 0.1
        nic.storm(0.1)
        det.fast_sample()
    for _ in range(4):  # 0.4 .. 0.7 without pause: three of them restore it (at 0.6)
        now[0] += 0.1
        state = det.fast_sample()
    assert [e.action for e in events] == ["opened", "resolved"]
    assert events[1].finding.ended_monotonic == pytest.approx(0.6)
    assert state.fast_calm_samples == 1  # only 0.7, once every detector was at rest again


def test_a_calm_ticks_pfc_sample_is_put_aside_and_is_the_next_storms_baseline() -> None:
    now, events, nic, tracker, det = _fast_path_detection()
    for _ in range(9):  # 0.1 .. 0.9: calm
        now[0] += 0.1
        det.fast_sample()
    evaluations = det.engine.state().evaluations
    now[0] = 1.0
    det.on_observation(observe(tracker, nic, 1.0))
    assert det.engine.state().evaluations == evaluations + 1  # the tick input only
    for _ in range(2):  # 1.1, 1.2: stormed
        now[0] += 0.1
        nic.storm(0.1)
        state = det.fast_sample()
    assert [f.kind for f in state.active] == ["pfc_storm"]
    assert events[0].finding.started_monotonic == pytest.approx(1.2)
    assert events[0].finding.first_evidence["interval_s"] == pytest.approx(0.1)  # from the tick's sample
