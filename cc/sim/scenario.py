"""A named, fixed-seed experiment: a topology, the flows over it, and how long to run and measure.

:func:`run` simulates one scenario for a batch of parameter sets and returns each one's metrics.
The benchmark's suite and the tuner's model situations are scenarios.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cc.model import DcqcnParams, ParamBatch
from cc.sim.engine import Engine
from cc.sim.metrics import RunMetrics, run_metrics
from cc.sim.network import SimConfig
from cc.sim.topology import Topology
from cc.sim.traffic import FlowSpec

__all__ = ["Scenario", "run"]


@dataclass(frozen=True)
class Scenario:
    """``flows`` start within [0, warmup_us + measure_us); metrics cover the measurement window, then
    the run continues up to ``drain_us`` more so that flows started in the window can finish."""

    name: str
    description: str
    topology: Topology
    flows: tuple[FlowSpec, ...]
    warmup_us: float
    measure_us: float
    drain_us: float = 5_000.0
    config: SimConfig = field(default_factory=SimConfig)

    @property
    def end_us(self) -> float:
        return self.warmup_us + self.measure_us

    def engine(
        self, params: DcqcnParams | Sequence[DcqcnParams] | ParamBatch, trace_us: float | None = None
    ) -> Engine:
        return Engine(
            self.topology, self.flows, params, self.config, measure_from_us=self.warmup_us, trace_us=trace_us
        )


def run(scenario: Scenario, params: DcqcnParams | Sequence[DcqcnParams] | ParamBatch) -> list[RunMetrics]:
    """Simulate ``scenario`` once per parameter set (in one batch) and measure each."""
    engine = scenario.engine(params)
    engine.run(scenario.end_us)
    _measure_only_window(engine)
    engine.drain(scenario.end_us + scenario.drain_us)
    return [run_metrics(engine, row) for row in range(engine.batch)]


def _measure_only_window(engine: Engine) -> None:
    """Queues, pauses and utilisation cover the window; the drain only completes flows."""
    engine.recorder.stop_us = engine.now_us
