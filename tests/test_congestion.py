"""Congestion scoring: the documented formula, aggregation, levels with hysteresis, storms, host inputs."""

from __future__ import annotations

import math

import pytest

from netd.config.settings import load_config
from netd.congestion.host import components, scorer_from_config
from netd.congestion.score import Components, Ramp, ScoreModel, aggregate
from netd.congestion.scorer import CongestionScorer, Levels, ScoreInput
from netd.detect.pfc import stormed_ports
from netd.model.snapshot import Counter, CounterGroup, PortSample
from netd.series.port_signals import PortSignals, PriorityPause
from netd.series.tracker import PortView


def test_ramp_is_zero_below_lo_and_one_above_hi():
    r = Ramp(0.01, 0.11)
    assert (r(0.0), r(0.01), r(0.06), r(0.11), r(5.0)) == (0.0, 0.0, pytest.approx(0.5), 1.0, 1.0)
    with pytest.raises(ValueError):
        Ramp(0.2, 0.1)


def test_port_score_is_a_weighted_noisy_or():
    m = ScoreModel()
    assert m.port(Components(0.0005, 0.0, 0.0, 0.0)) == (
        0.0,
        {"ce_fraction": 0.0, "cnp_per_packet": 0.0, "pause_fraction": 0.0, "loss_per_packet": 0.0},
    )
    score, parts = m.port(Components(ce_fraction=0.05))  # one saturated signal of weight 0.8
    assert score == pytest.approx(0.8) and parts == {"ce_fraction": pytest.approx(0.8)}
    both, _ = m.port(Components(ce_fraction=0.05, cnp_per_packet=0.01))
    assert both == pytest.approx(1 - 0.2 * 0.4)
    half, _ = m.port(Components(pause_fraction=0.155))  # halfway up the pause ramp, weight 1
    assert half == pytest.approx(0.5)
    assert m.port(Components(), up=False) == (1.0, {"link_down": 1.0})
    assert m.port(Components()) == (0.0, {})  # nothing reported: nothing known


def test_model_rejects_weights_outside_unit_interval():
    with pytest.raises(ValueError, match="weight"):
        ScoreModel(weights={"ce_fraction": 2, "cnp_per_packet": 1, "pause_fraction": 1, "loss_per_packet": 1})


def test_aggregate_is_mean_of_mean_and_max():
    assert aggregate([]) == 0.0
    assert aggregate([0.8, 0.0, 0.0, 0.0]) == pytest.approx((0.2 + 0.8) / 2)
    assert aggregate([0.6, 0.6]) == pytest.approx(0.6)


def _inp(host: str, dev: str, ce: float, tor: str = "t1", spine: str = "s1", up: bool = True) -> ScoreInput:
    return ScoreInput(host, dev, 1, Components(ce_fraction=ce), up=up, tor=tor, spine=spine, rail=0)


def test_levels_rise_at_once_and_fall_after_hold_below_the_margin():
    scorer = CongestionScorer(levels=Levels(alpha=1.0, hold_ticks=3))
    level = lambda ce, t: scorer.update([_inp("h", "d", ce)], t).ports[0].level  # noqa: E731
    assert level(0.0, 0) == "ok"
    assert level(0.05, 1) == "severe"  # ce at the top of its ramp scores its weight, 0.8: severe at once
    scorer = CongestionScorer(levels=Levels(alpha=1.0, hold_ticks=3))
    ce_for = lambda s: 0.001 + (0.05 - 0.001) * s / 0.8  # noqa: E731  (ce giving score s)
    assert level(ce_for(0.55), 0) == "congested"
    assert level(ce_for(0.45), 1) == "congested"  # inside the margin: stays
    assert [level(ce_for(0.35), t) for t in (2, 3, 4)] == ["congested", "congested", "busy"]  # held 3 ticks
    assert level(ce_for(0.6), 5) == "congested"
    report = scorer.update([_inp("h", "d", ce_for(0.6))], 6)
    assert report.ports[0].since == 5


def test_smoothing_and_forgetting():
    scorer = CongestionScorer(levels=Levels(alpha=0.5))
    scorer.update([_inp("h", "d", 0.05)], 0)
    s = scorer.update([_inp("h", "d", 0.0)], 1).ports[0]
    assert (s.score, s.smoothed) == (0.0, pytest.approx(0.4))
    scorer.update([], 2)  # the port vanished
    assert scorer.update([_inp("h", "d", 0.0)], 3).ports[0].smoothed == 0.0  # starts afresh


def test_storm_flag_sets_on_pause_and_clears_after_hold():
    scorer = CongestionScorer(levels=Levels(hold_ticks=2))

    def storm(pause: float, t: float, ev: bool = False) -> bool:
        inp = ScoreInput("h", "d", 1, Components(pause_fraction=pause), storm_events=ev)
        return scorer.update([inp], t).ports[0].stormed

    assert not storm(0.5, 0) and storm(0.95, 1) and storm(0.6, 2)  # above half the threshold: still stormed
    assert storm(0.1, 3) and not storm(0.1, 4)
    assert storm(0.0, 5, ev=True)  # the NIC's own storm event


def test_tor_and_spine_aggregate_up_ports_and_count_the_rest():
    scorer = CongestionScorer(levels=Levels(alpha=1.0))
    report = scorer.update(
        [
            _inp("a", "d0", 0.05, tor="t1"),
            _inp("b", "d0", 0.0, tor="t1"),
            _inp("c", "d0", 0.0, tor="t1", up=False),
            _inp("d", "d0", 0.0, tor="t2", spine="s1+s2"),
        ],
        10.0,
    )
    t1 = next(t for t in report.tors if t.name == "t1")
    assert t1.score == pytest.approx((0.4 + 0.8) / 2) and t1.signals["members_down"] == 1.0
    assert t1.members == ("a:d0/1", "b:d0/1", "c:d0/1")
    assert [s.name for s in report.spines] == ["s1", "s2"]
    s1 = report.spines[0]
    assert s1.members == ("t1", "t2") and s1.score == pytest.approx((0.3 + 0.6) / 2)
    assert report.scope("spine")[1].members == ("t2",)


def _view(**rates: float) -> PortView:
    counters = {name: Counter(name, name, CounterGroup.HW, 0) for name in rates}
    return PortView(
        PortSample("mlx5_0", 1, "eth0", "Ethernet", "ACTIVE", "LinkUp", 200.0, counters=counters), rates=rates
    )


def test_components_from_signals():
    v = _view(rx_packets=1000.0, tx_packets=3000.0, cnp_handled=30.0)
    sig = PortSignals(
        ce_fraction=0.02,
        cnp_handled_per_s=30.0,
        errors_per_s=2.0,
        retransmits_per_s=2.0,
        pfc=(PriorityPause(3, 1.0, 0.0, 0.25, 0.5),),
    )
    c = components(v, sig)
    assert (c.ce_fraction, c.cnp_per_packet, c.pause_fraction) == (0.02, 0.01, 0.5)
    assert c.loss_per_packet == pytest.approx(4 / 4000)
    idle = components(_view(rx_packets=0.0, tx_packets=0.0), PortSignals(errors_per_s=1.0))
    assert idle.loss_per_packet == 1.0 and idle.cnp_per_packet is None and idle.pause_fraction is None


def test_scorer_from_config_uses_the_configured_ramps_and_levels():
    cfg = load_config(None, environ={"NETD_CONGESTION_CE_FRACTION": "0.0,0.1", "NETD_CONGESTION_BUSY": "0.1"})
    scorer = scorer_from_config(cfg.congestion)
    assert scorer.model.ramps["ce_fraction"] == Ramp(0.0, 0.1) and scorer.levels.busy == 0.1
    assert math.isclose(scorer.model.port(Components(ce_fraction=0.05))[0], 0.4)


def test_open_storm_findings_from_the_detectors_mark_the_port_stormed():
    from netd.congestion.host import host_inputs
    from netd.detect.findings import AnomalyState, Finding, Scope, Severity
    from netd.model.snapshot import Snapshot
    from netd.series.tracker import SeriesTracker

    ports = tuple(
        PortSample(f"mlx5_{i}", 1, f"eth{i}", "Ethernet", "ACTIVE", "LinkUp", 200.0) for i in range(2)
    )
    obs = SeriesTracker().update(Snapshot(timestamp=1.0, monotonic=1.0, host="h", ports=ports))
    crit = Severity.CRITICAL
    storm = Finding(
        "f1",
        "pfc_storm",
        Scope("h", "mlx5_1", 1, "eth1", 3),
        crit,
        crit,
        "paused",
        {},
        {},
        1.0,
        1.0,
        1.0,
        1.0,
    )
    congestion = Finding(
        "f2",
        "congestion",
        Scope("h", "mlx5_0", 1),
        Severity.WARNING,
        Severity.WARNING,
        "busy",
        {},
        {},
        1.0,
        1.0,
        1.0,
        1.0,
    )
    inputs = host_inputs(obs, None, stormed_ports(AnomalyState("h", active=(storm, congestion))))
    assert [i.storm_events for i in inputs] == [False, True]
    assert [i.storm_events for i in host_inputs(obs, None, stormed_ports(None))] == [False, False]
    report = CongestionScorer().update(inputs, 1.0)
    assert [p.stormed for p in report.ports] == [False, True]


def test_a_port_listed_twice_advances_as_if_one_input_at_a_time():
    twice, once = CongestionScorer(levels=Levels(alpha=0.5)), CongestionScorer(levels=Levels(alpha=0.5))
    twice.update([_inp("h", "d", 0.05)], 0)
    once.update([_inp("h", "d", 0.05)], 0)
    both = twice.update([_inp("h", "d", 0.0), _inp("h", "d", 0.02)], 1).ports
    first = once.update([_inp("h", "d", 0.0)], 1).ports[0]
    second = once.update([_inp("h", "d", 0.02)], 1).ports[0]
    assert both == (first, second) and both[1].smoothed == pytest.approx(0.5 * second.score + 0.2)


@pytest.mark.parametrize(
    ("comps", "counted"),
    [
        (Components(ce_fraction=math.nan, rx_packets_per_s=10.0, pause_fraction=0.02), ["pause_fraction"]),
        (Components(cnp_per_packet=math.nan, tx_packets_per_s=999.0), []),
        (
            Components(ce_fraction=None, cnp_per_packet=0.005, loss_per_packet=0),
            ["cnp_per_packet", "loss_per_packet"],
        ),
    ],
)
def test_a_value_that_does_not_count_is_shown_but_not_scored(comps: Components, counted: list[str]) -> None:
    s = CongestionScorer().update([ScoreInput("h", "d", 1, comps)], 0).ports[0]
    score, parts = ScoreModel().port(comps)
    assert list(s.contributions) == counted == list(parts) and s.score == score
    assert list(s.signals) == ["ce_fraction", "cnp_per_packet", "pause_fraction", "loss_per_packet"]
    for k, value in s.signals.items():  # as given (None, 0, a number), but NaN is shown as absent
        given = getattr(comps, k)
        assert value is (None if given is not None and math.isnan(given) else given)


def test_a_ports_label_map_is_kept_while_its_labels_are_the_same():
    scorer = CongestionScorer()
    first = scorer.update([_inp("h", "d", 0.0, tor="t1")], 0).ports[0].labels
    assert scorer.update([_inp("h", "d", 0.01, tor="t1")], 1).ports[0].labels is first
    moved = scorer.update([_inp("h", "d", 0.0, tor="t2")], 2).ports[0].labels
    assert moved["tor"] == "t2" and first["tor"] == "t1"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("signal", ["ce_fraction", "cnp_per_packet", "pause_fraction", "loss_per_packet"])
def test_a_signal_that_is_not_a_finite_number_is_absent(signal: str, bad: float) -> None:
    """No source of netd gives one (the counter model and the fabric view drop them), but a
    non-finite signal must neither stop the scorer (a NaN raised "no level for score nan") nor reach
    the report, whose signals are served as JSON: it is scored and shown as absent (None)."""
    import json
    import time
    from dataclasses import replace

    base = Components(ce_fraction=0.03, cnp_per_packet=0.002, pause_fraction=0.2, loss_per_packet=1e-4)
    now = time.time()

    def report(value: float | None) -> tuple:
        inputs = [
            ScoreInput("h1", "mlx5_0", 1, replace(base, **{signal: value}), tor="t1"),
            ScoreInput("h2", "mlx5_0", 1, base, tor="t1"),
        ]
        return CongestionScorer().update(inputs, now)

    with_bad, with_none = report(bad), report(None)
    assert with_bad == with_none
    assert with_bad.ports[0].signals[signal] is None
    json.dumps([dict(p.signals) for p in with_bad.ports], allow_nan=False)
    score, parts = ScoreModel().port(replace(base, **{signal: bad}))
    assert (score, parts) == ScoreModel().port(replace(base, **{signal: None}))
