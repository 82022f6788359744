"""The engine: lifecycle, deduplication, suppression, wall-clock anchoring, a detector that raises."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from netd.detect.engine import DetectionEngine, suppress
from netd.detect.findings import Candidate, Scope, Severity
from netd.detect.inputs import DetectInput, PortCongestion
from netd.detect.pfc import PfcStormDetector
from tests.detect.helpers import HOST, busy, cfg, pfc, port, prio, stormed, tick


class Scripted:
    """A detector that reports whatever the test says, per evaluation."""

    kinds = ("test",)

    def __init__(self, script: list[list[Candidate]]) -> None:
        self.script = list(script)

    def evaluate(self, inp: DetectInput) -> list[Candidate]:
        return self.script.pop(0)


def cand(
    severity: str = "warning",
    kind: str = "test",
    device: str = "mlx5_0",
    priority: int | None = None,
    note: str = "x",
) -> Candidate:
    scope = Scope(HOST, device, 1, f"{device}_net", priority)
    return Candidate(kind, scope, Severity(severity), f"explained {note}", {"note": note})


def test_lifecycle_open_update_escalate_resolve() -> None:
    script = [[cand(note="a")], [cand(note="b")], [cand("critical", note="c")], [cand(note="d")], []]
    engine = DetectionEngine(cfg(), HOST, [Scripted(script)])
    actions = [[e.action for e in engine.evaluate(tick(float(t), port()))] for t in range(1, 6)]
    assert actions == [["opened"], [], ["escalated"], ["deescalated"], ["resolved"]]
    state = engine.state()
    assert not state.active
    (f,) = state.recent
    assert (f.severity, f.peak_severity, f.updates, f.resolution) == (
        Severity.WARNING,
        Severity.CRITICAL,
        3,
        "cleared",
    )
    assert f.evidence["note"] == "d" and f.first_evidence["note"] == "a"
    assert f.duration_s == 4.0 and f.ended_at == f.started_at + 4.0
    assert dict(state.totals) == {("test", "warning"): 1, ("test", "critical"): 1}


def test_one_anomaly_reported_many_times_is_one_finding() -> None:
    engine = DetectionEngine(cfg(), HOST, [Scripted([[cand()]] * 10)])
    for t in range(10):
        engine.evaluate(tick(float(t), port()))
    assert len(engine.state().active) == 1 and engine.state().totals[("test", "warning")] == 1


def test_reopen_window() -> None:
    script = [[cand()], [], [cand()], [], [], [], [cand()]]
    engine = DetectionEngine(cfg(reopen_window=2.5), HOST, [Scripted(script)])
    actions = [[e.action for e in engine.evaluate(tick(float(t), port()))] for t in range(1, 8)]
    assert actions == [["opened"], ["resolved"], ["reopened"], ["resolved"], [], [], ["opened"]]
    assert engine.state().totals[("test", "warning")] == 2
    ids = {f.id for f in engine.state().recent} | {f.id for f in engine.state().active}
    assert len(ids) == 2


def test_without_a_reopen_window_every_return_is_new() -> None:
    engine = DetectionEngine(cfg(), HOST, [Scripted([[cand()], [], [cand()]])])
    actions = [[e.action for e in engine.evaluate(tick(float(t), port()))] for t in range(1, 4)]
    assert actions == [["opened"], ["resolved"], ["opened"]]


def test_suppression_rules() -> None:
    storm = cand("critical", kind="pfc_storm", priority=3)
    kept, why = suppress([cand(kind="congestion_spreading", priority=3), storm])
    assert kept == [storm] and why[
        ("congestion_spreading", Scope(HOST, "mlx5_0", 1, "mlx5_0_net", 3))
    ].endswith("pfc_storm")
    other_port = cand(kind="congestion_spreading", device="mlx5_1", priority=3)
    assert suppress([other_port, storm])[0] == [other_port, storm]
    other_prio = cand(kind="congestion_spreading", priority=4)
    assert suppress([other_prio, storm])[0] == [other_prio, storm]


def test_a_finding_superseded_by_a_more_specific_one() -> None:
    spreading = cand(kind="congestion_spreading", priority=3)
    storm = cand("critical", kind="pfc_storm", priority=3)
    engine = DetectionEngine(cfg(), HOST, [Scripted([[spreading], [spreading, storm]])])
    engine.evaluate(tick(1.0, port()))
    events = engine.evaluate(tick(2.0, port()))
    resolved = [e.finding for e in events if e.action == "resolved"]
    assert [f.resolution for f in resolved] == ["superseded by pfc_storm"]


def test_a_detector_that_raises_keeps_its_findings() -> None:
    class Flaky:
        kinds = ("test",)
        calls = 0

        def evaluate(self, inp: DetectInput) -> list[Candidate]:
            self.calls += 1
            if self.calls == 2:
                raise ZeroDivisionError("bug")
            return [cand()]

    engine = DetectionEngine(cfg(), HOST, [Flaky()])
    engine.evaluate(tick(1.0, port()))
    assert engine.evaluate(tick(2.0, port())) == []  # neither resolved nor reopened
    assert len(engine.state().active) == 1 and engine.state().detector_errors == {"Flaky": 1}


def test_real_detectors_storm_and_congestion_end_to_end() -> None:
    engine = DetectionEngine(cfg(congestion_sustain=0.0), HOST)
    events = []
    for t in (0.1, 0.2, 0.3):
        events += engine.evaluate(pfc(t, port(priorities=(stormed(),))))
    hot = tick(1.0, port(counters=busy(ce=0.1), priorities=(prio(3),)))
    level = PortCongestion("severe", 0.9, MappingProxyType({"ce_fraction": 0.8}), MappingProxyType({}))
    events += engine.evaluate(dataclasses.replace(hot, congestion=MappingProxyType({("mlx5_0", 1): level})))
    opened = sorted((e.finding.kind, e.finding.started_monotonic) for e in events if e.action == "opened")
    assert opened == [("congestion", 1.0), ("pfc_storm", 0.2)]
    assert [f.kind for f in engine.state().active] == ["pfc_storm", "congestion"]  # worst first


def test_the_pfc_rest_and_confirm_answers_follow_every_evaluation() -> None:
    """pfc_at_rest() and pfc_confirm_in() are kept between evaluations (the fast path asks at every
    sample); asked before and after each evaluation of a storm's life, they are what the detectors say."""
    engine = DetectionEngine(cfg(pfc_detection_time=0.15, pfc_restoration_time=0.2), HOST)
    storms = [d for d in engine.detectors if isinstance(d, PfcStormDetector)]
    quiet = prio(3, rx_pause_frames=0, rx_pause_us=0, tx_packets=900)
    script = [quiet, quiet, stormed(fraction=0.3, tx=900), stormed(), stormed(), quiet, quiet, quiet, quiet]
    seen = set()
    for i, pc in enumerate(script):
        for _ in range(2):  # asked twice: the second answer is the kept one
            rest = all(d.at_rest() for d in storms)
            times = [t for t in (d.confirm_in() for d in storms) if t is not None]
            assert engine.pfc_at_rest() is rest
            assert engine.pfc_confirm_in() == min(times, default=None)
            seen.add((rest, bool(times)))
        engine.evaluate(pfc(0.1 * (i + 1), port(priorities=(pc,))))
    assert seen == {(True, False), (False, True), (False, False)}  # rest, an onset pending, a storm
