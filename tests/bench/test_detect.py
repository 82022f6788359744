"""The labelled-trace pipeline end to end (emulator -> sources -> series -> detection -> scoring), on a
short hand-written trace with one fault of each port-level kind, and the scorer's matching rules."""

from __future__ import annotations

import pytest

from cc.sim.workload import GREEDY, Flow
from netd.bench.detect_eval import Observed, score
from netd.bench.detect_replay import run_trace
from netd.config.settings import load_config
from netd.emulated.fault_kinds import (
    CounterSaturation,
    CounterStall,
    LinkFlap,
    LossBurst,
    SpreadingVictim,
    StuckReceiver,
)
from netd.emulated.faults import Label
from netd.emulated.traces import GLITCHES, ScheduledWorkload, Trace, glitch_trace

pytestmark = pytest.mark.slow  # replays labelled traces

N = 8


def ring() -> tuple[Flow, ...]:
    return tuple(Flow((h, p), ((h + 1) % N, p)) for h in range(N) for p in range(2))


def test_short_trace_every_fault_found_nothing_else() -> None:
    faults = [
        StuckReceiver(2, 0, 5.3, 10.6, feeders=((1, 0),)),
        LossBurst(4, 1, 12.2, 18.0, events_per_s=300),
        LinkFlap(5, 0, 20.1, 22.5, downs=((20.1, 20.4), (22.0, 22.5))),
        CounterSaturation(6, 1, 8.4, 14.0),
        CounterStall(7, 0, 25.5, 32.0),
        SpreadingVictim(3, 1, 28.7, 35.0, pause_fraction=0.5),
    ]
    # then a 7:1 incast onto host 7's port 0: the congestion scorer's level, held, is the finding
    incast = tuple(Flow((h, 0), (7, 0), GREEDY) for h in range(7))
    segments = [
        (0.0, 40.0, "allreduce", ring()),
        (40.0, 48.0, "incast", incast),
        (48.0, 50.0, "allreduce", ring()),
    ]
    congestion = [Label("congestion", 7, 0, 40.0, 48.0)]
    trace = Trace("short", 50.0, ScheduledWorkload(segments, sim_ms_per_s=2.0), faults, congestion)
    # a fixed 0.1 s cadence, so the number of fast samples is known exactly
    cfg = load_config(None, environ={}).detect.model_copy(
        update={"fast_interval": 0.1, "fast_calm_interval": 0}
    )
    run = run_trace(trace, cfg, sim_ms_per_s=2.0, seed=5)
    rows = {
        r["kind"]: r
        for r in score(trace.labels(), run.findings, host_hours=run.hosts * 50 / 3600, end_s=50.0)
    }
    for kind in (
        "pfc_storm",
        "pause_storm",
        "loss",
        "link_flap",
        "counter_saturated",
        "counter_stalled",
        "congestion_spreading",
        "congestion",
    ):
        assert rows[kind]["recall"] == 1.0, rows[kind]
        assert rows[kind]["false_alarms"] == 0, rows[kind]
    assert set(rows) == {lb.kind for lb in trace.labels()}, rows  # no other kind fired anywhere
    assert rows["pfc_storm"]["median_detection_latency_s"] <= 0.3
    assert run.fast_samples == run.hosts * 50 * 9 and run.fast_cpu_s > 0


def test_bad_reads_raise_no_finding_but_the_read_error() -> None:
    """Steps backwards, spikes, a 32-bit read beyond its width, a driver reset and inf/nan/negative
    rates on a healthy fabric: only the truthful read errors of the bad `rate` reads."""
    trace = glitch_trace(4, 120.0, sim_ms_per_s=2.0, gap_s=(2.0, 4.0))
    assert set(trace.fault_names) == set(GLITCHES)
    cfg = load_config(None, environ={}).detect
    run = run_trace(trace, cfg, sim_ms_per_s=2.0, seed=4)
    rows = score(trace.labels(), run.findings, host_hours=run.hosts * 120 / 3600, end_s=120.0)
    assert [r["kind"] for r in rows] == ["counter_read_error"], rows
    (row,) = rows
    assert row["false_alarms"] == 0 and row["recall"] == 1.0, row
    assert row["labels"] == sum(1 for n in trace.fault_names if n.startswith("rate_"))


def observed(kind: str, opened: float, closed: float | None, port: int = 0) -> Observed:
    return Observed(kind, 1, port, None, None, opened, closed)


def test_scoring_rules() -> None:
    labels = [
        Label("loss", 1, 0, 10.0, 20.0),
        Label("loss", 1, 0, 50.0, 60.0),
        Label("loss", 1, 1, 10.0, 20.0),
    ]
    findings = [
        observed("loss", 10.7, 25.0),  # detects the first, 0.7 s late
        observed("loss", 61.5, 70.0),  # opens just after the second ended: within the 2 s grace
        observed("loss", 30.0, 35.0),  # in between: a false alarm
        observed("loss", 5.0, 15.0, port=1),  # already open when the third started: latency 0
        observed("link_flap", 1.0, 2.0),  # nothing of its kind labelled
    ]
    rows = {r["kind"]: r for r in score(labels, findings, host_hours=2.0, end_s=100.0, kinds=("pfc_storm",))}
    loss = rows["loss"]
    assert (loss["detected"], loss["findings"], loss["false_alarms"]) == (3, 4, 1)
    assert loss["recall"] == 1.0 and loss["precision"] == 0.75 and loss["false_alarms_per_hour"] == 0.5
    assert loss["median_detection_latency_s"] == 0.7
    assert rows["link_flap"]["recall"] is None and rows["link_flap"]["precision"] == 0.0
    assert rows["pfc_storm"]["findings"] == 0 and rows["pfc_storm"]["precision"] is None


def test_an_incast_after_a_calm_minute_is_congestion_only_and_opens_after_its_sustain() -> None:
    """Issue 17's regression: once the congestion finding waited for `congestion_sustain`, an incast's
    receiver (CNPs sent far above its calm history) raised a `baseline_shift` before it, and the sustain
    counted from the first tick at the level cost a tick more than the sustain. The incast starts
    mid-second after the baseline's 60-tick warm-up."""
    incast = tuple(Flow((h, 0), (7, 0), GREEDY) for h in range(7))
    start, end = 63.4, 70.0
    segments = [
        (0.0, start, "allreduce", ring()),
        (start, end, "incast", incast),
        (end, 75.0, "allreduce", ring()),
    ]
    trace = Trace(
        "incast",
        75.0,
        ScheduledWorkload(segments, sim_ms_per_s=2.0),
        [],
        [Label("congestion", 7, 0, start, end)],
    )
    cfg = load_config(None, environ={}).detect
    run = run_trace(trace, cfg, sim_ms_per_s=2.0, seed=6)
    assert [f.kind for f in run.findings] == ["congestion"], run.findings
    (f,) = run.findings
    # held from the start of the first whole second at the level (64.0): open at 64 + sustain, no later
    assert f.opened_s - start <= cfg.congestion_sustain + 1.0, f
