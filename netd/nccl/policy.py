"""The hint policy: an α–β cost model of NCCL's network algorithms under measured congestion.

For a collective of ``S`` bytes on ``n`` nodes, each algorithm costs (µs)::

    T = base[a][p] + steps(a, n) · (net[a][p] + q) + volume(a, n) · S / (B · eff[p])

* ``base`` and ``net`` are NCCL's own default latencies (src/graph/tuning.cc, the
  ``ncclTunerConstantsDefaults`` base and NET hardware latencies), ``eff`` the protocol's share of
  the wire that carries data (LL 1/2, LL128 120/128, SIMPLE 1);
* ``steps``/``volume``: ring AllReduce 2(n−1) steps and 2(n−1)/n·S per node; tree AllReduce
  2⌈log2 n⌉ steps and 2·S/0.92 (NCCL's tree factor); ring AllGather/ReduceScatter (n−1) and
  (n−1)/n·S; PAT (SIMPLE only) ⌈log2 n⌉ steps and (n−1)/n·S. ``S`` is NCCL's ``nBytes``;
* ``B`` is the node's inter-node bandwidth and ``q`` the queueing delay per inter-node step,
  from :mod:`netd.nccl.conditions`: nominal (line rate, no queue) or effective (line rate less
  pause time and DCQCN cuts, plus the queue ECN marking implies).

NCCL models the nominal case itself. netd writes a hint only where measured congestion changes
the answer: for each node-count bucket (n = its largest count), collective and size bucket (S =
the bucket's geometric middle), the winner under effective conditions must differ from the
winner under nominal ones **and** beat the runner-up by ``min_gain`` (default 15 %). Anywhere
else NCCL keeps its own choice. A hint is soft: it forbids the losing network algorithm(s) where
the winner is available and leaves the protocol, channels and NCCL's other algorithms (NVLS,
CollNet) to NCCL. Broadcast and Reduce have only Ring in NCCL: never hinted. One node: no
inter-node traffic, never hinted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from netd.nccl.conditions import LinkConditions
from netd.nccl.layout import (
    ALGORITHMS,
    COLLECTIVES,
    NODE_BUCKETS,
    SIZE_BUCKETS,
    node_bucket_nodes,
    size_bucket_range,
)
from netd.nccl.table import NO_HINT, HintEntry, HintTable

__all__ = ["CANDIDATES", "Decision", "ModelParams", "PolicyResult", "algorithm_costs", "build_table"]

TREE, RING, PAT = ALGORITHMS.index("tree"), ALGORITHMS.index("ring"), ALGORITHMS.index("pat")
CANDIDATES: Mapping[str, tuple[int, ...]] = MappingProxyType(
    {"allreduce": (TREE, RING), "allgather": (RING, PAT), "reducescatter": (RING, PAT)}
)
_NONE = (math.nan, math.nan, math.nan)


def _frozen(d: dict[int, tuple[float, float, float]]) -> Mapping[int, tuple[float, float, float]]:
    return MappingProxyType(d)


@dataclass(frozen=True, slots=True)
class ModelParams:
    # µs per (LL, LL128, SIMPLE); nan: NCCL has no such pair
    base_us: Mapping[int, tuple[float, float, float]] = field(
        default_factory=lambda: _frozen(
            {TREE: (6.8, 14.0, 8.4), RING: (6.6, 14.0, 8.4), PAT: (_NONE[0], _NONE[1], 8.0)}
        )
    )
    net_us: Mapping[int, tuple[float, float, float]] = field(
        default_factory=lambda: _frozen(
            {TREE: (5.0, 8.5, 14.0), RING: (2.7, 4.0, 14.0), PAT: (_NONE[0], _NONE[1], 14.0)}
        )
    )
    efficiency: tuple[float, float, float] = (0.5, 120 / 128, 1.0)
    tree_factor: float = 0.92
    min_gain: float = 0.15


def _steps_volume(collective: str, algo: int, n: int) -> tuple[float, float]:
    log_n = math.ceil(math.log2(n))
    if collective == "allreduce":
        return (2 * (n - 1), 2 * (n - 1) / n) if algo == RING else (2 * log_n, 2.0)
    return (n - 1, (n - 1) / n) if algo == RING else (log_n, (n - 1) / n)


def algorithm_costs(
    collective: str, n_nodes: int, n_bytes: float, gbps: float, queue_us: float, params: ModelParams
) -> dict[int, float]:
    """Modelled µs per candidate algorithm (its best protocol) for one collective."""
    bytes_per_us = gbps * 1e3 / 8
    out = {}
    for algo in CANDIDATES[collective]:
        steps, volume = _steps_volume(collective, algo, n_nodes)
        if collective == "allreduce" and algo == TREE:
            volume /= params.tree_factor
        costs = [
            params.base_us[algo][p]
            + steps * (params.net_us[algo][p] + queue_us)
            + volume * n_bytes / (bytes_per_us * params.efficiency[p])
            for p in range(3)
            if not math.isnan(params.base_us[algo][p])
        ]
        out[algo] = min(costs)
    return out


@dataclass(frozen=True, slots=True)
class Decision:
    """Why one (node bucket, collective, size bucket) got its hint, or none."""

    n_nodes: int
    collective: str
    size_bucket: int
    n_bytes: float
    nominal_us: Mapping[int, float]
    effective_us: Mapping[int, float]
    entry: HintEntry

    def as_dict(self) -> dict[str, object]:
        return {
            "n_nodes": self.n_nodes,
            "collective": self.collective,
            "size_bucket": self.size_bucket,
            "bytes": round(self.n_bytes),
            "nominal_us": {ALGORITHMS[a]: round(t, 3) for a, t in self.nominal_us.items()},
            "effective_us": {ALGORITHMS[a]: round(t, 3) for a, t in self.effective_us.items()},
            "hint": self.entry.describe(),
        }


@dataclass(frozen=True, slots=True)
class PolicyResult:
    table: HintTable
    decisions: tuple[Decision, ...]  # only those with a hint
    conditions: LinkConditions
    reason: str  # one line: why the table is empty, or how many hints


def _representative_bytes(bucket: int) -> float:
    low, high = size_bucket_range(bucket)
    if bucket == 0:
        return (high or 1024) / 2
    return low * math.sqrt(2)


def _decide(
    collective: str, n: int, n_bytes: float, cond: LinkConditions, params: ModelParams
) -> tuple[HintEntry, dict[int, float], dict[int, float]]:
    nominal = algorithm_costs(collective, n, n_bytes, cond.nominal_gbps, 0.0, params)
    effective = algorithm_costs(collective, n, n_bytes, cond.effective_gbps, cond.queue_delay_us, params)
    nominal_winner = min(nominal, key=lambda a: nominal[a])
    winner = min(effective, key=lambda a: effective[a])
    runner_up = min(t for a, t in effective.items() if a != winner)
    if winner == nominal_winner or runner_up < effective[winner] * (1 + params.min_gain):
        return NO_HINT, nominal, effective
    losers = tuple(a for a in effective if a != winner)
    return HintEntry.prefer(winner, losers), nominal, effective


def build_table(
    cond: LinkConditions, now_ns: int, valid_for_ms: int, params: ModelParams | None = None, producer: int = 0
) -> PolicyResult:
    params = params or ModelParams()
    empty = HintTable(generated_at_ns=now_ns, valid_for_ms=valid_for_ms, producer=producer)
    if not cond.ports:
        return PolicyResult(empty, (), cond, "no up RDMA port with a known rate: no hints")
    if not cond.measured:
        return PolicyResult(empty, (), cond, "no rates measured yet: no hints")
    rows = [[[NO_HINT] * SIZE_BUCKETS for _ in COLLECTIVES] for _ in range(NODE_BUCKETS)]
    decisions = []
    for nb in range(1, NODE_BUCKETS):  # bucket 0 is one node: nothing crosses the network
        n = node_bucket_nodes(nb)
        for collective in CANDIDATES:
            c = COLLECTIVES.index(collective)
            for sb in range(SIZE_BUCKETS):
                n_bytes = _representative_bytes(sb)
                entry, nominal, effective = _decide(collective, n, n_bytes, cond, params)
                if not entry.empty:
                    rows[nb][c][sb] = entry
                    decisions.append(Decision(n, collective, sb, n_bytes, nominal, effective, entry))
    table = HintTable(
        tuple(tuple(tuple(coll) for coll in node) for node in rows), now_ns, valid_for_ms, producer
    )
    eff, nom = cond.effective_gbps, cond.nominal_gbps
    reason = (
        f"{len(decisions)} hints: effective inter-node bandwidth {eff:.1f} of {nom:.1f} Gb/s, "
        f"queueing {cond.queue_delay_us:.1f} µs per step"
    )
    return PolicyResult(table, tuple(decisions), cond, reason)
