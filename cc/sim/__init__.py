"""The numpy fabric simulator: topologies and the traffic over them (:mod:`~cc.sim.topology`,
:mod:`~cc.sim.traffic`, :mod:`~cc.sim.workload`), the discrete-time engine that runs DCQCN flows
through switch queues, RED/ECN, PFC and links (:mod:`~cc.sim.engine`, with its network compiler, flow
state, flow columns, emission ring, PFC state, shared switch buffer, counter-based random draws and
recorder), a run's figures (:mod:`~cc.sim.metrics`), named experiments (:mod:`~cc.sim.scenario`) and
the emulated fabric behind ``netd run`` (:mod:`~cc.sim.fabric`). It builds on :mod:`cc.model` only;
nothing here knows about the tuner or the benchmark."""

from __future__ import annotations

from cc.sim.engine import Engine
from cc.sim.fabric import Fabric, FabricConfig, PortDeltas
from cc.sim.metrics import RunMetrics, run_metrics
from cc.sim.network import MTU_BYTES, SimConfig
from cc.sim.scenario import Scenario, run
from cc.sim.topology import Topology, leaf_spine, rail_optimised, single_bottleneck
from cc.sim.traffic import (
    WEB_SEARCH,
    FlowSpec,
    SizeDistribution,
    all_to_all,
    incast,
    long_flows,
    poisson_flows,
    ring_allreduce,
)
from cc.sim.workload import GREEDY, PHASE_NAMES, FixedWorkload, Flow, Phase, PhaseSource, Workload

__all__ = [
    "GREEDY",
    "MTU_BYTES",
    "PHASE_NAMES",
    "WEB_SEARCH",
    "Engine",
    "Fabric",
    "FabricConfig",
    "FixedWorkload",
    "Flow",
    "FlowSpec",
    "Phase",
    "PhaseSource",
    "PortDeltas",
    "RunMetrics",
    "Scenario",
    "SimConfig",
    "SizeDistribution",
    "Topology",
    "Workload",
    "all_to_all",
    "incast",
    "leaf_spine",
    "long_flows",
    "poisson_flows",
    "rail_optimised",
    "ring_allreduce",
    "run",
    "run_metrics",
    "single_bottleneck",
]
