"""Configuration findings in the engine: one finding per ConfigFinding value, held on the PFC path and on
ticks that carry no configuration, withdrawn on the first tick whose configuration no longer has it."""

from __future__ import annotations

import dataclasses

from netd.detect.engine import DetectionEngine
from netd.detect.inputs import DetectInput
from netd.model.config_finding import ConfigFinding
from tests.detect.helpers import HOST, cfg, pfc, port, tick

PFC4 = ConfigFinding("pfc_without_ecn", "mlx5_0", 1, "eth0", 4, "PFC on 4, ECN off", "echo 1 > …/4")
DSCP26 = ConfigFinding("roce_on_lossy_priority", "mlx5_0", 1, "eth0", 3, "DSCP 26 lossy", "dcb …", "dscp 26")
DSCP27 = dataclasses.replace(DSCP26, subject="dscp 27", message="DSCP 27 lossy")


def _with(inp: DetectInput, *config: ConfigFinding) -> DetectInput:
    return dataclasses.replace(inp, config=tuple(config))


def test_each_value_is_a_finding_until_the_tick_without_it() -> None:
    engine = DetectionEngine(cfg(), HOST)
    opened = engine.evaluate(_with(tick(1.0, port()), PFC4, DSCP26, DSCP27))
    assert sorted((e.action, e.finding.kind, e.finding.scope.subject) for e in opened) == [
        ("opened", "pfc_without_ecn", None),
        ("opened", "roce_on_lossy_priority", "dscp 26"),
        ("opened", "roce_on_lossy_priority", "dscp 27"),  # same port and priority, another DSCP
    ]
    f = next(e.finding for e in opened if e.finding.kind == "pfc_without_ecn")
    assert (f.severity.value, f.scope.priority, f.explanation, f.evidence["fix"]) == (
        "warning",
        4,
        "PFC on 4, ECN off",
        "echo 1 > …/4",
    )
    assert engine.evaluate(pfc(1.1, port())) == []  # the fast path says nothing about configuration
    assert engine.evaluate(tick(2.0, port())) == []  # nor does a tick that carries none
    assert len(engine.state().active) == 3
    gone = engine.evaluate(_with(tick(3.0, port()), PFC4, DSCP27))
    assert [(e.action, e.finding.scope.subject, e.finding.resolution) for e in gone] == [
        ("resolved", "dscp 26", "cleared")
    ]
    assert [e.action for e in engine.evaluate(_with(tick(4.0, port())))] == ["resolved", "resolved"]
    assert engine.state().active == ()
