"""Model situations the tuner simulates to compare candidate parameters ("digital twins").

A host cannot see its fabric, only its counters; the tuner therefore keeps two small, generic
situations, scaled to the host's link speed and offered load, that bracket what DCQCN faces in
training clusters:

* ``incast``: one switch; into one port, two long flows (the standing queue DCQCN leaves behind
  elephants), 8:1 incasts of 2 MB (at 200G; scaled with speed) every millisecond, and short flows
  (web-search sizes up to 200 KB) — latency-sensitive traffic queued behind elephants and bursts.
  Objective: the tail (slowest 5 %) FCT slowdown of the short flows.
* ``collective``: an all-to-all of 512 KB per pair every millisecond among 8 hosts on a 2:1
  oversubscribed leaf-spine — throughput-bound traffic where marking too early or recovering too
  slowly costs completion time. Objective: the tail FCT slowdown of the collective's flows.

Both are evaluated for every candidate (one batched simulation each), and a candidate must not make
either one worse (the incast twin's utilisation, which is its elephants' recovery, counts only while
the signals do not rule out elephants: :func:`cc.tune.guard.utilization_waived`): the situation the
signals point to decides what to optimise, the other guards against over-fitting to it. They are
deliberately not the benchmark's scenarios.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from cc.model import DcqcnParams
from cc.sim import (
    RunMetrics,
    Scenario,
    SimConfig,
    SizeDistribution,
    all_to_all,
    incast,
    leaf_spine,
    long_flows,
    poisson_flows,
    run,
    single_bottleneck,
)

__all__ = ["STEP_US", "TWIN_DT_US", "Twin", "TwinResult", "evaluate", "evaluate_replicated", "twins"]

STEP_US = 1.0
"""The twins' step: no longer than their links' 1 µs delay. A hop costs at least one step, so a 4 µs
step made every hop 4 µs: the round trip grew from 4 to 16 µs and the bandwidth-delay product at
200G from 100 to 400 KB, above Kmin's lower rungs. Marking at 200 KB then starved the incast twin's
link after every cut (utilisation 0.87 -> 0.80 against 0.86 -> 0.94 at 1 µs) and slowed the
collective twin by 11 % (2.4 % at 1 µs): the guards refused a rung that the benchmark's own 1 µs
runs show costs no utilisation (docs/benchmarks.md, issue 20, second round). It costs ~4x the CPU."""

TWIN_DT_US = 4.0
"""The step at which ``cc.bench`` measures the batched simulator's speed: the twins' step until
issue 20's second round, kept so that figure stays comparable across rounds."""

SHORT_FLOWS = SizeDistribution(
    "web-search below 200 KB",
    [(0, 0), (10e3, 25), (20e3, 33), (30e3, 50), (50e3, 67), (80e3, 88), (200e3, 100)],
)
"""The latency-sensitive part of the web-search distribution (its flows up to 200 KB, renormalised)."""


@dataclass(frozen=True)
class Twin:
    name: str
    description: str
    scenario: Scenario
    objective_tag: str


@dataclass(frozen=True)
class TwinResult:
    """One candidate on one twin: the objective — the mean FCT slowdown of the slowest 5 % of the
    twin's objective flows, a tail statistic that moves with p99 but is far less noisy on a few
    hundred flows — and the guard-rail figures."""

    objective: float
    utilization: float
    pause_fraction: float
    queue_p99_kb: float

    @classmethod
    def of(cls, metrics: RunMetrics, tag: str) -> TwinResult:
        group = metrics.fct_by_tag.get(tag)
        objective = group["tail_mean"] if group else float("inf")
        return cls(objective, metrics.utilization, metrics.pause_fraction, metrics.queue_p99_kb)


def twins(link_gbps: float, load: float, seed: int = 7) -> tuple[Twin, ...]:
    """The two situations at ``link_gbps``, short-flow background at ``load`` (clipped to 5-40 %)."""
    rng = np.random.default_rng(seed)
    scale = link_gbps / 200.0
    config = SimConfig(dt_us=STEP_US, seed=seed)
    warmup, measure = 1_000.0, 3_000.0
    end = warmup + measure

    star = single_bottleneck(19, link_gbps)  # port 0 is the hot receiver
    flows = long_flows([(1, 0), (2, 0)], stop_us=end)  # elephants: a standing queue under DCQCN
    for k in range(int(end // 1_000)):
        flows += incast(0, list(range(3, 11)), 256e3 * scale, 500.0 + 1_000.0 * k)
    short = poisson_flows(
        rng, list(range(3, 20)), [0], float(np.clip(load, 0.05, 0.4)) / 17, link_gbps, SHORT_FLOWS, end
    )
    flows += short
    flows.sort(key=lambda f: f.start_us)
    bursty = Scenario(
        "incast",
        "2 long flows, 8:1 incasts every ms and short flows into one port",
        star,
        tuple(flows),
        warmup,
        measure,
        drain_us=2_000.0,
        config=config,
    )

    fabric = leaf_spine(leaves=2, spines=1, hosts_per_leaf=4, host_gbps=link_gbps, oversubscription=2.0)
    mesh = [
        f
        for k in range(int(end // 1_000))
        for f in all_to_all(list(range(fabric.n_ports)), 512e3 * scale, 200.0 + 1_000.0 * k)
    ]
    collective = Scenario(
        "collective",
        "all-to-all of 512 KB per pair every ms, 8 hosts, 2:1 oversubscribed",
        fabric,
        tuple(mesh),
        warmup,
        measure,
        drain_us=2_000.0,
        config=config,
    )
    return (
        Twin("incast", bursty.description, bursty, "short"),
        Twin("collective", collective.description, collective, "alltoall"),
    )


def evaluate(situations: Sequence[Twin], candidates: Sequence[DcqcnParams]) -> dict[str, list[TwinResult]]:
    """Every candidate on every twin (one batched simulation per twin)."""
    return {
        twin.name: [TwinResult.of(m, twin.objective_tag) for m in run(twin.scenario, candidates)]
        for twin in situations
    }


def evaluate_replicated(
    link_gbps: float, load: float, candidates: Sequence[DcqcnParams], seeds: Iterable[int]
) -> dict[str, list[TwinResult]]:
    """:func:`evaluate` on the twins drawn from each seed, averaged per candidate (worst pause kept)."""
    runs = [evaluate(twins(link_gbps, load, seed), candidates) for seed in seeds]
    out: dict[str, list[TwinResult]] = {}
    for name in runs[0]:
        rows = list(zip(*(run[name] for run in runs), strict=True))
        out[name] = [
            TwinResult(
                float(np.mean([r.objective for r in row])),
                float(np.mean([r.utilization for r in row])),
                max(r.pause_fraction for r in row),
                float(np.mean([r.queue_p99_kb for r in row])),
            )
            for row in rows
        ]
    return out
