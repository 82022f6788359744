"""A scenario with the tuner in the loop, as a daemon would run it against real NICs.

Every ``epoch_us`` of simulated time the host ports' counters are turned into
:class:`~cc.signals.HostSignals` (what netd reads from a NIC), combined over the fabric's ports,
and handed to :meth:`cc.tuner.Tuner.observe` with the parameters in force; a ``change`` or
``rollback`` is applied from the next step, as netd's applier would write it. The run is measured
exactly like :func:`cc.scenarios.run`, so the two can be compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cc.metrics import RunMetrics, run_metrics
from cc.params import DcqcnParams
from cc.recommendation import Recommendation
from cc.scenarios import Scenario
from cc.signals import HostSignals, combine, signals_from_ports
from cc.tuner import Tuner

__all__ = ["OnlineRun", "run_online"]


@dataclass
class OnlineRun:
    metrics: RunMetrics
    final: DcqcnParams
    actions: list[tuple[float, Recommendation]] = field(default_factory=list)  # (time µs, change/rollback)
    decisions: int = 0


def run_online(
    scenario: Scenario, tuner: Tuner, params: DcqcnParams | None = None, epoch_us: float = 1_000.0
) -> OnlineRun:
    in_force = params or DcqcnParams()
    engine = scenario.engine(in_force)
    topo = scenario.topology
    gbps = [topo.port_gbps(p) for p in range(topo.n_ports)]
    before, paused_before = engine.port_counters(), engine.nic_pause_us()
    actions: list[tuple[float, Recommendation]] = []
    decisions = 0
    while engine.now_us < scenario.end_us - 1e-9:
        start = engine.now_us
        engine.run(min(start + epoch_us, scenario.end_us))
        after, paused_after = engine.port_counters(), engine.nic_pause_us()
        interval = engine.now_us - start
        per_port = signals_from_ports(before, after, (paused_after - paused_before)[0], interval, gbps)
        signals = (
            combine(per_port) if per_port else HostSignals(interval / 1e6, max(gbps), 0.0, 0.0, 0.0, 0.0, 0.0)
        )
        before, paused_before = after, paused_after
        rec = tuner.observe(signals, in_force)
        decisions += 1
        if rec.action != "hold":
            in_force = rec.params
            engine.set_params(in_force)
            actions.append((engine.now_us, rec))
    engine.recorder.stop_us = engine.now_us
    engine.drain(scenario.end_us + scenario.drain_us)
    return OnlineRun(run_metrics(engine), in_force, actions, decisions)
