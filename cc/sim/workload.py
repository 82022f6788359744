"""A deterministic, training-like traffic schedule for the emulated fabric.

Training traffic is periodic: compute (the fabric idles), collectives (ring all-reduce keeps every
link busy but uncontended), and occasional many-to-one bursts (gathers, checkpoint or parameter
traffic) that are where congestion control earns its keep. :class:`Workload` repeats one iteration
of fixed length whose phase durations, incast receiver and senders are jittered per iteration from
the seed, so ``phase_at`` is O(1) for any time and identical for identical seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Protocol

import numpy as np

__all__ = [
    "DEFAULT_ITERATION",
    "GREEDY",
    "PHASE_NAMES",
    "FixedWorkload",
    "Flow",
    "Phase",
    "PhaseSource",
    "Workload",
]

GREEDY: Literal["greedy"] = "greedy"
PHASE_NAMES = ("idle", "allreduce", "incast")

HostPort = tuple[int, int]

DEFAULT_ITERATION: tuple[tuple[str, float], ...] = (
    ("idle", 2_500.0),  # forward/backward compute
    ("allreduce", 4_500.0),  # gradient ring all-reduce
    ("incast", 600.0),  # many-to-one gather
    ("idle", 1_400.0),
    ("allreduce", 1_000.0),
)
"""(phase name, mean duration µs) of one 10 ms training iteration."""


@dataclass(frozen=True, slots=True)
class Flow:
    """One RDMA flow (QP) from a host port to a host port; ``demand_mbps`` caps its rate."""

    src: HostPort
    dst: HostPort
    demand_mbps: float | Literal["greedy"] = GREEDY

    def __post_init__(self) -> None:
        if self.src == self.dst:
            raise ValueError(f"flow from {self.src} to itself")
        if self.demand_mbps != GREEDY and not float(self.demand_mbps) > 0:
            raise ValueError(f"demand_mbps={self.demand_mbps!r} must be 'greedy' or > 0")


@dataclass(frozen=True, slots=True)
class Phase:
    """A traffic pattern active on [start_us, end_us)."""

    name: str
    start_us: float
    end_us: float
    flows: tuple[Flow, ...]


class PhaseSource(Protocol):
    """Anything that can say which traffic pattern is active at a time: the fabric's input."""

    def phase_at(self, t_us: float) -> Phase: ...


class FixedWorkload:
    """One phase forever: the building block for experiments and tests."""

    def __init__(self, name: str, flows: tuple[Flow, ...] | list[Flow]) -> None:
        self._phase = Phase(name, 0.0, float("inf"), tuple(flows))

    def phase_at(self, t_us: float) -> Phase:
        return self._phase


class Workload:
    """Repeating iterations of ``iteration`` phases, jittered by ``jitter`` (fraction) per iteration.

    ``allreduce``: every host port sends to the same port of the next host (a ring per port index,
    crossing the spine between ToRs). ``incast``: ``incast_degree`` host ports, drawn from all other
    hosts so that both ToRs take part, send to one receiver port. ``idle``: no flows.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        tors: int = 2,
        hosts_per_tor: int = 4,
        ports_per_host: int = 2,
        iteration: tuple[tuple[str, float], ...] = DEFAULT_ITERATION,
        jitter: float = 0.2,
        incast_degree: int = 7,
    ) -> None:
        self.seed = seed
        self.n_hosts = tors * hosts_per_tor
        self.ports_per_host = ports_per_host
        if self.n_hosts < 2:
            raise ValueError("a workload needs at least 2 hosts")
        if not 0 <= jitter < 1:
            raise ValueError(f"jitter={jitter} outside [0, 1)")
        if not 1 <= incast_degree <= self.n_hosts - 1:
            raise ValueError(f"incast_degree={incast_degree} outside [1, {self.n_hosts - 1}]")
        unknown = {name for name, _ in iteration} - set(PHASE_NAMES)
        if unknown or not iteration or any(d <= 0 for _, d in iteration):
            raise ValueError(f"iteration needs positive durations and phases from {PHASE_NAMES}")
        self.iteration = iteration
        self.jitter = jitter
        self.incast_degree = incast_degree
        self.period_us = float(sum(d for _, d in iteration))
        self._iteration_phases = lru_cache(maxsize=4)(self._build_iteration)

    def phase_at(self, t_us: float) -> Phase:
        """The phase active at ``t_us`` (µs since the start of the schedule, >= 0)."""
        if t_us < 0:
            raise ValueError(f"t_us={t_us} must be >= 0")
        index = int(t_us // self.period_us)
        for phase in self._iteration_phases(index):
            if t_us < phase.end_us:
                return phase
        return self._iteration_phases(index + 1)[0]  # float rounding at the period boundary

    def _build_iteration(self, index: int) -> tuple[Phase, ...]:
        rng = np.random.default_rng((self.seed, index))
        means = np.array([d for _, d in self.iteration])
        durations = means * (1 + self.jitter * rng.uniform(-1, 1, len(means)))
        scaled = durations * (self.period_us / durations.sum())  # every iteration lasts period_us
        edges = index * self.period_us + np.concatenate(([0.0], np.cumsum(scaled)))
        edges[-1] = (index + 1) * self.period_us
        return tuple(
            Phase(name, float(edges[i]), float(edges[i + 1]), self._flows(name, rng))
            for i, (name, _) in enumerate(self.iteration)
        )

    def _flows(self, name: str, rng: np.random.Generator) -> tuple[Flow, ...]:
        if name == "allreduce":
            return tuple(
                Flow((h, p), ((h + 1) % self.n_hosts, p))
                for h in range(self.n_hosts)
                for p in range(self.ports_per_host)
            )
        if name == "incast":
            receiver = int(rng.integers(self.n_hosts))
            port = int(rng.integers(self.ports_per_host))
            others = [h for h in range(self.n_hosts) if h != receiver]
            senders = rng.choice(others, size=self.incast_degree, replace=False)
            return tuple(Flow((int(h), port), (receiver, port)) for h in sorted(senders))
        return ()  # idle
