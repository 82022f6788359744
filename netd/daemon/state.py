"""What the loop publishes once per tick: one immutable value that every reader shares.

The loop swaps a new :class:`PublishedState` in by reference; the exporter, the HTTP API, the NCCL
bridge and the tuner read the latest one without a lock and never see a half-built tick.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from netd.congestion.scorer import CongestionReport
from netd.daemon.health import TickHealth
from netd.detect.findings import AnomalyState
from netd.model.topology import Topology
from netd.series.tracker import Observation

__all__ = ["PublishedState"]


@dataclass(frozen=True)
class PublishedState:
    """What the loop publishes for every reader: the observation plus cumulative self-counters."""

    observation: Observation
    source_errors: dict[str, int] = field(default_factory=dict)  # source -> failures since start
    ticks: int = 0
    topology: Topology | None = None  # host port -> ToR -> spine, rails (netd.topology.build)
    congestion: CongestionReport | None = None  # per port/ToR/spine scores (netd.congestion.scorer)
    anomalies: AnomalyState | None = None  # anomaly findings (netd.detect.service)
    health: TickHealth = field(default_factory=TickHealth)  # cadence of the loop (netd.daemon.health)
    counter_events: dict[str, int] = field(default_factory=dict)  # counter model events since start
