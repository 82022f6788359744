"""Flows for the simulator and the traffic patterns they are drawn from.

A :class:`FlowSpec` is one RDMA flow (a QP's stream) between two host ports of a
:class:`~cc.sim.topology.Topology`: it starts at ``start_us``, sends ``size_bytes`` (or, when the size is
infinite, until ``stop_us``) at the rate its reaction point allows. Generators build the patterns
the issue asks for — N:1 incast, all-to-all, ring all-reduce, long flows, and short flows arriving
as a Poisson process with sizes from an empirical distribution — deterministically for a seed.

Size distributions are the two used in the HPCC paper's evaluation (flow size in bytes, CDF in %,
``traffic_gen/*_distribution.txt`` of alibaba-edu/High-Precision-Congestion-Control): web search
(DCTCP, SIGCOMM'10) and Facebook Hadoop (SIGCOMM'15).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "FB_HADOOP",
    "WEB_SEARCH",
    "FlowSpec",
    "SizeDistribution",
    "all_to_all",
    "incast",
    "long_flows",
    "poisson_flows",
    "ring_allreduce",
]


@dataclass(frozen=True, slots=True)
class FlowSpec:
    """One flow. ``key`` feeds the ECMP hash; ``tag`` names the pattern it belongs to (for metrics)."""

    src: int
    dst: int
    start_us: float = 0.0
    size_bytes: float = math.inf
    stop_us: float = math.inf
    priority: int = 3
    demand_mbps: float = math.inf
    key: int = 0
    tag: str = ""

    def __post_init__(self) -> None:
        if self.src == self.dst:
            raise ValueError(f"flow from port {self.src} to itself")
        if not self.size_bytes > 0 or not self.demand_mbps > 0 or not self.stop_us > self.start_us >= 0:
            raise ValueError(f"flow needs size > 0, demand > 0 and 0 <= start < stop: {self}")
        if not 0 <= self.priority <= 7:
            raise ValueError(f"priority={self.priority} outside [0, 7]")

    @property
    def finite(self) -> bool:
        return math.isfinite(self.size_bytes)


class SizeDistribution:
    """An empirical flow-size CDF, sampled by inverse transform with linear interpolation."""

    def __init__(self, name: str, points: Sequence[tuple[float, float]]) -> None:
        sizes = np.array([p[0] for p in points], dtype=np.float64)
        cdf = np.array([p[1] for p in points], dtype=np.float64)
        if cdf[0] != 0 or cdf[-1] != 100 or np.any(np.diff(cdf) < 0) or np.any(np.diff(sizes) <= 0):
            raise ValueError(f"{name}: CDF must rise from 0 to 100 over increasing sizes")
        self.name, self._sizes, self._cdf = name, sizes, cdf

    @property
    def mean_bytes(self) -> float:
        # piecewise-linear CDF: each segment contributes its probability times its mid size
        probability = np.diff(self._cdf) / 100.0
        return float(np.sum(probability * (self._sizes[1:] + self._sizes[:-1]) / 2))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        sizes = np.interp(rng.uniform(0.0, 100.0, n), self._cdf, self._sizes)
        return np.maximum(np.round(sizes), 64.0)  # at least one small packet


WEB_SEARCH = SizeDistribution(
    "web-search",
    [
        (0, 0),
        (10e3, 15),
        (20e3, 20),
        (30e3, 30),
        (50e3, 40),
        (80e3, 53),
        (200e3, 60),
        (1e6, 70),
        (2e6, 80),
        (5e6, 90),
        (10e6, 97),
        (30e6, 100),
    ],
)
FB_HADOOP = SizeDistribution(
    "fb-hadoop",
    [
        (0, 0),
        (100, 1),
        (200, 2),
        (300, 5),
        (350, 15),
        (400, 20),
        (500, 30),
        (600, 40),
        (700, 50),
        (1000, 60),
        (2000, 67),
        (7000, 70),
        (30e3, 72),
        (50e3, 82),
        (80e3, 87),
        (120e3, 90),
        (300e3, 95),
        (1e6, 97.5),
        (2e6, 99),
        (10e6, 100),
    ],
)


def incast(
    receiver: int, senders: Sequence[int], size_bytes: float, start_us: float = 0.0, tag: str = "incast"
) -> list[FlowSpec]:
    """N:1 — every sender starts ``size_bytes`` to ``receiver`` at the same time."""
    return [FlowSpec(s, receiver, start_us, size_bytes, key=i, tag=tag) for i, s in enumerate(senders)]


def all_to_all(ports: Sequence[int], size_bytes: float, start_us: float = 0.0) -> list[FlowSpec]:
    """Every port sends ``size_bytes`` to every other port at once (an all-to-all collective)."""
    return [
        FlowSpec(s, d, start_us, size_bytes, key=i * len(ports) + j, tag="alltoall")
        for i, s in enumerate(ports)
        for j, d in enumerate(ports)
        if s != d
    ]


def ring_allreduce(
    ports: Sequence[int],
    bytes_per_rank: float,
    start_us: float = 0.0,
    iterations: int = 1,
    period_us: float = 0,
) -> list[FlowSpec]:
    """A ring all-reduce of ``bytes_per_rank``: each rank streams 2(n-1)/n of its buffer to its ring
    successor (reduce-scatter then all-gather, pipelined), once per iteration every ``period_us``."""
    n = len(ports)
    if n < 2:
        raise ValueError("a ring needs at least 2 ranks")
    size = 2 * (n - 1) / n * bytes_per_rank
    return [
        FlowSpec(ports[i], ports[(i + 1) % n], start_us + k * period_us, size, key=k * n + i, tag="allreduce")
        for k in range(iterations)
        for i in range(n)
    ]


def long_flows(
    pairs: Sequence[tuple[int, int]],
    start_us: float = 0.0,
    stop_us: float = math.inf,
    size_bytes: float = math.inf,
) -> list[FlowSpec]:
    """Greedy flows between the given (src, dst) pairs."""
    return [
        FlowSpec(s, d, start_us, size_bytes, stop_us, key=i, tag="long") for i, (s, d) in enumerate(pairs)
    ]


def poisson_flows(
    rng: np.random.Generator,
    sources: Sequence[int],
    destinations: Sequence[int],
    load: float,
    port_gbps: float,
    dist: SizeDistribution,
    duration_us: float,
    start_us: float = 0.0,
    tag: str = "short",
    weights: Sequence[float] | None = None,
) -> list[FlowSpec]:
    """Flows arriving at each source as a Poisson process so that it offers ``load`` (0..1) of
    ``port_gbps``, sizes drawn from ``dist``, each to a destination drawn (not itself) uniformly or in
    proportion to ``weights`` (one per destination, e.g. its link speed, so no receiver is overrun)."""
    if not 0 < load <= 1:
        raise ValueError(f"load={load} outside (0, 1]")
    per_us = load * port_gbps * 1e3 / 8 / dist.mean_bytes  # flows per µs per source
    flows: list[FlowSpec] = []
    for src in sources:
        n = int(rng.poisson(per_us * duration_us))
        starts = np.sort(rng.uniform(start_us, start_us + duration_us, n))
        sizes = dist.sample(rng, n)
        others = [d for d in destinations if d != src]
        if weights is None:
            picks = rng.integers(0, len(others), n)
        else:
            w = np.array([wt for d, wt in zip(destinations, weights, strict=True) if d != src], dtype=float)
            picks = rng.choice(len(others), size=n, p=w / w.sum())
        flows += [
            FlowSpec(src, others[int(k)], float(t), float(size), key=int(rng.integers(1 << 31)), tag=tag)
            for t, size, k in zip(starts, sizes, picks, strict=True)
        ]
    return sorted(flows, key=lambda f: f.start_us)
