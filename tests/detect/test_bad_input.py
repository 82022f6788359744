"""Bad input: slow ticks, clock jumps, counter resets, a port that disappears mid-finding.

No false finding, no crash, findings resolved or carried correctly. These go through the feed
(observations built by the real series layer from real snapshots), where resets are recognised.
"""

from __future__ import annotations

import dataclasses

from netd.congestion.host import host_inputs
from netd.congestion.scorer import CongestionScorer
from netd.detect.engine import DetectionEngine
from netd.detect.feed import DetectFeed
from netd.detect.pfc import stormed_ports
from netd.detect.service import port_congestion
from netd.model.snapshot import (
    Counter,
    CounterGroup,
    EthtoolSample,
    Overflow,
    PortSample,
    Snapshot,
    frozen_map,
)
from netd.series.tracker import SeriesTracker
from tests.detect.helpers import HOST, busy, cfg, port, prio, tick

LINE_PPS = 200e9 / 8 / 4096


def sample(device: str, values: dict[str, int], state: str = "ACTIVE") -> PortSample:
    names = {
        "rx_packets": "port_rcv_packets",
        "tx_packets": "port_xmit_packets",
        "ecn_marked": "np_ecn_marked_roce_packets",
        "cnp_sent": "np_cnp_sent",
        "out_of_sequence": "out_of_sequence",
        "seq_err": "packet_seq_err",
    }
    counters = {
        raw: Counter(
            raw,
            vocab,
            CounterGroup.HW,
            values.get(vocab, 0),
            32 if vocab in ("out_of_sequence", "seq_err") else 64,
            Overflow.WRAP,
        )
        for vocab, raw in names.items()
    }
    return PortSample(
        device,
        1,
        f"{device}_net",
        "Ethernet",
        state,
        "LinkUp",
        200.0,
        driver="mlx5",
        counters=frozen_map(counters),
    )


def snapshot(
    t: float, wall: float, ports: list[PortSample], ethtool: dict[str, dict[str, int]] | None = None
) -> Snapshot:
    eth = {n: EthtoolSample(n, frozen_map(s)) for n, s in (ethtool or {}).items()}
    return Snapshot(timestamp=wall, monotonic=t, host=HOST, ports=tuple(ports), ethtool=frozen_map(eth))


class Pipeline:
    """What the daemon does each tick: series, the congestion scorer, then the detectors."""

    def __init__(self, **overrides: object) -> None:
        self.tracker, self.feed = SeriesTracker(), DetectFeed()
        self.engine = DetectionEngine(cfg(**({"congestion_sustain": 0.0} | overrides)), HOST)
        self.scorer = CongestionScorer()
        self.events: list = []

    def step(self, snap: Snapshot) -> list:
        obs = self.tracker.update(snap)
        report = self.scorer.update(
            host_inputs(obs, None, stormed_ports(self.engine.state())), snap.timestamp
        )
        pfc = self.feed.pfc_input(snap.ethtool, snap.monotonic, snap.timestamp)
        levels = port_congestion(report, HOST)
        tick_input = dataclasses.replace(self.feed.tick_input(obs), congestion=levels)
        events = self.engine.evaluate(pfc) + self.engine.evaluate(tick_input)
        self.events += events
        return events


def healthy(n: int, rx: float = LINE_PPS) -> dict[str, int]:
    return {"rx_packets": int(rx * n), "tx_packets": int(rx * n)}


def test_counter_reset_is_not_a_loss_burst() -> None:
    """A driver reload: every counter restarts near zero. out_of_sequence is a 32-bit q-counter, and
    3e9 -> 3 alone would read as a wrap of 1.29e9 events; the 64-bit counters resetting in the same
    tick say the device reset, so the feed leaves the whole port's deltas unknown for that tick."""
    p = Pipeline()
    big = 3_000_000_000
    p.step(snapshot(0.0, 100.0, [sample("mlx5_0", healthy(0) | {"out_of_sequence": big})]))
    p.step(snapshot(1.0, 101.0, [sample("mlx5_0", healthy(1) | {"out_of_sequence": big})]))
    p.step(snapshot(2.0, 102.0, [sample("mlx5_0", {"out_of_sequence": 3})]))  # every counter reset
    p.step(snapshot(3.0, 103.0, [sample("mlx5_0", {"out_of_sequence": 3} | healthy(1))]))
    assert [e.finding.kind for e in p.events if e.action == "opened"] == []


def test_a_real_burst_after_a_reset_is_still_seen() -> None:
    p = Pipeline()
    p.step(snapshot(0.0, 100.0, [sample("mlx5_0", healthy(5))]))
    p.step(snapshot(1.0, 101.0, [sample("mlx5_0", {})]))  # reset
    p.step(snapshot(2.0, 102.0, [sample("mlx5_0", healthy(1) | {"out_of_sequence": 500})]))
    assert [e.finding.kind for e in p.events if e.action == "opened"] == ["loss"]


def test_ethtool_reset_is_not_a_storm_or_discards() -> None:
    """Statistics that went backwards (a driver reload) have no delta: no pause, discards or storm."""
    p = Pipeline()
    for t in range(3):
        stats = {
            "rx_prio3_pause": 10 * t,
            "rx_prio3_pause_duration": 5_000_000_000 + 1000 * t,
            "tx_prio3_packets": 1_000_000 * t,
            "rx_discards_phy": 5_000,
        }
        p.step(snapshot(float(t), 100.0 + t, [sample("mlx5_0", healthy(t))], {"mlx5_0_net": stats}))
    reset = {"rx_prio3_pause": 7, "rx_prio3_pause_duration": 7, "tx_prio3_packets": 0, "rx_discards_phy": 0}
    p.step(snapshot(3.0, 103.0, [sample("mlx5_0", healthy(3))], {"mlx5_0_net": reset}))
    p.step(snapshot(3.1, 103.1, [sample("mlx5_0", healthy(3))], {"mlx5_0_net": reset}))
    assert [e.finding.kind for e in p.events if e.action == "opened"] == []
    assert p.feed._tick.update({}) == {}  # no crash on an empty sample either


def test_slow_tick_gap_carries_findings_without_judging() -> None:
    p = Pipeline(max_gap=5.0)
    marked = lambda n: healthy(n) | {"ecn_marked": int(0.1 * LINE_PPS * n)}  # noqa: E731
    for t in range(3):  # the scorer's smoothed level reaches "congested" on the second marked tick
        p.step(snapshot(float(t), 100.0 + t, [sample("mlx5_0", marked(t))]))
    assert [f.kind for f in p.engine.state().active] == ["congestion"]
    # the loop stalled for 30 s; the interval is not judged: the finding is carried, nothing new opens
    assert p.step(snapshot(32.0, 132.0, [sample("mlx5_0", marked(2) | {"out_of_sequence": 10_000})])) == []
    assert [f.kind for f in p.engine.state().active] == ["congestion"]


def test_a_short_slow_tick_is_judged_at_its_real_rate() -> None:
    """A 3 s interval with the traffic of 1 s: rates are lower, not alarming."""
    p = Pipeline()
    p.step(snapshot(0.0, 100.0, [sample("mlx5_0", healthy(0))]))
    p.step(snapshot(1.0, 101.0, [sample("mlx5_0", healthy(1))]))
    p.step(snapshot(4.0, 104.0, [sample("mlx5_0", healthy(2))]))
    assert p.events == []


def test_wall_clock_jumps_do_not_change_durations() -> None:
    p = Pipeline()
    marked = lambda n: healthy(n) | {"ecn_marked": int(0.1 * LINE_PPS * n)}  # noqa: E731
    walls = [1000.0, 1001.0, 1002.0 - 3600, 1003.0 - 3600, 1004.0 + 86400]  # NTP steps back, then forward
    walls += [1005.0 + 86400 + k for k in range(6)]
    at = {}
    for t, wall in enumerate(walls):
        values = marked(t) if t < 5 else healthy(t)
        for e in p.step(snapshot(float(t), wall, [sample("mlx5_0", values)])):
            at[e.action] = float(t)
    (f,) = p.engine.state().recent
    # opened on one side of the steps and resolved on the other: the duration is monotonic time
    assert at["opened"] <= 2.0 and at["resolved"] >= 5.0
    assert f.duration_s == at["resolved"] - at["opened"]
    assert f.started_at == walls[int(at["opened"])] and f.ended_at == f.started_at + f.duration_s
    assert f.last_seen_at >= f.started_at


def test_a_port_disappearing_mid_finding_is_resolved_and_can_return() -> None:
    p = Pipeline()
    marked = lambda n: healthy(n) | {"ecn_marked": int(0.1 * LINE_PPS * n)}  # noqa: E731
    for t in range(3):
        p.step(snapshot(float(t), 100.0 + t, [sample("mlx5_0", marked(t)), sample("mlx5_1", healthy(t))]))
    assert [f.kind for f in p.engine.state().active] == ["congestion"]
    events = p.step(snapshot(2.5, 102.5, [sample("mlx5_1", healthy(2))]))  # mlx5_0 hot-unplugged
    assert [(e.action, e.finding.resolution) for e in events] == [("resolved", "port disappeared")]
    # it comes back with fresh counters: the first reading has no delta, so no false finding
    events = p.step(
        snapshot(3.0, 103.0, [sample("mlx5_0", {"out_of_sequence": 42}), sample("mlx5_1", healthy(3))])
    )
    assert events == []
    assert (
        p.step(
            snapshot(
                4.0,
                104.0,
                [sample("mlx5_0", {"out_of_sequence": 42} | healthy(1)), sample("mlx5_1", healthy(4))],
            )
        )
        == []
    )


def test_repeated_and_reordered_snapshots_are_not_judged() -> None:
    p = Pipeline()
    p.step(snapshot(5.0, 105.0, [sample("mlx5_0", healthy(0))]))
    p.step(snapshot(5.0, 105.0, [sample("mlx5_0", healthy(1) | {"out_of_sequence": 999})]))
    p.step(snapshot(4.0, 104.0, [sample("mlx5_0", healthy(2) | {"out_of_sequence": 1999})]))
    assert p.events == []


def test_direct_inputs_with_missing_everything_do_not_crash() -> None:
    engine = DetectionEngine(cfg(), HOST)
    bare = dataclasses.replace(
        port(counters={}, priorities=(prio(3),)), state=None, rate_gbps=None, netdev=None
    )
    for t in range(5):
        assert engine.evaluate(tick(float(t), bare)) == []
    assert engine.evaluate(tick(6.0, port(counters=busy()), dt=-1.0)) == []
