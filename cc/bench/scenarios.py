"""The benchmark's scenarios: named, fixed-seed :class:`~cc.sim.Scenario` values drawn from a seed.

:func:`suite` is the evaluation set of ``python -m cc.bench`` (incast 16:1 and 64:1 with background
traffic, all-to-all on an oversubscribed two-tier fabric, ring all-reduce with background short
flows on a rail-optimised fabric, a mixed 25/100/400 Gb/s fabric, and a 256-host leaf-spine). Every
scenario is stationary after its warm-up — bursts repeat, background arrivals are Poisson — so a
tuner acting online during the warm-up is measured on the same kind of traffic as the default run.

:func:`cc.sim.run` simulates one scenario for a batch of parameter sets and returns each one's metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from cc.sim import (
    WEB_SEARCH,
    FlowSpec,
    Scenario,
    SimConfig,
    SizeDistribution,
    Topology,
    all_to_all,
    incast,
    leaf_spine,
    poisson_flows,
    rail_optimised,
    ring_allreduce,
)

__all__ = ["SUITE", "check_names", "suite"]


def _bursts(
    rng: np.random.Generator,
    ports: Sequence[int],
    fan_in: int,
    size: float,
    every_us: float,
    until_us: float,
    topo: Topology | None = None,
) -> list[FlowSpec]:
    """A ``fan_in``:1 incast of ``size``-byte flows every ``every_us``, random receiver and senders.
    With ``topo``, ``size`` is for a 200G receiver and scales with the receiver's speed (a burst
    lasts as long at every receiver)."""
    flows: list[FlowSpec] = []
    t = every_us / 2
    while t < until_us:
        receiver = int(rng.choice(ports))
        senders = rng.choice([p for p in ports if p != receiver], size=fan_in, replace=False)
        scaled = size * (topo.port_gbps(receiver) / 200.0 if topo is not None else 1.0)
        flows += incast(receiver, [int(s) for s in senders], scaled, t)
        t += every_us
    return flows


def _background(
    rng: np.random.Generator,
    topo: Topology,
    load: float,
    until_us: float,
    dist: SizeDistribution = WEB_SEARCH,
) -> list[FlowSpec]:
    ports = list(range(topo.n_ports))
    gbps = min(topo.port_gbps(p) for p in ports)
    return poisson_flows(rng, ports, ports, load, gbps, dist, until_us)


def _incast_scenario(fan_in: int, seed: int, measure: float) -> Scenario:
    rng = np.random.default_rng(seed)
    leaves = 4 if fan_in <= 16 else 8
    topo = leaf_spine(leaves=leaves, spines=2, hosts_per_leaf=max(5, -(-(fan_in + 1) // leaves)))
    warmup = 6_000.0
    ports = list(range(topo.n_ports))
    flows = _bursts(rng, ports, fan_in, 4e6 / fan_in, 1_000.0, warmup + measure)
    flows += _background(rng, topo, 0.15, warmup + measure)
    return Scenario(
        f"incast-{fan_in}",
        f"{fan_in}:1 incast of 4 MB in total every ms, web-search background at 15 % load, "
        f"{topo.n_ports} hosts at 200G on {leaves} leaves x 2 spines",
        topo,
        tuple(flows),
        warmup,
        measure,
        config=SimConfig(dt_us=1.0, seed=seed),
    )


def _alltoall_scenario(seed: int, measure: float) -> Scenario:
    topo = leaf_spine(leaves=4, spines=2, hosts_per_leaf=4, oversubscription=2.0)
    warmup = 6_000.0
    flows: list[FlowSpec] = []
    t = 500.0
    while t < warmup + measure:
        flows += all_to_all(list(range(topo.n_ports)), 256e3, t)
        t += 2_000.0
    return Scenario(
        "alltoall",
        "all-to-all of 256 KB per pair every 2 ms, 16 hosts on a 2:1 oversubscribed 4x2 leaf-spine",
        topo,
        tuple(flows),
        warmup,
        measure,
        config=SimConfig(dt_us=1.0, seed=seed),
    )


def _allreduce_scenario(seed: int, measure: float) -> Scenario:
    rng = np.random.default_rng(seed)
    topo = rail_optimised(hosts=8, rails=4, hosts_per_pod=4, spines=2)
    warmup = 6_000.0
    flows: list[FlowSpec] = []
    for rail in range(4):  # one ring per rail, crossing pods through the spines
        ranks = [h * 4 + rail for h in range(8)]
        flows += ring_allreduce(
            ranks, 16e6, 200.0, iterations=int((warmup + measure) // 2_000), period_us=2_000.0
        )
    flows += _background(rng, topo, 0.10, warmup + measure)
    flows.sort(key=lambda f: f.start_us)
    return Scenario(
        "allreduce+short",
        "per-rail ring all-reduce of 16 MB every 2 ms with web-search background at "
        "10 % load, 8 hosts x 4 rails, rail-optimised, 2 pods",
        topo,
        tuple(flows),
        warmup,
        measure,
        config=SimConfig(dt_us=1.0, seed=seed),
    )


def _mixed_speed_scenario(seed: int, measure: float) -> Scenario:
    rng = np.random.default_rng(seed)
    speeds = [25.0] * 4 + [100.0] * 4 + [400.0] * 4 + [25.0, 100.0, 400.0, 100.0]
    topo = leaf_spine(leaves=4, spines=2, hosts_per_leaf=4, host_gbps=speeds, uplink_gbps=400.0)
    warmup = 6_000.0
    ports = list(range(topo.n_ports))
    flows = _bursts(rng, ports, 8, 512e3, 1_000.0, warmup + measure, topo)
    for p in ports:  # each host offers 15 % of its speed, spread over receivers in proportion to theirs
        flows += poisson_flows(
            rng, [p], ports, 0.15, topo.port_gbps(p), WEB_SEARCH, warmup + measure, weights=speeds
        )
    flows.sort(key=lambda f: f.start_us)
    return Scenario(
        "mixed-speed",
        "hosts at 25/100/400G (400G uplinks), 8:1 incasts every ms (4 MB at a 200G receiver, "
        "scaled with its speed), web-search "
        "background at 15 % of each host's speed, to receivers in proportion to theirs",
        topo,
        tuple(flows),
        warmup,
        measure,
        config=SimConfig(dt_us=1.0, seed=seed),
    )


def _fabric_256_scenario(seed: int, measure: float) -> Scenario:
    rng = np.random.default_rng(seed)
    topo = leaf_spine(leaves=16, spines=4, hosts_per_leaf=16)
    warmup = 6_000.0
    ports = list(range(topo.n_ports))
    flows = _bursts(rng, ports, 32, 4e6 / 32, 1_000.0, warmup + measure)
    flows += _background(rng, topo, 0.15, warmup + measure)
    flows.sort(key=lambda f: f.start_us)
    return Scenario(
        "fabric-256",
        "32:1 incast of 4 MB in total every ms, web-search background at 15 % load, 256 hosts at 200G "
        "on 16 leaves x 4 spines (non-blocking)",
        topo,
        tuple(flows),
        warmup,
        measure,
        config=SimConfig(dt_us=1.0, seed=seed),
    )


SUITE: dict[str, Callable[[int, float], Scenario]] = {
    "incast-16": lambda seed, measure: _incast_scenario(16, seed, measure),
    "incast-64": lambda seed, measure: _incast_scenario(64, seed, measure),
    "alltoall": _alltoall_scenario,
    "allreduce+short": _allreduce_scenario,
    "mixed-speed": _mixed_speed_scenario,
    "fabric-256": _fabric_256_scenario,
}


def suite(seed: int = 1, names: Sequence[str] | None = None, measure_us: float = 30_000.0) -> list[Scenario]:
    """The evaluation scenarios (all of them, or ``names``), built deterministically from ``seed``,
    each measured for ``measure_us`` after a 6 ms warm-up."""
    check_names(names or ())
    return [SUITE[name](seed, measure_us) for name in (names or SUITE)]


def check_names(names: Sequence[str]) -> None:
    """ValueError naming the known scenarios if any of ``names`` is not one of them."""
    unknown = set(names) - set(SUITE)
    if unknown:
        raise ValueError(f"unknown scenarios {sorted(unknown)}; known: {sorted(SUITE)}")
