"""Scheduler decisions from congestion scores: which nodes to filter out, how to rank the rest. Pure.

**Filter** removes a node when any of its RDMA ports is down or in a PFC storm (a job that spans
rails needs every rail).

**Prioritize** gives each node 0..10 (the extender protocol's range)::

    path(p)    = 1 - (1 - port(p)) * (1 - tor(p)) * (1 - spine(p) + calmest spine)   smoothed scores
    congestion = mean of path(p) over the node's up ports
    affinity   = share of the node's ports whose ToR already holds a peer of the pod's group
    score      = round(10 * ((1 - w) * (1 - congestion) + w * affinity))   with peers placed
    score      = round(10 * (1 - congestion))                              otherwise

with ``w`` = ``scheduler.peer_weight`` (0.3). A spine counts only by how much hotter it is than the
calmest spine (in a one-spine fabric every node shares it, and it would only squeeze all scores
towards 0 without ranking anyone).

**Unknown nodes** (no ports in the report: the host has no netd, or ``netd fabric`` has not seen
it scraped for ``cluster.host_stale_after``: its netd died) follow ``scheduler.unknown_nodes``:
``lowest`` (default) passes the filter and scores 0, so a node netd cannot vouch for never outranks
a known one, nor escapes the down-port veto by being silent; ``neutral`` passes and scores
``scheduler.unknown_node_score``; ``reject`` fails the filter. A whole report older than
``scheduler.stale_after`` makes every node unknown.

Scores without peers are computed once per report (a :class:`NodeIndex` is built per report and
shared by every request), so prioritizing 5000 names is 5000 dictionary lookups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from netd.congestion.scorer import CongestionReport, ScopeScore

__all__ = ["MAX_PRIORITY", "NodeIndex", "NodeState", "UnknownPolicy"]

MAX_PRIORITY = 10  # k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority
UNKNOWN_REASON = "netd: no data about this node (no netd there, or its data is stale)"


@dataclass(frozen=True, slots=True)
class UnknownPolicy:
    mode: str = "lowest"  # lowest | neutral | reject
    neutral_score: int = 5

    def score(self) -> int:
        return self.neutral_score if self.mode == "neutral" else 0


@dataclass(frozen=True, slots=True)
class NodeState:
    node: str
    ports: tuple[ScopeScore, ...]
    tors: tuple[str, ...] = field(default=())

    def problems(self) -> list[str]:
        out = []
        for p in self.ports:
            what = f"{p.labels.get('device')}/{p.labels.get('port')} ({p.labels.get('netdev') or '?'})"
            if not p.up:
                out.append(f"RoCE port {what} is down")
            elif p.stormed:
                out.append(f"PFC storm on {what}")
        return out


def _score(value: float) -> int:
    return max(0, min(MAX_PRIORITY, round(MAX_PRIORITY * value)))


class NodeIndex:
    """Per-node view of one congestion report, built once per report and shared by requests.
    ``report=None`` (no data yet, or stale): every node is unknown."""

    def __init__(self, report: CongestionReport | None, policy: UnknownPolicy | None = None) -> None:
        self.report = report
        self.policy = policy or UnknownPolicy()
        self._tor = {t.name: t.smoothed for t in report.tors} if report else {}
        floor = min((s.smoothed for s in report.spines), default=0.0) if report else 0.0
        self._spine = {s.name: s.smoothed - floor for s in report.spines} if report else {}
        by_node: dict[str, list[ScopeScore]] = {}
        for p in report.ports if report else ():
            by_node.setdefault(p.labels.get("host", ""), []).append(p)
        self.nodes = {
            n: NodeState(n, tuple(ports), tuple(sorted({p.labels.get("tor", "") for p in ports} - {""})))
            for n, ports in by_node.items()
        }
        self._congestion = {n: self._node_congestion(st) for n, st in self.nodes.items()}
        self._scores = {n: _score(1.0 - c) for n, c in self._congestion.items()}
        self._failed = {n: "netd: " + "; ".join(pr) for n, st in self.nodes.items() if (pr := st.problems())}

    def filter(self, names: Iterable[str]) -> tuple[list[str], dict[str, str], int]:
        """(nodes that pass, node -> why it failed, how many were unknown)."""
        passed: list[str] = []
        failed: dict[str, str] = {}
        unknown = 0
        reject = self.policy.mode == "reject"
        known, bad = self.nodes, self._failed
        for name in names:
            if name not in known:
                unknown += 1
                if reject:
                    failed[name] = UNKNOWN_REASON
                    continue
            elif name in bad:
                failed[name] = bad[name]
                continue
            passed.append(name)
        return passed, failed, unknown

    def _path(self, p: ScopeScore) -> float:
        tor = self._tor.get(p.labels.get("tor", ""), 0.0)
        spines = [self._spine.get(s, 0.0) for s in p.labels.get("spine", "").split("+") if s]
        spine = max(spines) if spines else 0.0
        return 1.0 - (1.0 - p.smoothed) * (1.0 - tor) * (1.0 - spine)

    def _node_congestion(self, state: NodeState) -> float:
        up = [p for p in state.ports if p.up]
        return sum(self._path(p) for p in up) / len(up) if up else 1.0

    def congestion(self, name: str) -> float | None:
        """The node's congestion (0..1), None when netd does not know it."""
        return self._congestion.get(name)

    def peer_tors(self, peers: Mapping[str, int]) -> set[str]:
        return {
            t
            for node, count in peers.items()
            if count > 0 and node in self.nodes
            for t in self.nodes[node].tors
        }

    def prioritize(
        self, names: Sequence[str], peers: Mapping[str, int] | None = None, peer_weight: float = 0.3
    ) -> tuple[list[tuple[str, int]], int]:
        """(name, score) per candidate in order, and how many were unknown."""
        tors = self.peer_tors(peers) if peers else set()
        unknown_score = self.policy.score()
        scores = self._scores
        if not tors:  # the common case: a lookup per name
            out = [(name, scores.get(name, -1)) for name in names]
            unknown = sum(1 for _, s in out if s < 0)
            if unknown:
                out = [(n, unknown_score if s < 0 else s) for n, s in out]
            return out, unknown
        out, unknown = [], 0
        for name in names:
            congestion = self._congestion.get(name)
            if congestion is None:
                unknown += 1
                out.append((name, unknown_score))
                continue
            ports = self.nodes[name].ports
            affinity = sum(1 for p in ports if p.labels.get("tor") in tors) / len(ports)
            out.append((name, _score((1.0 - peer_weight) * (1.0 - congestion) + peer_weight * affinity)))
        return out, unknown
