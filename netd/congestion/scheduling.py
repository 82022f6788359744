"""Scheduler decisions from congestion scores: which nodes to filter out, how to rank the rest. Pure.

**Filter** removes a node when any of its RDMA ports is down or in a PFC storm (a job that spans
rails needs every rail). A node netd knows nothing about passes: no evidence, no veto.

**Prioritize** gives each node 0..10 (the extender protocol's range)::

    path(p)    = 1 - (1 - port(p)) * (1 - tor(p)) * (1 - spine(p) + calmest spine)   smoothed scores
    congestion = mean of path(p) over the node's up ports
    affinity   = share of the node's ports whose ToR already holds a peer of the pod's group
    score      = round(10 * ((1 - w) * (1 - congestion) + w * affinity))   with peers placed
    score      = round(10 * (1 - congestion))                              otherwise

with ``w`` = ``scheduler.peer_weight`` (0.3). A spine counts only by how much hotter it is than the
calmest spine (in a one-spine fabric every node shares it, and it would only squeeze all scores
towards 0 without ranking anyone). Nodes netd does not know score
``scheduler.unknown_node_score`` (5), so they neither win nor lose by default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from netd.congestion.scorer import CongestionReport, ScopeScore

__all__ = ["MAX_PRIORITY", "NodeIndex", "NodeState"]

MAX_PRIORITY = 10  # k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority


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


class NodeIndex:
    """Per-node view of one congestion report, built once per report and shared by requests."""

    def __init__(self, report: CongestionReport | None) -> None:
        self.report = report
        self._tor = {t.name: t.smoothed for t in report.tors} if report else {}
        floor = min((s.smoothed for s in report.spines), default=0.0) if report else 0.0
        self._spine = {s.name: s.smoothed - floor for s in report.spines} if report else {}
        by_node: dict[str, list[ScopeScore]] = {}
        for p in report.ports if report else ():
            by_node.setdefault(p.labels.get("host", ""), []).append(p)
        self._congestion: dict[str, float | None] = {}
        self.nodes = {
            n: NodeState(n, tuple(ports), tuple(sorted({p.labels.get("tor", "") for p in ports} - {""})))
            for n, ports in by_node.items()
        }

    def filter(self, names: Iterable[str]) -> tuple[list[str], dict[str, str]]:
        """(nodes that pass, node -> why it failed)."""
        passed: list[str] = []
        failed: dict[str, str] = {}
        for name in names:
            state = self.nodes.get(name)
            problems = state.problems() if state is not None else []
            if problems:
                failed[name] = "netd: " + "; ".join(problems)
            else:
                passed.append(name)
        return passed, failed

    def _path(self, p: ScopeScore) -> float:
        tor = self._tor.get(p.labels.get("tor", ""), 0.0)
        spines = [self._spine.get(s, 0.0) for s in p.labels.get("spine", "").split("+") if s]
        spine = max(spines) if spines else 0.0
        return 1.0 - (1.0 - p.smoothed) * (1.0 - tor) * (1.0 - spine)

    def congestion(self, name: str) -> float | None:
        """Memoised per node: the index lives as long as its report, and requests ask again and again."""
        if name in self._congestion:
            return self._congestion[name]
        state = self.nodes.get(name)
        value: float | None
        if state is None:
            value = None
        else:
            up = [p for p in state.ports if p.up]
            value = sum(self._path(p) for p in up) / len(up) if up else 1.0
        if state is not None or len(self._congestion) < 100_000:  # unknown names: bounded
            self._congestion[name] = value
        return value

    def peer_tors(self, peers: Mapping[str, int]) -> set[str]:
        return {
            t
            for node, count in peers.items()
            if count > 0 and node in self.nodes
            for t in self.nodes[node].tors
        }

    def prioritize(
        self,
        names: Sequence[str],
        peers: Mapping[str, int] | None = None,
        peer_weight: float = 0.3,
        unknown_score: int = 5,
    ) -> list[tuple[str, int]]:
        tors = self.peer_tors(peers) if peers else set()
        out = []
        for name in names:
            congestion = self.congestion(name)
            if congestion is None:
                out.append((name, unknown_score))
                continue
            value = 1.0 - congestion
            if tors:
                ports = self.nodes[name].ports
                affinity = sum(1 for p in ports if p.labels.get("tor") in tors) / len(ports)
                value = (1.0 - peer_weight) * value + peer_weight * affinity
            out.append((name, max(0, min(MAX_PRIORITY, round(MAX_PRIORITY * value)))))
        return out
